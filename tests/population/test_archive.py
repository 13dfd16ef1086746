"""The archive: every field round-trips, lineage queries, populations, embeddings, and what a
SIGKILL mid-write leaves behind."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from population.archive import Archive, Solution

ROOT = Path(__file__).resolve().parents[2]


def row(parent=None, epoch=0, code="x = 1", reward=1.0, **kw):
    base = dict(parent_id=parent, epoch=epoch, code=code, reward=reward, valid=reward > 0, feedback="fb",
                metrics={"m": 1.5}, eval_time_s=0.25, prompt_id="p", completion="c")
    base.update(kw)
    return base


def test_round_trip_of_every_field_survives_a_reopen(tmp_path):
    path = tmp_path / "deep" / "dir" / "a.sqlite"  # parent directories are created
    rows = [row(code="print('é')\n\t# tab\n", reward=2.5, feedback="good\nline 2", metrics={"sum_radii": 2.5, "n": [1, 2]}),
            row(code="", reward=0.0, valid=False, feedback="", metrics={}, eval_time_s=0.0, prompt_id=None, completion=None),
            row(reward=-3.25, metrics={"np": np.float32(0.5), "arr": np.arange(3), "inf": float("inf")})]
    with Archive(path) as arch:
        ids = arch.add_many(rows)
        ids += arch.add_many([row(parent=ids[0], epoch=7)])
    with Archive(path) as arch:
        got = [arch.get(i) for i in ids]
    assert got[0] == Solution(ids[0], None, 0, "print('é')\n\t# tab\n", 2.5, True, "good\nline 2",
                              {"sum_radii": 2.5, "n": [1, 2]}, 0.25, "p", "c")
    assert got[1] == Solution(ids[1], None, 0, "", 0.0, False, "", {}, 0.0, None, None)
    assert got[2].reward == -3.25 and got[2].metrics == {"np": 0.5, "arr": [0, 1, 2], "inf": float("inf")}
    assert (got[3].parent_id, got[3].epoch) == (ids[0], 7)
    assert isinstance(got[0].valid, bool) and isinstance(got[0].metrics, dict)


def test_wal_mode_and_clear_errors(tmp_path):
    with Archive(tmp_path / "a.sqlite") as arch:
        assert arch.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert arch.db.execute("PRAGMA synchronous").fetchone()[0] in (1, 2)  # NORMAL or FULL
        with pytest.raises(KeyError, match="solution 999 is not in the archive"):
            arch.get(999)
        with pytest.raises(KeyError, match="999"):
            arch.ancestors(999, 3)
        with pytest.raises(ValueError, match="missing fields \\['feedback'\\]"):
            arch.add_many([{k: v for k, v in row().items() if k != "feedback"}])
        with pytest.raises(ValueError, match="unknown fields \\['score'\\]"):
            arch.add_many([row(score=1.0)])
        with pytest.raises(ValueError, match="row 1 .* NaN"):  # the whole batch is refused, nothing written
            arch.add_many([row(), row(reward=float("nan"))])
        assert arch.count() == 0 and arch.best() is None


def test_lineage_queries_on_a_hand_built_tree(tmp_path):
    #        root
    #       /    \
    #      a      b (invalid)
    #     / \
    #    c   e
    #    |
    #    d
    with Archive(tmp_path / "a.sqlite") as arch:
        (root,) = arch.add_many([row(reward=1.0)])
        a, b = arch.add_many([row(root, 1, reward=2.0), row(root, 1, reward=0.0)])
        c, e, d = arch.add_many([row(a, 2, reward=3.0), row(a, 2, reward=9.0, valid=False), row(a + 2, 3)])
        assert d == c + 2 and arch.get(d).parent_id == c  # a parent may come earlier in the same batch
        assert [s.id for s in arch.ancestors(d, 1)] == [c]
        assert [s.id for s in arch.ancestors(d, 2)] == [c, a]
        assert [s.id for s in arch.ancestors(d, 10)] == [c, a, root]
        assert arch.ancestors(d, 0) == [] and arch.ancestors(root, 3) == []
        assert arch.ancestors(d, 3)[1] == arch.get(a)  # full Solution rows
        assert [s.id for s in arch.lineage(d)] == [root, a, c, d]
        assert [s.id for s in arch.lineage(root)] == [root]
        assert [s.id for s in arch.children(root)] == [a, b]
        assert [s.id for s in arch.children(a)] == [c, e] and arch.children(d) == []
        assert arch.best().id == c  # e has the top reward but is invalid
        assert arch.count() == 6
        assert arch.rewards([c, b, c]).tolist() == [3.0, 0.0, 3.0]
        assert arch.rewards([]).shape == (0,)
        assert [s[0] for s in arch.scores()] == [root, a, b, c, e, d]
        with pytest.raises(KeyError, match="4242"):
            arch.rewards([root, 4242])


def test_populations_per_epoch(tmp_path):
    path = tmp_path / "a.sqlite"
    with Archive(path) as arch:
        assert arch.get_population() == (-1, [])
        ids = arch.add_many([row(code=f"x = {i}") for i in range(4)])
        arch.set_population(0, ids[:1])
        arch.set_population(2, [ids[2], ids[0], ids[3]], tags=[1, 0, 1])
        arch.set_population(1, [ids[1]])
        arch.set_population(1, [ids[3], ids[1]])  # rewriting an epoch replaces it
        with pytest.raises(ValueError, match="tags"):
            arch.set_population(3, ids, tags=[0])
    with Archive(path) as arch:
        assert arch.get_population() == (2, [ids[2], ids[0], ids[3]])
        assert arch.get_population(0) == (0, [ids[0]]) and arch.get_population(1) == (1, [ids[3], ids[1]])
        assert arch.get_population(5) == (5, [])
        assert _tags(arch, 2) == [1, 0, 1] and _tags(arch, 0) == [-1]  # each slot's tag, stored for the run's record


def _tags(arch, epoch: int) -> list[int]:
    return [t for (t,) in arch.db.execute("SELECT tag FROM populations WHERE epoch = ? ORDER BY position", (epoch,))]


def test_embeddings_and_their_hash_cache(tmp_path):
    path = tmp_path / "a.sqlite"
    emb = np.random.default_rng(0).normal(size=(3, 384)).astype(np.float32)
    with Archive(path) as arch:
        ids = arch.add_many([row(code=f"x = {i}") for i in range(4)])
        arch.put_embeddings(ids[:3], emb, ["h0", "h1", "h2"])
        with pytest.raises(KeyError, match="999"):  # the whole update is rolled back
            arch.put_embeddings([ids[3], 999], emb[:2], ["h3", "h9"])
        with pytest.raises(ValueError, match="2 ids"):
            arch.put_embeddings(ids[:2], emb, ["a", "b"])
    with Archive(path) as arch:  # everything survives a reopen
        got = arch.get_embeddings([ids[2], ids[0]])
        assert got.dtype == np.float32 and got.shape == (2, 384)
        np.testing.assert_array_equal(got, emb[[2, 0]])
        np.testing.assert_array_equal(arch.cached_embedding("h1"), emb[1])
        assert arch.cached_embedding("h3") is None and arch.cached_embedding("nope") is None
        with pytest.raises(KeyError, match="no stored embedding"):
            arch.get_embeddings([ids[3]])
        assert arch.program_ids().tolist() == ids[:3]


# ---- crash safety ---------------------------------------------------------------------------

WRITER = """
import sys
from population.archive import Archive
path, tag = sys.argv[1], sys.argv[2]
arch = Archive(path)
batch = 0
while True:
    size = 1 + (batch * 7919) % 40
    ids = arch.add_many([dict(parent_id=None, epoch=batch, code="x" * 3000, reward=float(j), valid=True, feedback="f",
                              metrics={"j": j}, eval_time_s=0.0, prompt_id=f"{tag}:{batch}:{size}", completion=None)
                         for j in range(size)])
    arch.set_population(batch, ids)
    print(batch, flush=True)  # only after add_many returned: this batch is committed
    batch += 1
