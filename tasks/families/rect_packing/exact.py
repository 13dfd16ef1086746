"""Zero-tolerance re-check of a rectangle packing the verifier accepted (``check_exact``, tasks/base.py).

The verifier allows w + h up to 2 + 1e-9 and every circle constraint to 1e-9, then scales and
shrinks its way to a strictly valid reward; here the packing as returned is decided exactly, on
the returned floats scaled to integers (tasks/families/exact.py): w + h <= 2, r_i >= 0, each circle inside
[0, w] x [0, h], and (x_i - x_j)^2 + (y_i - y_j)^2 >= (r_i + r_j)^2 for every pair.
"""

from __future__ import annotations

from tasks.base import ExactCheck
from tasks.families.circles.exact import box_violations, overlap_violations, radius_violations
from tasks.families.exact import integers, outcome, ratio
from tasks.families.rect_packing.verify import HALF_PERIMETER, _unpack


def check_rect_packing(returned, n: int) -> ExactCheck:
    """The exact check of ``n`` circles in the program's rectangle of perimeter at most 4."""
    parts, err = _unpack(returned, n)
    if err is not None:  # only an artefact verify accepted is checked; this one it would not have
        return ExactCheck("unchecked", f"not a packing the verifier accepts: {err}")
    width, height, centers, radii = parts
    values, scale = integers([width, height] + centers[:, 0].tolist() + centers[:, 1].tolist() + radii.tolist())
    w, h, rest = values[0], values[1], values[2:]
    x, y, r = rest[:n], rest[n:2 * n], rest[2 * n:]
    found = radius_violations(r, scale) + overlap_violations(x, y, r, scale)
    found += box_violations(x, y, r, w, h, scale, "the rectangle")
    bound = int(HALF_PERIMETER) * scale  # 2, scaled (integers only: a float times 2^1074 overflows)
    if w + h > bound:
        over = ratio(w + h - bound, scale)
        found.append((over, f"the rectangle's w + h exceeds 2 by {over:.3g} (perimeter over 4)"))
    total = ratio(sum(r), scale)
    return outcome(found, f"{n} circles with radii >= 0 inside a {width:.6g} x {height:.6g} rectangle with w + h <= 2, "
                          f"no two overlapping: every constraint holds exactly on the returned floats (zero tolerance); "
                          f"sum of radii {total:.12g}", total)
