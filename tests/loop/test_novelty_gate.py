"""The novelty gate (evolution.novelty_threshold): a child whose embedding is at or above the threshold in
cosine similarity to its parent or to an archived program is never run and is treated as a repeat; the
embeddings it makes are the ones the kNN index takes (each program through the embedder once); off by
default, where nothing changes.

Cosines are the ones all-MiniLM-L6-v2 gives circle_packing_26's starter: 0.9998 for a one-digit edit
(0.3 -> 0.31), 0.85 for a grid instead of the two rings, exactly the same embedding for an edit past its
256-token window (the starter is 397 tokens). Planted vectors reproduce them where the real model is not
needed; one test runs the packaged model itself."""

import hashlib

import numpy as np
import pytest

from population.ann import FaissKnnIndex
from population.canonical import canonicalize
from population.child import Child
from population.diversity import KnnIndex, nearest
from population.embedding import Embedder
from population.novelty import TOLERANCE, is_near, pairwise
from rewards.evaluator import Evaluation
from rollout.engine_api import Completion
from tasks import load_task
from tests.helpers.evolution import STARTER, make
from train.config.config import ConfigError, load_config
from train.loop.children import ChildRules, Job, evaluate_children, repeat_feedback
from train.loop.epoch_metrics import epoch_metrics
from train.loop.novelty import NoveltyGate
from train.loop.run_dir import TABLE, table_columns, table_header, table_row
from train.runs.outcomes import outcome

DIM = 384
ONE_DIGIT, REWRITE = 0.9998, 0.85  # MiniLM's cosines to the starter (module docstring)
_SOURCE = load_task("circle_packing_26").initial_program
RINGS = _SOURCE[_SOURCE.index("    centers[0] = [0.5, 0.5]"):_SOURCE.index("    centers = np.clip")]  # the two rings
GRID = """    xs, ys = np.meshgrid(np.linspace(0.1, 0.9, 6), np.linspace(0.1, 0.9, 5))
    grid = np.stack([xs.ravel(), ys.ravel()], axis=1)
    rng = np.random.default_rng(7)
    centers = grid[rng.permutation(len(grid))[:n]] + rng.normal(0, 0.01, (n, 2))
"""
EDITS = {  # (SEARCH, REPLACE) on the starter
    "tail": ("    return centers, radii, float(np.sum(radii))", "    return centers, radii, float(radii.sum())"),
    "digit": ("        centers[1 + i] = [0.5 + 0.3 * np.cos(angle), 0.5 + 0.3 * np.sin(angle)]",
              "        centers[1 + i] = [0.5 + 0.31 * np.cos(angle), 0.5 + 0.31 * np.sin(angle)]"),
    "grid": (RINGS.rstrip("\n"), GRID.rstrip("\n")),
    "corner": ("    centers[0] = [0.5, 0.5]", "    centers[0] = [0.05, 0.05]"),
}


def answer(name: str) -> str:
    search, replace = EDITS[name]
    return f"<answer>\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n</answer>"


def edited(code: str, name: str) -> str:
    search, replace = EDITS[name]
    assert search in code
    return code.replace(search, replace, 1)


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def random_unit(seed) -> np.ndarray:
    return unit(np.random.default_rng(seed).normal(size=DIM))


def tilt(base: np.ndarray, cosine: float, seed: int) -> np.ndarray:
    """A unit vector at exactly ``cosine`` to ``base``."""
    u = np.random.default_rng(seed).normal(size=DIM)
    u -= (u @ base) * base
    return unit(cosine * base + np.sqrt(1 - cosine**2) * unit(u))


class Planted:
    """Stands in for Embedder.embed: planted vectors by canonical code, else one drawn from the code's
    hash (distinct programs nearly orthogonal); records every text it is asked to embed."""

    def __init__(self):
        self.vectors: dict[str, np.ndarray] = {}
        self.texts: list[str] = []

    def plant(self, code: str, vector: np.ndarray) -> None:
        self.vectors[canonicalize(code)] = vector

    def vector(self, code: str) -> np.ndarray:
        key = canonicalize(code)
        return self.vectors.get(key, random_unit(int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)))

    def embed(self, codes):  # set on the Embedder class as a bound method: no second self
        self.texts += list(codes)
        return np.stack([self.vector(c) for c in codes]) if codes else np.zeros((0, DIM), np.float32)


def canonical(codes) -> list[str]:
    return [canonicalize(c) for c in codes]


