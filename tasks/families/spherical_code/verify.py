"""Trusted checks for spherical codes (AlphaResearch, appendix D.1): n points on the unit sphere
S^2 in R^3, maximising the minimum pairwise angle theta_min = min_{i<j} arccos(<p_i, p_j>).

What the verifier does, in order:

* The artefact is an (n, 3) array of numbers (or a dict whose "points" is one; any other key,
  such as a reported score, is ignored). Booleans, strings, NaN and infinity are rejected.
* Every row is normalised: p_i / |p_i| (AlphaResearch: "rows normalized"), so only directions
  count and a program cannot gain anything by scaling. A row with |p_i| < MIN_NORM (1e-9) has no
  usable direction and is rejected (the zero vector above all). Norms are computed after dividing
  each row by its largest entry, so rows like [1e300, 1e300, 0] do not overflow; an entry beyond
  +-MAX_ENTRY (1e300) is rejected as absurd, since [1.5e308, 1.5e308, 0] has a norm no float holds.
* Angles are computed as atan2(|p_i x p_j|, <p_i, p_j>), accurate to about 1e-16 rad at every
  angle (arccos loses half the digits near 0 and pi). Two points closer than DUPLICATE_TOL
  (1e-9 rad) are duplicates: the code is rejected, naming the pair.
* The reward is theta_min in radians, recomputed here; nothing the program reports is used.

Nothing the program returns makes this raise.
"""

from __future__ import annotations

import math

import numpy as np

from tasks.base import Verdict, invalid
from tasks.families.circles.verify import best_known, has_bool  # noqa: F401 - best_known re-exported for the task folders

MIN_NORM = 1e-9  # rows shorter than this have no direction: rejected
DUPLICATE_TOL = 1e-9  # radians: two points at a smaller angle are the same point
MAX_ENTRY = 1e300  # beyond this a row's norm may not fit in a float: rejected as absurd


def usage(n: int) -> str:
    return f"run_spherical_code() must return the points as an array of shape ({n}, 3), one point per row"


def normalise(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unit rows, norms) of a finite (n, d) float array, without overflow or underflow."""
    scale = np.abs(points).max(axis=1, keepdims=True)
    safe = np.where(scale > 0, scale, 1.0)
    scaled = points / safe
    norms_scaled = np.sqrt((scaled * scaled).sum(axis=1, keepdims=True))
    norms = (norms_scaled * scale)[:, 0]
    unit = scaled / np.where(norms_scaled > 0, norms_scaled, 1.0)
    return unit, norms


def pairwise_angles(unit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, angle) for every pair i < j of unit vectors in R^3, angle in [0, pi]."""
    iu, ju = np.triu_indices(len(unit), 1)
    a, b = unit[iu], unit[ju]
    dot = np.einsum("ij,ij->i", a, b)
    cross = np.linalg.norm(np.cross(a, b), axis=1)
    return iu, ju, np.arctan2(cross, dot)


def min_angle(points) -> float:
    """theta_min in radians of the rows of ``points`` (any non-zero lengths; they are normalised)."""
    unit, _ = normalise(np.asarray(points, dtype=np.float64))
    return float(pairwise_angles(unit)[2].min())


def _points(returned, n: int, usage_text: str | None = None):
    """A finite float array of shape (n, 3), or (None, why)."""
    usage_text = usage_text or usage(n)
    if isinstance(returned, dict):
        if "points" not in returned:
            return None, f"the returned dict lacks 'points'; {usage_text}"
        returned = returned["points"]
    if returned is None or isinstance(returned, (str, bytes, int, float)):
        return None, f"{usage_text}; got {type(returned).__name__}"
    try:
        arr = np.asarray(returned)
    except (ValueError, TypeError):  # ragged nesting
        return None, f"the points must be a rectangular array of numbers; {usage_text}"
    if arr.dtype.kind not in "iuf":
        what = "booleans" if arr.dtype.kind == "b" else \
            "non-numeric entries (strings, None, ragged lists, integers too large for a float...)"
        return None, f"the points must contain only numbers, got {what}; {usage_text}"
    if arr.shape != (n, 3):
        return None, f"the points must have shape ({n}, 3), got shape {arr.shape}; {usage_text}"
    if has_bool(returned):  # [[1, 0, True], ...] would otherwise pass as 1.0
        return None, f"the points must contain only numbers, got booleans; {usage_text}"
    arr = arr.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(arr).all(axis=1))
    if bad.size:
        return None, f"the points contain NaN or infinity ({bad.size} point(s), first: point {bad[0]})"
    huge = np.flatnonzero((np.abs(arr) > MAX_ENTRY).any(axis=1))
    if huge.size:
        return None, (f"the points hold absurd values ({huge.size} point(s) with an entry beyond +-{MAX_ENTRY:g}, "
                      f"first: point {huge[0]}); only directions count, so scale them down")
    return arr, None


def verify_code(returned, n: int, best: float, usage_text: str | None = None) -> Verdict:
    """The verdict on ``n`` points on S^2: reward theta_min in radians. ``usage_text``: what a
    rejection says the entry function must return (default ``usage(n)``, run_spherical_code's)."""
    points, err = _points(returned, n, usage_text or usage(n))
    if err is not None:
        return invalid(err)
    unit, norms = normalise(points)
    short = np.flatnonzero(norms < MIN_NORM)
    if short.size:
        i = int(short[0])
        return invalid(f"{short.size} point(s) are zero or nearly zero vectors (|p| < {MIN_NORM:g}) and have no "
                       f"direction; first: point {i} has |p| = {norms[i]:.3g}", zero_vectors=float(short.size))
    iu, ju, angles = pairwise_angles(unit)
    k = int(np.argmin(angles))
    i, j, theta = int(iu[k]), int(ju[k]), float(angles[k])
    if theta < DUPLICATE_TOL:
        dup = int((angles < DUPLICATE_TOL).sum())
        return invalid(f"duplicate points: {dup} pair(s) of points coincide after normalisation (angle < "
                       f"{DUPLICATE_TOL:g} rad); first: points {i} and {j}, angle {theta:.3g} rad",
                       duplicate_pairs=float(dup))
    deviation = float(np.max(np.abs(norms - 1.0)))
    metrics = {"min_angle": theta, "min_angle_deg": math.degrees(theta), "max_cos": math.cos(theta),
               "n_points": float(n), "max_norm_deviation": deviation}
    note = f"; rows were normalised (largest | |p| - 1 | = {deviation:.3g})" if deviation > 1e-12 else ""
    feedback = (f"valid code: minimum angle {theta:.6g} rad = {math.degrees(theta):.4f} deg (best known {best:.6f}, "
                f"ratio {theta / best:.4f}); closest pair: points {i} and {j}{note}")
    return Verdict(theta, True, feedback, metrics)
