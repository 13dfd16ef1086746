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


def checkpoint_format(learner_dir: str | Path) -> str:
    """``deepspeed`` (ZeRO partitions) or ``dcp`` (torch.distributed.checkpoint: none/ddp/fsdp2)."""
    learner_dir = Path(learner_dir)
    for kind in ("deepspeed", "dcp"):
        if (learner_dir / kind).is_dir():
            return kind
    raise FileNotFoundError(f"{learner_dir} holds no learner checkpoint (expected {learner_dir / 'dcp'} or "
                            f"{learner_dir / 'deepspeed'}; runs with trainer.enabled: false have no trained "
                            "weights to export)")


def checkpoint_state(learner_dir: str | Path, model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The full policy weights of a ``Learner.save_state`` directory, reassembled in this one
    process (no process group) for ``model``'s architecture: DCP shards via
    torch.distributed.checkpoint, ZeRO partitions via DeepSpeed's zero_to_fp32."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    from train.sharding import quiet_single_process_dcp

    learner_dir = Path(learner_dir)
    expected = get_model_state_dict(model)
    if checkpoint_format(learner_dir) == "deepspeed":
        from train.zero import consolidated_state

        state = consolidated_state(learner_dir / "deepspeed")
        # ZeRO may store a tied weight once (embed_tokens); its alias (lm_head) is not missing.
        first_name = {id(p): n for n, p in model.named_parameters()}
        aliases = dict(model.named_parameters(remove_duplicate=False))
        missing = [k for k in expected if k not in state and first_name.get(id(aliases.get(k))) not in state]
        unexpected = sorted(set(state) - set(expected))
        if missing or unexpected:
            raise ValueError(f"{learner_dir} does not fit {type(model).__name__}: missing {missing[:5]}, "
                             f"unexpected {unexpected[:5]}")
        return state
    state = {"model": expected}
    with quiet_single_process_dcp():
        dcp.load(state, checkpoint_id=str(learner_dir / "dcp"))  # in place, into the model's tensors
    return state["model"]


def export_checkpoint(learner_dir: str | Path, policy: str, out_dir: str | Path, dtype: str = "float32",
                      cache_dir: str | None = None) -> Path:
    """A checkpoint's policy (``Learner.save_state``, written by any number of ranks under any
    strategy) as an HF directory, in one process: the base model supplies the architecture and
    tokenizer, the checkpoint the weights."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    from train.models import load_policy

    checkpoint_format(learner_dir)  # fail before loading the base model
    model, tokenizer = load_policy(policy, dtype, cache_dir)
    state = checkpoint_state(learner_dir, model)
    set_model_state_dict(model, state, options=StateDictOptions(strict=False))
    return export_hf(model, tokenizer, out_dir)
