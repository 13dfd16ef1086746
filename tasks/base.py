"""The task contract: a folder under tasks/ with a description, a starter program and a verifier.

A task never trusts the program: ``verify`` receives only the JSON-decoded value the entry
function returned and recomputes the reward from it.
"""

from __future__ import annotations

import difflib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

TASKS_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Verdict:
    reward: float
    valid: bool
    feedback: str
    metrics: dict[str, float] = field(default_factory=dict)


def invalid(feedback: str, **metrics: float) -> Verdict:
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
    _verify: Callable[[Any], Verdict]

    def verify(self, returned: Any) -> Verdict:
        """Trusted reward for a returned artefact; a verifier bug becomes an invalid verdict, not a crash."""
        try:
            verdict = self._verify(returned)
        except Exception as exc:  # noqa: BLE001 - the verdict must always exist
            return invalid(f"verifier could not check the result: {type(exc).__name__}: {exc}"[:500])
        if not isinstance(verdict, Verdict):
            raise TypeError(f"{self.folder}/verifier.py verify() must return tasks.base.Verdict, got {type(verdict).__name__}")
        return verdict


_SPEC_KEYS = {"name": str, "entry_function": str, "timeout_s": (int, float), "memory_mb": int,
              "best_known": (int, float), "best_known_source": str}


def _read_spec(folder: Path) -> dict:
    path = folder / "task.yaml"
    spec = yaml.safe_load(path.read_text()) or {}
    for key in spec:
        if key not in _SPEC_KEYS:
            near = difflib.get_close_matches(str(key), list(_SPEC_KEYS), n=1, cutoff=0.0)
            raise ValueError(f"{path}: unknown key '{key}'. Did you mean '{near[0]}'?")
    for key, tp in _SPEC_KEYS.items():
        if key not in spec:
            raise ValueError(f"{path}: missing key '{key}'")
        if not isinstance(spec[key], tp) or isinstance(spec[key], bool):
            raise ValueError(f"{path}: '{key}' has the wrong type ({type(spec[key]).__name__})")
    return spec


def available_tasks() -> list[str]:
    return sorted(p.parent.name for p in TASKS_DIR.glob("*/task.yaml"))


def load_task(name: str) -> Task:
    folder = TASKS_DIR / name
    if not (folder / "task.yaml").is_file():
        names = available_tasks()
        near = difflib.get_close_matches(name, names, n=1, cutoff=0.0)
        hint = f" Did you mean '{near[0]}'?" if near else ""
        raise ValueError(f"unknown task '{name}'.{hint} Available: {names}")
    spec = _read_spec(folder)
    module_spec = importlib.util.spec_from_file_location(f"helix_task_{name}_verifier", folder / "verifier.py")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    if not callable(getattr(module, "verify", None)):
        raise ValueError(f"{folder}/verifier.py must define verify(returned) -> Verdict")
    return Task(
        name=spec["name"], description=(folder / "description.md").read_text(),
        initial_program=(folder / "initial_program.py").read_text(), entry_function=spec["entry_function"],
        timeout_s=float(spec["timeout_s"]), memory_mb=spec["memory_mb"], best_known=float(spec["best_known"]),
        best_known_source=spec["best_known_source"], folder=folder, _verify=module.verify,
    )