class Recording:
    """The sandbox: scores every program 1.84 and remembers what it ran (canonically)."""

    def __init__(self):
        self.ran: list[str] = []

    def evaluate_many(self, codes, progress=False):
        self.ran += canonical(codes)
        return [Evaluation(1.84, True, "valid packing", {"sum_radii": 1.84}) for _ in codes]


@pytest.fixture
def planted(monkeypatch):
    fake = Planted()
    monkeypatch.setattr(Embedder, "embed", fake.embed)
    return fake


def _archived_program(evo, code: str, reward: float) -> int:
    root = int(evo.pool["id"][0])
    (sid,) = evo.add_children([Child(parent_id=root, epoch=1, prompt_id="e1-p0-g0", completion="<answer>", code=code,
                                     reward=reward, valid=True, feedback="valid packing", is_program=True)])
    return sid


def _job(evo, **kw) -> Job:
    root = int(evo.pool["id"][0])
    return Job(index=0, parent_id=root, parent_code=evo.task.initial_program, token_ids=[1], tag=0, **kw)


def _run(evo, evaluator, texts, repeats="score", job=None):
    job = job or _job(evo)
    outputs = [[Completion([1], t, False) for t in texts]]
    return evaluate_children(evo.task, evaluator, [job], outputs, epoch=2, progress=False,
                             rules=ChildRules(evo.archived, repeats, evo.novelty_gate([job])))


# ---- the arithmetic -------------------------------------------------------------------------

def test_similarities_are_cosines_whatever_the_norms():
    base = np.stack([random_unit(i) for i in range(50)])
    s = base[7]
    queries = np.stack([3.0 * s, 0.5 * tilt(base[20], ONE_DIGIT, 1), tilt(s, REWRITE, 2)])  # not unit
    sims, rows = nearest(queries, base * np.arange(1, 51)[:, None])  # nor the base
    assert rows.tolist() == [7, 20, 7]
    np.testing.assert_allclose(sims, [1.0, ONE_DIGIT, REWRITE], atol=1e-6)
    assert sims[0] <= 1.0  # clipped: float32 rounding of identical rows can give 1.0000001
    np.testing.assert_allclose(pairwise(queries, np.stack([s, base[20], s])), [1.0, ONE_DIGIT, REWRITE], atol=1e-6)
    empty_sims, empty_rows = nearest(queries, np.zeros((0, DIM), np.float32))
    assert np.isneginf(empty_sims).all() and (empty_rows == -1).all()


def test_both_knn_indexes_find_the_nearest_program():
    base = np.stack([random_unit(i) for i in range(200)])
    queries = np.stack([base[3], tilt(base[150], ONE_DIGIT, 5), tilt(base[42], REWRITE, 6)])
    exact = KnnIndex(5)
    exact.add(base)
    sims, rows = exact.nearest(queries)
    assert rows.tolist() == [3, 150, 42]
    np.testing.assert_allclose(sims, [1.0, ONE_DIGIT, REWRITE], atol=1e-6)
    pytest.importorskip("faiss")
    approx = FaissKnnIndex(5)
    approx.add(base)
    a_sims, a_rows = approx.nearest(queries)
    assert a_rows.tolist() == [3, 150, 42]
    np.testing.assert_allclose(a_sims, sims, atol=1e-5)


ROUNDED = 8  # random_unit(8)'s float32 cosine to itself is 0.99999988: identical vectors need not give 1


def test_the_threshold_reaches_exact_duplicates_through_float_rounding_only():
    v = random_unit(ROUNDED)
    self_similarity = pairwise(v[None], v[None])[0]
    assert 1.0 - TOLERANCE < self_similarity < 1.0
    sims = np.array([1.0, self_similarity, ONE_DIGIT, REWRITE, -0.3])
    assert is_near(sims, 1.0).tolist() == [True, True, False, False, False]
    assert is_near(sims, 0.9995).tolist() == [True, True, True, False, False]
    assert is_near(sims, 0.8).tolist() == [True, True, True, True, False]
    assert not is_near(sims, 0.0).any()  # off
    with pytest.raises(ValueError, match="novelty threshold"):
        is_near(sims, 1.5)


def test_the_threshold_setting_is_checked_and_off_by_default():
    assert load_config(None, []).evolution.novelty_threshold == 0.0
    assert load_config(None, ["evolution.novelty_threshold=0.9995"]).evolution.novelty_threshold == 0.9995
    assert load_config(None, ["evolution.novelty_threshold=1"]).evolution.novelty_threshold == 1.0
    for bad in ("1.01", "-0.5", "close"):
        with pytest.raises(ConfigError, match="novelty_threshold"):
            load_config(None, [f"evolution.novelty_threshold={bad}"])


# ---- the gate in evaluate_children, on an Evolution with planted embeddings ------------------------

