"""warm_start.lora_rank: adapters trained on the frozen base and merged into a plain saved model, with full
fine-tunes keeping the cache keys they had."""

import numpy as np
import pytest
import torch

from train.warm_start.build import Example, lora_config, merged_policy, train
from train.warm_start.config import WarmStartConfig


def _examples(seed: int = 0) -> list[Example]:
    rng = np.random.default_rng(seed)
    out = []
    for parent in range(2):
        prompt = rng.integers(100, 5000, 37).tolist()
        out += [Example("t", parent, prompt, "", rng.integers(100, 5000, n).tolist() + [2]) for n in (6, 9, 4)]
    return out


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].float()


def test_a_lora_warm_start_trains_the_adapters_only_and_saves_their_merge(tiny_model, tmp_path):
    from transformers import AutoModelForCausalLM

    from train.learner import lora

    ws = WarmStartConfig(enabled=True, epochs=3, lr=1e-2, lora_rank=4, dtype="float32")
    base = {n: p.detach().clone() for n, p in tiny_model.named_parameters()}
    adapters = lora_config(ws)
    assert (adapters.rank, adapters.alpha, adapters.target_modules) == (4, 8.0, "all-linear")
    lora.apply(tiny_model, adapters)
    losses = train(tiny_model, _examples(), ws, pad_id=2, progress=False)
    assert len(losses) == 6 and losses[-1] < losses[0] - 0.05, losses  # the adapters learned
    state = tiny_model.state_dict()
    for name, before in base.items():  # the frozen base is untouched
        torch.testing.assert_close(state[name if name in state else name.replace(".weight", ".base_layer.weight")],
                                   before, rtol=0, atol=0, msg=name)
    probe = _examples(1)[0].prompt_ids[:20]
    with_adapters = _logits(tiny_model, probe)

    merged = merged_policy(tiny_model, adapters, "tiny-random", None)
    assert not lora.has_adapters(merged) and type(merged) is type(tiny_model)
    assert merged.get_output_embeddings().weight is merged.get_input_embeddings().weight  # still tied
    torch.testing.assert_close(_logits(merged, probe), with_adapters, rtol=1e-4, atol=1e-5)
    moved = [n for n, p in merged.named_parameters() if not torch.equal(p, base[n])]
    assert any("q_proj" in n for n in moved) and any("down_proj" in n for n in moved)  # the merge reached the base

    merged.save_pretrained(tmp_path)  # a plain model directory: transformers loads it without peft
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, torch_dtype=torch.float32)
    assert not lora.has_adapters(loaded)
    torch.testing.assert_close(_logits(loaded, probe), with_adapters, rtol=1e-4, atol=1e-5)


def test_a_full_fine_tune_keeps_its_cache_key_and_lora_is_another_model():
    """The quickstart's full fine-tune (8 answers a parent then) was cached as ...-warm-a5d115fb8b45 before
    lora_rank existed: that cache stays valid (every existing warm start would otherwise be rebuilt), and adapters are another key."""
    from train.config.config import load_config, warm_start_inputs
    from train.warm_start.build import cache_key

    def key(rank: int) -> str:
        cfg = load_config("configs/quickstart.yaml", [f"warm_start.lora_rank={rank}", "warm_start.lr=5e-5",
                                                     "warm_start.answers_per_parent=8", "warm_start.dtype=bfloat16"])
        return cache_key(warm_start_inputs(cfg))

    assert key(0) == "a5d115fb8b45"
    assert key(16) != key(0) and key(16) != key(8)


def test_lora_rank_is_checked_like_every_key():
    from train.config.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="lora_rank"):
        load_config(None, ["warm_start.lora_rank=-1"])
    with pytest.raises(ConfigError, match="lora_rank"):
        load_config(None, ["warm_start.lora_rnak=4"])
