"""Search-form spherical code: improve 30 points on the unit sphere (maximise the smallest angle between two)."""
import time

import numpy as np
from scipy.optimize import minimize

N = 30
P, Q = np.triu_indices(N, 1)  # points P[k] and Q[k]: every pair once

try:
    report  # HELIX's sandbox provides report(points): if time runs out, the last points reported count
except NameError:  # run outside the sandbox: nothing to report to
    def report(points):
        pass


# EVOLVE-BLOCK-START
def start():
    """The constructor task's start: a Fibonacci spiral, evenly spread in height, turning by the golden angle."""
    i = np.arange(N) + 0.5
    z = 1 - 2 * i / N
    phi = np.pi * (1 + np.sqrt(5)) * i
    r = np.sqrt(1 - z * z)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def largest_cos(points):
    """The cosine of the smallest angle between two points: lower is better."""
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    return np.max(np.sum(unit[P] * unit[Q], axis=1))


def polish(points):
    """One SLSQP run: minimise t subject to cos(angle) <= t for every pair (points normalised inside)."""
    def gaps(z):  # all >= 0 when no pair is closer than angle arccos(t)
        unit = z[:-1].reshape(N, 3)
        unit = unit / np.linalg.norm(unit, axis=1, keepdims=True)
        return z[-1] - np.sum(unit[P] * unit[Q], axis=1)

    z = minimize(lambda z: z[-1], np.append(points.ravel(), largest_cos(points)), method="SLSQP",
                 constraints={"type": "ineq", "fun": gaps}, options={"maxiter": 300}).x
    points = z[:-1].reshape(N, 3)
    return points / np.linalg.norm(points, axis=1, keepdims=True)


def improve(points, budget_s, rng):
    """Basin hopping: nudge 1-3 points of the best code, re-optimise, keep the result if the angle grew."""
    deadline, slowest = time.monotonic() + budget_s, 0.0
    while time.monotonic() + slowest < deadline:  # stop before a hop as slow as the slowest yet would overrun
        began = time.monotonic()
        trial = points.copy()
        moved = rng.choice(N, size=rng.integers(1, 4), replace=False)
        trial[moved] += rng.normal(0, 0.1, (len(moved), 3))
        trial = polish(trial)
        if largest_cos(trial) < largest_cos(points):
            points = trial
            report(points.tolist())
        slowest = max(slowest, time.monotonic() - began)
    return points
# EVOLVE-BLOCK-END


def read_points(construction):
    """The points of a code as the verifier takes it: an (N, 3) list, or {"points": ...}."""
    if isinstance(construction, dict):
        construction = construction.get("points")
    points = np.asarray(construction, float)
    if points.shape != (N, 3):
        raise ValueError(f"expected points of shape ({N}, 3), got shape {points.shape}")
    norms = np.linalg.norm(points, axis=1, keepdims=True)
    if not (np.isfinite(points).all() and norms.min() > 0):
        raise ValueError("every point needs finite coordinates and a nonzero length")
    return points / norms


def search_code(construction, budget_s, seed):
    """HELIX calls this with the best code so far (None on a run's first call), a time budget and a seed."""
    points = start() if construction is None else read_points(construction)
    report(points.tolist())
    return improve(points, budget_s, np.random.default_rng(seed)).tolist()
