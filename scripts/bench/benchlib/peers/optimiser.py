"""The comparison's yardstick without an LLM: scipy's SLSQP restarted from perturbed starts for a fixed wall
time, on the same task from the same starter, each restart's result scored by the task's own verifier.

    .venv/bin/python -m benchlib.peers.optimiser TASK --seconds 1800 --seed 0 --log EVALS.jsonl

The first start is what the starter program returns (run once in HELIX's sandbox, like every other
system's starter); every later start is the best point so far plus Gaussian noise of a log-uniform scale,
so the search both polishes and jumps. Each restart is one "child" in the bench's table and one record in
the log, in scripts/bench/benchlib/peers/score.py's format. This is trusted code: its points are data, handed to
``task.verify`` (the verifier the sandbox's results go through) without running any program.

Tasks: circle_packing_26 (maximise the sum of radii: variables x, y, r per circle, r >= 0, inside the
square, pairwise distance >= r_i + r_j) and the Keane bump tasks (minimise f on 0 < x <= 10 with
sum(x) <= 7.5 d and prod(x) >= 0.75).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from scipy.optimize import minimize

from benchlib.peers.score import append_record

SHRINK = 1e-9  # radii are shrunk by this before scoring: SLSQP's solutions touch within round-off
EXIT_S = 1.0  # of its wall time, left for its exit (and the bench's once-a-second look)


def process_start() -> float:
    """When this process started, on time.monotonic()'s clock (both count from boot on Linux: the kernel's
    start time in /proc, CLOCK_BOOTTIME for now), so its wall time includes its imports, as the bench's cap does."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return time.monotonic() - age


@dataclass(frozen=True)
class Problem:
    """One task as a smooth constrained minimisation: a start from the starter's artefact, a perturbation,
    the SLSQP pieces, and the artefact the verifier takes."""

    start: Callable[[object], np.ndarray]  # starter artefact -> variables
    perturb: Callable[[np.ndarray, np.random.Generator], np.ndarray]
    objective: Callable[[np.ndarray], tuple[float, np.ndarray]]  # value and gradient
    constraints: list[dict]  # scipy's inequality constraints (fun >= 0), with jacobians
    bounds: list[tuple[float, float]]
    artefact: Callable[[np.ndarray], object]


def circle_problem(n: int) -> Problem:
    iu, ju = np.triu_indices(n, 1)

    def split(v):
        return v[:n], v[n:2 * n], v[2 * n:]

    def objective(v):
        grad = np.zeros(3 * n)
        grad[2 * n:] = -1.0
        return -float(np.sum(v[2 * n:])), grad

    def pairs(v):  # (x_i - x_j)^2 + (y_i - y_j)^2 - (r_i + r_j)^2 >= 0
        x, y, r = split(v)
        dx, dy, s = x[iu] - x[ju], y[iu] - y[ju], r[iu] + r[ju]
        return dx * dx + dy * dy - s * s

    def pairs_jac(v):
        x, y, r = split(v)
        dx, dy, s = x[iu] - x[ju], y[iu] - y[ju], r[iu] + r[ju]
        jac = np.zeros((len(iu), 3 * n))
        rows = np.arange(len(iu))
        jac[rows, iu], jac[rows, ju] = 2 * dx, -2 * dx
        jac[rows, n + iu], jac[rows, n + ju] = 2 * dy, -2 * dy
        jac[rows, 2 * n + iu], jac[rows, 2 * n + ju] = -2 * s, -2 * s
        return jac

    def walls(v):  # x - r, 1 - x - r, y - r, 1 - y - r >= 0
        x, y, r = split(v)
        return np.concatenate([x - r, 1 - x - r, y - r, 1 - y - r])

    eye = np.eye(n)
    zero = np.zeros((n, n))
    walls_jac = np.block([[eye, zero, -eye], [-eye, zero, -eye], [zero, eye, -eye], [zero, -eye, -eye]])

    def start(artefact):
        centers, radii = np.asarray(artefact[0], float), np.asarray(artefact[1], float)
        return np.concatenate([centers[:, 0], centers[:, 1], radii])

    def perturb(v, rng):
        x, y, r = split(v)
        scale = np.exp(rng.uniform(np.log(0.01), np.log(0.2)))
        x = np.clip(x + rng.normal(0, scale, n), 0.02, 0.98)
        y = np.clip(y + rng.normal(0, scale, n), 0.02, 0.98)
        return np.concatenate([x, y, 0.5 * r])

    def artefact(v):
        x, y, r = split(v)
        r = np.maximum(r * (1 - SHRINK) - SHRINK, 0.0)
        return [np.stack([x, y], 1).tolist(), r.tolist(), float(np.sum(r))]

    return Problem(start, perturb, objective,
                   [{"type": "ineq", "fun": pairs, "jac": pairs_jac},
                    {"type": "ineq", "fun": walls, "jac": lambda v: walls_jac}],
                   [(0.0, 1.0)] * (2 * n) + [(0.0, 0.5)] * n, artefact)


