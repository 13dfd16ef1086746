"""A small learner on the tiny policy and GRPO batches of known shape, for the learner and checkpoint tests."""

import numpy as np
import torch

from train.learner.config import TrainerConfig
from train.learner.distributed import DistInfo
from train.learner.learner import Learner, Sample


def samples(tokenizer, n_groups=2, g=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for group in range(n_groups):
        prompt = torch.randint(10, 1000, (4 + 3 * group,), generator=gen).tolist()
        for j in range(g):
            response = torch.randint(10, 1000, (2 + (j * 2 + group) % 5,), generator=gen).tolist()
            out.append(Sample(prompt, response, reward=float((j + group) % 3), group=group))
    return out


def make_learner(model, tokenizer, **overrides):
    cfg = TrainerConfig(lr=1e-2, grad_clip=1e9, lr_warmup_steps=3, **overrides)
    return Learner(model, cfg, group_size=3, temperature=1.0, pad_id=tokenizer.pad_token_id, info=DistInfo())


class StubEvolution:
    """What save_checkpoint needs of train.loop.evolution.Evolution."""

    def state_dict(self):
        return {"archive/max_id": np.asarray(7), "pool/reward": np.array([1.8365015544609251, 0.5])}
