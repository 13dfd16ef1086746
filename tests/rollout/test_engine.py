import pytest

from rollout.engines import ENGINES, SamplingParams, build_engine


def test_hf_engine_returns_g_completions_per_prompt(tiny_model, tokenizer):
    engine = build_engine("hf", model=tiny_model, tokenizer=tokenizer)
    prompts = [tokenizer("hello there")["input_ids"], tokenizer("a much longer prompt than the first one")["input_ids"]]
    out = engine.generate(prompts, SamplingParams(n=3, max_new_tokens=12, seed=1))
    assert [len(g) for g in out] == [3, 3]
    for group in out:
        for c in group:
            assert 1 <= len(c.token_ids) <= 12
            assert c.truncated == (tokenizer.eos_token_id not in c.token_ids)
            if not c.truncated:
                assert c.token_ids[-1] == tokenizer.eos_token_id
    again = engine.generate(prompts, SamplingParams(n=3, max_new_tokens=12, seed=1))
    assert [[c.token_ids for c in g] for g in out] == [[c.token_ids for c in g] for g in again]


def test_left_padding_does_not_change_a_prompts_samples(tiny_model, tokenizer):
    """Batched with a longer prompt, a short prompt must see the same distribution: check greedy-like sampling."""
    engine = build_engine("hf", model=tiny_model, tokenizer=tokenizer)
    short = tokenizer("hello there")["input_ids"]
    long = tokenizer("a much longer prompt than the first one, padded against")["input_ids"]
    cold = SamplingParams(n=1, temperature=1e-4, top_p=1.0, max_new_tokens=8, seed=0)
    alone = engine.generate([short], cold)[0][0].token_ids
    batched = engine.generate([long, short], cold)[1][0].token_ids
    assert alone == batched


def test_unknown_engine_lists_registered():
    with pytest.raises(ValueError, match="registered"):
        build_engine("nope")
    assert "hf" in ENGINES


def test_hf_engine_hands_over_each_batch_as_it_finishes(tiny_model, tokenizer):
    """on_batch gets every batch once, in order, with its first prompt's index; what it got is what
    generate returns, and the same as without the hook."""
    from rollout.engines import HFEngine

    engine = HFEngine(tiny_model, tokenizer, batch_size=2)
    prompts = [tokenizer(f"prompt number {i}")["input_ids"] for i in range(5)]
    params = SamplingParams(n=2, max_new_tokens=6, seed=3)
    seen = []
    out = engine.generate(prompts, params, on_batch=lambda first, groups: seen.append((first, groups)))
    assert [(first, len(groups)) for first, groups in seen] == [(0, 2), (2, 2), (4, 1)]
    assert [g for _, groups in seen for g in groups] == out
    assert engine.generate(prompts, params) == out


def test_generate_streaming_reports_one_batch_for_an_engine_without_the_hook(tiny_model, tokenizer):
    from rollout.engines import generate_streaming

    class Plain:
        needs_sync = False

        def generate(self, prompts, params):
            return [[f"completion of {p}"] for p in prompts]

    seen = []
    out = generate_streaming(Plain(), [[1], [2]], SamplingParams(n=1), lambda first, groups: seen.append((first, groups)))
    assert seen == [(0, out)] and len(out) == 2
