"""Trusted check of a 26-circle packing in the unit square (paper eq. 17-19).

The program's own sum of radii is ignored: the reward is recomputed from centres and radii.
"""

import math

import numpy as np

from tasks.base import Verdict, invalid

N = 26
TOL = 1e-9
BEST_KNOWN = 2.6359830849


def _as_array(value, shape, name):
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None, f"{name} must be numeric, got {type(value).__name__}"
    if arr.shape != shape:
        return None, f"{name} must have shape {shape}, got {arr.shape}"
    if not np.isfinite(arr).all():
        return None, f"{name} contains NaN or infinity"
    return arr, None


def verify(returned) -> Verdict:
    if isinstance(returned, dict):
        centers, radii = returned.get("centers"), returned.get("radii")
    elif isinstance(returned, (list, tuple)) and len(returned) in (2, 3):
        centers, radii = returned[0], returned[1]
    else:
        return invalid(f"run_packing() must return (centers, radii, sum_radii); got {type(returned).__name__}")
    centers, err = _as_array(centers, (N, 2), "centers")
    if err:
        return invalid(err)
    radii, err = _as_array(radii, (N,), "radii")
    if err:
        return invalid(err)
    problems = []
    if (radii < 0).any():
        i = int(np.argmin(radii))
        problems.append((float(-radii[i]), f"circle {i} has negative radius {radii[i]:.6g}"))
    x, y = centers[:, 0], centers[:, 1]
    for label, gap in (("left", x - radii), ("bottom", y - radii), ("right", 1 - x - radii), ("top", 1 - y - radii)):
        i = int(np.argmin(gap))
        if gap[i] < -TOL:
            problems.append((float(-gap[i]), f"circle {i} crosses the {label} edge by {-gap[i]:.3g}"))
    diff = centers[:, None, :] - centers[None, :, :]
    dist = np.sqrt((diff ** 2).sum(-1))
    overlap = radii[:, None] + radii[None, :] - dist
    iu = np.triu_indices(N, 1)
    pair = overlap[iu]
    n_overlaps = int((pair > TOL).sum())
    if n_overlaps:
        k = int(np.argmax(pair))
        problems.append((float(pair[k]), f"{n_overlaps} overlapping pairs; worst: circles {iu[0][k]} and {iu[1][k]} overlap by {pair[k]:.3g}"))
    if problems:
        problems.sort(reverse=True)
        text = "invalid packing: " + "; ".join(p for _, p in problems[:4])
        return invalid(text, violations=float(len(problems)), worst_violation=problems[0][0])
    total = float(radii.sum())
    if not math.isfinite(total):
        return invalid("sum of radii is not finite")
    metrics = {"sum_radii": total, "n_circles": float(N), "min_radius": float(radii.min()), "max_radius": float(radii.max())}
    feedback = f"valid packing: sum of radii {total:.6f} (best known {BEST_KNOWN}, ratio {total / BEST_KNOWN:.3f}); smallest radius {radii.min():.4f}, largest {radii.max():.4f}"
    return Verdict(total, True, feedback, metrics)
