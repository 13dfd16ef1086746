"""The plain-PyTorch backends: ``none`` (one process), ``ddp`` (replicas) and ``fsdp2`` (shards).

They share torch's AdamW, ``clip_grad_norm_`` and torch.distributed.checkpoint (DCP) under
``dcp/``, whose HF-named state dicts reshard on load, so a checkpoint from any of the three
resumes under any other at any world size. The FSDP2 sharding itself is ``train.learner.sharding``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch

from train.learner import lora, sharding
from train.learner.backend_base import Backend, register_backend


class _TorchBackend(Backend):
    """Shared by none/ddp/fsdp2: torch AdamW over ``module``'s parameters, DCP checkpoints."""

    checkpoint_dir = "dcp"

    def _optimizer_for(self, module: torch.nn.Module) -> None:
        trainable = [p for p in module.parameters() if p.requires_grad]  # all of them, or the LoRA adapters
        self.optimizer = torch.optim.AdamW(trainable, lr=self.cfg.lr, weight_decay=self.cfg.weight_decay)
        self.scheduler = self.make_scheduler(self.optimizer)

    def clip_and_step(self) -> float:
        norm = torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.cfg.grad_clip)
        norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)  # a DTensor under fsdp2
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return norm

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        return sharding.full_model_state(self.module)

    def save(self, path: Path) -> None:
        import torch.distributed.checkpoint as dcp

        sharding.quiet_single_process_dcp()
        state = sharding.train_state(self.module, self.optimizer)
        dcp.save(state, checkpoint_id=str(Path(path) / self.checkpoint_dir))

    def save_async(self, path: Path, process_group=None):
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp

        # DCP's default stager deep-copies every tensor (CPU ones too) before async_save returns,
        # so the next optimizer steps cannot reach the files being written.
        sharding.quiet_single_process_dcp()
        state = sharding.train_state(self.module, self.optimizer)
        return dcp.async_save(state, checkpoint_id=str(Path(path) / self.checkpoint_dir), process_group=process_group,
                              no_dist=not (dist.is_available() and dist.is_initialized()))

    def load(self, path: Path) -> None:
        import torch.distributed.checkpoint as dcp

        state = sharding.train_state(self.module, self.optimizer)
        sharding.quiet_single_process_dcp()
        dcp.load(state, checkpoint_id=str(Path(path) / self.checkpoint_dir))  # resharded to this world size
        sharding.load_train_state(self.module, self.optimizer, state)

    @classmethod
    def consolidated_state(cls, directory: Path, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        # A LoRA checkpoint holds the adapters alone (the base is frozen): read those into ``model``
        # (which carries the same adapters), then return its whole state.
        options = StateDictOptions(ignore_frozen_params=lora.has_adapters(model))
        state = {"model": get_model_state_dict(model, options=options)}
        if options.ignore_frozen_params:
            state["model"] = sharding.drop_frozen(model, state["model"])
        sharding.quiet_single_process_dcp()
        dcp.load(state, checkpoint_id=str(directory))  # in place, into the model's tensors
        return get_model_state_dict(model) if options.ignore_frozen_params else state["model"]


@register_backend("none")
class LocalBackend(_TorchBackend):
    """One process, the whole policy on this device."""

    def wrap_reference(self, model: torch.nn.Module) -> torch.nn.Module:
        return model.to(self.device)

    def wrap_policy(self, model: torch.nn.Module) -> None:
        self.model = self.module = model.to(self.device)
        self._optimizer_for(self.module)


@register_backend("ddp")
class DDPBackend(LocalBackend):
    """A full replica per rank; gradients all-reduced on the last micro-batch only."""

    single_process = "none"  # one process: nothing to replicate

    def wrap_policy(self, model: torch.nn.Module) -> None:
        self.module = model.to(self.device)
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        self.model = torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
        self._optimizer_for(self.module)

    def gradient_sync(self, last: bool):
        return contextlib.nullcontext() if last else self.model.no_sync()


@register_backend("fsdp2")
class FSDP2Backend(_TorchBackend):
    """Parameters, gradients and optimizer state sharded per decoder layer (``train.learner.sharding``);
    ``offload_params``/``offload_optimizer`` both mean FSDP2's CPU offload of all three."""

    sharded = True
    honours_bf16 = True
    needs_process_group = True

    def _shard(self, model: torch.nn.Module) -> torch.nn.Module:
        offload = self.cfg.offload_params or self.cfg.offload_optimizer  # fsdp2 offloads both or neither
        return sharding.shard_fsdp2(model, self.cfg.bf16, offload)  # moves each shard to the mesh's device

    def wrap_reference(self, model: torch.nn.Module) -> torch.nn.Module:
        return self._shard(model)  # the frozen copy is sharded like the policy, or 14B+ would not fit

    def wrap_policy(self, model: torch.nn.Module) -> None:
        self.model = self.module = self._shard(model)
        if self.cfg.bf16:
            # fp32 master weights whatever model.dtype loaded (the paper configs load bf16): AdamW on
            # bf16 weights rounds an lr-1e-6 update away for ~98% of them. Cast after sharding, so
            # each rank holds only its fp32 shard; the MixedPrecisionPolicy still computes in bf16.
            self.module.to(torch.float32)
        self._optimizer_for(self.module)

    def gradient_sync(self, last: bool):
        self.model.set_requires_gradient_sync(last)
        return contextlib.nullcontext()

    def generation_context(self):
        return sharding.gathered_for_generation(self.module)
