"""The large-archive paths give the small-archive answers: the bf16-prefiltered kNN update
(population/knn_bf16.py) and the pruned non-dominated sort (selection.beaten_by_n)."""

import numpy as np
import pytest

import population.knn_bf16 as knn_bf16
import population.selection as selection
from population.diversity import BF16_MIN_ROWS, KnnIndex, knn_diversity, normalise
from population.selection import beaten_by_n, nondominated_fronts, nsga2


@pytest.fixture
def native(monkeypatch):
    """Take the prefiltered path whatever the CPU (emulated bf16 is slow, never wrong)."""
    monkeypatch.setattr(knn_bf16, "bf16_native", lambda: True)


def clustered(rng, n, spread, dim=64, centres=6):
    """Tight clusters: many similarities within BF16_EPS of each other, the prefilter's hard case."""
    c = rng.normal(size=(centres, dim))
    return normalise((c[rng.integers(0, centres, n)] + spread * rng.normal(size=(n, dim))).astype(np.float32))


@pytest.mark.parametrize("k", [1, 5])
@pytest.mark.parametrize("spread", [0.01, 0.3, 5.0])
def test_prefiltered_index_equals_the_fp32_one(native, k, spread):
    rng = np.random.default_rng(11)
    data = clustered(rng, 900, spread)
    data[50] = 0.0  # a zero vector: similarity 0 to everything
    data[60:64] = data[70]  # exact duplicates
    plain, fast = KnnIndex(k, bf16_min_rows=None), KnnIndex(k, bf16_min_rows=0)
    for part in np.split(data, [200, 201, 203, 600, 850]):  # single newcomers (m < k) and larger batches
        plain.add(part)
        fast.add(part, batch=64, chunk=97)  # many chunks and sub-batches
        np.testing.assert_allclose(fast.topk, plain.topk, atol=2e-6)
    assert fast._shadow is not None and fast._shadow.n == 850  # mirrored up to the last add (synced lazily)
    want = knn_diversity(data, data, k, np.arange(len(data)))
    np.testing.assert_allclose(fast.diversity(), want, atol=2e-6)


def test_prefiltered_lists_agree_on_a_near_tie_at_the_bf16_resolution(native):
    """Archive rows whose similarities to a newcomer differ by less than a bf16 step: the fp32
    order must still decide which k are kept."""
    rng = np.random.default_rng(3)
    q = normalise(rng.normal(size=(1, 32)).astype(np.float32))
    noise = normalise(rng.normal(size=(400, 32)).astype(np.float32))
    archive = normalise(q + np.linspace(0.30, 0.31, 400)[:, None] * noise)  # cosines packed within ~5e-4
    plain, fast = KnnIndex(3, bf16_min_rows=None), KnnIndex(3, bf16_min_rows=0)
    for index in (plain, fast):
        index.add(archive)
        index.add(q)
    exact = np.sort(archive @ q[0])[::-1][:3]
    np.testing.assert_allclose(fast.topk[-1], exact, atol=1e-6)
    np.testing.assert_allclose(fast.topk, plain.topk, atol=2e-6)


def test_restore_rebuilds_the_bf16_copy_and_continues(native):
    rng = np.random.default_rng(5)
    a, b = clustered(rng, 300, 0.2), clustered(rng, 40, 0.2)
    first = KnnIndex(4, bf16_min_rows=0)
    first.add(a)
    resumed = KnnIndex(4, bf16_min_rows=0)
    resumed.load_state_dict(first.state_dict())
    resumed.bf16_min_rows = 0
    resumed.add(b)
    allrows = np.vstack([a, b])
    np.testing.assert_allclose(resumed.diversity(), knn_diversity(allrows, allrows, 4, np.arange(len(allrows))), atol=2e-6)
    assert resumed._shadow.n == len(a)  # rebuilt from the restored rows


