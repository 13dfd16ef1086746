"""DeepSpeed ZeRO specifics of the ``deepspeed`` backend (``train.learner.backend_deepspeed``), the alternative to FSDP2.

The learner keeps its own micro-batching and global-token loss normalisation, so DeepSpeed is
run with ``managed_gradient_accumulation: false``: every ``backward`` accumulates (stage 2/3
reduce-scatter per micro-batch), and ``step`` is always the optimizer boundary, whatever the
number of micro-batches this step had. The optimizer is DeepSpeed's AdamW with ``torch_adam``
(``torch.optim.AdamW``): nothing is compiled, on a CPU box or a GPU node without nvcc.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable

import torch

from train.learner.config import TrainerConfig

TAG = "state"  # the one checkpoint tag inside a Learner.save_state directory


def ds_config(cfg: TrainerConfig, train: bool = True) -> dict:
    """The DeepSpeed config for the policy (``train``) or the frozen reference (no optimizer)."""
    if cfg.offload_params and cfg.zero_stage != 3:
        raise ValueError(f"trainer.offload_params under deepspeed needs trainer.zero_stage: 3 (got {cfg.zero_stage}); "
                         "stages 1-2 keep a full parameter copy per rank")
    pin = torch.cuda.is_available()
    zero: dict = {"stage": cfg.zero_stage}
    if cfg.offload_params:
        zero["offload_param"] = {"device": "cpu", "pin_memory": pin}
    config = {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "steps_per_print": 2**62,  # the learner logs its own metrics
        "bf16": {"enabled": cfg.bf16},
        "zero_optimization": zero,
    }
    if train:
        if cfg.offload_optimizer and cfg.zero_stage > 0:
            zero["offload_optimizer"] = {"device": "cpu", "pin_memory": pin}
        config.update({
            "managed_gradient_accumulation": False,
            "gradient_clipping": cfg.grad_clip,
            # The same AdamW as the other strategies (torch's defaults), built without DeepSpeed ops.
            "optimizer": {"type": "AdamW", "params": {"lr": cfg.lr, "weight_decay": cfg.weight_decay,
                                                      "betas": [0.9, 0.999], "eps": 1e-8, "torch_adam": True}},
            "zero_force_ds_cpu_optimizer": False,  # offloaded torch AdamW instead of the compiled CPUAdam
        })
    return config


def wrap_policy(model: torch.nn.Module, cfg: TrainerConfig, make_scheduler: Callable):
    """The DeepSpeed engine training ``model`` (sharded in place) with its optimizer and LR scheduler."""
    import deepspeed

    engine, optimizer, _, scheduler = deepspeed.initialize(
        model=model, model_parameters=[p for p in model.parameters() if p.requires_grad],
        config=ds_config(cfg), lr_scheduler=make_scheduler)
    return engine, optimizer, scheduler


def wrap_reference(model: torch.nn.Module, cfg: TrainerConfig, device: torch.device) -> torch.nn.Module:
    """The frozen reference: ZeRO-3 shards it like the policy (ZeRO inference); stages 0-2 keep it
    whole on the rank's device (DeepSpeed places only the modules it wraps)."""
    if cfg.zero_stage != 3:
        return model.to(device)
    import deepspeed

    engine, *_ = deepspeed.initialize(model=model, config=ds_config(cfg, train=False))
    engine.eval()  # DeepSpeedEngine.eval returns None, unlike nn.Module.eval
    return engine


def _zero3_params(module: torch.nn.Module) -> list[torch.nn.Parameter]:
    return [p for p in module.parameters() if hasattr(p, "ds_id")]


def full_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Full HF-named tensors on every rank; ZeRO-3 parameters are gathered one at a time, so the
    peak is one full tensor above the shard, not a whole model."""
    from deepspeed.runtime.zero import GatheredParameters

    state = module.state_dict(keep_vars=True)
    gathered: dict[int, torch.Tensor] = {}
    out = {}
    for name, value in state.items():
        if hasattr(value, "ds_id"):
            if id(value) not in gathered:  # tied weights: gather once
                with GatheredParameters([value]):
                    gathered[id(value)] = value.detach().to("cpu", copy=True)
            out[name] = gathered[id(value)]
        else:
            out[name] = value.detach().to("cpu", copy=True)
    return out


@contextlib.contextmanager
def gathered_for_generation(module: torch.nn.Module):
    """Hold every ZeRO-3 parameter whole while HF ``generate`` runs: ranks generate different
    prompts for different numbers of steps, so per-forward all-gathers would deadlock. Marking
    them persistent keeps DeepSpeed's forward hooks from releasing them after each layer."""
    params = _zero3_params(module)
    if not params:
        yield module
        return
    from deepspeed.runtime.zero import GatheredParameters

    with GatheredParameters(params):
        persist = [p.ds_persist for p in params]
        for p in params:
            p.ds_persist = True
        try:
            yield module
        finally:
            for p, flag in zip(params, persist):
                p.ds_persist = flag


def save(engine, path: Path) -> None:
    """Collective: DeepSpeed's own checkpoint (each rank its ZeRO partitions) under ``path``."""
    engine.save_checkpoint(str(path), tag=TAG)


def load(engine, path: Path) -> None:
    """Collective: needs the world size that wrote it (ZeRO partitions are per rank)."""
    load_path, _ = engine.load_checkpoint(str(path), tag=TAG, load_optimizer_states=True, load_lr_scheduler_states=True)
    if load_path is None:
        raise FileNotFoundError(f"{path} holds no DeepSpeed checkpoint tagged {TAG!r}")


def consolidated_state(path: Path) -> dict[str, torch.Tensor]:
    """One process, no process group: the full fp32 weights from the ZeRO partitions on disk."""
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    return get_fp32_state_dict_from_zero_checkpoint(str(path), tag=TAG)
