import copy
import math

import pytest
import torch

from tests.helpers.learner import make_learner, samples
from train.learner.config import TrainerConfig
from train.learner.distributed import DistInfo
from train.learner.learner import Learner, Sample, pack, response_logprobs, token_budget_chunks


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
        learner.scheduler = torch.optim.lr_scheduler.LambdaLR(learner.optimizer, lambda step: 1.0)
    return learner.step(samples(tokenizer))


@pytest.mark.parametrize("agg", ["seq-mean-token-mean", "token-mean"])
@pytest.mark.parametrize("budget", [0, 1, 20])
def test_micro_batching_does_not_change_the_update(tiny_model, tokenizer, budget, agg):
    """micro=1 vs one micro-batch of 6, and token budgets from "every sequence alone" (1) up."""
    a, b = copy.deepcopy(tiny_model), copy.deepcopy(tiny_model)
    ma = _step(a, tokenizer, micro=1 if budget == 0 else 6, sgd=True, max_tokens_per_micro_batch=budget,
               loss_agg_mode=agg)
    mb = _step(b, tokenizer, micro=6, sgd=True, loss_agg_mode=agg)
    assert ma["micro_batches"] > mb["micro_batches"] == 1
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


def test_token_budget_chunks_respect_the_budget():
    lengths = [(3, 9), (2, 1), (6, 2), (1, 1), (20, 30), (4, 4), (2, 2)]
    batch = [Sample([7] * p, [8] * r, 0.0, i) for i, (p, r) in enumerate(lengths)]
    chunks = token_budget_chunks(batch, micro_batch_size=3, max_tokens=24)
    assert sorted(i for c in chunks for i in c) == list(range(len(batch)))  # each sample exactly once
    assert [4] in chunks  # 50 tokens > budget: alone
    for c in chunks:
        padded = len(c) * (max(lengths[i][0] for i in c) + max(lengths[i][1] for i in c))
        assert len(c) <= 3 and (padded <= 24 or len(c) == 1)
    # Longest first, greedy: the budget is filled, not just respected.
    assert chunks == [[4], [0], [2, 5], [6, 1, 3]]
    assert token_budget_chunks(batch, 3, 0) == [[0, 1, 2], [3, 4, 5], [6]]


def test_save_load_state_resumes_exactly(tiny_model, tokenizer, tmp_path):
    """Two steps straight == step, save, fresh learner, load, step (AdamW moments and the warmup
    schedule included: without them the second update differs)."""
    straight = make_learner(copy.deepcopy(tiny_model), tokenizer)
    for seed in (0, 1):
        straight.step(samples(tokenizer, seed=seed))
    first = make_learner(copy.deepcopy(tiny_model), tokenizer)
    first.step(samples(tokenizer, seed=0))
    first.save_state(tmp_path / "ckpt")
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["dcp", "extra.pt"]
    resumed = make_learner(copy.deepcopy(tiny_model), tokenizer)
    resumed.load_state(tmp_path / "ckpt")
    assert resumed.scheduler.get_last_lr() == straight_lr_after(1)
    metrics = resumed.step(samples(tokenizer, seed=1))
    assert metrics["kl"] > 0  # the reference stayed the initial policy
    want, got = straight.full_state_dict(), resumed.full_state_dict()
    assert want.keys() == got.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], atol=0, rtol=0, msg=name)


def straight_lr_after(steps: int, lr: float = 1e-2, warmup: int = 3) -> list[float]:
    return [lr * min(1.0, (steps + 1) / warmup)]


def test_deepspeed_checkpoint_does_not_load_into_another_strategy(tiny_model, tokenizer, tmp_path):
    (tmp_path / "deepspeed").mkdir()
    torch.save({"scheduler": {}, "moved": True, "strategy": "deepspeed", "world": 2}, tmp_path / "extra.pt")
    with pytest.raises(ValueError, match="DeepSpeed checkpoints resume only under deepspeed with the same"):
        make_learner(tiny_model, tokenizer).load_state(tmp_path)


