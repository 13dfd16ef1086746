"""Trusted checks for circle packing in a rectangle of perimeter 4 (AlphaEvolve appendix B.13,
BES section 5.2 and appendix G.2): n disjoint circles in a rectangle [0, w] x [0, h] of the
program's choice with 2(w + h) <= 4, maximising the sum of radii.

The program returns the rectangle and the circles: a dict {"width": w, "height": h,
"centers": (n, 2), "radii": (n,)}; other keys (a reported sum, say) are ignored and the reward
is recomputed from centres and radii. Every constraint is checked with the absolute tolerance
of the unit-square tasks, TOL = 1e-9 (tasks/families/circles/verify.py):

* w > 0 and h > 0, finite numbers, and w + h <= 2 + TOL (perimeter 2(w + h) <= 4 + 2 TOL);
* r_i >= 0 (strictly: a negative radius is rejected);
* x_i - r_i >= -TOL, x_i + r_i <= w + TOL, y_i - r_i >= -TOL, y_i + r_i <= h + TOL;
* |c_i - c_j| >= r_i + r_j - TOL for i < j.

The tolerances buy nothing: as in the unit-square tasks (tasks/families/circles/verify.py, ``certified_radii``),
each radius counts minus its circle's largest overlap or overhang, and a rectangle with
w + h > 2 (by at most TOL) has its packing scaled by 2 / (w + h), so the reward is the sum of a
packing that meets every constraint exactly. A rejection says which constraint, which circle(s)
and by how much (worst case). Nothing the program returns makes this raise; a side, coordinate
or radius beyond +-LIMIT (1e6) is rejected before any arithmetic. AlphaEvolve's own check takes
the circles' bounding box instead of a stated rectangle; the two agree up to a translation (a
packing valid here has a bounding box inside [0, w] x [0, h]).
"""

from __future__ import annotations

import math

import numpy as np

from tasks.base import Verdict, invalid
from tasks.families.circles.verify import (
    LIMIT,
    TOL,
    as_array,
    best_known,  # noqa: F401 - re-exported for the task folder
    certified_radii,
    charged_feedback,
    invalid_packing,
    overlap_problem,
)

HALF_PERIMETER = 2.0  # w + h <= 2: perimeter 4


def usage(n: int) -> str:
    return (f'run_packing() must return a dict {{"width": w, "height": h, "centers": array of shape ({n}, 2), '
            f'"radii": array of shape ({n},)}} with w + h <= 2')


def _side(value, name: str, usage_text: str):
    """A finite number > 0, or (None, why). Booleans and strings are not numbers."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None, f"{name} must be a number, got {type(value).__name__}; {usage_text}"
    if isinstance(value, int) and abs(value) > LIMIT:  # 10**400 would not even convert to a float
        bound = "> 0" if value < 0 else "at most 2 (w + h <= 2)"
        return None, f"{name} must be {bound}, got an integer of {len(str(abs(value)))} digits"
    value = float(value)
    if not math.isfinite(value):
        return None, f"{name} must be finite, got {value}"
    if value > LIMIT:
        return None, f"{name} must be at most 2 (w + h <= 2), got {value:.6g}"
    if value <= 0:
        return None, f"{name} must be > 0, got {value:.6g}"
    return value, None


def _unpack(returned, n: int, usage_text: str | None = None):
    usage_text = usage_text or usage(n)
    if not isinstance(returned, dict):
        return None, f"{usage_text}; got {type(returned).__name__}"
    missing = [k for k in ("width", "height", "centers", "radii") if k not in returned]
    if missing:
        return None, f"the returned dict lacks {', '.join(missing)}; {usage_text}"
    width, err = _side(returned["width"], "width", usage_text)
    if err is None:
        height, err = _side(returned["height"], "height", usage_text)
    if err is None:
        centers, err = as_array(returned["centers"], (n, 2), "centers", usage_text)
    if err is None:
        radii, err = as_array(returned["radii"], (n,), "radii", usage_text)
    if err is not None:
        return None, err
    return (width, height, centers, radii), None


def _bounds_problem(centers, radii, width: float, height: float):
    """(worst amount, count, text) for circles leaving [0, w] x [0, h], or None."""
    x, y = centers[:, 0], centers[:, 1]
    gaps = np.stack([x - radii, y - radii, width - x - radii, height - y - radii], axis=1)  # each must be >= 0
    out = gaps < -TOL
    if not out.any():
        return None
    i, side = np.unravel_index(int(np.argmin(np.where(out, gaps, np.inf))), gaps.shape)
    edge = ("left edge (x - r < 0)", "bottom edge (y - r < 0)", f"right edge (x + r > w = {width:.6g})",
            f"top edge (y + r > h = {height:.6g})")[side]
    count = int(out.any(axis=1).sum())
    return (-gaps[i, side], count, f"out of bounds: {count} circle(s) leave the rectangle [0, w] x [0, h]; worst: "
                                   f"circle {i} (center ({x[i]:.6g}, {y[i]:.6g}), r={radii[i]:.6g}) crosses the "
                                   f"{edge} by {-gaps[i, side]:.3g}")


def verify_rect_packing(returned, n: int, best: float, usage_text: str | None = None) -> Verdict:
    """The verdict on ``n`` circles in a rectangle [0, w] x [0, h] with w + h <= 2. ``usage_text``:
    what a rejection says the entry function must return (default ``usage(n)``, run_packing's)."""
    parts, err = _unpack(returned, n, usage_text or usage(n))
    if err is not None:
        return invalid(err)
    width, height, centers, radii = parts

    problems = []  # (worst amount, count, text)
    excess = width + height - HALF_PERIMETER
    if excess > TOL:
        problems.append((excess, 1, f"perimeter too large: 2(w + h) = {2 * (width + height):.9g} > 4 "
                                    f"(w = {width:.6g}, h = {height:.6g}; w + h exceeds 2 by {excess:.3g})"))
    neg = np.flatnonzero(radii < 0)
    if neg.size:
        i = int(neg[np.argmin(radii[neg])])
        problems.append((-radii[i], neg.size, f"negative radius: {neg.size} circle(s) have r < 0; "
                                               f"worst: circle {i} has radius {radii[i]:.6g}"))
    problems.append(_bounds_problem(centers, radii, width, height))
    problems.append(overlap_problem(centers, radii))
    verdict = invalid_packing(problems)
    if verdict is not None:
        return verdict

    raw = float(radii.sum())
    x, y = centers[:, 0], centers[:, 1]
    overhang = -np.stack([x - radii, y - radii, width - x - radii, height - y - radii], axis=1).min(axis=1)
    scale = min(1.0, HALF_PERIMETER / (width + height))  # a rectangle too large by <= TOL: shrink it all
    total = scale * float(certified_radii(radii, overhang, centers).sum())
    metrics = {"sum_radii": total, "n_circles": float(n), "width": width, "height": height,
               "perimeter": 2 * (width + height), "min_radius": float(radii.min()), "max_radius": float(radii.max()),
               "tolerance_charge": raw - total}
    feedback = (f"valid packing: sum of radii {total:.6f} (best known {best:.6f}, ratio {total / best:.3f}) in a "
                f"{width:.4f} x {height:.4f} rectangle (perimeter {2 * (width + height):.6f}); "
                f"radii range {radii.min():.4f} to {radii.max():.4f}{charged_feedback(raw, total)}")
    return Verdict(total, True, feedback, metrics)
