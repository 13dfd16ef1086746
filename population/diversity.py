"""kNN embedding diversity, paper eq. 6: Div(s_i) = 1 - mean cosine similarity to its k nearest
neighbours among all solutions ever generated, itself excluded.

Pure numpy on L2-normalised rows. ``KnnIndex`` keeps every item's current top-k similarities,
so adding m items to an archive of N costs one m x N product, not N x N.
"""

from __future__ import annotations

import numpy as np


def normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)  # a zero vector stays zero: similarity 0, never NaN


def _div_from_topk(topk: np.ndarray) -> np.ndarray:
    """Mean over the finite entries of each row; a solution with no neighbours at all gets 1.0."""
    finite = np.isfinite(topk)
    count = finite.sum(1)
    total = np.where(finite, topk, 0.0).sum(1)
    return np.where(count > 0, 1.0 - total / np.maximum(count, 1), 1.0)


def _topk_rows(sims: np.ndarray, k: int) -> np.ndarray:
    """The k largest entries of each row, descending, padded with -inf."""
    n, width = sims.shape
    if width < k:
        sims = np.concatenate([sims, np.full((n, k - width), -np.inf, dtype=sims.dtype)], axis=1)
        width = k
    part = np.partition(sims, width - k, axis=1)[:, width - k :]
    return -np.sort(-part, axis=1)


def knn_diversity(query: np.ndarray, base: np.ndarray, k: int, self_index: np.ndarray | None = None,
                  chunk: int = 4096) -> np.ndarray:
    q, b = normalise(query), normalise(base)
    out = np.empty(len(q), dtype=np.float64)
    for start in range(0, len(q), chunk):
        sims = q[start : start + chunk] @ b.T
        if self_index is not None:
            rows = np.arange(len(sims))
            sims[rows, np.asarray(self_index[start : start + chunk])] = -np.inf
        out[start : start + chunk] = _div_from_topk(_topk_rows(sims, k))
    return out


class KnnIndex:
    """Exact, incremental: every item's top-k neighbour similarities, updated as items arrive."""

    def __init__(self, k: int):
        self.k = k
        self._emb = np.zeros((0, 0), dtype=np.float32)  # capacity grows by doubling; rows [:n] are live
        self._n = 0
        self.topk = np.zeros((0, k), dtype=np.float32)

    @classmethod
    def from_state(cls, k: int, emb: np.ndarray, topk: np.ndarray) -> "KnnIndex":
        """Rebuild from saved normalised embeddings and their top-k neighbour similarities."""
        if topk.shape != (len(emb), k):
            raise ValueError(f"topk must have shape {(len(emb), k)}, got {topk.shape}")
        index = cls(k)
        index._emb = np.array(emb, dtype=np.float32)
        index._n = len(emb)
        index.topk = np.asarray(topk, dtype=np.float32)
        return index

    @property
    def emb(self) -> np.ndarray:
        return self._emb[: self._n]

    def __len__(self) -> int:
        return self._n

    def _append(self, new: np.ndarray) -> None:
        need = self._n + len(new)
        if need > len(self._emb):
            grown = np.zeros((max(need, 2 * len(self._emb), 1024), new.shape[1]), dtype=np.float32)
            if self._n:
                grown[: self._n] = self.emb
            self._emb = grown
        self._emb[self._n : need] = new
        self._n = need

    def add(self, emb: np.ndarray, batch: int = 2048, chunk: int = 16384) -> None:
        new = normalise(emb)
        for start in range(0, len(new), batch):  # bounded memory for a big batch (e.g. a rebuild)
            self._add(new[start : start + batch], chunk)

    def _add(self, new: np.ndarray, chunk: int) -> None:
        inner = new @ new.T
        np.fill_diagonal(inner, -np.inf)
        new_topk = _topk_rows(inner, self.k)
        for start in range(0, self._n, chunk):
            block = new @ self._emb[start : min(start + chunk, self._n)].T  # (m, c)
            new_topk = _topk_rows(np.concatenate([new_topk, block], 1), self.k)
            # Only old items whose best newcomer beats their current k-th neighbour change.
            rows = np.flatnonzero(block.max(axis=0) > self.topk[start : start + block.shape[1], -1])
            if rows.size:
                old = self.topk[start + rows]
                self.topk[start + rows] = _topk_rows(np.concatenate([old, block[:, rows].T], 1), self.k)
        self._append(new)
        self.topk = np.concatenate([self.topk, new_topk.astype(np.float32)])

    def diversity(self) -> np.ndarray:
        return _div_from_topk(self.topk.astype(np.float64))


def make_knn_index(kind: str, k: int):
    """``exact`` (default, chunked matrix products) or ``faiss`` (HNSW, for very large archives)."""
    if kind == "exact":
        return KnnIndex(k)
    if kind == "faiss":
        from population.ann import FaissKnnIndex

        return FaissKnnIndex(k)
    raise ValueError(f"unknown knn index {kind!r}; valid: exact, faiss")
