"""Approximate kNN diversity for very large archives (``population.knn_index: faiss``).

Same interface as ``diversity.KnnIndex``. New items find their neighbours with an HNSW search
(inner product on unit vectors = cosine) plus the exact new-vs-new block. Old items' lists are
updated in reverse from those same searches: an old item learns of a newcomer only if it is
among that newcomer's ``reverse_k`` nearest. Both approximations are measured against the
exact index by ``scripts/bench/bench_population.py`` (recall of the top-k similarities, Div error).
"""

from __future__ import annotations

import numpy as np

from population.diversity import div_from_topk, normalise
from population.topk import topk_rows


class FaissKnnIndex:
    def __init__(self, k: int, hnsw_m: int = 32, ef_search: int = 128, reverse_k: int | None = None):
        try:
            import faiss
        except ImportError as exc:
            raise ImportError("population.knn_index = faiss needs faiss-cpu: bash scripts/setup.sh --ann "
                              "(or pip install faiss-cpu)") from exc
        self.faiss = faiss
        self.k = k
        self.hnsw_m = hnsw_m
        self.ef_search = ef_search
        self.reverse_k = reverse_k or 4 * k
        self.index = None
        self.topk = np.zeros((0, k), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.topk)

    def _search(self, queries: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        if self.index is None or self.index.ntotal == 0:
            return np.zeros((len(queries), 0), np.float32), np.zeros((len(queries), 0), np.int64)
        sims, rows = self.index.search(queries, min(n, self.index.ntotal))
        return np.where(rows >= 0, sims, -np.inf).astype(np.float32), rows

    def add(self, emb: np.ndarray, batch: int = 2048) -> None:
        new = normalise(emb)
        for start in range(0, len(new), batch):  # bounded memory for a big batch (e.g. a rebuild)
            self._add(new[start : start + batch])

    def _add(self, new: np.ndarray) -> None:
        if self.index is None:
            self.index = self.faiss.IndexHNSWFlat(new.shape[1], self.hnsw_m, self.faiss.METRIC_INNER_PRODUCT)
            self.index.hnsw.efSearch = self.ef_search
        sims, rows = self._search(new, max(self.k, self.reverse_k))
        inner = new @ new.T
        np.fill_diagonal(inner, -np.inf)
        new_topk = topk_rows(np.concatenate([sims[:, : self.k], inner], 1), self.k)
        # Reverse updates: each newcomer offers its similarity to the old items it found.
        offers: dict[int, list[float]] = {}
        for i in range(len(new)):
            for s, r in zip(sims[i], rows[i]):
                if r >= 0:
                    offers.setdefault(int(r), []).append(float(s))
        if offers:
            old = np.fromiter(offers, dtype=np.int64)
            width = max(len(v) for v in offers.values())
            block = np.full((len(old), width), -np.inf, dtype=np.float32)
            for j, r in enumerate(old):
                block[j, : len(offers[int(r)])] = offers[int(r)]
            self.topk[old] = topk_rows(np.concatenate([self.topk[old], block], 1), self.k)
        self.index.add(new)
        self.topk = np.concatenate([self.topk, new_topk.astype(np.float32)])

    def nearest(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each query's highest cosine similarity to an indexed item and its row, by one HNSW search:
        approximate, like the index (the novelty gate compares the parent exactly besides)."""
        sims, rows = self._search(normalise(queries), 1)
        if sims.shape[1] == 0:
            return np.full(len(queries), -np.inf), np.full(len(queries), -1, np.int64)
        return np.minimum(sims[:, 0].astype(np.float64), 1.0), rows[:, 0].astype(np.int64)

    def diversity(self) -> np.ndarray:
        return div_from_topk(self.topk.astype(np.float64))

    def state_dict(self) -> dict[str, np.ndarray]:
        """The HNSW graph (faiss' own serialisation, as bytes) and the top-k lists, for checkpoints."""
        graph = np.zeros(0, np.uint8) if self.index is None else self.faiss.serialize_index(self.index)
        return {"faiss": np.asarray(graph, dtype=np.uint8), "topk": self.topk.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        graph = np.asarray(state["faiss"], dtype=np.uint8)
        self.index = self.faiss.deserialize_index(graph) if graph.size else None
        if self.index is not None:
            self.index.hnsw.efSearch = self.ef_search
        self.topk = np.array(state["topk"], dtype=np.float32).reshape(-1, self.k)
