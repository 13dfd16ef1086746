"""``write_task``: a task folder made from Python objects, checked, and returned as a loaded task.

The folder is what ``helix new-task NAME`` writes (tasks/NAME/: task.yaml, description.md,
brief.md, initial_program.py, verifier.py), filled in with the caller's problem instead of the
template's example; then the task check every run starts with (train.commands.task_check) runs on
it. A folder that fails the check is removed again, so the call can be repeated once the problem is
fixed; the error is the check's own one line.

``dest``: the folder the task folder goes in, outside the repository (tasks/ by default). It is added to
this process's HELIX_TASKS (tasks/paths.py), so that the check, the runs this process starts and their
child processes find the task; a run started elsewhere names it in ``task.paths`` (or HELIX_TASKS).
"""

from __future__ import annotations

import importlib.util
import math
import os
import shutil
from pathlib import Path

import yaml

from tasks import paths
from tasks.base import FORMS, TASKS_DIR, Task
from tasks.scaffold import check_name, destination


class TaskArgumentError(ValueError):
    """One line: which argument is wrong and why (nothing was written)."""


def _verifier_source(verifier: str | Path) -> str:
    """Verifier source text, from the text itself, a .py file, or an importable module's name."""
    if isinstance(verifier, Path) or (isinstance(verifier, str) and verifier.endswith(".py") and "\n" not in verifier):
        path = Path(verifier)
        if not path.is_file():
            raise TaskArgumentError(f"verifier: {path} is not a file")
        return path.read_text(encoding="utf-8")
    if not isinstance(verifier, str) or not verifier.strip():
        raise TaskArgumentError("verifier: give its source text (defining verify), a .py file or a module name")
    if "\n" not in verifier and verifier.replace(".", "").replace("_", "").isalnum():  # a dotted module name
        spec = importlib.util.find_spec(verifier)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            raise TaskArgumentError(f"verifier: no Python module named {verifier!r} was found")
        return Path(spec.origin).read_text(encoding="utf-8")
    return verifier


def _number(name: str, value, low: float, integer: bool = False) -> None:
    ok = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
    if not ok or not math.isfinite(value) or value < low:
        what = "an integer" if integer else "a finite number"
        raise TaskArgumentError(f"{name} must be {what} >= {low:g}, got {value!r}")


def write_task(name: str, *, description: str, starter: str, verifier: str | Path, best_known: float,
               best_known_source: str = "", entry_function: str = "solve", time_limit_s: float = 30.0,
               cpu_time_limit_s: float | None = None, memory_mb: int = 1024, brief: str | None = None,
               objectives: list[dict] | None = None, form: str = "construct",
               dest: str | Path | None = None) -> Task:
    """Write tasks/NAME/ (or DEST/NAME/), run the task check on it, and return the task (tasks.base.Task).

    ``description``: what the model reads (the objective, constraints, what ``entry_function`` returns).
    ``starter``: the starter program's source; it must define ``entry_function`` and score above 0 and
    below ``best_known``. ``verifier``: verifier.py's source (defining ``verify(returned)``), a path to a
    .py file, or an importable module's name. ``time_limit_s`` / ``cpu_time_limit_s``: what one program may
    run at paper and at CPU scale. ``brief``: the short description small models see (default: the
    description's first paragraph). ``objectives``: extra selection objectives from the verifier's
    metrics (task.yaml ``objectives``, docs/population.md). ``form``: ``construct`` (``entry_function()``
    builds an answer) or ``search`` (``entry_function(construction, budget_s, seed)`` improves the best one so
    far; the check then runs the starter on None and twice on its own output, docs/search_form.md). ``dest``:
    write DEST/NAME/ instead, outside the repository (DEST is made if missing and added to HELIX_TASKS). Raises
    TaskArgumentError, ScaffoldError or TaskCheckError, each one line; on a failed check the folder is removed."""
    from train.commands.task_check import check_task

    dest = destination(dest)
    check_name(name, dest)
    for key, text in (("description", description), ("starter", starter)):
        if not isinstance(text, str) or not text.strip():
            raise TaskArgumentError(f"{key} must be non-empty text")
    if not entry_function.isidentifier():
        raise TaskArgumentError(f"entry_function must be a Python identifier, got {entry_function!r}")
    if form not in FORMS:
        raise TaskArgumentError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
    _number("best_known", best_known, -math.inf)
    _number("time_limit_s", time_limit_s, 1e-3)
    if cpu_time_limit_s is not None:
        _number("cpu_time_limit_s", cpu_time_limit_s, 1e-3)
    _number("memory_mb", memory_mb, 64, integer=True)
    source = _verifier_source(verifier)
    brief = brief if brief is not None else description.strip().split("\n\n")[0]
    spec = {"name": name, "entry_function": entry_function, "timeout_s": time_limit_s, "memory_mb": memory_mb,
            "best_known": float(best_known), "best_known_source": best_known_source or f"given to write_task for {name}"}
    if form != "construct":
        spec["form"] = form
    if cpu_time_limit_s is not None:
        spec["cpu_timeout_s"] = cpu_time_limit_s
    if objectives:
        spec["objectives"] = list(objectives)
    folder = (TASKS_DIR if dest is None else dest) / name
    files = {"task.yaml": f"# {name}: written by train.api.write_task (the keys: docs/adding_a_task.md)\n"
                          + yaml.safe_dump(spec, sort_keys=False),
             "description.md": description.strip() + "\n", "brief.md": brief.strip() + "\n",
             "initial_program.py": starter if starter.endswith("\n") else starter + "\n",
             "verifier.py": source if source.endswith("\n") else source + "\n"}
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.mkdir()
    if dest is not None and dest not in paths.roots(TASKS_DIR):
        os.environ[paths.ENV] = os.pathsep.join([os.environ.get(paths.ENV, ""), str(dest)]).lstrip(os.pathsep)
    try:
        for file, text in files.items():
            (folder / file).write_text(text, encoding="utf-8")
        return check_task(name).task
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