def keane_problem(d: int) -> Problem:
    from tasks.families.functions.verify import keane_bump

    weights = np.arange(1, d + 1)

    def objective(x):
        c, s = np.cos(x), np.sin(x)
        c2 = c**2
        others = np.array([np.prod(np.delete(c2, i)) for i in range(d)])  # prod of c_j^2 over j != i
        a = np.sum(c**4) - 2 * np.prod(c2)
        b = np.sqrt(np.sum(weights * x**2))
        da = -4 * c**3 * s + 4 * c * s * others  # d a / d x_i
        db = weights * x / b
        grad = -(np.sign(a) * da * b - abs(a) * db) / b**2  # f = -|a| / b
        return keane_bump(x), grad

    def start(artefact):
        return np.asarray(artefact, float)

    def perturb(x, rng):
        scale = np.exp(rng.uniform(np.log(0.05), np.log(1.0)))
        return np.clip(x + rng.normal(0, scale, d), 0.05, 10.0)

    return Problem(start, perturb, objective,
                   [{"type": "ineq", "fun": lambda x: 7.5 * d - np.sum(x), "jac": lambda x: -np.ones(d)},
                    {"type": "ineq", "fun": lambda x: np.prod(x) - 0.75 - 1e-7,
                     "jac": lambda x: np.prod(x) / x}],
                   [(1e-6, 10.0)] * d, lambda x: np.clip(x, 1e-6, 10.0).tolist())


def problem_for(task: str) -> Problem:
    if task == "circle_packing_26":
        return circle_problem(26)
    if task.startswith("keane_bump_"):
        return keane_problem(int(task.rsplit("_", 1)[1]))
    raise ValueError(f"the optimiser has no formulation of {task!r}; it knows circle_packing_26 and keane_bump_<d>")


def starter_artefact(task) -> tuple[object, dict]:
    """The starter run once in HELIX's sandbox: its artefact, and its record (the row's starter)."""
    from rewards import Evaluator
    from tasks import own_timeout_s

    evaluator = Evaluator(task, workers=1, timeout_s=own_timeout_s(task.name, "cpu"), keep_artefacts=True)
    try:
        result = evaluator.evaluate(task.initial_program)
    finally:
        evaluator.close()
    if not result.valid or result.artefact is None:
        raise RuntimeError(f"the starter of {task.name} is not valid: {result.feedback}")
    record = {"reward": result.reward, "valid": True, "status": result.status, "starter": True,
              "eval_time_s": result.eval_time_s, "hash": "starter", "t": time.time()}
    return json.loads(result.artefact), record


def run(task_name: str, seconds: float, seed: int, log: Path, started: float | None = None) -> dict:
    """SLSQP restarts within ``seconds`` from ``started`` (default: the process's start), the starter's
    evaluation included: no restart begins that the longest one so far would carry past the end, so the bench's
    wall cap (the same seconds) never has to stop it; every restart logged."""
    from tasks import load_task

    task = load_task(task_name)
    problem = problem_for(task_name)
    rng = np.random.default_rng(seed)
    deadline = (process_start() if started is None else started) + seconds - EXIT_S
    artefact, record = starter_artefact(task)
    append_record(log, record)
    best_v, best_reward = problem.start(artefact), record["reward"]
    restarts, longest = 0, 0.0
    while time.monotonic() + longest < deadline:
        began = time.monotonic()
        v0 = problem.start(artefact) if restarts == 0 else problem.perturb(best_v, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = minimize(lambda v: problem.objective(v)[0], v0, jac=lambda v: problem.objective(v)[1],
                             method="SLSQP", bounds=problem.bounds, constraints=problem.constraints,
                             options={"maxiter": 500, "ftol": 1e-12})
        verdict = task.verify(problem.artefact(found.x))
        longest = max(longest, time.monotonic() - began)
        restarts += 1
        reward = float(verdict.reward) if verdict.valid else 0.0
        append_record(log, {"reward": reward, "valid": bool(verdict.valid), "status": "ok" if verdict.valid else "invalid",
                            "starter": False, "eval_time_s": 0.0, "hash": f"restart-{restarts}", "t": time.time()})
        if verdict.valid and reward > best_reward:
            best_v, best_reward = found.x, reward
    return {"restarts": restarts, "best": best_reward}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchlib.peers.optimiser", description=__doc__.split("\n\n")[0])
    parser.add_argument("task")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        problem_for(args.task)
    except ValueError as err:
        print(f"optimiser: {err}", file=sys.stderr)
        return 2
    print(json.dumps(run(args.task, args.seconds, args.seed, args.log)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