"""


def test_sigkill_mid_write_never_tears_a_batch(tmp_path):
    """Kill a writer at random moments, several times over the same file; every batch is whole
    or absent, every batch it reported committed is there, and the file stays consistent."""
    path = tmp_path / "a.sqlite"
    rng = np.random.default_rng(0)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for rnd in range(5):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"r{rnd}"], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = proc.stdout.readline()  # wait until at least one batch is committed
        assert first.strip() == "0", proc.stderr.read()
        time.sleep(rng.uniform(0.0, 0.25))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reported = [0] + [int(x) for x in proc.stdout.read().split()]
        proc.stdout.close()
        proc.stderr.close()

        db = sqlite3.connect(path)
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        counts = dict(db.execute("SELECT prompt_id, COUNT(*) FROM solutions WHERE prompt_id LIKE ? GROUP BY prompt_id",
                                 (f"r{rnd}:%",)).fetchall())
        dangling = db.execute("SELECT COUNT(*) FROM populations p LEFT JOIN solutions s ON s.id = p.solution_id "
                              "WHERE s.id IS NULL").fetchone()[0]
        db.close()
        for tag, n in counts.items():
            assert n == int(tag.split(":")[2]), f"batch {tag} is torn: {n} rows"
        present = sorted(int(tag.split(":")[1]) for tag in counts)
        assert present == list(range(len(present)))  # none missing in the middle
        assert set(reported) <= set(present) and len(present) <= max(reported) + 2
        assert dangling == 0
    with Archive(path) as arch:  # it reopens and accepts writes
        before = arch.count()
        arch.add_many([row()])
        assert arch.count() == before + 1


# ---- scale --------------------------------------------------------------------------------

def test_lineage_queries_are_cheap_on_a_large_chain_and_tree(tmp_path):
    n = 100_000
    rng = np.random.default_rng(3)
    with Archive(tmp_path / "a.sqlite") as arch:
        # a chain 1 <- 2 <- ... <- n (ids of a fresh table run 1, 2, ...; checked below)
        chain = arch.add_many([row(parent=i - 1 if i > 1 else None, code="x", prompt_id=None, completion=None)
                               for i in range(1, n + 1)])
        assert chain == list(range(1, n + 1))
        # a random tree over the next n ids: each node's parent is one of the 200 before it
        parent = {n + 1: None}
        parent.update({i: int(rng.integers(max(n + 1, i - 200), i)) for i in range(n + 2, 2 * n + 1)})
        tree = arch.add_many([row(parent=parent[i], code="y", prompt_id=None, completion=None) for i in range(n + 1, 2 * n + 1)])
        assert tree == list(range(n + 1, 2 * n + 1))

        start = time.perf_counter()
        anc = arch.ancestors(n, 5)
        kids = arch.children(n - 5)
        probes = rng.integers(n + 1, 2 * n + 1, 20)
        tree_anc = [arch.ancestors(int(i), 8) for i in probes]
        elapsed = time.perf_counter() - start
        assert [a.id for a in anc] == [n - 1, n - 2, n - 3, n - 4, n - 5]
        assert [k.id for k in kids] == [n - 4]
        for i, got in zip(probes, tree_anc):
            want, p = [], parent[int(i)]
            while p is not None and len(want) < 8:
                want.append(p)
                p = parent[p]
            assert [a.id for a in got] == want
        assert elapsed < 1.0, f"22 lineage queries took {elapsed:.2f} s"
        deep = arch.lineage(n)  # the whole 10^5-deep chain, root first
        assert len(deep) == n and deep[0].id == 1 and deep[-1].id == n


def test_advantage_and_artefact_round_trip_and_an_older_archive_is_migrated(tmp_path):
    """The records the run browser reads (advantage, what the estimator saw, a program's artefact) survive a
    reopen; an archive from before those columns stays readable, read-only without them and, opened by a
    writer, gets them (NULL for its old rows) in both tables, so --resume's rewind still copies rows whole."""
    from population.archive import ReadOnlyArchive

    path = tmp_path / "a.sqlite"
    inputs = {"estimator": "grpo", "norm_by_std": True, "reward": 1.5, "tokens": 12}
    with Archive(path) as arch:
        ids = arch.add_many([row(), row(advantage=-0.7071, advantage_inputs=inputs, artefact='{"radii": [0.5]}')])
    with ReadOnlyArchive(path) as arch:
        old, new = arch.get(ids[0]), arch.get(ids[1])
        assert (old.advantage, old.advantage_inputs, arch.artefact(ids[0]), arch.has_artefact(ids[0])) == (None, None, None, False)
        assert (new.advantage, new.advantage_inputs, arch.artefact(ids[1])) == (-0.7071, inputs, '{"radii": [0.5]}')
        assert arch.has_artefact(ids[1])
    db = sqlite3.connect(path)  # as an archive written before the columns existed
    for table in ("solutions", "discarded_solutions"):
        for column in ("advantage", "advantage_inputs", "artefact"):
            db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    db.commit()
    db.close()
    with ReadOnlyArchive(path) as arch:
        assert arch.get(ids[1]).advantage is None and arch.artefact(ids[1]) is None and not arch.has_artefact(ids[1])
        with pytest.raises(KeyError):
            arch.artefact(999)
    with Archive(path) as arch:  # a writer migrates
        (third,) = arch.add_many([row(advantage=0.25, artefact="[1]")])
        assert arch.get(ids[1]).advantage is None and (arch.get(third).advantage, arch.artefact(third)) == (0.25, "[1]")
        assert arch.rewind(ids[1], 0) == 1  # the new row moves aside whole
        cols = {t: [r[1] for r in arch.db.execute(f"PRAGMA table_info({t})")] for t in ("solutions", "discarded_solutions")}
        assert cols["solutions"] == cols["discarded_solutions"] and cols["solutions"][-3:] == ["advantage", "advantage_inputs", "artefact"]


def test_exact_checks_round_trip_best_exact_and_an_older_archive_reads_as_not_checked(tmp_path):
    """A record candidate's exact check is kept with it; best_exact is the best whose check said exact (the
    best reward may hold only within tolerance); an archive from before the column reads as not checked."""
    from population.archive import ReadOnlyArchive

    path = tmp_path / "a.sqlite"
    fails = {"detail": "circles 16 and 22 overlap by 9e-10", "status": "tolerance_only", "value": None}  # status not first
    holds = {"status": "exact", "detail": "every constraint holds", "value": 2.5}
    with Archive(path) as arch:
        ids = arch.add_many([row(reward=2.5, exact=holds), row(reward=2.6, exact=fails), row(reward=2.55),
                             row(reward=2.5, exact=holds), row(reward=3.0, valid=False, exact=holds)])
        assert [arch.get(i).exact for i in ids[:3]] == [holds, fails, None]
        assert arch.best().id == ids[1] and arch.best_exact().id == ids[0]  # earliest of the two exact 2.5s
    db = sqlite3.connect(path)
    for table in ("solutions", "discarded_solutions"):
        db.execute(f"ALTER TABLE {table} DROP COLUMN exact")
    db.commit()
    db.close()
    with ReadOnlyArchive(path) as arch:
        assert arch.get(ids[0]).exact is None and arch.best_exact() is None and arch.best().id == ids[1]
    with Archive(path) as arch:  # a writer migrates: old rows not checked, new ones kept
        (new,) = arch.add_many([row(reward=2.7, exact=holds)])
        assert arch.get(ids[0]).exact is None and arch.best_exact().id == new
