"""The ``deepspeed`` backend: DeepSpeed ZeRO (stage ``trainer.zero_stage``) behind the Backend interface.

The engine owns clipping, the optimizer/scheduler step and gradient zeroing, and writes its own
checkpoint (``deepspeed/``, ZeRO partitions per rank, so it resumes only at the same world size).
The DeepSpeed specifics (config, gathers, checkpoint tag) are ``train.learner.zero``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from train.learner import zero
from train.learner.backend_base import Backend, register_backend


@register_backend("deepspeed")
class DeepSpeedBackend(Backend):
    """``model`` is the DeepSpeed engine, ``module`` the HF model it wraps (sharded in place)."""

    sharded = True
    needs_process_group = True
    checkpoint_dir = "deepspeed"
    reshards = False
    honours_bf16 = True

    @property
    def zero_stage(self) -> int:
        return self.cfg.zero_stage

    def wrap_reference(self, model: torch.nn.Module) -> torch.nn.Module:
        return zero.wrap_reference(model, self.cfg, self.device)

    def wrap_policy(self, model: torch.nn.Module) -> None:
        self.module = model
        self.model, self.optimizer, self.scheduler = zero.wrap_policy(model, self.cfg, self.make_scheduler)

    def backward(self, loss: torch.Tensor) -> None:
        self.model.backward(loss, scale_wrt_gas=False)  # already normalised globally

    def clip_and_step(self) -> float:
        self.model.step()  # clips (trainer.grad_clip), steps optimizer + scheduler, zeroes grads
        return float(self.model.get_global_grad_norm())

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        return zero.full_state(self.module)

    def generation_context(self):
        return zero.gathered_for_generation(self.module)

    def save(self, path: Path) -> None:
        zero.save(self.model, Path(path) / self.checkpoint_dir)

    def load(self, path: Path) -> None:
        zero.load(self.model, Path(path) / self.checkpoint_dir)

    @classmethod
    def consolidated_state(cls, directory: Path, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        expected = get_model_state_dict(model)
        state = zero.consolidated_state(directory)
        # ZeRO may store a tied weight once (embed_tokens); its alias (lm_head) is not missing.
        first_name = {id(p): n for n, p in model.named_parameters()}
        aliases = dict(model.named_parameters(remove_duplicate=False))
        missing = [k for k in expected if k not in state and first_name.get(id(aliases.get(k))) not in state]
        unexpected = sorted(set(state) - set(expected))
        if missing or unexpected:
            raise ValueError(f"{Path(directory).parent} does not fit {type(model).__name__}: missing {missing[:5]}, "
                             f"unexpected {unexpected[:5]}")
        return state
