"""Search-form third autocorrelation inequality: improve step heights a of f on [-1/4, 1/4], minimising
C = max|f*f| / (integral f)^2 = 2n max|np.convolve(a, a)| / (sum a)^2."""
import time

import numpy as np
from scipy.optimize import minimize

try:
    report  # HELIX's sandbox provides report(heights): if time runs out, the last heights reported count
except NameError:  # run outside the sandbox: nothing to report to
    def report(heights):
        pass


# EVOLVE-BLOCK-START
def start():
    """The constructor task's start: a constant function on 20 equal steps (C = 2)."""
    return np.ones(20)


def bound(heights):
    """C = 2n max|a * a| / (sum a)^2: lower is better."""
    return 2 * len(heights) * np.max(np.abs(np.convolve(heights, heights))) / np.sum(heights) ** 2


def polish(heights):
    """One SLSQP run: minimise t subject to |a * a| <= t everywhere and sum(a) = 1."""
    n = len(heights)

    def gaps(z):  # all >= 0 when every |c_m| <= t
        c = np.convolve(z[:n], z[:n])
        return np.concatenate([z[n] - c, z[n] + c])

    a = heights / np.sum(heights)
    z = minimize(lambda z: z[n], np.append(a, np.max(np.abs(np.convolve(a, a)))), method="SLSQP",
                 constraints=[{"type": "ineq", "fun": gaps}, {"type": "eq", "fun": lambda z: np.sum(z[:n]) - 1}],
                 options={"maxiter": 100}).x  # at 160 steps an iteration costs tens of milliseconds
    return z[:n]


def improve(heights, budget_s, rng):
    """Basin hopping: nudge a few heights of the best function, re-optimise, keep the result if C fell."""
    deadline, slowest = time.monotonic() + budget_s, 0.0
    if len(heights) < 160:  # twice as many steps of half the width: the same f, so the same C, but finer
        heights = np.repeat(heights, 2)
        report(heights.tolist())
    while time.monotonic() + slowest < deadline:  # stop before a hop as slow as the slowest yet would overrun
        began = time.monotonic()
        trial = heights / np.sum(heights)
        moved = rng.choice(len(trial), size=rng.integers(1, 4), replace=False)
        trial[moved] += rng.normal(0, 0.5 / len(trial), len(moved))
        trial = polish(trial)
        if np.isfinite(trial).all() and np.sum(trial) > 0 and bound(trial) < bound(heights):
            heights = trial
            report(heights.tolist())
        slowest = max(slowest, time.monotonic() - began)
    return heights
# EVOLVE-BLOCK-END


def read_heights(construction):
    """The heights as the verifier takes them: a list of 1 to 1000 finite numbers with a nonzero sum."""
    if not isinstance(construction, (list, tuple)):
        raise ValueError(f"expected a list of 1 to 1000 heights, got {type(construction).__name__}")
    heights = np.asarray(construction, float)
    if heights.ndim != 1 or not 1 <= len(heights) <= 1000:
        raise ValueError(f"expected a list of 1 to 1000 heights, got shape {heights.shape}")
    if not (np.isfinite(heights).all() and np.sum(heights) != 0):
        raise ValueError("the heights need to be finite numbers with a nonzero sum")
    return heights


def search_heights(construction, budget_s, seed):
    """HELIX calls this with the best heights so far (None on a run's first call), a time budget and a seed."""
    heights = start() if construction is None else read_heights(construction)
    report(heights.tolist())
    return improve(heights, budget_s, np.random.default_rng(seed)).tolist()
