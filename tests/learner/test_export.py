"""HF export: from a live model, and from a ``Learner.save_state`` checkpoint in one process.
(Checkpoints written by 2-rank FSDP2 and DeepSpeed ZeRO-3 are exported in
tests/learner/test_distributed_train.py.)"""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from train.learner.config import TrainerConfig
from train.learner.distributed import DistInfo
from train.learner.export import checkpoint_format, export_checkpoint, export_hf
from train.learner.learner import Learner, Sample


def _trained(tiny_model, tokenizer) -> Learner:
    learner = Learner(tiny_model, TrainerConfig(lr=1e-2), group_size=2, temperature=1.0,
                      pad_id=tokenizer.pad_token_id, info=DistInfo())
    batch = [Sample([11, 12, 13], [20 + i, 30], float(i % 2), group=i // 2) for i in range(4)]
    assert learner.step(batch)["skipped_step"] == 0.0
    return learner


def _assert_loads_as(out, want: dict) -> None:
    model = AutoModelForCausalLM.from_pretrained(out)
    got = model.state_dict()
    assert got.keys() == want.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], atol=0, rtol=0, msg=name)
    assert list(out.glob("*.safetensors")) and (out / "tokenizer.json").is_file()
    assert json.loads((out / "generation_config.json").read_text())["pad_token_id"] is not None


def test_export_from_checkpoint_equals_the_trained_weights(tiny_model, tokenizer, tmp_path):
    from train.learner.models import load_policy

    learner = _trained(tiny_model, tokenizer)
    learner.save_state(tmp_path / "ckpt")
    assert checkpoint_format(tmp_path / "ckpt") == "dcp"
    trained = learner.full_state_dict()
    initial = load_policy("tiny-random", seed=0)[0].state_dict()
    assert any(not torch.equal(trained[k], initial[k]) for k in trained)  # not the base model again
    out = export_checkpoint(tmp_path / "ckpt", "tiny-random", tmp_path / "hf")
    _assert_loads_as(out, trained)


def test_export_hf_from_a_live_model_replaces_the_directory(tiny_model, tokenizer, tmp_path):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "stale.bin").write_text("old")
    out = export_hf(tiny_model, tokenizer, tmp_path / "hf")
    assert not (out / "stale.bin").exists()
    _assert_loads_as(out, tiny_model.state_dict())


def test_export_without_a_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no learner checkpoint"):
        export_checkpoint(tmp_path, "tiny-random", tmp_path / "hf")


def test_export_state_saves_the_states_own_tensors_without_a_second_copy(tiny_model, tokenizer, tmp_path, monkeypatch):
    """The run's export at its end: the weights are the given state's tensors (no base loaded only to be
    overwritten, which held a second full copy at the quickstart's memory peak), and the directory loads back
    with exactly those weights and load_policy's generation config."""
    from train.learner import export
    from train.learner.models import load_policy, policy_skeleton

    gen = torch.Generator().manual_seed(5)
    state = {k: v + 0.01 * torch.randn(v.shape, generator=gen) for k, v in tiny_model.state_dict().items()}
    state["lm_head.weight"] = state["model.embed_tokens.weight"]  # tied, as the model's own state dict has it
    seen = {}
    real = export.export_hf
    monkeypatch.setattr(export, "export_hf", lambda model, tok, out: seen.update(model=model) or real(model, tok, out))
    out = export.export_state(state, "tiny-random", tmp_path / "hf")
    params = dict(seen["model"].named_parameters())
    assert all(params[k].data_ptr() == state[k].data_ptr() for k in params)
    back = AutoModelForCausalLM.from_pretrained(out)
    for name, value in back.state_dict().items():
        torch.testing.assert_close(value, state[name], atol=0, rtol=0, msg=name)
    skeleton, _ = policy_skeleton("tiny-random")
    assert all(p.is_meta for p in skeleton.parameters())
    assert skeleton.generation_config.to_dict() == load_policy("tiny-random")[0].generation_config.to_dict()
    # A gathered state (FSDP2, ZeRO-3) holds the tied head as a tensor of its own: still saved once, as the embedding.
    gathered = {**state, "lm_head.weight": state["lm_head.weight"].clone()}
    again = export.export_state(gathered, "tiny-random", tmp_path / "hf2")
    from safetensors.torch import load_file

    assert load_file(again / "model.safetensors").keys() == load_file(out / "model.safetensors").keys()
