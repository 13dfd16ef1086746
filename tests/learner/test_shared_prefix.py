"""trainer.shared_prefix: a group's prompt computed once for all its responses gives the same
log-probs, entropies, losses, gradients and steps as one row per sample (within float32
round-off), and a layout that is wrong in the ways that matter (a response seeing a sibling,
response positions restarting at 0 or continuing after the sibling) is caught by the same checks.

Tolerances (float32, tiny 2-layer Llama, 49k vocab): per-token log-probs atol 1e-5 (measured
max |diff| ~1e-6: the two layouts only sum attention over the same keys in another order);
entropies atol 5e-5 (a sum of 49k terms of size ~11; measured ~1e-5); parameter updates of
SGD steps of lr 1 (= minus the accumulated gradient, so round-off stays the gradient's round-off
on any CPU) rtol 1e-4, atol 1e-6, the margin test_learner.py uses for micro-batching. A wrong
layout moves log-probs by > 1e-2.
"""

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers.env import child_env
from train.learner import shared_prefix
from train.learner.config import TrainerConfig
from train.learner.distributed import DistInfo
from train.learner.learner import Learner, Sample, pack, response_logprobs

ROOT = Path(__file__).resolve().parents[2]
LOGP_ATOL, ENTROPY_ATOL = 1e-5, 5e-5
WRONG_MIN = 1e-3  # a wrong layout must move some log-prob by more than this (100x LOGP_ATOL)


def batch_of(prompt_lens=(37, 61), g=4, seed=0, truncate_longest=False):
    """Groups of G samples with prompts of the given lengths, responses of 5..19 tokens, rewards
    varying within each group, interleaved (group 0, 1, 0, 1, ...) so a micro-batch of
    consecutive samples mixes prompt lengths."""
    gen = torch.Generator().manual_seed(seed)
    groups = []
    for k, p in enumerate(prompt_lens):
        prompt = torch.randint(10, 1000, (p,), generator=gen).tolist()
        members = []
        for j in range(g):
            q = 5 + (5 * j + 3 * k) % 15
            members.append(Sample(prompt, torch.randint(10, 1000, (q,), generator=gen).tolist(),
                                  reward=float((j * 7 + k) % 3), group=k, truncated=truncate_longest and q >= 15))
        groups.append(members)
    return [s for j in range(g) for s in (members[j] for members in groups)]


def shared_batch(samples, pad_id, kind="bool"):
    return {"response_mask": pack(samples, pad_id)["response_mask"], **shared_prefix.layout(samples, pad_id, kind)}


def max_diff(a, b, mask):
    return (a - b)[mask.bool()].abs().max().item()


# --- the layout itself ------------------------------------------------------------------------

def test_layout_packs_each_prompt_once_with_exact_positions_and_mask():
    samples = batch_of()
    out = shared_prefix.layout(samples, pad_id=0)
    segments, positions, mask = out["segments"], out["position_ids"], out["attention_mask"][:, 0]
    assert out["input_ids"].shape[0] == 2  # one row per group
    s = 61  # the longest prompt: every row's prompt ends at column S
    for row, members in enumerate(shared_prefix.rows(samples)):
        p = len(samples[members[0]].prompt_ids)
        assert (segments[row] == 0).sum() == p and (segments[row, s - p : s] == 0).all()
        assert positions[row, s - p : s].tolist() == list(range(p))
        for j, i in enumerate(members, start=1):
            cols = (segments[row] == j).nonzero().flatten()
            q = len(samples[i].response_ids)
            assert out["input_ids"][row, cols].tolist() == samples[i].response_ids
            assert positions[row, cols].tolist() == list(range(p, p + q))  # from P, not after the sibling
            # The prediction of token k sits at column cols[k] - 1, except token 0: the last prompt column.
            kept = out["gather_col"][i, :q] + s - 1
            assert kept.tolist() == [s - 1] + (cols[:-1]).tolist()
            assert out["targets"][i, :q].tolist() == samples[i].response_ids
            first = cols[0]
            seen = mask[row, first].nonzero().flatten().tolist()
            assert seen == list(range(s - p, s)) + [first.item()]  # the whole prompt and itself only
        pads = segments[row] == -1
        assert not mask[row][~pads][:, pads].any()  # no token attends to padding
        assert torch.equal(mask[row][pads], torch.eye(len(pads), dtype=torch.bool)[pads])  # padding: itself only
    assert out["valid"].sum() == sum(len(x.response_ids) for x in samples)
    assert int(out["logits_to_keep"]) == out["input_ids"].shape[1] - s + 1


