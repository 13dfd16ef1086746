"""kNN embedding diversity, paper eq. 6: Div(s_i) = 1 - mean cosine similarity to its k nearest
neighbours among all solutions ever generated, itself excluded.

Pure numpy on L2-normalised rows (cosine = dot product). Conventions, chosen so the score is
always finite and defined:
- fewer than k others: the mean runs over all the others there are;
- no others at all (a lone solution, or an empty base): Div = 1.0, maximally novel;
- a zero vector stays zero after normalisation: cosine 0 to everything, never NaN;
- exact duplicates have cosine 1, so k duplicates give Div = 0.

``KnnIndex`` keeps every item's current top-k similarities, so adding m items to an archive
of N costs one m x N product (O(m N d)), never the N x N one. From ``BF16_MIN_ROWS`` archived
rows on, on a CPU with native bf16, that product is prefiltered in bf16 and rescored in fp32
(population/knn_bf16.py): the same lists, ~3x faster at 10^6.
"""

from __future__ import annotations

import numpy as np

from population.topk import topk_rows

_BLOCK_ELEMS = 1 << 25  # similarity-block budget (float32): 128 MiB whatever the archive size
BF16_MIN_ROWS = 1 << 16  # archive size from which KnnIndex prefilters in bf16 (where bf16 is native)


def normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float32). Non-finite input is a bug upstream: say so."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D (n, d) array, got shape {x.shape}")
    if not np.isfinite(x).all():
        bad = np.flatnonzero(~np.isfinite(x).all(axis=1))
        raise ValueError(f"embeddings contain NaN or inf in rows {bad[:10].tolist()}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)  # a zero vector stays zero: similarity 0, never NaN


def div_from_topk(topk: np.ndarray) -> np.ndarray:
    """1 - mean over the finite entries of each row (-inf pads absent neighbours); none: 1.0."""
    finite = np.isfinite(topk)
    count = finite.sum(1)
    total = np.where(finite, topk, 0.0).sum(1)
    return np.where(count > 0, 1.0 - total / np.maximum(count, 1), 1.0)


def _check_k(k: int) -> int:
    if int(k) != k or k < 1:
        raise ValueError(f"k (population.knn_k) must be an integer >= 1, got {k!r}")
    return int(k)


def knn_diversity(query: np.ndarray, base: np.ndarray, k: int, self_index: np.ndarray | None = None,
                  chunk: int = 4096) -> np.ndarray:
    """Eq. 6 for each query row against ``base``, exactly, by blocked matrix products.

    ``self_index[i]`` is the row of query i inside ``base`` (excluded from its neighbours); without
    it every base row counts. ``chunk`` bounds the query rows per block; blocks are further
    shrunk so one block never exceeds ~128 MiB however large the base is.
    """
    k = _check_k(k)
    q, b = normalise(query), normalise(base)
    if len(q) and len(b) and q.shape[1] != b.shape[1]:
        raise ValueError(f"query dimension {q.shape[1]} differs from base dimension {b.shape[1]}")
    if self_index is not None:
        self_index = np.asarray(self_index, dtype=np.int64).reshape(-1)
        if len(self_index) != len(q):
            raise ValueError(f"self_index has {len(self_index)} entries for {len(q)} queries")
        if len(self_index) and (self_index.min() < 0 or self_index.max() >= len(b)):
            raise ValueError(f"self_index must lie in [0, {len(b)}), got range "
                             f"[{self_index.min()}, {self_index.max()}]")
    step = max(1, min(int(chunk), _BLOCK_ELEMS // max(len(b), 1)))
    out = np.empty(len(q), dtype=np.float64)
    for start in range(0, len(q), step):
        sims = q[start : start + step] @ b.T if len(b) else np.zeros((len(q[start : start + step]), 0), np.float32)
        if self_index is not None:
            sims[np.arange(len(sims)), self_index[start : start + step]] = -np.inf
        out[start : start + step] = div_from_topk(topk_rows(sims, k).astype(np.float64))
    return out


def nearest(queries: np.ndarray, base: np.ndarray, base_normalised: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Each query's highest cosine similarity to a ``base`` row and that row, exactly, in blocks of
    base rows (bounded memory at any archive size). An empty base: similarity -inf, row -1.
    ``base_normalised``: its rows are unit already (a kNN index's), so no normalised copy is made."""
    q = normalise(queries)
    best = np.full(len(q), -np.inf, np.float64)
    rows = np.full(len(q), -1, np.int64)
    if len(q) == 0 or len(base) == 0:
        return best, rows
    if q.shape[1] != np.shape(base)[1]:
        raise ValueError(f"query dimension {q.shape[1]} differs from base dimension {np.shape(base)[1]}")
    step = max(1, _BLOCK_ELEMS // len(q))
    for start in range(0, len(base), step):
        block = base[start : start + step]
        sims = q @ (np.asarray(block, np.float32) if base_normalised else normalise(block)).T
        arg = sims.argmax(axis=1)
        top = sims[np.arange(len(q)), arg].astype(np.float64)
        better = top > best  # ties keep the earlier row: the first program with that embedding
        best[better], rows[better] = top[better], start + arg[better]
    return np.minimum(best, 1.0), rows


class KnnIndex:
    """Exact, incremental: every item's top-k neighbour similarities, updated as items arrive.

    ``diversity()`` equals ``knn_diversity(all, all, k, self_index=arange(N))`` at all times.
    """

    def __init__(self, k: int, bf16_min_rows: int | None = BF16_MIN_ROWS):
        """``bf16_min_rows``: archive size from which to prefilter in bf16 when the CPU has native
        bf16 (None: never)."""
        self.k = _check_k(k)
        self._emb = np.zeros((0, 0), dtype=np.float32)  # capacity grows in 25% steps (amortised O(1) a row); rows [:n] are live
        self._n = 0
        self.topk = np.zeros((0, self.k), dtype=np.float32)  # descending, -inf where fewer than k others
        self.bf16_min_rows = bf16_min_rows
        self._shadow = None  # knn_bf16.Bf16Shadow, made on the first prefiltered add

    @classmethod
    def from_state(cls, k: int, emb: np.ndarray, topk: np.ndarray, bf16_min_rows: int | None = BF16_MIN_ROWS) -> "KnnIndex":
        """Rebuild from saved normalised embeddings and their top-k neighbour similarities."""
        emb = np.array(emb, dtype=np.float32)
        if emb.ndim != 2 or np.shape(topk) != (len(emb), k):
            raise ValueError(f"need emb (N, d) and topk (N, {k}); got {emb.shape} and {np.shape(topk)}")
        index = cls(k, bf16_min_rows)
        index._emb = emb
        index._n = len(emb)
        index.topk = np.array(topk, dtype=np.float32)
        return index

    @property
    def emb(self) -> np.ndarray:
        """The live normalised embeddings, (N, d)."""
        return self._emb[: self._n]

    @property
    def dim(self) -> int | None:
        return self._emb.shape[1] if self._n else None

    def __len__(self) -> int:
        return self._n

    def _append(self, new: np.ndarray) -> None:
        need = self._n + len(new)
        if need > len(self._emb) or self._emb.shape[1] != new.shape[1]:
            grown = np.zeros((max(need, len(self._emb) + len(self._emb) // 4, 1024), new.shape[1]), dtype=np.float32)
            if self._n:
                grown[: self._n] = self._emb[: self._n]
            self._emb = grown
        self._emb[self._n : need] = new
        self._n = need

    def add(self, emb: np.ndarray, batch: int = 2048, chunk: int = 16384) -> None:
        """Add m items: their top-k against everything, and old items' top-k against them.

        ``batch`` caps newcomers per step and ``chunk`` old items per block, bounding memory to
        batch x chunk similarities even when a whole archive is re-added at once."""
        new = normalise(emb)
        if len(new) == 0:
            return
        if self._n and new.shape[1] != self._emb.shape[1]:
            raise ValueError(f"embedding dimension {new.shape[1]} differs from the index's {self._emb.shape[1]}")
        for start in range(0, len(new), batch):
            self._add(new[start : start + batch], chunk)

    def _prefilter(self) -> bool:
        if self.bf16_min_rows is None or self._n < max(self.bf16_min_rows, 1):
            return False
        if self._shadow is None:
            from population.knn_bf16 import Bf16Shadow, bf16_native

            if not bf16_native():
                self.bf16_min_rows = None  # emulated bf16 is slower than fp32: never try again
                return False
            self._shadow = Bf16Shadow()
        return True

    def _add(self, new: np.ndarray, chunk: int) -> None:
        if self._prefilter():
            from population.knn_bf16 import add_prefiltered

            new_topk = add_prefiltered(self.emb, self.topk, self._shadow, new, self.k, chunk)
            self._append(new)
            self.topk = np.concatenate([self.topk, new_topk.astype(np.float32)])
            return
        inner = new @ new.T
        np.fill_diagonal(inner, -np.inf)  # an item is never its own neighbour
        new_topk = topk_rows(inner, self.k)
        for start in range(0, self._n, chunk):
            block = new @ self._emb[start : min(start + chunk, self._n)].T  # (m, c)
            new_topk = topk_rows(np.concatenate([new_topk, block], 1), self.k)
            # Only old items whose best newcomer beats their current k-th neighbour change.
            rows = np.flatnonzero(block.max(axis=0) > self.topk[start : start + block.shape[1], -1])
            if rows.size:
                old = self.topk[start + rows]
                self.topk[start + rows] = topk_rows(np.concatenate([old, block[:, rows].T], 1), self.k)
        self._append(new)
        self.topk = np.concatenate([self.topk, new_topk.astype(np.float32)])

    def nearest(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each query's highest cosine similarity to an indexed item and that item's row (the novelty
        gate, population/novelty.py), exactly; read-only, so safe while no item is being added."""
        return nearest(queries, self.emb, base_normalised=True)

    def diversity(self) -> np.ndarray:
        """Eq. 6 for every item added so far, (N,) float64."""
        return div_from_topk(self.topk.astype(np.float64))

    def state_dict(self) -> dict[str, np.ndarray]:
        """Arrays that ``from_state`` restores bit-for-bit (a checkpoint; re-adding could round differently)."""
        return {"emb": self.emb.copy(), "topk": self.topk.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        restored = KnnIndex.from_state(self.k, state["emb"], state["topk"])
        self._emb, self._n, self.topk = restored._emb, restored._n, restored.topk
        self._shadow = None  # rebuilt from the restored rows on the next prefiltered add
