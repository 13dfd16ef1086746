"""One GRPO step with trainer.shared_prefix off, then on, from the same initial weights, under
torchrun (fsdp2 or deepspeed ZeRO-3, gloo). Run by tests/learner/test_shared_prefix.py; rank 0 writes
both resulting full weights (and the initial ones) to OUT/weights.pt.

AdamW runs with eps 1e3 (lr 10): with |grad| << eps its update is linear in the gradient (about
SGD with lr 1e-2), so the weights compare the accumulated gradients. With the usual eps 1e-8 the
first update is ~lr x sign(grad), and round-off flips the sign of near-0 gradients."""

import argparse
from pathlib import Path

import torch

from train.learner.config import TrainerConfig
from train.learner.distributed import init_distributed, shard, shutdown
from train.learner.learner import Learner, Sample
from train.learner.models import load_policy


def groups() -> list[list[Sample]]:
    """3 groups x G=4, prompts of 37, 61 and 45 tokens, responses of 5..19: rank 0 gets two
    groups and rank 1 one, so rank 1 runs weight-0 padding passes."""
    gen = torch.Generator().manual_seed(7)
    out = []
    for k, p in enumerate((37, 61, 45)):
        prompt = torch.randint(10, 1000, (p,), generator=gen).tolist()
        out.append([Sample(prompt, torch.randint(10, 1000, (5 + (5 * j + 3 * k) % 15,), generator=gen).tolist(),
                           reward=float((j * 7 + k) % 3), group=k) for j in range(4)])
    return out


def main() -> None:
    import faulthandler
    faulthandler.dump_traceback_later(300, exit=True)  # a hung collective fails the test instead of CI
    ap = argparse.ArgumentParser()
    ap.add_argument("--strategy", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    info = init_distributed(single_process_group=True)
    mine = [s for group in shard(groups(), info) for s in group]
    result = {}
    for flag in (False, True):
        torch.manual_seed(0)
        model, tok = load_policy("tiny-random", "float32", None, seed=0)
        if not flag:
            result["initial"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        # micro_batch_size 3 < G: every group is cut across micro-batches; two optimizer steps.
        cfg = TrainerConfig(lr=10.0, grad_clip=1e9, strategy=args.strategy, zero_stage=3, micro_batch_size=3,
                            ppo_mini_batches=2, shared_prefix=flag)
        learner = Learner(model, cfg, group_size=4, temperature=1.0, pad_id=tok.pad_token_id, info=info)
        if flag:
            result["mask_kind"] = learner.mask_kind
        inner = getattr(learner.optimizer, "optimizer", learner.optimizer)  # DeepSpeed's ZeRO optimizer wraps torch's
        assert isinstance(inner, torch.optim.AdamW), type(inner)
        for group in inner.param_groups:
            group["eps"] = 1e3
        learner.step(mine)
        result["on" if flag else "off"] = {k: v.detach().clone() for k, v in learner.full_state_dict().items()}
    if info.is_main:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        torch.save(result, Path(args.out) / "weights.pt")
    shutdown(info)


if __name__ == "__main__":
    main()