def test_float_mask_is_the_additive_form_of_the_bool_one():
    samples = batch_of()
    b = shared_prefix.layout(samples, 0, "bool")["attention_mask"]
    f = shared_prefix.layout(samples, 0, "float")["attention_mask"]
    assert f.dtype == torch.float32 and torch.equal(f == 0, b) and (f[~b] < -1e30).all()


def test_group_chunks_keep_groups_together_within_the_limits():
    samples = batch_of(prompt_lens=(37, 61, 45), g=4)
    groups = [s.group for s in samples]
    assert shared_prefix.group_chunks(samples, 8, 0) == [[0, 3, 6, 9, 1, 4, 7, 10], [2, 5, 8, 11]]
    split = shared_prefix.group_chunks(samples, 3, 0)  # G=4 > 3: each group cut into 3 + 1
    assert sorted(i for c in split for i in c) == list(range(12)) and all(len(c) <= 3 for c in split)
    assert all(len({groups[i] for i in c}) == 1 for c in split if len(c) == 3)
    budget = 200
    chunks = shared_prefix.group_chunks(samples, 16, budget)
    assert sorted(i for c in chunks for i in c) == list(range(12))
    for c in chunks:
        assert shared_prefix.padded_tokens([samples[i] for i in c]) <= budget or len(c) == 1
    assert shared_prefix.padded_tokens(samples) == 3 * (61 + max(
        shared_prefix.row_tokens(samples, m) - len(samples[m[0]].prompt_ids) for m in shared_prefix.rows(samples)))


# --- exactness against one row per sample ------------------------------------------------------

@pytest.mark.parametrize("impl", ["sdpa", "helix_sdpa", "eager"])
def test_logprobs_and_entropy_equal_the_per_sample_layout(tiny_model, tokenizer, impl):
    tiny_model.set_attn_implementation(impl)
    kind, _ = shared_prefix.mask_kind(tiny_model)
    assert kind == {"sdpa": "bool", "helix_sdpa": "bool", "eager": "float"}[impl]
    samples, pad = batch_of(), tokenizer.pad_token_id
    plain = pack(samples, pad)
    with torch.no_grad():
        want, want_ent = response_logprobs(tiny_model, plain, with_entropy=True)
        got, got_ent = response_logprobs(tiny_model, shared_batch(samples, pad, kind), with_entropy=True)
    mask = plain["response_mask"]
    assert got.shape == want.shape == mask.shape
    assert max_diff(got, want, mask) <= LOGP_ATOL
    assert max_diff(got_ent, want_ent, mask) <= ENTROPY_ATOL
    assert (got[mask == 0] == 0).all() and (got_ent[mask == 0] == 0).all()


def _wrong_sibling_mask(batch):
    """Let every response also see the response before it in its row (causally)."""
    seg = batch["segments"]
    t = seg.shape[1]
    q, k = seg.unsqueeze(2), seg.unsqueeze(1)
    leak = (q > 1) & (k == q - 1) & torch.ones((t, t), dtype=torch.bool).tril()
    batch["attention_mask"] = batch["attention_mask"] | leak.unsqueeze(1)


def _wrong_positions(batch, mode):
    """Response positions restarting at 0, or continuing after the previous sibling."""
    seg, pos = batch["segments"], batch["position_ids"]
    for row in range(seg.shape[0]):
        p = int((seg[row] == 0).sum())
        resp = seg[row] > 0
        if mode == "restart":
            pos[row, resp] -= p
        else:
            pos[row, resp] = torch.arange(p, p + int(resp.sum()))


