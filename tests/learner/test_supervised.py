"""The supervised step (train.learner.supervised), the warm start's fine-tune: with gradient checkpointing each
decoder layer is recomputed in backward on the prompt's read-only cache, which must change no weight, keep the
warm start's cache key, and really recompute; the build's child process reports its failures as they are."""

import numpy as np
import pytest
import torch

from train.learner.supervised import Answer, Recipe, SharedPrompt, answers_nll, fine_tune, prompt_cache


def _examples() -> list[Answer]:
    rng = np.random.default_rng(3)
    out = []
    for parent in range(3):
        prompt = rng.integers(100, 5000, 45).tolist()
        out += [Answer(prompt, rng.integers(100, 5000, n).tolist() + [2], parent) for n in (7, 12, 3, 9, 5)]
    return out


def _trained(dtype: str, checkpointing: bool):
    """A tiny model after a 2-epoch warm start, and how often its decoder layers ran forward."""
    from train.learner.models import load_policy

    model, _ = load_policy("tiny-random", seed=0)
    calls = [0]
    for layer in model.model.layers:
        layer.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))  # a recompute stops early
    recipe = Recipe(lr=1e-3, epochs=2, answers_per_pass=2, autocast=dtype, gradient_checkpointing=checkpointing)
    losses = fine_tune(model, _examples(), recipe, pad_id=2, progress=False)
    return model, losses, calls[0]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_checkpointed_layers_are_recomputed_and_the_weights_are_bitwise_the_same(dtype):
    plain, plain_losses, plain_calls = _trained(dtype, checkpointing=False)
    ckpt, ckpt_losses, ckpt_calls = _trained(dtype, checkpointing=True)
    assert ckpt_losses == plain_losses  # exact: the same kernels on the same inputs
    for (name, a), (_, b) in zip(plain.state_dict().items(), ckpt.state_dict().items()):
        assert torch.equal(a, b), name
    # 3 prompts x 2 epochs: one prompt pass and 3 answer passes (5 answers, 2 a pass) each, per layer.
    layers, steps, passes = len(plain.model.layers), 6, 3
    assert plain_calls == layers * steps * (1 + passes)
    assert ckpt_calls == layers * steps * (1 + 2 * passes)  # every answer pass ran again in backward
    assert not any(getattr(m, "gradient_checkpointing", False) for m in ckpt.modules())  # switched off for saving


def test_the_prompt_cache_is_read_only_across_passes(tiny_model):
    """Every pass reads the prompt alone: the cache does not grow, and a second pass on it gives the first's loss."""
    ex = _examples()[:2]
    cache = prompt_cache(tiny_model, ex[0].prompt_ids)
    assert all(type(layer) is SharedPrompt for layer in cache.layers)
    length = cache.get_seq_length()
    assert length == len(ex[0].prompt_ids) - 1
    first = answers_nll(tiny_model, cache, ex, pad_id=2)
    assert cache.get_seq_length() == length
    again = answers_nll(tiny_model, cache, ex, pad_id=2)
    assert torch.equal(first, again)


def test_checkpointing_is_not_in_the_cache_key():
    """It changes no weight, so a cached warm start stays valid either way (the quickstart's is ...-97e849ca884e)."""
    from train.config.config import load_config, warm_start_inputs
    from train.warm_start.build import cache_key

    def key(on: bool) -> str:
        cfg = load_config("configs/quickstart.yaml", [f"warm_start.gradient_checkpointing={str(on).lower()}",
                                                     "warm_start.dtype=bfloat16"])
        return cache_key(warm_start_inputs(cfg))

    assert key(True) == key(False) == "97e849ca884e"


def test_a_build_that_fails_in_its_child_raises_the_same_error_here(tmp_path):
    """The fine-tune runs in a spawned child (train.warm_start.isolated): its failure must read as it did
    in-process, the same type and message (the command line prints it as one line), with the child's traceback
    kept as a note, and nothing written. A base model that is not there fails before any data is made."""
    from train.config.config import load_config, warm_start_inputs
    from train.learner.models import ModelNotFoundError
    from train.warm_start import isolated
    from train.warm_start.build import Example, ensure_warm_start, warm_start_dir

    missing = tmp_path / "no-such-model"
    cfg = load_config(None, [f"model.policy={missing}", f"model.cache_dir={tmp_path / 'cache'}", "warm_start.enabled=true"])
    inputs = warm_start_inputs(cfg)
    examples = [Example("circle_packing_26", 0, [5, 6, 7], "x", [8, 2])]
    with pytest.raises(ModelNotFoundError, match="neither") as raised:
        isolated.build_in_child(inputs, examples, {"drawn": 1, "valid": 1, "data_s": 0.1}, tmp_path / "out", progress=False)
    notes = "\n".join(getattr(raised.value, "__notes__", []))
    assert "raised in the warm start's build process" in notes and "load_policy" in notes
    assert not (tmp_path / "out").exists()

    def no_tools(name):
        raise AssertionError("no sandbox for a model that is not there")

    with pytest.raises(ModelNotFoundError, match="neither"):
        ensure_warm_start(inputs, no_tools, progress=False)
    assert not warm_start_dir(inputs).exists()


def test_a_build_process_killed_without_a_word_is_one_clear_error(tmp_path, monkeypatch):
    """The OOM killer's SIGKILL leaves no exception to send back: the parent says what happened, and the run
    prints it as one `helix: error:` line (train/helix.py) with nothing cached."""
    import os

    from train.config.config import load_config, warm_start_inputs
    from train.warm_start import isolated

    killer = tmp_path / "python"
    killer.write_text("#!/bin/sh\nkill -9 $$\n")
    os.chmod(killer, 0o755)
    monkeypatch.setattr(isolated.sys, "executable", str(killer))
    inputs = warm_start_inputs(load_config(None, ["model.policy=tiny-random", "warm_start.enabled=true"]))
    with pytest.raises(isolated.WarmStartFailed, match=r"exit code -9 \(SIGKILL: out of memory\?\); nothing was cached"):
        isolated.build_in_child(inputs, [], {}, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
