import numpy as np
import pytest

pytest.importorskip("faiss", reason="faiss-cpu is part of the test extra; install with bash scripts/setup.sh")

from population.ann import FaissKnnIndex
from population.diversity import KnnIndex
from population.knn_index import make_knn_index


def clustered(rng, n, d=32, clusters=20):
    centers = rng.normal(size=(clusters, d))
    return centers[rng.integers(0, clusters, n)] + 0.3 * rng.normal(size=(n, d))


def test_faiss_index_tracks_the_exact_index():
    rng = np.random.default_rng(0)
    exact, approx = KnnIndex(5), FaissKnnIndex(5)
    for n in (50, 200, 64, 300):
        batch = clustered(rng, n)
        exact.add(batch)
        approx.add(batch)
    assert len(approx) == len(exact) == 614
    err = np.abs(approx.diversity() - exact.diversity())
    assert err.mean() < 0.01 and np.isfinite(approx.diversity()).all()
    recall = np.mean([len(np.intersect1d(np.round(a, 5), np.round(e, 5))) / 5 for a, e in zip(approx.topk, exact.topk)])
    assert recall > 0.9


def test_duplicates_get_zero_and_factory_validates():
    index = make_knn_index("faiss", 2)
    index.add(np.ones((3, 8)))
    assert np.allclose(index.diversity(), 0.0, atol=1e-5)
    with pytest.raises(ValueError, match="exact, faiss"):
        make_knn_index("annoy", 2)
