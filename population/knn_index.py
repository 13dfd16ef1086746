"""The kNN index registry (``population.knn_index`` picks one): both compute eq. 6's diversity
incrementally, with the same interface (add, diversity, state_dict, load_state_dict)."""

from __future__ import annotations

from population.ann import FaissKnnIndex
from population.diversity import KnnIndex

KNN_INDEXES = {
    "exact": KnnIndex,  # chunked matrix products, exact (default)
    "faiss": FaissKnnIndex,  # HNSW search, for very large archives (imports faiss when built)
}


def make_knn_index(kind: str, k: int):
    if kind not in KNN_INDEXES:
        raise ValueError(f"unknown knn index {kind!r}; valid: {', '.join(KNN_INDEXES)}")
    return KNN_INDEXES[kind](k)