@pytest.mark.parametrize("repeats", ["score", "zero"])
def test_planted_near_duplicates_are_never_run_and_a_different_child_is(tmp_path, planted, repeats):
    evo = make(tmp_path, "evolution.novelty_threshold=0.9995", f"evolution.repeats={repeats}")
    root, starter = int(evo.pool["id"][0]), evo.task.initial_program
    s = planted.vector(starter)
    other = edited(starter, "corner")  # an archived program that is not the parent
    other_id = _archived_program(evo, other, 1.7512)
    near_parent, near_other, different = edited(starter, "digit"), edited(other, "digit"), edited(starter, "grid")
    planted.plant(near_parent, tilt(s, ONE_DIGIT, 1))
    planted.plant(near_other, tilt(planted.vector(other), ONE_DIGIT, 2))
    planted.plant(different, tilt(s, REWRITE, 3))
    assert pairwise(planted.vector(near_other)[None], s[None])[0] < 0.2  # near the other program only
    planted.texts.clear()
    evaluator = Recording()
    job = _job(evo, operator="rewrite")
    texts = [f"<answer>\n```python\n{code}\n```\n</answer>" for code in (near_parent, near_other, different)]
    a, b, c = _run(evo, evaluator, texts, repeats, job)
    assert evaluator.ran == canonical([different])  # the two near duplicates never reached the sandbox
    assert canonical(planted.texts) == canonical([near_parent, near_other, different])  # once, before evaluation
    assert c.is_program and c.valid and c.reward == 1.84 and "near_repeat" not in c.metrics
    assert c.metrics["novelty_similarity"] == pytest.approx(REWRITE, abs=1e-6)  # recorded, to choose a threshold from
    for child, twin, reward in ((a, root, STARTER), (b, other_id, 1.7512)):
        assert not child.is_program and not child.valid
        assert child.metrics["near_repeat"] == 1.0 and "repeat" not in child.metrics and "status_ok" not in child.metrics
        assert child.metrics["novelty_similarity"] == pytest.approx(ONE_DIGIT, abs=1e-6)
        assert f"solution {twin}" in child.feedback and "not run" in child.feedback
        assert child.reward == (reward if repeats == "score" else 0.0)  # as evolution.repeats treats a repeat
        assert outcome(child.metrics, child.valid) == "repeat"


def test_threshold_one_gates_only_an_exact_embedding_duplicate(tmp_path, planted):
    starter = load_task("circle_packing_26").initial_program
    planted.plant(starter, random_unit(ROUNDED))  # its cosine to itself rounds below 1
    evo = make(tmp_path, "evolution.novelty_threshold=1.0")
    s = planted.vector(starter)
    same_embedding, digit = edited(starter, "tail"), edited(starter, "digit")
    planted.plant(same_embedding, s.copy())  # other code, the very same vector (past the 256-token window)
    planted.plant(digit, tilt(s, ONE_DIGIT, 1))
    evaluator = Recording()
    tail, one_digit = _run(evo, evaluator, [answer("tail"), answer("digit")])
    assert evaluator.ran == canonical([digit])
    assert tail.metrics["near_repeat"] == 1.0 and tail.reward == STARTER
    assert tail.metrics["novelty_similarity"] == pytest.approx(1.0, abs=TOLERANCE)
    assert one_digit.is_program and "near_repeat" not in one_digit.metrics


def test_each_program_goes_through_the_embedder_once(tmp_path, planted):
    """The kNN index takes the gate's embeddings: add_children embeds nothing again, and siblings of one
    epoch are not held back as each other's repeats (as exact repeats are not), but embedded once."""
    evo = make(tmp_path, "evolution.novelty_threshold=0.9995")
    starter = evo.task.initial_program
    planted.plant(edited(starter, "grid"), tilt(planted.vector(starter), REWRITE, 3))
    planted.texts.clear()
    evaluator = Recording()
    job = _job(evo)
    outputs = [[Completion([1], answer(n), False) for n in ("grid", "corner", "grid", "digit")]]
    gate = evo.novelty_gate([job])
    children = evaluate_children(evo.task, evaluator, [job], outputs, epoch=2, progress=False,
                                 rules=ChildRules(evo.archived, gate=gate))
    programs = [edited(starter, n) for n in ("grid", "corner", "digit")]
    assert canonical(planted.texts) == canonical(programs) and gate.embedded == 3  # the grid siblings: one text
    assert evaluator.ran == canonical([programs[0], programs[1], programs[0], programs[2]])
    before = len(evo.index)
    evo.add_children(children)
    assert len(planted.texts) == 3 and evo.embedded_last == 0  # nothing embedded again
    assert len(evo.index) == before + 4
    np.testing.assert_allclose(evo.index.emb[before:], np.stack([c.embedding for c in children]), atol=1e-7)  # renormalised
    np.testing.assert_array_equal(evo.archive.get_embeddings([int(i) for i in evo.pool["id"][-4:]]),
                                  np.stack([c.embedding for c in children]))
    assert evo.archived(programs[2]) == int(evo.pool["id"][-1])  # a known program from now on


