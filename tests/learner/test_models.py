import subprocess
import sys

import pytest
import torch

from train.learner.models import ModelNotFoundError, load_policy, resolve_policy_path


def test_missing_local_model_fails_fast_with_instructions(tmp_path):
    with pytest.raises(ModelNotFoundError, match="local Hugging Face model directory"):
        resolve_policy_path(str(tmp_path / "no-such-model"))


def test_tiny_random_is_seeded_and_uses_smollm2_tokenizer():
    a, tok = load_policy("tiny-random", seed=3)
    b, _ = load_policy("tiny-random", seed=3)
    assert len(tok) == 49152 and tok.padding_side == "left" and tok.pad_token_id is not None
    assert a.config.vocab_size == len(tok)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)


def test_embedded_smollm2_converts_and_answers_greedily():
    model, tok = load_policy("smollm2-135m-instruct")
    path = resolve_policy_path("smollm2-135m-instruct")
    assert (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file()
    assert not hasattr(model.config, "quantization_config")
    ids = tok("The capital of France is", return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=4, do_sample=False)
    assert "Paris" in tok.decode(out[0, ids["input_ids"].shape[1]:])


def test_local_directory_path_works(tmp_path):
    model, tok = load_policy("tiny-random", seed=0)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, _ = load_policy(str(tmp_path))
    for p, q in zip(model.parameters(), loaded.parameters()):
        assert torch.equal(p, q)


@pytest.mark.slow  # end to end, 15-30 s: kept out of the -m 'not slow' tier
def test_the_first_conversion_says_one_line_and_logs_transformers_bars_to_a_file(tmp_path):
    # In a subprocess: pytest's own capture replaces sys.stdout, which a real terminal does not.
    code = f"from train.learner.models import resolve_policy_path; resolve_policy_path('smollm2-135m-instruct', {str(tmp_path)!r})"
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    log = tmp_path / "models" / "SmolLM2-135M-Instruct.convert.log"
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "models" / "SmolLM2-135M-Instruct" / "config.json").is_file()
    assert first.stdout.count("\n") == 1 and first.stdout.startswith("[helix] converting embedded") and str(log) in first.stdout
    assert first.stderr == ""  # the dequantise / load / save bars went to the log
    assert "Converting and de-quantizing GGUF tensors" in log.read_text()
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")  # converted once: silent after that
