"""Zero-tolerance re-check of a point the verifier accepted (``check_exact``, tasks/base.py).

The verifier allows the box and the other constraints 1e-9 (and evaluates f at the point clipped
to the box); here the returned point itself is checked exactly, in rational arithmetic of its floats
(fractions.Fraction: a float's own value): the box (Keane's x_i > 0 strictly), Mishra's disk
(x1 + 5)^2 + (x2 + 5)^2 < 25 strictly, Keane's sum(x) <= 7.5 d and prod(x) >= 0.75. The objective is
trigonometric, so it stays a float computation: the check has no value, only the constraints.
"""

from __future__ import annotations

from fractions import Fraction

from tasks.base import ExactCheck
from tasks.families.exact import outcome
from tasks.families.functions.verify import PROBLEMS, _point

Violations = list[tuple[float, str]]


def _box(x: list[Fraction], lo: list[float], hi: list[float], open_low: bool = False) -> Violations:
    """Coordinates outside [lo_i, hi_i] (``open_low``: (lo_i, hi_i], Keane's x_i > 0)."""
    out = []
    for i, (v, low, high) in enumerate(zip(x, lo, hi)):
        if v < low or (open_low and v == low):
            short = float(low - v)
            out.append((short, f"x[{i}] = {float(v)!r} is {'not above' if open_low else 'below'} {low:g}"
                               + (f" by {short:.3g}" if short else "")))
        elif v > high:
            out.append((float(v - high), f"x[{i}] = {float(v)!r} exceeds {high:g} by {float(v - high):.3g}"))
    return out


def _mishra(x: list[Fraction]) -> Violations:
    out = _box(x, [-10.0, -6.5], [0.0, 0.0])
    disk = (x[0] + 5) ** 2 + (x[1] + 5) ** 2
    if disk >= 25:
        over = float(disk - 25)
        out.append((over, f"(x1 + 5)^2 + (x2 + 5)^2 = {float(disk)!r} is not < 25" + (f" (over by {over:.3g})" if over else "")))
    return out


def _keane(x: list[Fraction]) -> Violations:
    d = len(x)
    out = _box(x, [0.0] * d, [10.0] * d, open_low=True)
    total, prod, cap = sum(x), Fraction(1), Fraction(15 * d, 2)
    for v in x:
        prod *= v
    if total > cap:
        out.append((float(total - cap), f"sum(x) exceeds 7.5 d = {7.5 * d:g} by {float(total - cap):.3g}"))
    if prod < Fraction(3, 4):
        out.append((float(Fraction(3, 4) - prod), f"prod(x) is below 0.75 by {float(Fraction(3, 4) - prod):.3g}"))
    return out


CONSTRAINTS = {"eggholder": lambda x: _box(x, [-512.0] * 2, [512.0] * 2), "mishra_bird": _mishra,
               **{f"keane_bump_{d}": _keane for d in (10, 20, 30)}}
WHAT = {"eggholder": "x in [-512, 512]^2", "mishra_bird": "x in [-10, 0] x [-6.5, 0] and (x1 + 5)^2 + (x2 + 5)^2 < 25",
        **{f"keane_bump_{d}": f"x in (0, 10]^{d}, sum(x) <= {7.5 * d:g} and prod(x) >= 0.75" for d in (10, 20, 30)}}


def check_point(name: str, returned) -> ExactCheck:
    """The exact check of the point returned for problem ``name`` (a key of functions.verify.PROBLEMS)."""
    problem = PROBLEMS[name]
    x, err = _point(returned, problem.dim, f"a list of {problem.dim} numbers")
    if err is not None:  # only an artefact verify accepted is checked; this one it would not have
        return ExactCheck("unchecked", f"not a point the verifier accepts: {err}")
    exact = [Fraction(float(v)) for v in x.tolist()]
    return outcome(CONSTRAINTS[name](exact), f"{WHAT[name]}: every constraint holds exactly on the returned floats "
                                             "(rational arithmetic, zero tolerance); f itself is trigonometric, "
                                             "evaluated in floating point", None)
