"""Trusted checks for Heilbronn's problem in a triangle (AlphaEvolve B.9; EinsteinArena's heilbronn-triangles):
n points on or inside the equilateral triangle T with vertices (0, 0), (1, 0), (1/2, sqrt(3)/2), maximising
the smallest area of a triangle formed by three of them, normalised by the area of T (sqrt(3)/4). Every
triangle is an affine image of T and affine maps keep area ratios, so this is the problem for any triangle.

Containment is checked as the sources do, with a tolerance of 1e-9 on each edge's signed distance:
y >= 0, y <= sqrt(3) x and sqrt(3) x + y <= sqrt(3). The tolerance buys nothing: the smallest area is
divided by the area of the smallest triangle with T's edge directions that holds every point (T's edges
pushed out by the largest overhang beyond each; for an equilateral triangle the height grows by their sum).
For points inside T that is T itself. Three collinear points (or two equal ones) give area 0: a valid
configuration scoring 0, with the triple named.

``check_exact`` decides containment at zero tolerance in exact arithmetic: the returned floats are
rationals, and a comparison a <= sqrt(3) b between rationals is decided by signs and squares. The
smallest area is exact (a rational); only its division by sqrt(3)/4 is a float operation.
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from tasks.base import ExactCheck, Verdict, invalid
from tasks.families.circles.verify import as_array

TOL = 1e-9  # signed distance a point may lie outside an edge of T (floating-point rounding)
SQRT3 = math.sqrt(3.0)
HEIGHT = SQRT3 / 2  # of T
EDGES = ("bottom edge y >= 0", "right edge sqrt(3) x + y <= sqrt(3)", "left edge y <= sqrt(3) x")


def usage(n: int) -> str:
    return (f"the entry function must return {n} points [x, y] on or inside the triangle with vertices (0, 0), (1, 0), "
            f"(1/2, sqrt(3)/2), as a list of pairs or an array of shape ({n}, 2)")


def points_of(returned, n: int):
    """(float array of shape (n, 2), None) or (None, why); a dict's "points" is taken, other keys ignored."""
    if isinstance(returned, dict):
        if "points" not in returned:
            return None, f"the returned dict lacks 'points'; {usage(n)}"
        returned = returned["points"]
    if returned is None or isinstance(returned, (str, bytes, int, float, bool)):
        return None, f"{usage(n)}; got {type(returned).__name__}"
    return as_array(returned, (n, 2), "points", usage(n))


def overhangs(points: np.ndarray) -> np.ndarray:
    """(n, 3) signed distance of each point beyond each edge of T (<= 0: inside), in the order of EDGES."""
    x, y = points[:, 0], points[:, 1]
    return np.stack([-y, (SQRT3 * x + y - SQRT3) / 2, (y - SQRT3 * x) / 2], axis=1)


def smallest_triangle(points: np.ndarray) -> tuple[float, tuple[int, int, int]]:
    """(smallest area of a triangle of three of the points, its vertices' indices)."""
    triples = np.array(list(itertools.combinations(range(len(points)), 3)))
    a, b, c = points[triples[:, 0]], points[triples[:, 1]], points[triples[:, 2]]
    areas = np.abs((b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])) / 2
    k = int(np.argmin(areas))
    return float(areas[k]), tuple(int(i) for i in triples[k])


def verify_points(returned, n: int, best: float) -> Verdict:
    points, err = points_of(returned, n)
    if err is not None:
        return invalid(err)
    over = overhangs(points)
    if np.any(over > TOL):
        i, edge = np.unravel_index(int(np.argmax(over)), over.shape)
        count = int(np.any(over > TOL, axis=1).sum())
        return invalid(f"{count} point(s) lie outside the triangle; worst: point {i} = ({points[i, 0]:.6g}, "
                       f"{points[i, 1]:.6g}) is beyond its {EDGES[edge]} by {over[i, edge]:.3g} (tolerance {TOL:g})",
                       outside=float(count))
    height = HEIGHT + float(np.maximum(over.max(axis=0), 0.0).sum())  # the smallest triangle like T holding them
    area, (i, j, k) = smallest_triangle(points)
    reward = area / (height * height / SQRT3)
    charge = area / (HEIGHT * HEIGHT / SQRT3) - reward
    note = (f"; {charge:.3g} was charged for points outside the triangle within the tolerance (the area is divided by "
            "the enlarged triangle's)") if charge > 1e-15 else ""
    if area == 0:
        return Verdict(0.0, True, f"points {i}, {j} and {k} are collinear (or two coincide): the smallest triangle has "
                                  "area 0, so the score is 0; move them apart", {"min_area": 0.0, "n_points": float(n)})
    feedback = (f"smallest triangle: points {i}, {j}, {k} with area {reward:.10g} of the triangle's (best known "
                f"{best:.10g}, ratio {reward / best:.4f}){note}")
    return Verdict(reward, True, feedback, {"min_area": reward, "n_points": float(n), "tolerance_charge": charge})


def sqrt3_times_at_least(a: Fraction, b: Fraction) -> bool:
    """Whether sqrt(3) a >= b, exactly, for rationals a and b."""
    if a >= 0 and b <= 0:
        return True
    if a >= 0:
        return 3 * a * a >= b * b
    if b >= 0:
        return False
    return 3 * a * a <= b * b


def beyond(a: Fraction, b: Fraction) -> float:
    """b - sqrt(3) a, the amount by which sqrt(3) a >= b fails, to 30 digits (for a message only)."""
    with localcontext() as ctx:
        ctx.prec = 40
        return float(Decimal(b.numerator) / Decimal(b.denominator)
                     - Decimal(3).sqrt() * Decimal(a.numerator) / Decimal(a.denominator))


def check_points(returned, n: int) -> ExactCheck:
    points, err = points_of(returned, n)
    if err is not None:
        return ExactCheck("unchecked", f"not points the verifier accepts: {err}")
    exact = [(Fraction(float(x)), Fraction(float(y))) for x, y in points.tolist()]
    violations = []  # (distance beyond the edge, text)
    for i, (x, y) in enumerate(exact):
        if y < 0:
            violations.append((float(-y), f"point {i} is below the bottom edge by {float(-y):.3g}"))
        if not sqrt3_times_at_least(x, y):  # y <= sqrt(3) x
            violations.append((beyond(x, y) / 2, f"point {i} is beyond the left edge y <= sqrt(3) x by "
                                                 f"{beyond(x, y) / 2:.3g}"))
        if not sqrt3_times_at_least(1 - x, y):  # sqrt(3) x + y <= sqrt(3)
            violations.append((beyond(1 - x, y) / 2, f"point {i} is beyond the right edge sqrt(3) x + y <= sqrt(3) by "
                                                     f"{beyond(1 - x, y) / 2:.3g}"))
    if violations:
        amount, text = max(violations)
        more = f" (and {len(violations) - 1} more violation(s) at zero tolerance)" if len(violations) > 1 else ""
        return ExactCheck("tolerance_only", text + more)
    area = min(abs((bx - ax) * (cy - ay) - (by - ay) * (cx - ax)) / 2
               for (ax, ay), (bx, by), (cx, cy) in itertools.combinations(exact, 3))
    value = float(4 * area) / SQRT3
    return ExactCheck("exact", f"all {n} points inside the triangle at zero tolerance (rational coordinates against "
                               f"edges through sqrt(3), decided by squaring); smallest area exact, {float(area):.15g}, "
                               f"divided by the triangle's sqrt(3)/4 in floats: {value:.15g}", value)
