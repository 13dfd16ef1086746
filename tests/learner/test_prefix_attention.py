"""prefix_attention: the shared-prefix row's attention cut at the prompt's end gives what attention
under the row's full mask gives (checked against a float64 softmax written out here), computes the
prompt's part without a mask, and is plain sdpa everywhere else (generation, per-sample rows).

Tolerances: float32 against float64, outputs atol 2e-6 (measured ~3e-7) and input gradients atol
2e-5 (sums over ~600 keys; measured ~2e-6). A response that saw a sibling, or a prompt token that
saw a response, moves outputs by ~1e-1."""

import pytest
import torch
import torch.nn.functional as F

from train.learner import prefix_attention, shared_prefix
from train.learner.config import TrainerConfig
from train.learner.distributed import DistInfo
from train.learner.learner import Learner, Sample, response_logprobs

H, HKV, D = 6, 2, 32  # grouped-query attention, as SmolLM2 (9 heads on 3 key/value heads)


class Attn(torch.nn.Module):
    """What transformers hands an attention function as ``module``."""

    num_key_value_groups = H // HKV
    is_causal = True


def row_samples(prompt_lens, answer_lens, seed=0):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for g, (p, answers) in enumerate(zip(prompt_lens, answer_lens)):
        prompt = torch.randint(10, 1000, (p,), generator=gen).tolist()
        out += [Sample(prompt, torch.randint(10, 1000, (n,), generator=gen).tolist(), float(i), g)
                for i, n in enumerate(answers)]
    return out


def reference(q, k, v, mask):
    """softmax(q k^T / sqrt(d) + log mask) v in float64, every head's keys repeated for its queries."""
    k = k.double().repeat_interleave(H // HKV, dim=1)
    v = v.double().repeat_interleave(H // HKV, dim=1)
    scores = q.double() @ k.transpose(-1, -2) / D ** 0.5
    return (scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v).transpose(1, 2)


@pytest.mark.parametrize("prompt_lens", [(600,), (431, 600)], ids=["one row", "left-padded rows"])
def test_the_split_equals_attention_under_the_full_mask(prompt_lens):
    samples = row_samples(prompt_lens, [(70, 90, 130, 110)] * len(prompt_lens))
    batch = shared_prefix.layout(samples, pad_id=0)
    mask, s = batch["attention_mask"], int(batch["prefix_len"])
    assert bool(batch["prefix_padded"]) == (len(prompt_lens) > 1)
    rows, t = batch["input_ids"].shape
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(rows, n, t, D, generator=gen, requires_grad=True) for n in (H, HKV, HKV))
    got, none = prefix_attention.shared_prefix_sdpa(Attn(), q, k, v, mask, helix_prefix_len=s,
                                                    helix_prefix_padded=bool(batch["prefix_padded"]))
    want = reference(q, k, v, mask)
    assert none is None and got.shape == (rows, t, H, D) and got.is_contiguous()
    torch.testing.assert_close(got.double(), want, atol=2e-6, rtol=0)
    weights = torch.randn(want.shape, generator=gen, dtype=torch.float64)
    grads = torch.autograd.grad((got.double() * weights).sum(), (q, k, v))
    expected = torch.autograd.grad((want * weights).sum(), (q, k, v))
    for name, a, b in zip("qkv", grads, expected):
        torch.testing.assert_close(a.double(), b.double(), atol=2e-5, rtol=0, msg=name)


def test_the_prompt_part_runs_without_a_mask_and_the_tail_on_its_rows(monkeypatch):
    """The saving itself: the prompt's queries go to sdpa as a causal call on the prompt's keys (the
    kernel skips the blocks above the diagonal only then), the responses' queries with the mask's last rows."""
    samples = row_samples((300,), [(40, 60, 50)])
    batch = shared_prefix.layout(samples, pad_id=0)
    mask, s = batch["attention_mask"], int(batch["prefix_len"])
    t = mask.shape[-1]
    calls = []
    real = F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, **kw):
        calls.append((q.shape[2], k.shape[2], None if attn_mask is None else tuple(attn_mask.shape), kw["is_causal"]))
        return real(q, k, v, attn_mask=attn_mask, **kw)

    monkeypatch.setattr(prefix_attention.F, "scaled_dot_product_attention", spy)
    q, k, v = torch.randn(1, H, t, D), torch.randn(1, HKV, t, D), torch.randn(1, HKV, t, D)
    prefix_attention.shared_prefix_sdpa(Attn(), q, k, v, mask, helix_prefix_len=s, helix_prefix_padded=False)
    assert calls == [(s, s, None, True), (t - s, t, (1, 1, t - s, t), False)]


