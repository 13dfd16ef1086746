"""The task contract: a folder under tasks/ with task.yaml, description.md, initial_program.py, verifier.py.

Adding a task means adding a folder; nothing else changes. A task never trusts the program:
``verify`` gets only the JSON-decoded value the entry function returned and recomputes the
reward from it. Folders are validated strictly at load time, so a typo in task.yaml or a
starter program without its entry function fails loudly at start-up, not as zero rewards later.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

TASKS_DIR = Path(__file__).resolve().parent
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    reward: float
    valid: bool
    feedback: str
    metrics: dict[str, float] = field(default_factory=dict)


def invalid(feedback: str, **metrics: float) -> Verdict:
    """A rejected artefact: reward 0, and feedback that says why."""
    return Verdict(0.0, False, feedback, dict(metrics))


@dataclass(frozen=True)
class Task:
    name: str
    description: str
    initial_program: str
    entry_function: str
    timeout_s: float
    memory_mb: int
    best_known: float
    best_known_source: str
    folder: Path
    _verify: Callable[[Any], Verdict] = field(repr=False, compare=False)

    def verify(self, returned: Any) -> Verdict:
        """Trusted reward for a returned artefact. A verifier exception becomes an invalid verdict
        with the reason (the batch goes on); returning a non-Verdict is a task bug and raises."""
        try:
            verdict = self._verify(returned)
        except Exception as exc:  # noqa: BLE001 - one odd artefact must not stop the run
            log.warning("task %s: verifier raised %s: %s", self.name, type(exc).__name__, exc)
            return invalid(f"the verifier could not check the result: {type(exc).__name__}: {exc}"[:500])
        if not isinstance(verdict, Verdict):
            raise TypeError(f"{self.folder / 'verifier.py'}: verify() must return tasks.base.Verdict, "
                            f"got {type(verdict).__name__}")
        if verdict.valid and not math.isfinite(verdict.reward):
            return invalid(f"the verifier produced a non-finite reward ({verdict.reward}); treated as invalid")
        return verdict


# key -> (accepted types, check, what the check means)
_SPEC: dict[str, tuple[tuple[type, ...], Callable[[Any], bool], str]] = {
    "name": ((str,), bool, "a non-empty string"),
    "entry_function": ((str,), str.isidentifier, "a Python identifier"),
    "timeout_s": ((int, float), lambda v: v > 0, "a number > 0 (seconds)"),
    "memory_mb": ((int,), lambda v: v >= 64, "an integer >= 64 (MB)"),
    "best_known": ((int, float), math.isfinite, "a finite number"),
    "best_known_source": ((str,), bool, "a non-empty string"),
}
_FILES = ("description.md", "initial_program.py", "verifier.py")


def _read_spec(folder: Path) -> dict:
    path = folder / "task.yaml"
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: must be a mapping with keys {', '.join(_SPEC)}")
    for key in spec:
        if key not in _SPEC:
            near = difflib.get_close_matches(str(key), list(_SPEC), n=1, cutoff=0.0)
            raise ValueError(f"{path}: unknown key '{key}'. Did you mean '{near[0]}'? Valid keys: {', '.join(_SPEC)}")
    for key, (types, check, meaning) in _SPEC.items():
        if key not in spec:
            raise ValueError(f"{path}: missing key '{key}' ({meaning})")
        value = spec[key]
        if isinstance(value, bool) or not isinstance(value, types) or not check(value):
            raise ValueError(f"{path}: '{key}' must be {meaning}, got {value!r}")
    if spec["name"] != folder.name:
        raise ValueError(f"{path}: name '{spec['name']}' must match the folder name '{folder.name}'")
    return spec


def _check_initial_program(path: Path, source: str, entry: str) -> None:
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ValueError(f"{path}: does not parse: {exc}") from None
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if entry not in defined:
        raise ValueError(f"{path}: does not define the entry function {entry}() named in task.yaml")


def available_tasks() -> list[str]:
    """Every folder under tasks/ that holds a task.yaml."""
    return sorted(p.parent.name for p in TASKS_DIR.glob("*/task.yaml") if not p.parent.name.startswith((".", "_")))


def load_task(name: str) -> Task:
    names = available_tasks()
    if name not in names:
        near = difflib.get_close_matches(str(name), names, n=3, cutoff=0.0)
        hint = f" Did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
        raise ValueError(f"unknown task {name!r}.{hint} Available tasks: {', '.join(names) or 'none'}")
    folder = TASKS_DIR / name
    spec = _read_spec(folder)
    for file in _FILES:
        if not (folder / file).is_file():
            raise ValueError(f"{folder}: missing {file} (a task folder needs task.yaml, {', '.join(_FILES)})")
    initial = (folder / "initial_program.py").read_text(encoding="utf-8")
    _check_initial_program(folder / "initial_program.py", initial, spec["entry_function"])
    module_spec = importlib.util.spec_from_file_location(f"helix_task_{name}_verifier", folder / "verifier.py")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    if not callable(getattr(module, "verify", None)):
        raise ValueError(f"{folder / 'verifier.py'}: must define verify(returned) -> Verdict")
    return Task(
        name=spec["name"], description=(folder / "description.md").read_text(encoding="utf-8").strip() + "\n",
        initial_program=initial, entry_function=spec["entry_function"], timeout_s=float(spec["timeout_s"]),
        memory_mb=spec["memory_mb"], best_known=float(spec["best_known"]),
        best_known_source=spec["best_known_source"], folder=folder, _verify=module.verify,
    )
