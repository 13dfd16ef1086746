"""Zero-tolerance re-check of a circle packing the verifier accepted (``check_exact``, tasks/base.py).

The verifier tolerates violations up to 1e-9 and charges them to the radii, so its reward is the sum
of a strictly valid packing; but the packing as returned may still overlap by 9e-10, and a "record"
made of it fails at zero tolerance. Here every constraint is decided exactly on the returned floats,
scaled to integers (tasks/families/exact.py), with squares in place of square roots:

* r_i >= 0;
* square: x_i - r_i >= 0, y_i - r_i >= 0, x_i + r_i <= 1, y_i + r_i <= 1;
* disk: |c_i| + r_i <= 1, i.e. 1 - r_i >= 0 and x_i^2 + y_i^2 <= (1 - r_i)^2 (both sides of the
  root are >= 0 once 1 - r_i is);
* every pair: (x_i - x_j)^2 + (y_i - y_j)^2 >= (r_i + r_j)^2 (r_i + r_j >= 0 once the radii are).

A failure names the worst violation (amounts are rounded only for the message) and how many more.
"""

from __future__ import annotations

import math

from tasks.base import ExactCheck
from tasks.families.circles.verify import _unpack, as_array, usage
from tasks.families.exact import integers, outcome, ratio

Violations = list[tuple[float, str]]


def _excess(root_of: int, minus: int, scale: int) -> float:
    """sqrt(root_of) - minus (minus >= 0, root_of > minus^2), over ``scale``, as a float for a message."""
    return ratio(root_of - minus * minus, scale * (math.isqrt(root_of) + minus) or 1)


def radius_violations(r: list[int], scale: int) -> Violations:
    return [(ratio(-ri, scale), f"circle {i} has radius {ratio(ri, scale):.3g} < 0") for i, ri in enumerate(r) if ri < 0]


def box_violations(x: list[int], y: list[int], r: list[int], width: int, height: int, scale: int, what: str) -> Violations:
    """Circles leaving [0, width] x [0, height] (all scaled by ``scale``); ``what`` names the container."""
    out = []
    for i, (xi, yi, ri) in enumerate(zip(x, y, r)):
        for gap, edge in ((xi - ri, "left"), (yi - ri, "bottom"), (width - xi - ri, "right"), (height - yi - ri, "top")):
            if gap < 0:
                out.append((ratio(-gap, scale), f"circle {i} crosses the {edge} edge of {what} by {ratio(-gap, scale):.3g}"))
    return out


def disk_violations(x: list[int], y: list[int], r: list[int], scale: int) -> Violations:
    """Circles leaving the unit disk: |c| + r > 1."""
    out = []
    for i, (xi, yi, ri) in enumerate(zip(x, y, r)):
        room, norm2 = scale - ri, xi * xi + yi * yi  # 1 - r and |c|^2, scaled
        if room < 0 or norm2 > room * room:
            over = ratio(-room, scale) + math.sqrt(ratio(norm2, scale * scale)) if room < 0 else _excess(norm2, room, scale)
            out.append((over, f"circle {i} leaves the unit disk by {over:.3g} (|c| + r > 1)"))
    return out


def overlap_violations(x: list[int], y: list[int], r: list[int], scale: int) -> Violations:
    """Pairs closer than the sum of their radii."""
    out = []
    n = len(r)
    for i in range(n):
        xi, yi, ri = x[i], y[i], r[i]
        for j in range(i + 1, n):
            dx, dy, s = xi - x[j], yi - y[j], ri + r[j]
            d2 = dx * dx + dy * dy
            if d2 < s * s:
                over = ratio(s * s - d2, scale * (s + math.isqrt(d2)))
                out.append((over, f"circles {i} and {j} overlap by {over:.3g}"))
    return out


def check_packing(returned, n: int, container: str) -> ExactCheck:
    """The exact check of ``n`` circles in the unit ``container`` ("square" or "disk")."""
    usage_text = usage(n)
    centers, radii, err = _unpack(returned, usage_text)
    if err is None:
        centers, err = as_array(centers, (n, 2), "centers", usage_text)
    if err is None:
        radii, err = as_array(radii, (n,), "radii", usage_text)
    if err is not None:  # only an artefact verify accepted is checked; this one it would not have
        return ExactCheck("unchecked", f"not a packing the verifier accepts: {err}")
    values, scale = integers(centers[:, 0].tolist() + centers[:, 1].tolist() + radii.tolist())
    x, y, r = values[:n], values[n:2 * n], values[2 * n:]
    found = radius_violations(r, scale) + overlap_violations(x, y, r, scale)
    if container == "square":
        found += box_violations(x, y, r, scale, scale, scale, "the unit square")
        inside = "inside the unit square"
    else:
        found += disk_violations(x, y, r, scale)
        inside = "inside the unit disk (|c| + r <= 1, compared squared)"
    total = ratio(sum(r), scale)
    return outcome(found, f"{n} circles with radii >= 0, {inside}, no two overlapping: every constraint holds "
                          f"exactly on the returned floats (zero tolerance); sum of radii {total:.12g}", total)