@pytest.mark.parametrize("wrong", ["sibling_mask", "positions_restart", "positions_continue"])
def test_wrong_layouts_fail_the_equivalence_check(tiny_model, tokenizer, wrong):
    samples, pad = batch_of(), tokenizer.pad_token_id
    plain = pack(samples, pad)
    batch = shared_batch(samples, pad)
    if wrong == "sibling_mask":
        _wrong_sibling_mask(batch)
    else:
        _wrong_positions(batch, wrong.split("_")[1])
    with torch.no_grad():
        want, _ = response_logprobs(tiny_model, plain)
        got, _ = response_logprobs(tiny_model, batch)
    diff = max_diff(got, want, plain["response_mask"])
    print(f"{wrong}: max |logp diff| = {diff:.3g}")
    assert diff > WRONG_MIN > LOGP_ATOL


def _sgd_step(model, samples, pad, **overrides):
    """One Learner.step with SGD lr 1: the parameter delta is minus the accumulated gradient."""
    cfg = TrainerConfig(**{"lr": 1.0, "grad_clip": 1e9, "micro_batch_size": 8, **overrides})
    learner = Learner(model, cfg, group_size=4, temperature=1.0, pad_id=pad, info=DistInfo())
    learner.optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    learner.scheduler = torch.optim.lr_scheduler.LambdaLR(learner.optimizer, lambda step: 1.0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    metrics = learner.step(samples)
    return learner, metrics, {k: v - before[k] for k, v in model.state_dict().items()}


CASES = {
    "plain": ({}, {}),
    "group_split_across_micro_batches": ({}, {"micro_batch_size": 3}),  # G=4: pieces of 3 + 1
    "token_budget": ({}, {"max_tokens_per_micro_batch": 120}),
    "truncated_masked": ({"truncate_longest": True}, {"mask_truncated": True}),
    "entropy_bonus": ({}, {"entropy_coeff": 0.01}),
    "one_prompt_length_three_groups": ({"prompt_lens": (45, 45, 45)}, {"micro_batch_size": 6}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_gradients_and_loss_equal_the_per_sample_step(tiny_model, tokenizer, case):
    batch_kw, cfg_kw = CASES[case]
    samples, pad = batch_of(**batch_kw), tokenizer.pad_token_id
    off, m_off, d_off = _sgd_step(copy.deepcopy(tiny_model), samples, pad, shared_prefix=False, **cfg_kw)
    on, m_on, d_on = _sgd_step(copy.deepcopy(tiny_model), samples, pad, shared_prefix=True, **cfg_kw)
    assert on.mask_kind == "bool" and off.mask_kind is None
    if case == "group_split_across_micro_batches":
        chunks = [c for c, _ in on._chunks(samples, list(range(len(samples))))]
        assert len(chunks) == 4 and any(len(c) == 1 for c in chunks)  # each group: a piece of 3 and of 1
    for key in ("loss", "pg_loss", "kl", "entropy"):
        assert m_on[key] == pytest.approx(m_off[key], rel=1e-5, abs=1e-7), key
    assert max(d.abs().max().item() for d in d_off.values()) > 1e-3  # a real update, not ~0 == ~0
    for name in d_off:
        torch.testing.assert_close(d_on[name], d_off[name], rtol=1e-4, atol=1e-6, msg=name)


def test_wrong_mask_in_the_learner_changes_the_gradients(tiny_model, tokenizer, monkeypatch):
    """The gradient check above is not blind: with the sibling leak in the layout it fails."""
    samples, pad = batch_of(), tokenizer.pad_token_id
    _, _, d_off = _sgd_step(copy.deepcopy(tiny_model), samples, pad, shared_prefix=False)
    real = shared_prefix.layout

    def leaky(*args, **kwargs):
        batch = real(*args, **kwargs)
        _wrong_sibling_mask(batch)
        return batch

    monkeypatch.setattr(shared_prefix, "layout", leaky)
    _, _, d_on = _sgd_step(copy.deepcopy(tiny_model), samples, pad, shared_prefix=True)
    worst = max(((d_on[k] - d_off[k]).abs().max() / d_off[k].abs().max().clamp(min=1e-12)).item() for k in d_off)
    print(f"sibling leak: max relative gradient difference {worst:.3g}")
    assert worst > 1e-2


def _two_mini_batch_updates(model, samples, pad, shared: bool) -> dict:
    """Two optimizer steps per batch (ppo_mini_batches 2: pi_old and the reference from the frozen
    forward, the second step's ratio off 1), with SGD lr 1: each weight's update is minus its
    accumulated gradients, linear in them. (AdamW moves every weight by ~lr whatever its gradient's
    size, so round-off in a near-0 gradient became a 2e-4 difference on an AVX2-only EPYC: a tolerance
    that separated a bug from round-off only on the CPU it was measured on.)"""
    _, metrics, delta = _sgd_step(model, samples, pad, shared_prefix=shared, micro_batch_size=5, ppo_mini_batches=2)
    assert metrics["optimizer_steps"] == 2 and metrics["kl"] > 0
    return delta


def _assert_same_updates(got: dict, want: dict) -> None:
    # rtol 1e-4, atol 1e-6: test_learner.py's micro-batching margin, as above; the updates are ~1e-2
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-6, msg=name)


def test_step_with_two_ppo_mini_batches_matches(tiny_model, tokenizer):
    """The same two updates with shared_prefix on and off."""
    samples, pad = batch_of(prompt_lens=(37, 61, 45, 29)), tokenizer.pad_token_id
    off = _two_mini_batch_updates(copy.deepcopy(tiny_model), samples, pad, False)
    on = _two_mini_batch_updates(copy.deepcopy(tiny_model), samples, pad, True)
    assert max(d.abs().max().item() for d in off.values()) > 1e-3  # a real update, not ~0 == ~0
    _assert_same_updates(on, off)


@pytest.mark.parametrize("wrong", ["sibling_mask", "positions_restart"])
def test_two_mini_batch_check_fails_on_a_wrong_layout(tiny_model, tokenizer, monkeypatch, wrong):
    """The comparison above is not blind: a wrong layout in the learner fails it."""
    samples, pad = batch_of(prompt_lens=(37, 61, 45, 29)), tokenizer.pad_token_id
    off = _two_mini_batch_updates(copy.deepcopy(tiny_model), samples, pad, False)
    real = shared_prefix.layout

    def wrong_layout(*args, **kwargs):
        batch = real(*args, **kwargs)
        _wrong_sibling_mask(batch) if wrong == "sibling_mask" else _wrong_positions(batch, "restart")
        return batch

    monkeypatch.setattr(shared_prefix, "layout", wrong_layout)
    on = _two_mini_batch_updates(copy.deepcopy(tiny_model), samples, pad, True)
    with pytest.raises(AssertionError):
        _assert_same_updates(on, off)


def test_attention_without_4d_masks_falls_back_with_one_line(tiny_model, tokenizer, capsys):
    tiny_model.config._attn_implementation = "flash_attention_2"
    learner = Learner(tiny_model, TrainerConfig(), group_size=4, temperature=1.0, pad_id=tokenizer.pad_token_id,
                      info=DistInfo())
    lines = [line for line in capsys.readouterr().out.splitlines() if "shared_prefix" in line]
    assert len(lines) == 1 and "flash_attention_2" in lines[0] and "one row per sample" in lines[0]
    assert learner.mask_kind is None
    batch = learner._batch(batch_of(), [0, 1, 2])
    assert "gather_row" not in batch and batch["attention_mask"].dim() == 2
    assert TrainerConfig().shared_prefix is True


# --- distributed --------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["fsdp2", "deepspeed"])
def test_two_ranks_shared_prefix_on_equals_off(tmp_path, strategy):
    """2 gloo ranks, FSDP2 or DeepSpeed ZeRO-3 (policy and reference sharded), 3 groups (rank 1 has
    one, so it runs padding passes), groups split across micro-batches, 2 PPO mini-batches: the
    weights after one step equal with shared_prefix on and off."""
    worker = ROOT / "tests" / "workers" / "shared_prefix_worker.py"
    env = child_env(OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone", str(worker),
           "--strategy", strategy, "--out", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = torch.load(tmp_path / "weights.pt", weights_only=True)
    on, off, initial = result["on"], result["off"], result["initial"]
    assert result["mask_kind"] == "bool"
    # The worker's AdamW is linear in the gradient (eps 1e3), so the updates compare gradients:
    # rtol 1e-4 as above, atol 5e-8 for the round-off of weights of size ~0.1 (ulp 7e-9).
    assert max((off[k] - initial[k]).abs().max().item() for k in off) > 5e-4
    for name in off:
        torch.testing.assert_close(on[name] - initial[name], off[name] - initial[name], atol=5e-8, rtol=1e-4, msg=name)
