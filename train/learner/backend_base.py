"""The one interface every learner backend (``trainer.strategy``) implements, and its registry.

The Learner owns the GRPO loop; a backend owns everything that depends on how the policy is
spread over ranks: wrapping the policy and the frozen reference, per-micro-batch gradient sync,
backward, clip + optimizer step, gathering full weights, and checkpoint save/load. Adding a
strategy is one ``@register_backend("name")`` class; nothing outside the registry compares
strategy names. Built-in backends: ``train.learner.backend_torch`` (none/ddp/fsdp2) and
``train.learner.backend_deepspeed``; ``train.learner.backends`` imports them and maps config to a name.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import torch

if TYPE_CHECKING:
    from train.learner.config import TrainerConfig
    from train.learner.distributed import DistInfo


class Backend(ABC):
    """How the policy is trained across ranks. ``wrap_policy`` sets ``model`` (what forward passes
    and ``train()`` use), ``module`` (the HF model whose parameters/state dict are the policy's),
    ``optimizer`` and ``scheduler``."""

    name: ClassVar[str] = ""  # set by register_backend; stored in checkpoints (extra.pt "strategy")
    sharded: ClassVar[bool] = False  # weights live in pieces across ranks: full_state_dict is a collective gather
    needs_process_group: ClassVar[bool] = False  # even one process must start a process group of one
    single_process: ClassVar[str | None] = None  # the backend this one becomes without torchrun (ddp -> none)
    checkpoint_dir: ClassVar[str] = ""  # the subdirectory of a Learner.save_state directory it writes
    reshards: ClassVar[bool] = True  # its checkpoints resume at any world size
    honours_bf16: ClassVar[bool] = False  # trainer.bf16 applies (otherwise the policy trains in fp32)

    def __init__(self, cfg: TrainerConfig, info: DistInfo):
        self.cfg = cfg
        self.info = info
        self.device = info.device
        self.model: torch.nn.Module | None = None
        self.module: torch.nn.Module | None = None
        self.optimizer = None
        self.scheduler = None

    def make_scheduler(self, optimizer):
        """Linear warmup over ``trainer.lr_warmup_steps`` optimizer steps, then constant (every backend)."""
        warmup = self.cfg.lr_warmup_steps
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0)

    @abstractmethod
    def wrap_reference(self, model: torch.nn.Module) -> torch.nn.Module:
        """The frozen reference (already eval, no grad), placed/sharded like the policy; called
        before ``wrap_policy`` so every rank runs the same collectives in the same order."""

    @abstractmethod
    def wrap_policy(self, model: torch.nn.Module) -> None:
        """Place/shard ``model`` and set ``model``, ``module``, ``optimizer``, ``scheduler``."""

    def gradient_sync(self, last: bool):
        """Context for one micro-batch's forward + backward: gradients are reduced across ranks only
        on the ``last`` micro-batch of an optimizer step (accumulate locally before it)."""
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        """Accumulate ``loss``'s gradients; the loss is already normalised over the global batch."""
        loss.backward()

    @abstractmethod
    def clip_and_step(self) -> float:
        """Clip to ``trainer.grad_clip``, step optimizer and scheduler, zero gradients; returns the
        pre-clip global gradient norm."""

    @abstractmethod
    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """Collective when ``sharded``: the full policy weights, HF names, on every rank."""

    def generation_context(self):
        """Where the HF engine may call ``generate`` on ``module`` (held whole when sharded, since
        ranks generate for different numbers of steps)."""
        return contextlib.nullcontext(self.module)

    @abstractmethod
    def save(self, path: Path) -> None:
        """Collective: model + optimizer under ``path / checkpoint_dir``."""

    def save_async(self, path: Path, process_group=None):
        """Collective, like ``save``, but returns once the state is staged (copied to CPU memory):
        a Future that completes when the files are written (on rank 0, the coordinator, only
        after every rank's). ``process_group``: a CPU group used by the writer thread alone.
        This default writes synchronously and returns None (DeepSpeed writes its own files)."""
        self.save(path)
        return None

    @abstractmethod
    def load(self, path: Path) -> None:
        """Collective: the inverse of ``save``."""

    @classmethod
    @abstractmethod
    def consolidated_state(cls, directory: Path, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """One process, no process group: the full weights in ``directory`` (a ``checkpoint_dir``
        written by any number of ranks), for ``model``'s architecture (``helix export``)."""

    def can_resume(self, strategy: str, world: int) -> bool:
        """Whether a checkpoint written under ``strategy`` by ``world`` ranks loads here: the same
        on-disk format, and the same world size unless the format reshards."""
        written = BACKENDS.get(strategy)
        return (written is not None and written.checkpoint_dir == self.checkpoint_dir
                and (self.reshards or world == self.info.world))


BACKENDS: dict[str, type[Backend]] = {}


def register_backend(name: str):
    """Class decorator: make a ``Backend`` subclass available as ``trainer.strategy: name``."""

    def wrap(cls):
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise TypeError(f"register_backend({name!r}) needs a Backend subclass, got {cls!r}")
        if not cls.checkpoint_dir:
            raise TypeError(f"backend {name!r} ({cls.__name__}) sets no checkpoint_dir")
        cls.name = name
        BACKENDS[name] = cls
        return cls

    return wrap


def backend_class(name: str) -> type[Backend]:
    """The registered class for a resolved strategy name (``auto`` is resolved by ``train.learner.backends``)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown trainer.strategy {name!r}; valid: {', '.join(['auto', *BACKENDS])}")
    return BACKENDS[name]
