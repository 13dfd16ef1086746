import copy

import pytest
import torch

from train.config import TrainerConfig
from train.distributed import DistInfo
from train.learner import Learner, Sample, pack, response_logprobs


def samples(tokenizer, n_groups=2, g=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for group in range(n_groups):
        prompt = torch.randint(10, 1000, (4 + 3 * group,), generator=gen).tolist()
        for j in range(g):
            response = torch.randint(10, 1000, (2 + (j * 2 + group) % 5,), generator=gen).tolist()
            out.append(Sample(prompt, response, reward=float((j + group) % 3), group=group))
    return out


def test_packed_logprobs_equal_unpadded_per_sequence(tiny_model, tokenizer):
    batch = samples(tokenizer)
    packed = pack(batch, tokenizer.pad_token_id)
    with torch.no_grad():
        logp, _ = response_logprobs(tiny_model, packed)
        for i, s in enumerate(batch):
            ids = torch.tensor([s.prompt_ids + s.response_ids])
            full = torch.log_softmax(tiny_model(ids).logits[0].float(), -1)
            p = len(s.prompt_ids)
            want = torch.stack([full[p - 1 + k, t] for k, t in enumerate(s.response_ids)])
            torch.testing.assert_close(logp[i, : len(s.response_ids)], want, atol=1e-5, rtol=1e-5)


def _step(model, tokenizer, micro, sgd=False, **overrides):
    cfg = TrainerConfig(lr=1e-3, micro_batch_size=micro, grad_clip=1e9, **overrides)
    learner = Learner(model, cfg, group_size=3, temperature=1.0, pad_id=tokenizer.pad_token_id, info=DistInfo())
    if sgd:  # parameter delta == -gradient, so weights compare the accumulated gradients directly
        learner.optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    return learner.step(samples(tokenizer))


def test_micro_batching_does_not_change_the_update(tiny_model, tokenizer):
    a, b = copy.deepcopy(tiny_model), copy.deepcopy(tiny_model)
    ma = _step(a, tokenizer, micro=1, sgd=True)
    mb = _step(b, tokenizer, micro=6, sgd=True)
    assert ma["loss"] == pytest.approx(mb["loss"], rel=1e-4, abs=1e-6)
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb, atol=1e-6, rtol=1e-5)


def test_step_moves_weights_and_first_step_kl_is_zero(tiny_model, tokenizer):
    before = copy.deepcopy(tiny_model)
    metrics = _step(tiny_model, tokenizer, micro=2)
    assert metrics["kl"] == pytest.approx(0.0, abs=1e-8)  # policy == reference before the update
    assert metrics["zero_std_frac"] == 0.0 and metrics["entropy"] > 0
    moved = sum((p - q).abs().sum().item() for p, q in zip(tiny_model.parameters(), before.parameters()))
    assert moved > 0


def test_positive_advantage_raises_its_logprob(tiny_model, tokenizer):
    batch = samples(tokenizer)
    packed = pack(batch, tokenizer.pad_token_id)
    with torch.no_grad():
        before, _ = response_logprobs(tiny_model, packed)
    _step(tiny_model, tokenizer, micro=6, kl_coef=0.0)
    with torch.no_grad():
        after, _ = response_logprobs(tiny_model, packed)
    m = packed["response_mask"]
    delta = ((after - before) * m).sum(-1) / m.sum(-1)
    best = max(range(len(batch)), key=lambda i: batch[i].reward - sum(s.reward for s in batch if s.group == batch[i].group) / 3)
    assert delta[best] > 0


def test_all_truncated_and_masked_means_no_update(tiny_model, tokenizer):
    before = copy.deepcopy(tiny_model)
    truncated = [Sample(s.prompt_ids, s.response_ids, s.reward, s.group, truncated=True) for s in samples(tokenizer)]
    learner = Learner(tiny_model, TrainerConfig(lr=1e-2, mask_truncated=True), 3, 1.0, tokenizer.pad_token_id, DistInfo())
    metrics = learner.step(truncated)
    assert metrics["loss"] == 0.0
    for p, q in zip(tiny_model.parameters(), before.parameters()):
        assert torch.equal(p, q)
