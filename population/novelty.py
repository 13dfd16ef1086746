"""The novelty gate's arithmetic (``evolution.novelty_threshold``): how close a child's embedding is
to the programs it is checked against, and whether that is close enough to skip running it.

Pure numpy, kept apart from the loop that embeds and gates (train/loop/novelty.py) so it can be
tested on planted vectors; the nearest indexed program comes from the kNN index (``nearest``,
population/diversity.py, population/ann.py). Similarity is cosine: rows are L2-normalised first
(the embedder's are unit already, a stored or planted vector need not be), then dot products.
"""

from __future__ import annotations

import numpy as np

from population.diversity import normalise

# Identical float32 embeddings give dot products a few ulps off 1 (1.0000001 is typical for MiniLM's
# unit rows): a similarity this close to the threshold counts as reaching it, so a threshold of 1.0
# means "the same embedding" rather than "a rounding error larger than 1". Far below the smallest
# gap measured between distinct programs' embeddings (cosine 0.99985 for a one-digit edit).
TOLERANCE = 1e-6


def check_threshold(threshold: float) -> float:
    """0 turns the gate off; otherwise a cosine in (0, 1]. Anything else is a mistake, said so."""
    t = float(threshold)
    if not 0.0 <= t <= 1.0:
        raise ValueError(f"novelty threshold must be 0 (off) or a cosine similarity in (0, 1], got {threshold!r}")
    return t


def is_near(similarity: np.ndarray, threshold: float) -> np.ndarray:
    """True where ``similarity`` reaches ``threshold`` (within TOLERANCE); nowhere with the gate off (0)."""
    similarity = np.asarray(similarity, np.float64)
    if check_threshold(threshold) == 0.0:
        return np.zeros(similarity.shape, bool)
    return similarity >= threshold - TOLERANCE


def pairwise(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of row i of ``a`` with row i of ``b`` (a child and its parent), at most 1."""
    if len(a) != len(b):
        raise ValueError(f"pairwise similarity of {len(a)} rows with {len(b)}")
    if len(a) == 0:
        return np.zeros(0, np.float64)
    return np.minimum(np.einsum("ij,ij->i", normalise(a), normalise(b)).astype(np.float64), 1.0)
