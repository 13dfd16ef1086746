"""Search-form circle packing: improve 21 circles in a rectangle of perimeter 4 (maximise the sum of radii)."""
import time

import numpy as np
from scipy.optimize import minimize

N = 21
P, Q = np.triu_indices(N, 1)  # circles P[k] and Q[k]: every pair once

try:
    report  # HELIX's sandbox provides report(packing): if time runs out, the last packing reported counts
except NameError:  # run outside the sandbox: nothing to report to
    def report(packing):
        pass


# EVOLVE-BLOCK-START
def start():
    """The constructor task's start: a 1 x 1 square, 21 circles on a 5 x 5 grid, each radius the distance
    to the nearest wall or half the distance to the nearest other centre."""
    centers = np.array([[0.1 + 0.2 * (k % 5), 0.1 + 0.2 * (k // 5)] for k in range(N)])
    d = np.linalg.norm(centers[:, None] - centers[None], axis=2)
    np.fill_diagonal(d, np.inf)
    x, y = centers[:, 0], centers[:, 1]
    return 1.0, centers, np.min([x, y, 1 - x, 1 - y, d.min(axis=1) / 2], axis=0)


def fit_radii(width, centers, radii):
    """Shrink radii until every circle is inside the width x (2 - width) rectangle and no two overlap."""
    x, y = centers[:, 0], centers[:, 1]
    radii = np.maximum(np.minimum.reduce([radii, x, y, width - x, 2 - width - y]), 0)
    for i, j in zip(P, Q):
        d = np.hypot(x[i] - x[j], y[i] - y[j])
        if radii[i] + radii[j] > d:
            radii[[i, j]] *= d / (radii[i] + radii[j])
    return radii


def polish(width, centers, radii):
    """One SLSQP run over the width, all centres and radii: maximise sum(r) with height = 2 - width."""
    def gaps(z):  # all >= 0 in a valid packing
        x, y, r, w = z[:N], z[N:2 * N], z[2 * N:3 * N], z[-1]
        pairs = (x[P] - x[Q]) ** 2 + (y[P] - y[Q]) ** 2 - (r[P] + r[Q]) ** 2
        return np.concatenate([x - r, w - x - r, y - r, 2 - w - y - r, pairs])

    z = minimize(lambda z: -z[2 * N:3 * N].sum(), np.concatenate([centers.T.ravel(), radii, [width]]),
                 method="SLSQP", bounds=[(0, 2)] * (2 * N) + [(0, 1)] * N + [(0.1, 1.9)],
                 constraints={"type": "ineq", "fun": gaps}, options={"maxiter": 300}).x
    centers = z[:2 * N].reshape(2, N).T
    return z[-1], centers, fit_radii(z[-1], centers, z[2 * N:3 * N])


def improve(width, centers, radii, budget_s, rng):
    """Basin hopping: nudge 1-3 circles of the best packing, re-optimise, keep the result if the sum grew."""
    deadline, slowest = time.monotonic() + budget_s, 0.0
    while time.monotonic() + slowest < deadline:  # stop before a hop as slow as the slowest yet would overrun
        began = time.monotonic()
        trial = centers.copy()
        moved = rng.choice(N, size=rng.integers(1, 4), replace=False)
        trial[moved] = np.clip(trial[moved] + rng.normal(0, 0.1, (len(moved), 2)), 0, [width, 2 - width])
        trial_width, trial, trial_radii = polish(width, trial, radii)
        if trial_radii.sum() > radii.sum():
            width, centers, radii = trial_width, trial, trial_radii
            report(packing(width, centers, radii))
        slowest = max(slowest, time.monotonic() - began)
    return width, centers, radii
# EVOLVE-BLOCK-END


def packing(width, centers, radii):
    return {"width": float(width), "height": 2 - float(width), "centers": centers.tolist(), "radii": radii.tolist()}


def read_packing(construction):
    """(width, centers, radii) of a packing {"width", "height", "centers", "radii"}; the height is taken as
    2 - width, the largest the perimeter allows."""
    if not isinstance(construction, dict) or not {"width", "centers", "radii"} <= set(construction):
        raise ValueError(f"expected a packing {{'width', 'height', 'centers': ({N}, 2), 'radii': ({N},)}}, "
                         f"got {type(construction).__name__}")
    width = float(construction["width"])
    centers, radii = np.asarray(construction["centers"], float), np.asarray(construction["radii"], float)
    if centers.shape != (N, 2) or radii.shape != (N,):
        raise ValueError(f"expected centers of shape ({N}, 2) and radii of shape ({N},), "
                         f"got {centers.shape} and {radii.shape}")
    if not (0 < width < 2 and np.isfinite(centers).all() and np.isfinite(radii).all()):
        raise ValueError(f"the packing needs 0 < width < 2 and finite centres and radii (width {width})")
    return width, centers, radii


def search_packing(construction, budget_s, seed):
    """HELIX calls this with the best packing so far (None on a run's first call), a time budget and a seed."""
    if construction is None:
        width, centers, radii = start()
    else:
        width, centers, radii = read_packing(construction)
        radii = fit_radii(width, centers, radii)
    report(packing(width, centers, radii))
    return packing(*improve(width, centers, radii, budget_s, np.random.default_rng(seed)))