@pytest.mark.parametrize("repeats", ["score", "zero"])
def test_an_exact_repeat_is_held_back_without_embedding(tmp_path, planted, repeats):
    evo = make(tmp_path, "evolution.novelty_threshold=0.9995", f"evolution.repeats={repeats}")
    known = edited(evo.task.initial_program, "corner")
    sid = _archived_program(evo, known, 1.7512)
    planted.texts.clear()
    evaluator = Recording()
    (child,) = _run(evo, evaluator, [answer("corner")], repeats)
    assert evaluator.ran == [] and planted.texts == []
    assert child.metrics["repeat"] == 1.0 and "near_repeat" not in child.metrics and not child.is_program
    if repeats == "score":  # what running it again would have given, unrun
        assert child.reward == 1.7512 and child.metrics["novelty_similarity"] == 1.0
        assert f"(solution {sid})" in child.feedback
    else:  # caught before the gate, as without it
        assert child.reward == 0.0 and child.feedback == repeat_feedback(sid)


def test_both_parents_of_a_crossover_are_compared_exactly():
    """The parents are compared directly, whatever the index finds (faiss searches approximately)."""

    class Blind:  # an index whose search misses everything
        def nearest(self, queries):
            return np.full(len(queries), -np.inf), np.full(len(queries), -1, np.int64)

    class Fixed(Embedder):  # the real de-duplication (embed_cached) over planted vectors
        def __init__(self, vectors):
            self.vectors = vectors

        def code_hash(self, code):
            return code

        def embed(self, codes):
            return np.stack([self.vectors[c] for c in codes])

    a, b = random_unit(1), random_unit(2)
    embedder = Fixed({"near a": tilt(a, ONE_DIGIT, 3), "near b": tilt(b, ONE_DIGIT, 4), "new": tilt(b, REWRITE, 5)})
    gate = NoveltyGate(0.9995, embedder, Blind(), np.array([10, 11]), np.array([1.8, 1.7]), {10: a, 11: b})
    verdicts, emb = gate.check(["near a", "near b", "new"], [(10, 11), (10, 11), (10, 11)])
    assert [(v.twin_id, v.twin_reward, v.held) for v in verdicts] == [(10, 1.8, True), (11, 1.7, True), (11, 1.7, False)]
    assert verdicts[2].similarity == pytest.approx(REWRITE, abs=1e-6)
    assert emb.shape == (3, DIM)
    with pytest.raises(ValueError, match="off"):
        NoveltyGate(0.0, embedder, Blind(), np.array([10]), np.array([1.8]), {})


def test_off_by_default_every_child_runs_and_is_embedded_after(tmp_path, planted):
    evo = make(tmp_path)
    starter = evo.task.initial_program
    planted.plant(edited(starter, "tail"), planted.vector(starter).copy())
    planted.plant(edited(starter, "digit"), tilt(planted.vector(starter), ONE_DIGIT, 1))
    planted.texts.clear()
    job = _job(evo)
    assert evo.novelty_gate([job]) is None
    evaluator = Recording()
    children = _run(evo, evaluator, [answer("tail"), answer("digit")])
    assert evaluator.ran == canonical(c.code for c in children) and planted.texts == []
    assert all(c.is_program and c.embedding is None and c.metrics == {"sum_radii": 1.84, "status_ok": 1.0}
               for c in children)
    evo.add_children(children)
    assert planted.texts == [c.code for c in children] and evo.embedded_last == 2
    assert table_columns() is TABLE and "near" not in table_header()


# ---- the epoch's row and table -------------------------------------------------------------

