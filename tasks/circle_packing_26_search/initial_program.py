"""Search-form circle packing: improve a packing of 26 circles in the unit square (maximise the sum of radii)."""
import time

import numpy as np
from scipy.optimize import minimize

N = 26
P, Q = np.triu_indices(N, 1)  # circles P[k] and Q[k]: every pair once

try:
    report  # HELIX's sandbox provides report(packing): if time runs out, the last packing reported counts
except NameError:  # run outside the sandbox: nothing to report to
    def report(packing):
        pass


# EVOLVE-BLOCK-START
def start():
    """The constructor task's start: a circle in the centre, rings of 8 and 17 around it."""
    centers = [[0.5, 0.5]]
    for count, ring in ((8, 0.3), (17, 0.45)):
        for k in range(count):
            angle = 2 * np.pi * k / count
            centers.append([0.5 + ring * np.cos(angle), 0.5 + ring * np.sin(angle)])
    return np.clip(centers, 0.01, 0.99)


def fit_radii(centers, radii):
    """Shrink radii until every circle is inside the square and no two overlap."""
    x, y = centers[:, 0], centers[:, 1]
    radii = np.maximum(np.minimum.reduce([radii, x, y, 1 - x, 1 - y]), 0)
    for i, j in zip(P, Q):
        d = np.hypot(x[i] - x[j], y[i] - y[j])
        if radii[i] + radii[j] > d:
            radii[[i, j]] *= d / (radii[i] + radii[j])
    return radii


def polish(centers, radii):
    """One SLSQP run over all centres and radii: maximise sum(r), inside the square, no overlaps."""
    def gaps(z):  # all >= 0 in a valid packing
        x, y, r = z.reshape(3, N)
        pairs = (x[P] - x[Q]) ** 2 + (y[P] - y[Q]) ** 2 - (r[P] + r[Q]) ** 2
        return np.concatenate([x - r, 1 - x - r, y - r, 1 - y - r, pairs])

    z = minimize(lambda z: -z[2 * N:].sum(), np.concatenate([centers.T.ravel(), radii]), method="SLSQP",
                 bounds=[(0, 1)] * (2 * N) + [(0, 0.5)] * N, constraints={"type": "ineq", "fun": gaps},
                 options={"maxiter": 300}).x
    centers = z[:2 * N].reshape(2, N).T
    return centers, fit_radii(centers, z[2 * N:])


def improve(centers, radii, budget_s, rng):
    """Basin hopping: nudge 1-3 circles of the best packing, re-optimise, keep the result if the sum grew."""
    deadline, slowest = time.monotonic() + budget_s, 0.0
    while time.monotonic() + slowest < deadline:  # stop before a hop as slow as the slowest yet would overrun
        began = time.monotonic()
        trial = centers.copy()
        moved = rng.choice(N, size=rng.integers(1, 4), replace=False)
        trial[moved] = np.clip(trial[moved] + rng.normal(0, 0.1, (len(moved), 2)), 0, 1)
        trial, trial_radii = polish(trial, radii)
        if trial_radii.sum() > radii.sum():
            centers, radii = trial, trial_radii
            report(packing(centers, radii))
        slowest = max(slowest, time.monotonic() - began)
    return centers, radii
# EVOLVE-BLOCK-END


def packing(centers, radii):
    return {"centers": centers.tolist(), "radii": radii.tolist()}


def read_packing(construction):
    """(centers, radii) of a packing as the verifier takes it: {"centers", "radii"} or [centers, radii, ...]."""
    if isinstance(construction, dict):
        construction = [construction.get("centers"), construction.get("radii")]
    if not isinstance(construction, (list, tuple)) or len(construction) < 2:
        raise ValueError(f"expected a packing {{'centers': ({N}, 2), 'radii': ({N},)}}, got {type(construction).__name__}")
    centers, radii = np.asarray(construction[0], float), np.asarray(construction[1], float)
    if centers.shape != (N, 2) or radii.shape != (N,):
        raise ValueError(f"expected centers of shape ({N}, 2) and radii of shape ({N},), "
                         f"got {centers.shape} and {radii.shape}")
    if not (np.isfinite(centers).all() and np.isfinite(radii).all()):
        raise ValueError("the packing holds NaN or infinity")
    return centers, radii


def search_packing(construction, budget_s, seed):
    """HELIX calls this with the best packing so far (None on a run's first call), a time budget and a seed."""
    if construction is None:
        centers = start()
        radii = fit_radii(centers, np.full(N, np.inf))
    else:
        centers, radii = read_packing(construction)
        radii = fit_radii(centers, radii)
    report(packing(centers, radii))
    return packing(*improve(centers, radii, budget_s, np.random.default_rng(seed)))
