"""Parent sampling for the next B prompts: high-reward parents are drawn more often (paper, line 8570).

``rank`` weights a parent by its reward rank, not by the reward itself, so the pressure does
not depend on the reward's scale or sign (circle packing sums vs -log10 NMSE):

    w_i = 1 / (kappa + rank_i),  kappa = 1,  rank_i = #{j : R_j > R_i}  (0 = best)

Equal rewards share the better rank; NaN counts as the worst reward. With P distinct rewards
the best parent is drawn P / H_P times as often as under uniform sampling (H_P = 1 + 1/2 + ...
+ 1/P): about 2.9x for P = 8, 7.9x for P = 32.
``uniform`` draws every member equally (an ablation).
``puct`` is TTT-Discover's rule, which needs what each member's descendants reached: population/puct.py,
run by train/loop/evolution.py with the lineage statistics it keeps (population/lineage_stats.py).
"""

from __future__ import annotations

import numpy as np

MODES = ("rank", "uniform")  # the weightings below
PARENT_SAMPLING = MODES + ("puct",)  # population.parent_sampling
KAPPA = 1.0


def parent_weights(rewards: np.ndarray, mode: str = "rank") -> np.ndarray:
    """Sampling probability of each population member (sums to 1)."""
    if mode not in MODES:
        raise ValueError(f"unknown parent sampling mode {mode!r}; valid: {list(MODES)}")
    r = np.asarray(rewards, dtype=np.float64).reshape(-1)
    n = len(r)
    if n == 0:
        raise ValueError("cannot sample parents from an empty population")
    if mode == "uniform":
        return np.full(n, 1.0 / n)
    r = np.where(np.isnan(r), -np.inf, r)
    ranks = n - np.searchsorted(np.sort(r), r, side="right")  # how many are strictly better
    w = 1.0 / (KAPPA + ranks)
    return w / w.sum()


def sample_parents(rewards: np.ndarray, n: int, rng: np.random.Generator, mode: str = "rank") -> np.ndarray:
    """``n`` population indices drawn with replacement; the same rng state gives the same parents."""
    if n < 0:
        raise ValueError(f"number of parents must be >= 0, got {n}")
    p = parent_weights(rewards, mode)
    return rng.choice(len(p), size=n, replace=True, p=p).astype(np.int64)