def test_near_repeats_are_counted_and_shown_in_the_table():
    kids = [Child(parent_id=1, epoch=2, prompt_id=f"e2-p0-g{g}", completion="", code="x", metrics=m)
            for g, m in enumerate([{"near_repeat": 1.0, "novelty_similarity": 0.9998}, {"repeat": 1.0},
                                   {"status_ok": 1.0}, {"near_repeat": 1.0, "novelty_similarity": 1.0}])]
    row = epoch_metrics(2, kids, [10] * 4, [False] * 4, np.array([1.0]), np.array([1.0]), np.array([0]), 1.84, 6, {})
    assert row["near_repeat_frac"] == 0.5 and row["repeat_frac"] == 0.25
    columns = table_columns(novelty_gate=True)
    header = table_header(columns).split()
    assert header[header.index("rep") + 1] == "near" and len(columns) == len(TABLE) + 1
    cells = table_row(row, columns).split()
    assert cells[header.index("near") - 2] == "0.50"  # "R mean" and "R max" are two words each


# ---- the real path: the packaged MiniLM ----------------------------------------------------

@pytest.fixture(scope="module")
def minilm():
    return Embedder()._load()


def test_the_packaged_embedder_gates_what_it_cannot_tell_apart(tmp_path, monkeypatch, minilm):
    """Evolution, its kNN index and all-MiniLM-L6-v2 as the loop uses them. At 1.0 only the edit past the
    model's 256-token window is held back (same embedding); at 0.9995 the one-digit edit is too; the grid
    runs at both. The programs that ran are embedded once, by the gate."""
    monkeypatch.setattr(Embedder, "_load", lambda self: minilm)
    evo = make(tmp_path, "evolution.novelty_threshold=1.0")
    calls = []
    real = evo.embedder.embed
    evo.embedder.embed = lambda codes: calls.append(list(codes)) or real(codes)
    starter = evo.task.initial_program
    texts = [answer(n) for n in ("tail", "digit", "grid")]
    evaluator = Recording()
    tail, digit, grid = _run(evo, evaluator, texts)
    assert evaluator.ran == canonical([digit.code, grid.code])
    assert tail.metrics["near_repeat"] == 1.0 and tail.metrics["novelty_similarity"] == pytest.approx(1.0, abs=TOLERANCE)
    assert canonicalize(tail.code) == canonicalize(edited(starter, "tail")) and tail.reward == STARTER  # repeats: score
    assert len(calls) == 1 and calls[0] == [tail.code, digit.code, grid.code]

    evo.cfg.evolution.novelty_threshold = 0.9995
    evaluator = Recording()
    tail, digit, grid = _run(evo, evaluator, texts)
    assert evaluator.ran == canonical([grid.code])
    assert digit.metrics["near_repeat"] == 1.0 and 0.9995 <= digit.metrics["novelty_similarity"] < 1.0
    calls.clear()
    evo.add_children([tail, digit, grid])
    assert calls == [] and evo.embedded_last == 0  # the grid's embedding came from the gate


# ---- the loop ------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [0, 1], ids=["after-generation", "batched"])
def test_the_loop_holds_back_near_repeats_counts_them_and_shows_them(tmp_path, capsys, batch_size):
    """The scripted policy writes the same two programs in every group: a harmless edit of the starter
    (MiniLM cosine 0.997 to it) and one that crashes (0.937). At 0.99 the harmless one is a near repeat
    of its parent in both epochs, never run and scored as the starter (repeats: score); the crashing one
    runs in epoch 1 and is an exact repeat in epoch 2, held back unrun with the gate on."""
    from population.archive import Archive
    from tests.helpers.scripted import metrics, run_scripted

    run = run_scripted(tmp_path, "population.enabled=false", "evolution.novelty_threshold=0.99", "run.export=false",
                       f"rollout.batch_size={batch_size}")
    rows = metrics(run)
    assert [r["near_repeat_frac"] for r in rows] == [0.25, 0.25]  # 2 of 8 children per epoch
    assert [r["repeat_frac"] for r in rows] == [0.0, 0.25]
    assert [r["embedded"] for r in rows] == [2, 1]  # by the gate only: the index reused its embeddings
    assert [r["n_programs"] for r in rows] == [2, 0]
    with Archive(run / "archive.sqlite") as arch:
        root = arch.get(arch.scores()[0][0])  # the starter
        kids = [arch.get(s[0]) for s in arch.scores() if s[0] != root.id]
    harmless = [s for s in kids if "import math" in s.code]
    crash = [s for s in kids if "boom" in s.code]
    assert len(harmless) == len(crash) == 4
    assert all(s.metrics["near_repeat"] == 1.0 and "status_ok" not in s.metrics and not s.valid
               and s.reward == root.reward and f"solution {root.id}" in s.feedback for s in harmless)
    assert all("status_ok" in s.metrics for s in crash if s.epoch == 1)
    assert all(s.metrics["repeat"] == 1.0 and "status_ok" not in s.metrics for s in crash if s.epoch == 2)
    header = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("epoch")).split()
    assert header[header.index("rep") + 1] == "near"
