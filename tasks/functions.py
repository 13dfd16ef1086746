"""Function minimisation tasks (paper appendix B.4, eq. 20-25): the functions, their feasible
sets, and the trusted verifier shared by every task folder that minimises one of them.

The program returns the point x; the parent recomputes f(x) and checks every constraint, so a
program cannot claim a value. Reward (eq. 20): R = |f*| / (|f*| + |f(x) - f*|). The published
f* are rounded, so a point at or below f* gets R = 1 (eq. 20 read literally would penalise beating
the rounded record).

Mishra's Bird: the paper prints the constraint as x1^2 + x2^2 >= 25, which its own global minimum
(-3.1302, -1.5822) violates; we use the standard form (x1 + 5)^2 + (x2 + 5)^2 < 25, which it meets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from tasks.base import Verdict, invalid

TOL = 1e-9


def eggholder(x: np.ndarray) -> float:
    x1, x2 = x
    return float(-(x2 + 47) * np.sin(np.sqrt(abs(x2 + 47 + x1 / 2))) - x1 * np.sin(np.sqrt(abs(x1 - (x2 + 47)))))


def mishra_bird(x: np.ndarray) -> float:
    x1, x2 = x
    return float(np.sin(x2) * np.exp((1 - np.cos(x1)) ** 2) + np.cos(x1) * np.exp((1 - np.sin(x2)) ** 2) + (x1 - x2) ** 2)


def keane_bump(x: np.ndarray) -> float:
    c = np.cos(x)
    num = abs(np.sum(c**4) - 2 * np.prod(c**2))
    return float(-num / np.sqrt(np.sum(np.arange(1, len(x) + 1) * x**2)))


def _box(lo: np.ndarray, hi: np.ndarray, open_low: bool = False) -> Callable[[np.ndarray], list[str]]:
    def check(x):
        out = []
        below = (x <= lo) if open_low else (x < lo - TOL)
        for i in np.flatnonzero(below | (x > hi + TOL)):
            bound = f"{'>' if open_low else '>='} {lo[i]:g} and <= {hi[i]:g}"
            out.append(f"x[{i}] = {x[i]:.6g} must be {bound}")
        return out
    return check


def _mishra_constraints(x: np.ndarray) -> list[str]:
    out = _box(np.array([-10.0, -6.5]), np.array([0.0, 0.0]))(x)
    disk = (x[0] + 5) ** 2 + (x[1] + 5) ** 2
    if disk >= 25 + TOL:
        out.append(f"(x1 + 5)^2 + (x2 + 5)^2 = {disk:.6g} must be < 25 (violated by {disk - 25:.3g})")
    return out


def _keane_constraints(x: np.ndarray) -> list[str]:
    d = len(x)
    out = _box(np.zeros(d), np.full(d, 10.0), open_low=True)(x)
    total, prod = float(np.sum(x)), float(np.prod(x))
    if total > 7.5 * d + TOL:
        out.append(f"sum(x) = {total:.6g} must be <= 7.5 d = {7.5 * d:g} (violated by {total - 7.5 * d:.3g})")
    if prod < 0.75 - TOL:
        out.append(f"prod(x) = {prod:.6g} must be >= 0.75 (violated by {0.75 - prod:.3g})")
    return out


@dataclass(frozen=True)
class Problem:
    name: str
    dim: int
    f: Callable[[np.ndarray], float]
    constraints: Callable[[np.ndarray], list[str]]
    f_star: float


PROBLEMS = {
    "eggholder": Problem("eggholder", 2, eggholder, _box(np.full(2, -512.0), np.full(2, 512.0)), -959.6407),
    "mishra_bird": Problem("mishra_bird", 2, mishra_bird, _mishra_constraints, -106.7645),
    **{f"keane_bump_{d}": Problem(f"keane_bump_{d}", d, keane_bump, _keane_constraints, f)
       for d, f in ((10, -0.747310362), (20, -0.803619104), (30, -0.818056222))},
}


def reward(value: float, f_star: float) -> float:
    """Eq. 20, with R = 1 at or below the (rounded) published minimum."""
    return abs(f_star) / (abs(f_star) + max(value - f_star, 0.0))


def verify_point(problem: Problem, returned) -> Verdict:
    usage = f"the entry function must return the point x as a list of {problem.dim} numbers"
    try:
        x = np.asarray(returned, dtype=np.float64)
    except (TypeError, ValueError):
        return invalid(f"could not read the result as numbers; {usage}")
    if x.shape != (problem.dim,):
        return invalid(f"x has shape {x.shape}, expected ({problem.dim},); {usage}")
    if not np.all(np.isfinite(x)):
        return invalid(f"x holds NaN or inf at positions {np.flatnonzero(~np.isfinite(x))[:10].tolist()}; {usage}")
    broken = problem.constraints(x)
    if broken:
        more = f" (and {len(broken) - 3} more)" if len(broken) > 3 else ""
        return invalid("infeasible point: " + "; ".join(broken[:3]) + more, violations=float(len(broken)))
    value = problem.f(x)
    if not math.isfinite(value):
        return invalid(f"f(x) is not finite ({value}) at this point")
    r = reward(value, problem.f_star)
    return Verdict(r, True, f"f(x) = {value:.10g} (known minimum {problem.f_star:g}; gap {value - problem.f_star:.4g}); "
                            f"reward {r:.6f}", {"f": value, "gap": value - problem.f_star})