def test_without_the_prompt_length_it_is_plain_sdpa():
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    t = 50
    q, k, v = torch.randn(2, H, t, D), torch.randn(2, HKV, t, D), torch.randn(2, HKV, t, D)
    mask = torch.ones(t, t, dtype=torch.bool).tril().expand(2, 1, t, t)
    for m in (None, mask):
        got, _ = prefix_attention.shared_prefix_sdpa(Attn(), q, k, v, m)
        want, _ = sdpa_attention_forward(Attn(), q, k, v, m)
        assert torch.equal(got, want)


def test_the_learner_switches_sdpa_and_only_sdpa(tiny_model, tokenizer):
    """Only a switched model's batches carry the prompt length, so no other model's forward gets the keywords."""
    pad, samples = tokenizer.pad_token_id, row_samples((30, 41), [(5, 7), (6, 3)])
    learner = Learner(tiny_model, TrainerConfig(), group_size=4, temperature=1.0, pad_id=pad, info=DistInfo())
    assert tiny_model.config._attn_implementation == prefix_attention.NAME
    assert shared_prefix.mask_kind(tiny_model) == ("bool", "")
    batch = learner._batch(samples, [0, 1, 2, 3])
    assert int(batch["prefix_len"]) == 41 and bool(batch["prefix_padded"])
    tiny_model.set_attn_implementation("sdpa")
    Learner(tiny_model, TrainerConfig(shared_prefix=False), group_size=4, temperature=1.0, pad_id=pad, info=DistInfo())
    assert tiny_model.config._attn_implementation == "sdpa"
    tiny_model.set_attn_implementation("eager")
    learner = Learner(tiny_model, TrainerConfig(), group_size=4, temperature=1.0, pad_id=pad, info=DistInfo())
    assert tiny_model.config._attn_implementation == "eager" and learner.mask_kind == "float"
    batch = learner._batch(samples, [0, 1, 2, 3])
    assert "gather_row" in batch and "prefix_len" not in batch and "prefix_padded" not in batch


def test_a_switched_model_logprobs_and_generates_as_on_sdpa(tiny_model, tokenizer):
    """Log-probs of a shared-prefix batch and greedy generation (whose masks transformers builds for
    the registered name) are sdpa's."""
    pad = tokenizer.pad_token_id
    samples = row_samples((40, 57), [(5, 9, 7), (6, 11, 4)])
    batch = {**shared_prefix.layout(samples, pad)}
    prompts = torch.tensor([[pad] * 3 + samples[0].prompt_ids[:12], samples[3].prompt_ids[:15]])
    attention = (prompts != pad).long()
    out = {}
    for impl in ("sdpa", prefix_attention.NAME):
        tiny_model.set_attn_implementation(impl)
        with torch.no_grad():
            logp, _ = response_logprobs(tiny_model, batch)
            gen = tiny_model.generate(input_ids=prompts, attention_mask=attention, max_new_tokens=6, do_sample=False,
                                      pad_token_id=pad)
        out[impl] = (logp, gen)
    torch.testing.assert_close(out["sdpa"][0], out[prefix_attention.NAME][0], atol=1e-6, rtol=0)
    assert torch.equal(out["sdpa"][1], out[prefix_attention.NAME][1])
