"""The trusted check of spread_points_bench: it gets only the JSON-decoded value solve() returned and recomputes the reward.

Replace the example's checks with yours. Never trust the program: check types (a JSON true is not a
number), the shape, finiteness and every constraint, and return tasks.base.invalid("what is wrong") or
Verdict(reward, True, feedback, metrics). Higher reward is better; keep it finite.
"""
import math

from tasks.base import Verdict, invalid

N = 12  # points
TOL = 1e-9  # how far outside the square a coordinate may be (floating-point rounding)


def _number(value) -> float | None:
    """A finite real number, or None (bools, huge ints, strings, NaN and inf are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int) and abs(value) > 10**6:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def verify(returned):
    # 1. The shape: a list of N pairs.
    if not isinstance(returned, list) or len(returned) != N:
        return invalid(f"expected a list of {N} points [x, y], got {type(returned).__name__} of length "
                       f"{len(returned) if isinstance(returned, list) else '-'}")
    points = []
    for i, point in enumerate(returned):
        if not isinstance(point, list) or len(point) != 2:
            return invalid(f"point {i} is not a pair [x, y]")
        x, y = _number(point[0]), _number(point[1])
        if x is None or y is None:
            return invalid(f"point {i} holds a value that is not a finite number")
        # 2. The constraints.
        if not (-TOL <= x <= 1 + TOL and -TOL <= y <= 1 + TOL):
            return invalid(f"point {i} = ({x:.6g}, {y:.6g}) is outside the unit square")
        points.append((x, y))
    # 3. The reward, recomputed here.
    smallest = min(math.dist(points[i], points[j]) for i in range(N) for j in range(i + 1, N))
    if smallest <= 0:
        return invalid("two points coincide (smallest distance 0)")
    return Verdict(smallest, True, f"smallest distance {smallest:.6f}", {"min_distance": smallest})
