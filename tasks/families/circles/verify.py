"""Trusted checks shared by the circle-packing tasks (paper eq. 17-19): n circles in the unit
square or the unit disk, maximising the sum of radii.

The program's own sum of radii is ignored: the reward is recomputed from centres and radii.
Every constraint is checked with an absolute tolerance of 1e-9, and a rejection says which
constraint, which circle(s), by how much (worst case) and how many violations there are, so
the next prompt can fix it. Nothing the program returns makes this raise; a coordinate or
radius beyond +-LIMIT (1e6) is rejected before any arithmetic, so nothing overflows.

The tolerance buys nothing (``certified_radii``): a violation it lets through is charged to the
reward. Each circle's radius counts only after it is shrunk by its own largest violation (how
far it leaves the container, how much it overlaps any other circle), and then r' = max(r - s, 0)
is a packing with no violation at all, so the reward is always the sum of a strictly valid
packing. Without the charge, inflating every radius by TOL / 2 would add n TOL / 2 (1.3e-8 for
n = 26) and could pass off a known record as a new one. An exactly valid packing is charged
nothing; floating-point touching costs ~1e-16 per circle.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from tasks.base import Verdict, invalid

TOL = 1e-9
LIMIT = 1e6  # |coordinate| or radius beyond this cannot be part of a valid packing: rejected up front


def best_known(task_folder: Path) -> float:
    return float(yaml.safe_load((Path(task_folder) / "task.yaml").read_text())["best_known"])


def usage(n: int) -> str:
    return f"run_packing() must return (centers, radii, sum_radii) with centers of shape ({n}, 2) and radii of shape ({n},)"


def as_array(value, shape: tuple, name: str, usage_text: str):
    """A float array of exactly ``shape``, or (None, why). Strings, None and booleans are not numbers."""
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):  # ragged nesting
        return None, f"{name} must be a rectangular array of numbers of shape {shape}; {usage_text}"
    if arr.dtype.kind not in "iuf":
        what = "booleans" if arr.dtype.kind == "b" else \
            "non-numeric entries (strings, None, lists of mixed depth, integers too large for a float...)"
        return None, f"{name} must contain only numbers, got {what}; {usage_text}"
    if arr.shape != shape:
        return None, f"{name} must have shape {shape}, got shape {arr.shape}; {usage_text}"
    if not isinstance(value, np.ndarray) and has_bool(value):  # [0.1, True] would otherwise pass as 1.0
        return None, f"{name} must contain only numbers, got booleans; {usage_text}"
    arr = arr.astype(np.float64)
    rows = arr.reshape(shape[0], -1)
    bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))
    if bad.size:
        return None, f"{name} contains NaN or infinity ({bad.size} circle(s), first: circle {bad[0]})"
    huge = np.flatnonzero((np.abs(rows) > LIMIT).any(axis=1))
    if huge.size:
        i = int(huge[0])
        return None, (f"{name} holds absurd values ({huge.size} circle(s) beyond +-{LIMIT:g}, first: circle {i}, "
                      f"{rows[i].tolist()}); a valid packing lies inside its unit container")
    return arr, None


def has_bool(value) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, (bool, np.bool_)):
            return True
    return False


def _unpack(returned, usage_text: str):
    if isinstance(returned, dict):
        missing = [k for k in ("centers", "radii") if k not in returned]
        if missing:
            return None, None, f"the returned dict lacks {', '.join(missing)}; {usage_text}"
        return returned["centers"], returned["radii"], None
    if isinstance(returned, (list, tuple)) and len(returned) in (2, 3):
        return returned[0], returned[1], None
    got = f"a sequence of length {len(returned)}" if isinstance(returned, (list, tuple)) else type(returned).__name__
    return None, None, f"{usage_text} (or a dict with 'centers' and 'radii'); got {got}"


def _square_excess(centers, radii) -> np.ndarray:
    """How far each circle leaves the unit square (<= 0: inside)."""
    x, y = centers[:, 0], centers[:, 1]
    return -np.stack([x - radii, y - radii, 1 - x - radii, 1 - y - radii], axis=1).min(axis=1)


def _disk_excess(centers, radii) -> np.ndarray:
    """How far each circle leaves the unit disk (<= 0: inside)."""
    return np.hypot(centers[:, 0], centers[:, 1]) + radii - 1.0


EXCESS = {"square": _square_excess, "disk": _disk_excess}


def certified_radii(radii: np.ndarray, excess: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Radii shrunk by each circle's largest tolerated violation: r' = max(r - s, 0) with
    s = max(0, excess_i, max_j overlap_ij). The circles r' neither leave the container
    (excess_i - s <= 0) nor overlap (r_i' + r_j' <= r_i + r_j - overlap_ij = |c_i - c_j|; a
    circle shrunk to 0 is a point, on its neighbour's shrunk rim at most, and counts nothing)."""
    shrink = np.maximum(excess, 0.0)
    iu, ju = np.triu_indices(len(radii), 1)
    overlap = radii[iu] + radii[ju] - np.hypot(centers[iu, 0] - centers[ju, 0], centers[iu, 1] - centers[ju, 1])
    np.maximum.at(shrink, iu, overlap)
    np.maximum.at(shrink, ju, overlap)
    return np.maximum(radii - shrink, 0.0)


