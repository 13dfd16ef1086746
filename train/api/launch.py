"""``run``: a HELIX run started from Python, exactly what ``train/helix.py`` runs.

The same start routine as the command line (train.api.start): the config loaded and validated, the task
checked, the run executed (process group, warm start, the epochs, export), so a run started here and the
same run started from a shell write the same run folder with the same results, seed for seed. What
differs is how it ends: errors are exceptions with the command line's one-line messages
(ConfigError, TaskCheckError, ...) instead of an exit code, and the result is an object.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from train.api import start
from train.api.reader import Run, SolutionView, open_run


@dataclass(frozen=True)
class RunResult:
    """What a finished run gives back: its folder, its best solution and its per-epoch metrics. ``run`` reads
    the rest (solutions, populations, prompts; train.api.runs.Run)."""

    path: Path
    best: SolutionView | None
    metrics: list[dict]
    run: Run

    def __repr__(self) -> str:
        best = "no valid solution" if self.best is None else f"best {self.best.reward:.10g} (solution {self.best.id})"
        return f"RunResult({self.path}, {len(self.metrics)} epochs, {best})"


def override_strings(overrides: Mapping[str, Any] | list[str] | tuple[str, ...] | None) -> list[str]:
    """``{"trainer.epochs": 2}`` -> ``["trainer.epochs=2"]``: each value written as YAML, which the command
    line's overrides are parsed as (so 1e-6 stays a float and a mapping stays a mapping); a list of
    ``key=value`` strings is taken as it is."""
    if overrides is None:
        return []
    if isinstance(overrides, (list, tuple)):
        return [str(o) for o in overrides]
    if not isinstance(overrides, Mapping):
        raise TypeError(f"overrides must be a mapping of dotted keys to values, or a list of 'key=value' strings; "
                        f"got {type(overrides).__name__}")
    out = []
    for key, value in overrides.items():
        text = yaml.safe_dump(value, default_flow_style=True, width=1 << 30).strip()
        out.append(f"{key}={text.removesuffix('...').strip()}")
    return out


def run(config: str | Path | None = None, overrides: Mapping[str, Any] | list[str] | None = None, *,
        resume: str | Path | None = None, progress: bool = True) -> RunResult:
    """Run HELIX as ``python train/helix.py --config CONFIG key=value ...`` does (or ``--resume RUN_DIR``).

    ``overrides``: dotted settings, ``{"trainer.epochs": 2}``. ``progress=False``: no progress bars
    (``run.progress=false``; the one-line log and the epoch table still print). A Ctrl-C (KeyboardInterrupt)
    finishes the checkpoint being written, prints how to resume, and is raised again:
    ``run(resume=path)`` continues it. Raises ConfigError / TaskCheckError with the command line's messages."""
    if (config is None) == (resume is None):
        raise ValueError("give exactly one of config (a new run) or resume (a run directory to continue)")
    extra = override_strings(overrides) + ([] if progress else ["run.progress=false"])
    begun = start.load(config, extra, resume)
    start.check(begun)
    path = start.execute(begun)
    if path is None:  # not rank 0 under torchrun: rank 0 holds the run folder
        return None
    view = open_run(path)
    return RunResult(path, view.best(), view.metrics(), view)
