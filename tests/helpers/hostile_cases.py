"""Shared by the hostile tests (tests/redteam/test_hostile_*.py): the hostile values every verifier must
survive, ways to plant them in a real artefact, and brute-force references the verifiers are
checked against (written out one constraint at a time, independently of tasks/)."""

from __future__ import annotations

import copy
import math


def deeply_nested(depth: int = 500, leaf=1.0):
    """[[[...[leaf]...]]]: deeper than numpy's 64 dimensions, shallower than JSON's recursion limit."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


# What the sandbox's JSON can carry into a verifier (a program can also forge the record: it runs in
# the runner's process). Python ints of any size survive json.loads up to 4300 digits.
HOSTILE = {
    "inf": math.inf, "-inf": -math.inf, "nan": math.nan, "1e308": 1e308, "-1e308": -1e308, "1e200": 1e200,
    "-0.0": -0.0, "5e-324": 5e-324, "True": True, "False": False, "str": "x", "numeric str": "0.5", "None": None,
    "[]": [], "{}": {}, "deep": deeply_nested(), "10**400": 10**400, "-10**400": -10**400, "2**63": 2**63,
}


def paths(value, path=(), depth=0, max_depth=3):
    """The root and, to max_depth, every dict key's value and the first and last items of lists."""
    yield path
    if depth >= max_depth:
        return
    if isinstance(value, dict):
        for key in value:
            yield from paths(value[key], path + (key,), depth + 1, max_depth)
    elif isinstance(value, list) and value:
        for i in sorted({0, len(value) - 1}):
            yield from paths(value[i], path + (i,), depth + 1, max_depth)


def planted(value, path, new):
    """A copy of ``value`` with the item at ``path`` replaced by ``new``."""
    if not path:
        return new
    value = copy.copy(value)
    value[path[0]] = planted(value[path[0]], path[1:], new)
    return value


def every_number(value, fn):
    """A copy of ``value`` with every number (not bool) x replaced by fn(x)."""
    if isinstance(value, dict):
        return {k: every_number(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [every_number(v, fn) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return fn(value)
    return value


def hostile_variants(template):
    """(label, artefact): each hostile value at each path of ``template``, and as every number."""
    for path in paths(template):
        for name, bad in HOSTILE.items():
            yield f"{list(path)} = {name}", planted(template, path, bad)
    for name, bad in HOSTILE.items():
        yield f"every number = {name}", every_number(template, lambda _x, bad=bad: bad)
    yield "every number * 1e300", every_number(template, lambda x: x * 1e300)
    yield "every number negated", every_number(template, lambda x: -x)


def brute_force_certified_sum(width, height, centers, radii, disk=False):
    """The sum of radii that a packing in [0, width] x [0, height] (or, with ``disk``, the unit
    disk) certainly achieves: each radius minus its circle's largest overhang or overlap (floored
    at 0), all scaled by 2 / (w + h) when w + h > 2 (the rectangle task; pass w + h <= 2 for the
    unit square). Loops, no numpy."""
    n = len(radii)
    shrink = []
    for i, ((x, y), r) in enumerate(zip(centers, radii)):
        s = max(0.0, math.hypot(x, y) + r - 1) if disk else max(0.0, r - x, r - y, x + r - width, y + r - height)
        for j in range(n):
            if j != i:
                (x2, y2), r2 = centers[j], radii[j]
                s = max(s, r + r2 - math.hypot(x - x2, y - y2))
        shrink.append(s)
    total = math.fsum(max(r - s, 0.0) for r, s in zip(radii, shrink))
    return total * min(1.0, 2.0 / (width + height))
