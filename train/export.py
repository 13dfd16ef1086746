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


def export_state(state: dict[str, torch.Tensor], policy: str, out_dir: str | Path, dtype: str = "float32",
                 cache_dir: str | None = None) -> Path:
    """Full weights (e.g. gathered from FSDP2 shards) into a fresh copy of the base architecture."""
    from torch.distributed.checkpoint.state_dict import set_model_state_dict

    from train.models import load_policy

    model, tokenizer = load_policy(policy, dtype, cache_dir)
    set_model_state_dict(model, state)
    return export_hf(model, tokenizer, out_dir)


def export_checkpoint(learner_dir: str | Path, policy: str, out_dir: str | Path, dtype: str = "float32",
                      cache_dir: str | None = None) -> Path:
    """A checkpoint's policy (``Learner.save_state``, written by any number of ranks under any
    strategy) as an HF directory, in one process: the base model supplies the architecture and
    tokenizer, torch.distributed.checkpoint reassembles the full weights from the shards."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    from train.models import load_policy
    from train.sharding import quiet_single_process_dcp

    learner_dir = Path(learner_dir)
    if not (learner_dir / "dcp").is_dir():
        raise FileNotFoundError(f"{learner_dir} holds no learner checkpoint (expected {learner_dir / 'dcp'}; "
                                "runs with trainer.enabled: false have no trained weights to export)")
    model, tokenizer = load_policy(policy, dtype, cache_dir)
    state = {"model": get_model_state_dict(model)}
    with quiet_single_process_dcp():
        dcp.load(state, checkpoint_id=str(learner_dir / "dcp"))
    set_model_state_dict(model, state["model"])
    return export_hf(model, tokenizer, out_dir)
