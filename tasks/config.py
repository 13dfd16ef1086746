"""The ``task:`` config section: which task, and the evaluator's limits for it. A field's range
rule sits in its metadata (``rule``: predicate, what it must be); train.config checks them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional


def _rule(default, ok, text: str):
    return field(default=default, metadata={"rule": (ok, text)})


@dataclass
class TaskConfig:
    name: str = "circle_packing_26"  # a folder under tasks/
    # None: the task's own limit (paper: 60 s for circle packing)
    timeout_s: Optional[float] = _rule(None, lambda v: v is None or v > 0, "must be > 0")
    memory_mb: Optional[int] = _rule(None, lambda v: v is None or v >= 64, "must be >= 64")
    eval_workers: int = _rule(0, lambda v: v >= 0, "must be >= 0")  # 0: one per CPU core
    # local: a sandbox per program on this machine. ray: each program runs in the same sandbox on a
    # Ray cluster's worker (bash scripts/setup.sh --ray; docs/scale.md: Evaluation on a Ray cluster)
    eval_backend: Literal["local", "ray"] = "local"
    # ray only: HOST:PORT of the head (`ray start --head --port 6379`), "auto" (the cluster running on
    # this machine), or "" (a private single-node Ray started for this run, eval_workers CPUs)
    ray_address: str = ""
