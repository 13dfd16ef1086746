"""Export the policy as a Hugging Face model directory that transformers and vLLM load as-is."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import torch

from train.learner import lora
from train.learner.config import LoraConfig


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
    """Full weights (e.g. gathered from FSDP2 shards, or LoRA-merged) saved as the base architecture. The model is
    built without weights and takes the state's own tensors: loading the base's weights only to overwrite them
    held a second full copy at the run's end (+0.5 GB for the quickstart's 135M in fp32, its memory peak)."""
    from train.learner.models import policy_skeleton

    model, tokenizer = policy_skeleton(policy, dtype, cache_dir)
    want = next(model.parameters()).dtype
    model.load_state_dict({k: v.to(want) for k, v in state.items()}, strict=True, assign=True)
    # A gathered (FSDP2/ZeRO) state holds tied weights as two tensors; assigned, they would be saved twice.
    model.tie_weights()
    return export_hf(model, tokenizer, out_dir)


def checkpoint_format(learner_dir: str | Path) -> str:
    """The backend subdirectory a ``Learner.save_state`` directory holds: ``dcp``
    (torch.distributed.checkpoint: none/ddp/fsdp2) or ``deepspeed`` (ZeRO partitions)."""
    from train.learner.backends import BACKENDS

    learner_dir = Path(learner_dir)
    kinds = list(dict.fromkeys(cls.checkpoint_dir for cls in BACKENDS.values()))
    for kind in kinds:
        if (learner_dir / kind).is_dir():
            return kind
    expected = " or ".join(str(learner_dir / kind) for kind in kinds)
    raise FileNotFoundError(f"{learner_dir} holds no learner checkpoint (expected {expected}; runs with "
                            "trainer.enabled: false have no trained weights to export)")


def checkpoint_state(learner_dir: str | Path, model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The full policy weights of a ``Learner.save_state`` directory, reassembled in this one
    process (no process group) for ``model``'s architecture by the backend that wrote that format
    (DCP shards via torch.distributed.checkpoint, ZeRO partitions via DeepSpeed's zero_to_fp32)."""
    from train.learner.backends import BACKENDS

    learner_dir = Path(learner_dir)
    kind = checkpoint_format(learner_dir)
    reader = next(cls for cls in BACKENDS.values() if cls.checkpoint_dir == kind)
    return reader.consolidated_state(learner_dir / kind, model)


def export_checkpoint(learner_dir: str | Path, policy: str, out_dir: str | Path, dtype: str = "float32",
                      cache_dir: str | None = None, lora_cfg: LoraConfig | None = None) -> Path:
    """A checkpoint's policy (``Learner.save_state``, written by any number of ranks under any
    strategy) as an HF directory, in one process: the base model supplies the architecture and
    tokenizer, the checkpoint the weights. ``lora_cfg`` (enabled): the checkpoint holds adapters
    for ``policy``, the base they were trained on; the export is base and adapters merged."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict

    from train.learner.models import load_policy

    checkpoint_format(learner_dir)  # fail before loading the base model
    model, tokenizer = load_policy(policy, dtype, cache_dir)
    with_adapters = lora_cfg is not None and lora_cfg.enabled
    if with_adapters:
        lora.apply(model, lora_cfg)
    state = checkpoint_state(learner_dir, model)
    set_model_state_dict(model, state, options=StateDictOptions(strict=False))
    if with_adapters:
        return export_state(lora.merged_state(get_model_state_dict(model), lora_cfg), policy, out_dir, dtype, cache_dir)
    return export_hf(model, tokenizer, out_dir)
