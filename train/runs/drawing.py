"""A solution's picture from what its run recorded: the artefact its program returned when the loop
evaluated it (archive column ``artefact``, JSON, tasks with a render.py), drawn by the task's own
``render(artefact, ax)``. Nothing is re-run: the report and the run browser only read the run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from population.archive import ReadOnlyArchive
from train.runs import plots
from train.runs import run_data as rd


def load_render(path: Path):
    """A task's render(artefact, ax), from its folder's render.py (task folders are data, not packages)."""
    spec = importlib.util.spec_from_file_location(f"helix_render_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "render", None)):
        raise ValueError(f"{path} must define render(artefact, ax)")
    return module.render


def render_path(task_name: str | None) -> tuple[Path | None, str | None]:
    """(the task's render.py, None) or (None, why there is none)."""
    from tasks import load_task

    if task_name is None:
        return None, "the task is unknown (no task.name in config.yaml): the drawing is skipped"
    try:
        task = load_task(task_name)
    except ValueError as exc:
        return None, f"task {task_name!r} cannot be loaded ({exc}): the drawing is skipped"
    path = task.folder / "render.py"
    if not path.is_file():
        return None, (f"task {task_name!r} has no render.py: the drawing is skipped (add "
                      f"{path.relative_to(task.folder.parent.parent)} with render(artefact, ax) to draw its solutions)")
    return path, None


def rendering(run: rd.RunData, arch: ReadOnlyArchive, sol, title: str = "best solution"):
    """(Figure or None, notes): ``sol``'s recorded artefact drawn by the task's render.py."""
    if sol is None:
        return None, ["the archive holds no valid solution yet: nothing to draw"]
    path, why = render_path(rd.cfg_get(run.config, "task", "name"))
    if path is None:
        return None, [why]
    text = arch.artefact(sol.id)
    if text is None:
        what = ("this archive predates recorded artefacts (runs record what a valid program returned since the "
                "run browser stopped re-running programs)") if "artefact" not in arch.columns else \
            "the run recorded no artefact for it (invalid, or larger than the evaluator's 64 KB limit)"
        return None, [f"solution #{sol.id} is not drawn: {what}"]
    notes = [f"drawn from the artefact solution #{sol.id}'s program returned when the run evaluated it "
             f"(reward {sol.reward:.10g}); nothing was re-run"]
    try:
        fig = plots.plot_artefact(load_render(path), json.loads(text),
                                  f"{title} #{sol.id} (epoch {sol.epoch}): reward {sol.reward:.8g}")
    except Exception as exc:  # a task's render.py failing on an odd artefact: say so, draw nothing
        return None, notes + [f"{path} failed: {type(exc).__name__}: {exc}"]
    return fig, notes
