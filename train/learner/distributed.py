"""torchrun plumbing: who am I, and how ranks exchange Python objects and metrics.

A single process (``python train/helix.py``) is world size 1 and never touches
``torch.distributed``; under ``torchrun`` the process group uses gloo on a CPU box. On a GPU
node each rank owns ``cuda:LOCAL_RANK`` and the group has both backends (``cpu:gloo,cuda:nccl``):
model collectives go over nccl, and the small CPU metric reductions and object broadcasts here
over gloo, so no caller has to move a Python float to the GPU to sum it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def device(self) -> torch.device:
        """Where this rank computes: its own GPU on a GPU node, else the CPU."""
        if torch.cuda.is_available():
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu")


_owns_group = False  # init_distributed made the default group (another library, e.g. vLLM, may have)


def init_distributed(single_process_group: bool = False) -> DistInfo:
    """``single_process_group``: also start a process group of one where torchrun did not (plain
    ``python``), because FSDP2 and DeepSpeed need one: sharding one rank still buys bf16 mixed
    precision and CPU offload, which is how a policy too big for one GPU trains on one GPU."""
    global _owns_group
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)  # before any CUDA work: nccl and FSDP2 use the current device
    if world <= 1 and not single_process_group:
        return DistInfo(local_rank=local_rank)
    if not dist.is_initialized():
        if world <= 1:  # torchrun's variables (DeepSpeed reads them too), for a group of one
            for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"),
                               ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(_free_port()))):
                os.environ.setdefault(key, value)
        backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
        # Evaluation and embedding run on rank 0 while the others wait: allow a long barrier.
        dist.init_process_group(backend=backend, timeout=timedelta(hours=2))
        _owns_group = True
    return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def broadcast(obj, info: DistInfo):
    """Rank 0's ``obj`` on every rank."""
    if not info.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(obj, info: DistInfo) -> list | None:
    """Every rank's ``obj`` as a list on rank 0 (None elsewhere)."""
    if not info.enabled:
        return [obj]
    out = [None] * info.world if info.is_main else None
    dist.gather_object(obj, out, dst=0)
    return out


def all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    if not info.enabled:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


def all_reduce_max(value: int, info: DistInfo) -> int:
    if not info.enabled:
        return value
    t = torch.tensor([value], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def shard(items: list, info: DistInfo) -> list:
    """This rank's contiguous share of ``items`` (a prompt group never straddles two ranks)."""
    per, extra = divmod(len(items), info.world)
    start = info.rank * per + min(info.rank, extra)
    return items[start : start + per + (1 if info.rank < extra else 0)]


def shutdown(info: DistInfo) -> None:
    """Destroy the default group if we made it; a single-process vLLM engine makes and tears down its own.
    vLLM's groups inside ours go first: destroying ours destroys them, and vLLM's exit hook would then
    fail on them ("Invalid process group specified")."""
    global _owns_group
    if _owns_group and dist.is_initialized():
        if "vllm.distributed.parallel_state" in sys.modules:
            from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

            destroy_model_parallel()
            destroy_distributed_environment()  # its world group, then the default group
        if dist.is_initialized():
            dist.destroy_process_group()
    _owns_group = False