def test_without_native_bf16_the_index_stays_fp32(monkeypatch):
    monkeypatch.setattr(knn_bf16, "bf16_native", lambda: False)
    rng = np.random.default_rng(6)
    data = clustered(rng, 120, 0.3)
    index = KnnIndex(2, bf16_min_rows=0)
    index.add(data[:100])
    index.add(data[100:])
    assert index._shadow is None and index.bf16_min_rows is None
    np.testing.assert_allclose(index.diversity(), knn_diversity(data, data, 2, np.arange(120)), atol=1e-6)


def test_small_archives_never_take_the_prefiltered_path():
    """Results at the sizes runs and tests use are the plain fp32 products', bit for bit."""
    assert BF16_MIN_ROWS >= 50_000
    index = KnnIndex(5)
    index.add(np.random.default_rng(1).normal(size=(2000, 16)))
    assert index._shadow is None


@pytest.mark.parametrize("case", ["independent", "correlated", "ties", "anticorrelated"])
def test_pruned_sort_gives_the_same_fronts_and_selection(case, monkeypatch):
    rng = np.random.default_rng(["independent", "correlated", "ties", "anticorrelated"].index(case))
    for _ in range(6):
        n = int(rng.integers(200, 3000))
        r = rng.random(n)
        d = {"independent": rng.random(n), "correlated": r + 0.2 * rng.random(n),
             "ties": np.round(rng.random(n) * 4) / 4, "anticorrelated": 1 - r + 0.05 * rng.random(n)}[case]
        if case == "ties":
            r = np.round(r * 6) / 6
        for size in (1, 7, 32):
            full = nondominated_fronts(r, d, size, prune_min_rows=10**9)
            pruned = nondominated_fronts(r, d, size, prune_min_rows=0)
            assert [f.tolist() for f in pruned] == [f.tolist() for f in full]
            beaten = beaten_by_n(r, d, size)
            assert all(np.count_nonzero((r > r[i]) & (d > d[i])) >= size for i in np.flatnonzero(beaten))
    if case == "independent":  # the prune must actually remove most of a large random pool
        r, d = rng.random(50_000), rng.random(50_000)
        assert beaten_by_n(r, d, 32).mean() > 0.9
        pruned = nsga2(r, d, 32, np.random.default_rng(0))
        original = selection.nondominated_fronts
        monkeypatch.setattr(selection, "nondominated_fronts", lambda a, b, n_stop=None: original(a, b, n_stop, prune_min_rows=10**9))
        np.testing.assert_array_equal(pruned, nsga2(r, d, 32, np.random.default_rng(0)))


def test_bit_pattern_comparisons_are_exact_or_conservative():
    import torch

    values = np.concatenate([np.random.default_rng(2).normal(size=400), [0.0, -0.0, 1.0, -1.0, 1e-30, -1e-30,
                                                                          np.inf, -np.inf]]).astype(np.float32)
    rounded = torch.from_numpy(values).to(torch.bfloat16).float().numpy()
    bits = knn_bf16.to_bits(values)
    np.testing.assert_array_equal(knn_bf16.from_bits(bits), rounded)
    table = bits.reshape(8, -1)  # column maxima of an (8, 51) block, as the prefilter takes them
    want = rounded.reshape(8, -1).max(axis=0)
    got = knn_bf16.max_upper_bound(table.max(axis=0))
    assert (got >= want).all() and (got[want >= 0] == want[want >= 0]).all()
    for floor in (0.3, 0.0, -0.2, -np.inf):
        accept = bits >= knn_bf16.threshold_bits(np.full(len(bits), floor, np.float32))
        assert accept[rounded >= floor].all()  # never drops a value at or above the floor
        if floor > 0:
            np.testing.assert_array_equal(accept, rounded >= floor)


def test_sparse_nonzero_matches_numpy():
    rng = np.random.default_rng(4)
    mask = rng.random((16, 40)) < 0.03
    rows, cols = knn_bf16.nonzero_2d(mask)
    want = np.nonzero(mask)
    np.testing.assert_array_equal(rows, want[0])
    np.testing.assert_array_equal(cols, want[1])
