"""Function minimisation tasks (paper appendix B.4, eq. 20-25): the functions, their feasible
sets, and the trusted verifier shared by every task folder that minimises one of them.

The program returns the point x; the parent recomputes f(x) and checks every constraint, so a
program cannot claim a value. Reward (eq. 20): R = |f*| / (|f*| + |f(x) - f*|). The published
f* are rounded, so a point at or below f* gets R = 1 (eq. 20 read literally would penalise beating
the rounded record).

What a point may be: a list of ``dim`` real numbers (ints or floats; booleans, strings, None,
nested lists and integers too large for a float are rejected, each with one line). Bounds are
checked with an absolute tolerance TOL = 1e-9, but f is evaluated at the point clipped to the
box, so the tolerance cannot buy a lower value (at the Eggholder minimum, on the edge x1 = 512,
stepping out by 1e-9 would lower f by 3.4e-9). The other constraints (Mishra's disk, Keane's
sum and product) keep their 1e-9 tolerance uncharged: they are checked only inside the box,
and at Keane's constrained optima relaxing the product by 1e-9 lowers f by about 5e-11 (local
optima found by SLSQP for d = 10, 20, 30), far below the 1e-9 the published f* are given to.

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


_MISHRA_LO, _MISHRA_HI = np.array([-10.0, -6.5]), np.array([0.0, 0.0])
_MISHRA_BOX = _box(_MISHRA_LO, _MISHRA_HI)


def _mishra_constraints(x: np.ndarray) -> list[str]:
    out = _MISHRA_BOX(x)
    if out:  # outside the box: the disk is not worth computing (x may be 1e308)
        return out
    disk = (x[0] + 5) ** 2 + (x[1] + 5) ** 2
    if disk >= 25 + TOL:
        out.append(f"(x1 + 5)^2 + (x2 + 5)^2 = {disk:.6g} must be < 25 (violated by {disk - 25:.3g})")
    return out


def _keane_constraints(x: np.ndarray) -> list[str]:
    d = len(x)
    out = _box(np.zeros(d), np.full(d, 10.0), open_low=True)(x)
    if out:  # outside the box: sum and product are not worth computing (x may be 1e308)
        return out
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
    lo: np.ndarray  # the box f is evaluated in: a point within TOL outside is clipped to it
    hi: np.ndarray


PROBLEMS = {
    "eggholder": Problem("eggholder", 2, eggholder, _box(np.full(2, -512.0), np.full(2, 512.0)), -959.6407,
                         np.full(2, -512.0), np.full(2, 512.0)),
    "mishra_bird": Problem("mishra_bird", 2, mishra_bird, _mishra_constraints, -106.7645, _MISHRA_LO, _MISHRA_HI),
    **{f"keane_bump_{d}": Problem(f"keane_bump_{d}", d, keane_bump, _keane_constraints, f, np.zeros(d),
                                  np.full(d, 10.0))  # x > 0 is strict: no tolerance below, nothing to clip
       for d, f in ((10, -0.747310362), (20, -0.803619104), (30, -0.818056222))},
}


def reward(value: float, f_star: float) -> float:
    """Eq. 20, with R = 1 at or below the (rounded) published minimum."""
    return abs(f_star) / (abs(f_star) + max(value - f_star, 0.0))


def _point(returned, dim: int, usage: str):
    """A finite float vector of ``dim`` numbers, or (None, why)."""
    if isinstance(returned, np.ndarray):
        if returned.dtype.kind not in "iuf":
            what = "booleans" if returned.dtype.kind == "b" else f"an array of dtype {returned.dtype}"
            return None, f"x must hold numbers, got {what}; {usage}"
        returned = returned.tolist()
    if not isinstance(returned, (list, tuple)):
        return None, f"{usage}; got {type(returned).__name__}"
    if len(returned) != dim:
        return None, f"x has {len(returned)} entries, expected {dim}; {usage}"
    for i, v in enumerate(returned):
        if isinstance(v, (bool, np.bool_)):
            return None, f"x[{i}] is a boolean ({v}), not a number; {usage}"
        if not isinstance(v, (int, float, np.integer, np.floating)):
            return None, f"x[{i}] is a {type(v).__name__}, not a number; {usage}"
        if isinstance(v, int) and abs(v) > 2**64:  # 10**400 does not even convert to a float
            return None, f"x[{i}] is an integer of {len(str(abs(v)))} digits, far outside the feasible set; {usage}"
    x = np.array(returned, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        return None, f"x holds NaN or inf at positions {np.flatnonzero(~np.isfinite(x))[:10].tolist()}; {usage}"
    return x, None


def verify_point(problem: Problem, returned) -> Verdict:
    usage = f"the entry function must return the point x as a list of {problem.dim} numbers"
    x, err = _point(returned, problem.dim, usage)
    if err is not None:
        return invalid(err)
    broken = problem.constraints(x)
    if broken:
        more = f" (and {len(broken) - 3} more)" if len(broken) > 3 else ""
        return invalid("infeasible point: " + "; ".join(broken[:3]) + more, violations=float(len(broken)))
    value = problem.f(np.clip(x, problem.lo, problem.hi))
    if not math.isfinite(value):
        return invalid(f"f(x) is not finite ({value}) at this point")
    r = reward(value, problem.f_star)
    return Verdict(r, True, f"f(x) = {value:.10g} (known minimum {problem.f_star:g}; gap {value - problem.f_star:.4g}); "
                            f"reward {r:.6f}", {"f": value, "gap": value - problem.f_star})
