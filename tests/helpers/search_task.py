"""A search-form task small enough to write from a test (tasks/ holds the real ones): eight numbers in [0, 1],
reward the mean of 4 x (1 - x) (best 1, every x at 1/2). Its starter starts from [0.1] * 8 when given None
(reward 0.36), from the construction it is given otherwise, and takes STEPS seeded random steps, keeping a step
only where it improves and reporting each: deterministic, and done in milliseconds, so a test sees exact numbers
(``replay`` computes them in this process)."""

from __future__ import annotations

from pathlib import Path

import tasks.base

NAME = "points_search"
N = 8
START = 0.36  # the starter's reward from None: 4 x 0.1 x 0.9
TASK_YAML = f"""name: {NAME}
entry_function: improve
form: search
timeout_s: 5
cpu_timeout_s: 3
memory_mb: 512
best_known: 1.0
best_known_source: "x = 1/2 for every x: 4 x (1 - x) is at most 1"
"""
STARTER = f'''"""Nudge each number towards 1/2, keeping what improves."""
import time

import numpy as np

N = {N}
STEPS = 40

try:
    report
except NameError:
    def report(construction):
        pass


def score(x):
    return float(np.mean(4 * x * (1 - x)))


# EVOLVE-BLOCK-START
def improve(construction, budget_s, seed):
    x = np.full(N, 0.1) if construction is None else np.array(construction["x"], float)
    if x.shape != (N,):
        raise ValueError(f"expected {{N}} numbers, got shape {{x.shape}}")
    rng = np.random.default_rng(seed)
    deadline = time.monotonic() + budget_s
    best = score(x)
    for _ in range(STEPS):
        if time.monotonic() > deadline:
            break
        trial = x.copy()
        k = rng.integers(N)
        trial[k] = np.clip(trial[k] + rng.normal(0, 0.1), 0, 1)
        if score(trial) > best:
            x, best = trial, score(trial)
            report({{"x": x.tolist()}})
    return {{"x": x.tolist()}}
# EVOLVE-BLOCK-END
'''
VERIFIER = f'''import math

from tasks.base import Verdict, invalid

N = {N}


def verify(returned):
    if not isinstance(returned, dict) or not isinstance(returned.get("x"), list) or len(returned["x"]) != N:
        return invalid("expected {{'x': [{N} numbers in [0, 1]]}}")
    xs = returned["x"]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 1 for v in xs):
        return invalid("every x must be a finite number in [0, 1]")
    reward = sum(4 * v * (1 - v) for v in xs) / N
    return Verdict(reward, True, f"mean 4x(1-x) = {{reward:.6f}}", {{"x_min": min(xs)}})
'''
DESCRIPTION = "Move eight numbers in [0, 1] so that the mean of 4 x (1 - x) is as large as possible.\n"


def score(xs) -> float:
    """The verifier's reward, computed here independently."""
    return sum(4 * v * (1 - v) for v in xs) / len(xs)


def write(root: Path, name: str = NAME, **replace: str) -> Path:
    """The task folder under ``root`` (a tasks/ of its own); ``replace``: file name -> text instead of the above."""
    folder = root / name
    folder.mkdir(parents=True)
    files = {"task.yaml": TASK_YAML.replace(f"name: {NAME}", f"name: {name}"), "initial_program.py": STARTER,
             "verifier.py": VERIFIER, "description.md": DESCRIPTION, **replace}
    for file, text in files.items():
        (folder / file).write_text(text)
    return folder


def install(tmp_path: Path, monkeypatch, **replace: str) -> Path:
    """Write the task into a private tasks/ folder and point tasks.base at it (load_task finds it by NAME)."""
    root = tmp_path / "tasks"
    folder = write(root, **replace)
    monkeypatch.setattr(tasks.base, "TASKS_DIR", root)
    return folder


def replay(construction, seed: int) -> dict:
    """What the starter returns for (construction, seed), computed by running its source here (it is our own
    trusted code), with a generous budget and without the sandbox."""
    namespace: dict = {}
    exec(compile(STARTER, "starter", "exec"), namespace)
    return namespace["improve"](construction, 60.0, seed)
