"""Export the policy as a Hugging Face model directory that transformers and vLLM load as-is."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import torch


def export_hf(model: torch.nn.Module, tokenizer, out_dir: str | Path) -> Path:
    """safetensors shards + config + generation config + tokenizer, swapped in atomically."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".tmp-", dir=out_dir.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True, max_shard_size="2GB")
        tokenizer.save_pretrained(tmp)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir
