"""Parent sampling for the next B prompts: high-reward parents are drawn more often (paper, line 8570)."""

from __future__ import annotations

import numpy as np

MODES = ("rank", "uniform")


def parent_weights(rewards: np.ndarray, mode: str = "rank") -> np.ndarray:
    """rank: w_i = 1 / (1 + rank_i) with rank 0 the best (ties share the better rank); uniform: equal."""
    if mode not in MODES:
        raise ValueError(f"unknown parent sampling mode {mode!r}; valid: {list(MODES)}")
    n = len(rewards)
    if mode == "uniform":
        return np.full(n, 1.0 / n)
    r = np.asarray(rewards, dtype=np.float64)
    r = np.where(np.isfinite(r), r, -np.inf)
    ranks = np.array([(r > x).sum() for x in r])  # competition ranking
    w = 1.0 / (1.0 + ranks)
    return w / w.sum()


def sample_parents(rewards: np.ndarray, n: int, rng: np.random.Generator, mode: str = "rank") -> np.ndarray:
    if len(rewards) == 0:
        raise ValueError("cannot sample parents from an empty population")
    return rng.choice(len(rewards), size=n, replace=True, p=parent_weights(rewards, mode))
