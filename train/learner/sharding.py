"""FSDP2 sharding and the DCP state-dict helpers of the plain-PyTorch backends (``train.learner.backend_torch``;
DeepSpeed ZeRO's counterpart is ``train.learner.zero``).

``fsdp2`` is what makes 14B/32B fit on one 8-GPU node: parameters, gradients and optimizer
state are sharded per decoder layer (``fully_shard``), optionally kept on the CPU between uses
(``offload_params``), with bf16 compute and fp32 gradient reduction. State dicts use
``torch.distributed.checkpoint.state_dict``, whose names are the plain HF ones in every mode,
so checkpoints, weight sync to an inference engine and HF export share one code path.
"""

from __future__ import annotations

import contextlib

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_state_dict, set_state_dict


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The repeated blocks FSDP2 shards one by one (``model.model.layers`` in HF decoder LMs)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise ValueError(f"fsdp2 needs an HF decoder model with model.layers; {type(model).__name__} has none")
    return list(layers)


def shard_fsdp2(model: torch.nn.Module, bf16: bool, offload_params: bool) -> torch.nn.Module:
    """``offload_params``: FSDP2's CPUOffloadPolicy keeps parameters, gradients and (so) the
    optimizer state on the CPU; there is no separate optimizer-only offload."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    device = "cuda" if torch.cuda.is_available() else "cpu"
    mesh = init_device_mesh(device, (torch.distributed.get_world_size(),))
    kwargs = {"mesh": mesh}
    if bf16:
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    if offload_params:
        kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=torch.cuda.is_available())  # pinning needs a GPU
    for layer in decoder_layers(model):
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    return model


def full_model_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Full, unsharded HF-named tensors on every rank (collective under fsdp2)."""
    return get_model_state_dict(module, options=StateDictOptions(full_state_dict=True))


# Frozen parameters never change (a LoRA policy's base): checkpoints hold the trained ones alone.
_TRAINED = StateDictOptions(ignore_frozen_params=True)


def train_state(module: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """Trained-model + optimizer state as each rank holds it (sharded under fsdp2), for DCP."""
    model_sd, optim_sd = get_state_dict(module, optimizer, options=_TRAINED)
    return {"model": drop_frozen(module, model_sd), "optim": optim_sd}


def frozen_names(module: torch.nn.Module) -> set[str]:
    return {name for name, p in module.named_parameters(remove_duplicate=False) if not p.requires_grad}


def drop_frozen(module: torch.nn.Module, state: dict) -> dict:
    """``state`` without frozen weights: ignore_frozen_params keeps a frozen weight's tied alias
    (lm_head of a tied embedding), which would be one more full matrix per checkpoint."""
    frozen = frozen_names(module)
    return {k: v for k, v in state.items() if k not in frozen}


def load_train_state(module: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """The inverse of ``train_state``: frozen weights stay as loaded; a trained one missing is an error."""
    keys = set_state_dict(module, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"],
                          options=StateDictOptions(ignore_frozen_params=True, strict=False))
    frozen = frozen_names(module)
    missing = [k for k in keys.missing_keys if k not in frozen]
    if missing or keys.unexpected_keys:
        raise ValueError(f"checkpoint does not fit the policy: missing {missing[:5]}, unexpected {keys.unexpected_keys[:5]}")


def quiet_single_process_dcp() -> None:
    """torch.distributed.checkpoint warns on every single-process save/load that it "assumes the
    intent is to save in a single process"; that is exactly the intent here. The filter is
    process-wide, not ``catch_warnings``: an asynchronous save warns from its writer thread after
    the call that started it has returned, and ``catch_warnings`` (global state, not per thread)
    would race it. Adding the same filter again replaces it (the warnings module keeps one copy)."""
    import warnings

    warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")


@contextlib.contextmanager
def gathered_for_generation(module: torch.nn.Module):
    """Hold every FSDP2 layer unsharded while HF ``generate`` runs: ranks generate different
    prompts for different numbers of steps, so per-forward all-gathers would deadlock."""
    from torch.distributed.fsdp import FSDPModule

    fsdp = [m for m in module.modules() if isinstance(m, FSDPModule)]
    for m in fsdp:
        m.set_reshard_after_forward(False, recurse=False)
    for m in fsdp:
        m.unshard()
    try:
        yield module
    finally:
        for m in fsdp:
            m.reshard()
            m.set_reshard_after_forward(True, recurse=False)
