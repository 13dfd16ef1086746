"""Zero-tolerance re-check of a spherical code the verifier accepted (``check_exact``, tasks/base.py).

The verifier has no tolerance a code could ride: rows are normalised, and a pair closer than 1e-9 rad
is rejected, not accepted. What floats can blur is which pair is closest and its angle. Here both
are decided exactly on the returned floats, scaled to integer vectors p_i (tasks/families/exact.py; the scale
does not change a direction): every p_i is nonzero, no two have the same direction (p_i x p_j = 0 with
<p_i, p_j> > 0), and the closest pair maximises the signed squared cosine
sign(<p_i, p_j>) <p_i, p_j>^2 / (|p_i|^2 |p_j|^2), compared as exact rationals (no root, no arccos).
Its angle, atan2(|p_i x p_j|, <p_i, p_j>), is then rounded once to a float (the check's value).
"""

from __future__ import annotations

import math
from fractions import Fraction

from tasks.base import ExactCheck
from tasks.families.exact import integers, outcome, ratio
from tasks.families.spherical_code.verify import _points


def _cross2(p: tuple[int, int, int], q: tuple[int, int, int]) -> int:
    """|p x q|^2, exactly."""
    cx, cy, cz = p[1] * q[2] - p[2] * q[1], p[2] * q[0] - p[0] * q[2], p[0] * q[1] - p[1] * q[0]
    return cx * cx + cy * cy + cz * cz


def check_code(returned, n: int) -> ExactCheck:
    """The exact check of ``n`` points on S^2: nonzero, distinct directions, and the closest pair."""
    points, err = _points(returned, n)
    if err is not None:  # only an artefact verify accepted is checked; this one it would not have
        return ExactCheck("unchecked", f"not a code the verifier accepts: {err}")
    values, _ = integers(points.ravel().tolist())
    p = [tuple(values[3 * i:3 * i + 3]) for i in range(n)]
    norm2 = [a * a + b * b + c * c for a, b, c in p]
    found = [(1.0, f"point {i} is the zero vector (no direction)") for i in range(n) if norm2[i] == 0]
    best, pair = None, None
    for i in range(n):
        for j in range(i + 1, n):
            if not norm2[i] or not norm2[j]:
                continue
            dot = sum(a * b for a, b in zip(p[i], p[j]))
            if dot > 0 and _cross2(p[i], p[j]) == 0:
                found.append((1.0, f"points {i} and {j} have the same direction (exactly)"))
            signed = Fraction((1 if dot >= 0 else -1) * dot * dot, norm2[i] * norm2[j])
            if best is None or signed > best:
                best, pair = signed, (i, j, dot)
    if pair is None:
        return outcome(found, "", None)
    i, j, dot = pair
    both = norm2[i] * norm2[j]  # sine and cosine from exact squares, each rounded once, then the angle
    cos = math.copysign(math.sqrt(ratio(dot * dot, both)), 1 if dot >= 0 else -1)
    angle = math.atan2(math.sqrt(ratio(_cross2(p[i], p[j]), both)), cos)
    return outcome(found, f"{n} points, none zero and no two in the same direction, exactly; the closest pair, points "
                          f"{i} and {j} (squared cosines compared as exact rationals), is {angle:.15g} rad apart", angle)
