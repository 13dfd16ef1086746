import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from population.archive import Archive


def row(parent=None, epoch=0, code="x = 1", reward=1.0, **kw):
    base = dict(parent_id=parent, epoch=epoch, code=code, reward=reward, valid=reward > 0, feedback="fb",
                metrics={"m": 1.5}, eval_time_s=0.25, prompt_id="p", completion="c")
    base.update(kw)
    return base


def test_round_trip_of_every_field(tmp_path):
    with Archive(tmp_path / "a.sqlite") as arch:
        (sid,) = arch.add_many([row(code="print(1)", reward=2.5, feedback="good", metrics={"sum_radii": 2.5})])
        s = arch.get(sid)
        assert (s.parent_id, s.epoch, s.code, s.reward, s.valid, s.feedback, s.metrics, s.eval_time_s, s.prompt_id,
                s.completion) == (None, 0, "print(1)", 2.5, True, "good", {"sum_radii": 2.5}, 0.25, "p", "c")
        with pytest.raises(KeyError, match="not in the archive"):
            arch.get(999)


def test_lineage_queries_on_a_hand_built_tree(tmp_path):
    with Archive(tmp_path / "a.sqlite") as arch:
        (root,) = arch.add_many([row()])
        a, b = arch.add_many([row(root, 1, reward=2.0), row(root, 1, reward=0.0)])
        (c,) = arch.add_many([row(a, 2, reward=3.0)])
        (d,) = arch.add_many([row(c, 3)])
        assert [s.id for s in arch.ancestors(d, 2)] == [c, a]
        assert [s.id for s in arch.ancestors(d, 10)] == [c, a, root]
        assert arch.ancestors(root, 3) == []
        assert [s.id for s in arch.lineage(d)] == [root, a, c, d]
        assert [s.id for s in arch.children(root)] == [a, b]
        assert arch.best().id == c and arch.count() == 5
        assert arch.rewards([c, b]).tolist() == [3.0, 0.0]
        assert arch.all_ids().tolist() == [root, a, b, c, d]


def test_populations_embeddings_and_meta(tmp_path):
    path = tmp_path / "a.sqlite"
    with Archive(path) as arch:
        assert arch.get_population() == (-1, [])
        ids = arch.add_many([row(code=f"x = {i}") for i in range(3)])
        arch.set_population(0, ids[:1])
        arch.set_population(1, [ids[2], ids[0]])
        emb = np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32)
        arch.put_embeddings(ids, emb, ["h0", "h1", "h2"])
        arch.set_meta("epoch", "1")
    with Archive(path) as arch:  # everything survives a reopen
        assert arch.get_population() == (1, [ids[2], ids[0]]) and arch.get_population(0) == (0, [ids[0]])
        np.testing.assert_array_equal(arch.get_embeddings(ids), emb)
        np.testing.assert_array_equal(arch.cached_embedding("h1"), emb[1])
        assert arch.cached_embedding("nope") is None and arch.get_meta("epoch") == "1"


WRITER = """
import sys
from population.archive import Archive
arch = Archive(sys.argv[1])
batch = 0
while True:
    arch.add_many([dict(parent_id=None, epoch=batch, code="x" * 2000, reward=1.0, valid=True, feedback="f",
                        metrics={}, eval_time_s=0.0, prompt_id=f"batch-{batch}", completion=None) for _ in range(50)])
    batch += 1
"""


@pytest.mark.parametrize("delay", [0.3, 0.7, 1.1])
def test_sigkill_mid_write_loses_at_most_the_batch_in_flight(tmp_path, delay):
    path = tmp_path / "a.sqlite"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=root, env=dict(os.environ, PYTHONPATH=root))
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    counts = dict(db.execute("SELECT prompt_id, COUNT(*) FROM solutions GROUP BY prompt_id").fetchall())
    db.close()
    assert counts, "the writer committed nothing before the kill; raise the delay"
    assert set(counts.values()) == {50}  # every batch is whole
    batches = sorted(int(k.split("-")[1]) for k in counts)
    assert batches == list(range(len(batches)))  # and none is missing in the middle
    with Archive(path) as arch:  # it reopens and accepts writes
        arch.add_many([row()])


def test_ancestor_lookup_is_cheap_on_a_long_chain(tmp_path):
    n = 100_000
    with Archive(tmp_path / "a.sqlite") as arch:
        with arch.db:  # a 10^5-deep chain: solution i's parent is i - 1
            arch.db.executemany("INSERT INTO solutions (id, parent_id, epoch, code, reward, valid, feedback, metrics, "
                                "eval_time_s) VALUES (?, ?, 0, 'x', 1, 1, '', '{}', 0)",
                                ((i, i - 1 if i > 1 else None) for i in range(1, n + 1)))
        start = time.perf_counter()
        anc = arch.ancestors(n, 5)
        kids = arch.children(n - 5)
        elapsed = time.perf_counter() - start
        assert [a.id for a in anc] == [n - 1, n - 2, n - 3, n - 4, n - 5]
        assert [k.id for k in kids] == [n - 4]
        assert elapsed < 1.0
