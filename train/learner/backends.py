"""Learner backends by name: the registry with the built-ins loaded, and the single place that
maps ``trainer.strategy`` (``auto`` included) to a backend.

    backend = make_backend(cfg.strategy, cfg, info)   # none | ddp | fsdp2 | deepspeed (+ plugins)

The interface is ``train.learner.backend_base.Backend``; register another with ``@register_backend``.
"""

from __future__ import annotations

import torch

from train.learner import backend_deepspeed, backend_torch  # noqa: F401 (registers none, ddp, fsdp2, deepspeed)
from train.learner.backend_base import BACKENDS, Backend, backend_class, register_backend
from train.learner.distributed import DistInfo

__all__ = ["BACKENDS", "Backend", "backend_class", "make_backend", "needs_process_group", "register_backend",
           "resolve_strategy"]


def resolve_strategy(name: str, info: DistInfo) -> str:
    """``auto``: a single process is ``none``; under torchrun, ``ddp`` (small policies replicate
    cheaply; choose ``fsdp2`` or ``deepspeed`` explicitly when one copy per rank does not fit).
    ``fsdp2``/``deepspeed`` hold in one process too (its own process group of one, see
    ``needs_process_group``): their bf16 and offload switches are the point there."""
    if name == "auto":
        return "ddp" if info.enabled else "none"
    cls = backend_class(name)
    if cls.single_process is not None and not info.enabled:
        return cls.single_process
    if cls.needs_process_group and not torch.distributed.is_initialized():
        raise ValueError(f"trainer.strategy {name} needs a process group; start it with "
                         "train.learner.distributed.init_distributed(single_process_group=True) or torchrun")
    return name


def needs_process_group(strategy: str, trainer_enabled: bool = True) -> bool:
    """Whether a single process must start a process group of one for ``strategy`` (``auto`` never does)."""
    cls = BACKENDS.get(strategy)
    return trainer_enabled and cls is not None and cls.needs_process_group


def make_backend(strategy: str, cfg, info: DistInfo) -> Backend:
    """The backend for ``trainer.strategy`` (a ``TrainerConfig``) on this rank, before wrapping."""
    return BACKENDS[resolve_strategy(strategy, info)](cfg, info)