def charged_feedback(raw: float, total: float) -> str:
    """The note a charged packing's feedback carries (empty when nothing was charged)."""
    if raw - total <= 1e-12:  # float noise of touching circles: in the reward, not worth a line
        return ""
    return (f"; {raw - total:.3g} of the radii's sum {raw:.10g} was charged for violations within the tolerance "
            "(each radius counts minus its circle's largest overlap or overhang)")


def _square_problem(centers, radii):
    """(worst amount, count, text) for circles leaving the unit square, or None."""
    x, y = centers[:, 0], centers[:, 1]
    gaps = np.stack([x - radii, y - radii, 1 - x - radii, 1 - y - radii], axis=1)  # each must be >= 0
    out = gaps < -TOL
    if not out.any():
        return None
    i, side = np.unravel_index(int(np.argmin(np.where(out, gaps, np.inf))), gaps.shape)
    edge = ("left edge (x - r < 0)", "bottom edge (y - r < 0)", "right edge (x + r > 1)", "top edge (y + r > 1)")[side]
    count = int(out.any(axis=1).sum())
    return (-gaps[i, side], count, f"out of bounds: {count} circle(s) leave the unit square; worst: "
                                   f"circle {i} (center ({x[i]:.6g}, {y[i]:.6g}), r={radii[i]:.6g}) crosses the {edge} "
                                   f"by {-gaps[i, side]:.3g}")


def _disk_problem(centers, radii):
    """(worst amount, count, text) for circles leaving the unit disk centred at the origin, or None."""
    excess = np.hypot(centers[:, 0], centers[:, 1]) + radii - 1.0  # must be <= 0
    out = np.flatnonzero(excess > TOL)
    if not out.size:
        return None
    i = int(out[np.argmax(excess[out])])
    x, y = centers[i]
    return (excess[i], out.size, f"out of bounds: {out.size} circle(s) leave the unit disk; worst: circle {i} "
                                 f"(center ({x:.6g}, {y:.6g}), r={radii[i]:.6g}) has |c| + r = {1 + excess[i]:.6g} > 1, "
                                 f"outside by {excess[i]:.3g}")


CONTAINERS = {"square": _square_problem, "disk": _disk_problem}


def overlap_problem(centers: np.ndarray, radii: np.ndarray):
    """(worst overlap, pairs, text) for the pairs of circles that overlap by more than TOL, or None."""
    x, y = centers[:, 0], centers[:, 1]
    iu, ju = np.triu_indices(len(radii), 1)
    dist = np.hypot(x[iu] - x[ju], y[iu] - y[ju])
    overlap = radii[iu] + radii[ju] - dist  # must be <= 0
    over = np.flatnonzero(overlap > TOL)
    if not over.size:
        return None
    k = int(over[np.argmax(overlap[over])])
    a, b = int(iu[k]), int(ju[k])
    return (overlap[k], over.size, f"overlap: {over.size} pair(s) of circles overlap; worst: circles "
                                   f"{a} and {b} overlap by {overlap[k]:.3g} (distance {dist[k]:.6g} < "
                                   f"r_{a} + r_{b} = {radii[a] + radii[b]:.6g})")


def invalid_packing(problems: list) -> Verdict | None:
    """One invalid verdict listing every (worst amount, count, text) problem, worst first; None
    when there is none (``None`` entries are checks that passed)."""
    problems = sorted((p for p in problems if p is not None), key=lambda p: -p[0])
    if not problems:
        return None
    count = sum(p[1] for p in problems)
    text = f"invalid packing ({count} violation(s), tolerance {TOL:g}): " + "; ".join(p[2] for p in problems)
    return invalid(text, violations=float(count), worst_violation=float(problems[0][0]))


def verify_packing(returned, n: int, container: str, best: float, usage_text: str | None = None) -> Verdict:
    """The verdict on ``n`` circles in the unit ``container`` (square [0,1]^2, or the disk of
    radius 1 at the origin). ``usage_text``: what a rejection says the entry function must return
    (default ``usage(n)``, run_packing's; a search-form task names its own entry)."""
    usage_text = usage_text or usage(n)
    centers, radii, err = _unpack(returned, usage_text)
    if err is None:
        centers, err = as_array(centers, (n, 2), "centers", usage_text)
    if err is None:
        radii, err = as_array(radii, (n,), "radii", usage_text)
    if err is not None:
        return invalid(err)

    problems = []  # (worst amount, count, text)
    neg = np.flatnonzero(radii < 0)
    if neg.size:
        i = int(neg[np.argmin(radii[neg])])
        problems.append((-radii[i], neg.size, f"negative radius: {neg.size} circle(s) have r < 0; "
                                               f"worst: circle {i} has radius {radii[i]:.6g}"))
    problems.append(CONTAINERS[container](centers, radii))
    problems.append(overlap_problem(centers, radii))
    verdict = invalid_packing(problems)
    if verdict is not None:
        return verdict

    raw = float(radii.sum())
    total = float(certified_radii(radii, EXCESS[container](centers, radii), centers).sum())
    metrics = {"sum_radii": total, "n_circles": float(n), "min_radius": float(radii.min()),
               "max_radius": float(radii.max()), "tolerance_charge": raw - total}
    feedback = (f"valid packing: sum of radii {total:.6f} (best known {best:.6f}, ratio {total / best:.3f}); "
                f"radii range {radii.min():.4f} to {radii.max():.4f}{charged_feedback(raw, total)}")
    return Verdict(total, True, feedback, metrics)
