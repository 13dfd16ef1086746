"""What the families' exact checks share (verifier.py ``check_exact``, tasks/base.py ``ExactCheck``).

Why integers: every float is a dyadic rational m / 2^k, so multiplying all of an artefact's numbers
by the largest 2^k among them turns each into an integer without any rounding. A constraint such as
(x_i - x_j)^2 + (y_i - y_j)^2 >= (r_i + r_j)^2 is then an integer inequality, decided exactly, and
Python's integers do it faster than fractions.Fraction (no gcd after every operation).
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from tasks.base import ExactCheck


def integers(values: Iterable[float]) -> tuple[list[int], int]:
    """(integers n_i, scale D) with values[i] == n_i / D exactly; D is a power of two (1 for integers)."""
    ratios = [Fraction(v) for v in values]  # exact: a float's own rational value, an int as itself
    scale = max((r.denominator for r in ratios), default=1)  # each a power of two, so the largest is a multiple of all
    return [r.numerator * (scale // r.denominator) for r in ratios], scale


def ratio(numerator: int, denominator: int) -> float:
    """numerator / denominator as the nearest float (Python divides big integers correctly rounded)."""
    return numerator / denominator


def outcome(violations: list[tuple[float, str]], exact_detail: str, value: float | None) -> ExactCheck:
    """"exact" with ``exact_detail`` and ``value`` when nothing is violated; else "tolerance_only" naming
    the worst violation (largest amount) and how many more there are (no value: the construction
    is not a valid one, so it has no exact objective)."""
    if not violations:
        return ExactCheck("exact", exact_detail, value)
    amount, text = max(violations, key=lambda v: v[0])
    more = len(violations) - 1
    return ExactCheck("tolerance_only", text + (f" (and {more} more violation(s) at zero tolerance)" if more else ""))