def _is_step(model, tokenizer, shift: float | None, rollout_is: str = "token"):
    """One SGD step (no KL) where the engine's logprobs are the trainer's own plus ``shift``."""
    from train.learner.learner import pack

    batch = samples(tokenizer)
    if shift is not None:
        with torch.no_grad():
            logp, _ = response_logprobs(model, pack(batch, tokenizer.pad_token_id))
        batch = [Sample(s.prompt_ids, s.response_ids, s.reward, s.group, s.truncated,
                        (logp[i, : len(s.response_ids)] + shift).tolist()) for i, s in enumerate(batch)]
    cfg = TrainerConfig(lr=1.0, grad_clip=1e9, kl_coef=0.0, micro_batch_size=6, rollout_is=rollout_is,
                        rollout_is_threshold=2.0)
    learner = Learner(model, cfg, group_size=3, temperature=1.0, pad_id=tokenizer.pad_token_id, info=DistInfo())
    learner.optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    learner.scheduler = torch.optim.lr_scheduler.LambdaLR(learner.optimizer, lambda step: 1.0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    metrics = learner.step(batch)
    return metrics, {k: model.state_dict()[k] - before[k] for k in before}


@pytest.mark.parametrize("shift, scale", [(0.0, 1.0), (math.log(4.0), 0.25), (-math.log(4.0), 2.0)])
def test_truncated_importance_sampling_scales_the_update(tiny_model, tokenizer, shift, scale):
    """Engine logprobs = trainer's + shift: token TIS weights are exp(-shift) = 1, 1/4, and 4 capped
    at the threshold 2, and with a linear (SGD, no KL) step the update scales by exactly that."""
    _, plain = _is_step(copy.deepcopy(tiny_model), tokenizer, None)
    metrics, weighted = _is_step(copy.deepcopy(tiny_model), tokenizer, shift)
    assert metrics["rollout_logprob_diff"] == pytest.approx(abs(shift), abs=1e-5)
    for name in plain:
        torch.testing.assert_close(weighted[name], scale * plain[name], atol=1e-6, rtol=1e-4, msg=name)


def test_engine_logprobs_without_correction_are_only_measured(tiny_model, tokenizer):
    _, plain = _is_step(copy.deepcopy(tiny_model), tokenizer, None)
    metrics, logged = _is_step(copy.deepcopy(tiny_model), tokenizer, 0.7, rollout_is="none")
    assert metrics["rollout_logprob_diff"] == pytest.approx(0.7, abs=1e-5)
    for name in plain:
        torch.testing.assert_close(logged[name], plain[name], atol=0, rtol=0)


def test_mini_batches_cut_whole_groups_and_repeat_per_epoch():
    from train.learner.learner import mini_batches

    groups = [0, 0, 1, 1, 2, 2]
    assert mini_batches(groups, 1) == [[0, 1, 2, 3, 4, 5]]
    assert mini_batches(groups, 2) == [[0, 1, 4, 5], [2, 3]]  # round-robin over groups
    assert mini_batches(groups, 3, epochs=2) == [[0, 1], [2, 3], [4, 5]] * 2
    assert mini_batches([7, 7, 7], 3) == [[0, 1, 2], [], []]  # a rank with fewer groups than parts


@pytest.mark.parametrize("agg", ["seq-mean-token-mean", "token-mean"])
def test_ppo_mini_batches_take_ratios_against_the_sampling_policy(tiny_model, tokenizer, agg):
    """Two optimizer steps on one batch of rollouts, checked against plain torch: the second step's
    ratio is pi_new / pi_old with pi_old the policy *before the first step* (clip range wide open,
    no KL, so the loss is -A * ratio averaged over each answer's tokens and then the answers (eq. 4),
    or over the mini-batch's tokens (token-mean))."""
    from train.learner.grpo import compute_advantages

    batch, pad = samples(tokenizer), tokenizer.pad_token_id
    ours, theirs = copy.deepcopy(tiny_model), copy.deepcopy(tiny_model)
    # shared_prefix off: the hand reference below is one row per sample, and two AdamW steps amplify the
    # layouts' float round-off past atol (shared vs per-sample is tests/learner/test_shared_prefix.py's job).
    cfg = TrainerConfig(lr=1e-2, grad_clip=1e9, kl_coef=0.0, micro_batch_size=6, ppo_mini_batches=2, shared_prefix=False,
                        clip_ratio_low=0.99, clip_ratio_high=100.0, loss_agg_mode=agg)
    metrics = Learner(ours, cfg, group_size=3, temperature=1.0, pad_id=pad, info=DistInfo()).step(batch)
    assert metrics["optimizer_steps"] == 2 and metrics["micro_batches"] == 2

    packed = pack(batch, pad)
    mask = packed["response_mask"]
    adv = compute_advantages(torch.tensor([s.reward for s in batch]), [s.group for s in batch], mask)
    with torch.no_grad():
        old, _ = response_logprobs(theirs, packed)
    opt = torch.optim.AdamW(theirs.parameters(), lr=1e-2, weight_decay=0.0)
    ratios = []
    for idx in ([0, 1, 2], [3, 4, 5]):  # the two groups, one optimizer step each
        sub = pack([batch[i] for i in idx], pad)
        r = sub["response_mask"].shape[1]
        logp, _ = response_logprobs(theirs, sub)
        ratio = torch.exp(logp - old[idx, :r])
        m = mask[idx, :r]
        terms = adv[idx, :r] * ratio * m
        loss = -(terms.sum() / m.sum() if agg == "token-mean" else (terms.sum(-1) / m.sum(-1)).mean())
        opt.zero_grad()
        loss.backward()
        opt.step()
        ratios.append((ratio.detach() - 1).abs().mul(m).max().item())
    assert ratios[0] < 1e-5 < 1e-3 < ratios[1]  # the second step saw a moved policy: the ratio matters
    for p, q in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(p, q, atol=2e-5, rtol=1e-4)


def test_clip_binds_only_with_several_updates_per_batch(tiny_model, tokenizer):
    def step(**extra):
        cfg = TrainerConfig(lr=5e-2, grad_clip=1e9, micro_batch_size=6, clip_ratio_low=0.01, clip_ratio_high=0.01, **extra)
        learner = Learner(copy.deepcopy(tiny_model), cfg, 3, 1.0, tokenizer.pad_token_id, DistInfo())
        return learner.step(samples(tokenizer))

    one, two = step(), step(ppo_epochs=2)
    assert one["clip_frac"] == 0.0 and one["optimizer_steps"] == 1
    assert two["clip_frac"] > 0.0 and two["optimizer_steps"] == 2


def test_recorded_advantages_are_what_the_update_applied(tiny_model, tokenizer, monkeypatch):
    """Learner.last_advantages (what the epoch loop archives for the run browser) against the advantage
    tensor grpo_loss received, token by token, and against GRPO by hand; a lost child (NaN reward) and a
    truncated one under mask_truncated put no token in the update and are recorded as (None, 0)."""
    import train.learner.learner as learner_module

    seen = []

    def spy(log_prob, old_log_prob, ref_log_prob, advantages, response_mask, *rest):
        seen.append((advantages.detach().cpu().clone(), response_mask.detach().cpu().clone()))
        return grpo_loss(log_prob, old_log_prob, ref_log_prob, advantages, response_mask, *rest)

    grpo_loss = learner_module.grpo_loss
    monkeypatch.setattr(learner_module, "grpo_loss", spy)
    batch = samples(tokenizer)  # rewards: group 0 [0, 1, 2], group 1 [1, 2, 0]
    batch[2] = Sample(batch[2].prompt_ids, batch[2].response_ids, float("nan"), 0)  # lost: group 0 scores [0, 1]
    batch[4] = Sample(batch[4].prompt_ids, batch[4].response_ids, batch[4].reward, 1, truncated=True)
    cfg = TrainerConfig(lr=1e-3, micro_batch_size=6, mask_truncated=True)
    learner = Learner(tiny_model, cfg, group_size=3, temperature=1.0, pad_id=tokenizer.pad_token_id, info=DistInfo())
    learner.step(batch)
    (applied, mask), = seen
    recorded = learner.last_advantages
    assert recorded[2] == (None, 0) and recorded[4] == (None, 0)
    for i, (value, tokens) in enumerate(recorded):
        assert tokens == int(mask[i].sum()) == (0 if i in (2, 4) else len(batch[i].response_ids))
        if tokens:
            assert torch.equal(applied[i][mask[i] > 0], torch.full((tokens,), value, dtype=applied.dtype))
    s0, s1 = math.sqrt(0.5), 1.0  # sample std of [0, 1] and of [1, 2, 0] (the truncated one still counts in its group)
    want = [-0.5 / (s0 + 1e-6), 0.5 / (s0 + 1e-6), None, 0.0, None, -1.0 / (s1 + 1e-6)]
    for (value, _), w in zip(recorded, want):
        assert value == w if w is None else value == pytest.approx(w, rel=1e-6)
