"""The ``task:`` config section: which task, and the evaluator's limits for it. A field's range
sits in its annotation (``Annotated[float, "> 0"]``; None skips it); train's config loader checks
every bound at load, so this package needs no validator of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal, Optional


@dataclass
class TaskConfig:
    name: str = "circle_packing_26"  # a folder under tasks/, or under one of task.paths
    # folders holding your own task folders (each an existing directory; relative: to the working directory,
    # written into the run's config.yaml made absolute), searched after tasks/ and the HELIX_TASKS environment
    # variable's; a name a shipped task has is an error, not an override (docs/adding_a_task.md)
    paths: list[str] = field(default_factory=list)
    # None: the task's own limit from its task.yaml, resolved when the config loads (so a run's
    # config.yaml shows it): timeout_s there (paper: 60 s for circle packing), or cpu_timeout_s
    # under timeout_scale: cpu (configs/base/cpu.yaml). A number here wins over both.
    timeout_s: Annotated[Optional[float], "> 0"] = None
    timeout_scale: Literal["paper", "cpu"] = "paper"
    memory_mb: Annotated[Optional[int], ">= 64"] = None
    eval_workers: Annotated[int, ">= 0"] = 0  # 0: one per CPU core
    # local: a sandbox per program on this machine. ray: each program runs in the same sandbox on a
    # Ray cluster's worker (bash scripts/setup.sh --ray; docs/scale.md: Evaluation on a Ray cluster)
    eval_backend: Literal["local", "ray"] = "local"
    # ray only: HOST:PORT of the head (`ray start --head --port 6379`), "auto" (the cluster running on
    # this machine), or "" (a private single-node Ray started for this run, eval_workers CPUs)
    ray_address: str = ""
