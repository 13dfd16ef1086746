"""The k largest similarities of each row: the one partial sort that kNN diversity's exact path
(population.diversity) and its bf16 prefilter (population.knn_bf16) share, in a module of its own
so neither imports the other at load time."""

from __future__ import annotations

import numpy as np


def topk_rows(sims: np.ndarray, k: int) -> np.ndarray:
    """The k largest entries of each row, descending, padded with -inf."""
    n, width = sims.shape
    if width < k:
        sims = np.concatenate([sims, np.full((n, k - width), -np.inf, dtype=sims.dtype)], axis=1)
        width = k
    part = np.partition(sims, width - k, axis=1)[:, width - k :]
    return -np.sort(-part, axis=1)
