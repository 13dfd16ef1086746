import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from population.archive import Archive, ReadOnlyArchive
from train.runs import inspect_archive, outcomes


def build(tmp_path, crossover=False):
    """root -> a, b; a -> c (with crossover, c also has b as its second parent)."""
    path = tmp_path / "archive.sqlite"
    base = dict(valid=True, feedback="ok", metrics={}, eval_time_s=0.0)
    with Archive(path) as arch:
        (root,) = arch.add_many([dict(base, parent_id=None, epoch=0, code="x = 1\ny = 2\n", reward=1.0)])
        a, b = arch.add_many([dict(base, parent_id=root, epoch=1, code="x = 5\ny = 2\n", reward=1.5),
                              dict(base, parent_id=root, epoch=1, code="x = 1\ny = 9\n", reward=2.0)])
        mate = dict(second_parent_id=b, operator="crossover") if crossover else {}
        (c,) = arch.add_many([dict(base, parent_id=a, epoch=2, code="x = 5\ny = 7\n", reward=4.0, **mate)])
        emb = np.array([[1, 0, 0], [0.9, 0.1, 0], [0, 1, 0], [0.8, 0.2, 0]], dtype=np.float32)
        arch.put_embeddings([root, a, b, c], emb)
        arch.set_population(1, [root, a, b])
        arch.set_population(2, [a, b, c])
    return path, (root, a, b, c)


def test_top_lists_by_reward(tmp_path, capsys):
    path, (root, a, b, c) = build(tmp_path)
    inspect_archive.main([str(path), "top", "-k", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert [int(line.split()[0]) for line in lines[1:]] == [c, b]
    assert [line.split()[5] for line in lines[1:]] == ["-", "-"]  # no exact check ran on these


def test_top_shows_each_solutions_exact_check(tmp_path, capsys):
    path = tmp_path / "a.sqlite"
    row = dict(parent_id=None, epoch=0, code="x = 1", valid=True, feedback="ok")
    with Archive(path) as arch:
        arch.add_many([dict(row, reward=2.0, exact={"status": "tolerance_only", "detail": "circles 1 and 2 overlap"}),
                       dict(row, reward=1.0, exact={"status": "exact", "detail": "holds"})])
    inspect_archive.main([str(path), "top"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[5] == "exact" and [line.split()[5] for line in lines[1:]] == ["tolerance", "exact"]


def test_lineage_shows_the_diffs_between_generations(tmp_path, capsys):
    path, (root, a, b, c) = build(tmp_path)
    inspect_archive.main([str(path), "lineage", str(c)])
    out = capsys.readouterr().out
    assert out.index(f"solution {root}") < out.index(f"solution {a}") < out.index(f"solution {c}")
    assert "-x = 1" in out and "+x = 5" in out and "-y = 2" in out and "+y = 7" in out


def test_front_of_an_epoch_is_the_non_dominated_set(tmp_path, capsys):
    path, (root, a, b, c) = build(tmp_path)
    inspect_archive.main([str(path), "front", "--epoch", "2"])
    out = capsys.readouterr().out
    ids = [int(line.split()[0]) for line in out.splitlines()[2:]]
    # k=5 covers all 4 programs. By hand (eq. 6): Div(a)=0.302, Div(b)=0.882, Div(c)=0.266;
    # rewards a=1.5, b=2.0, c=4.0: b dominates a; b (most diverse) and c (best reward) form the front.
    assert sorted(ids) == sorted([b, c])


# ---- crossover children: both edges in the tools ----
def test_inspect_archive_lineage_names_the_second_parent(tmp_path, capsys):
    path, (root, a, b, c) = build(tmp_path, crossover=True)
    inspect_archive.main([str(path), "lineage", str(c)])
    out = capsys.readouterr().out
    assert f"solution {c} (epoch 2, by crossover)" in out
    assert f"second parent: solution {b} (epoch 1), reward 2" in out and f"from the first parent, solution {a}" in out


def test_the_report_draws_both_edges_of_a_crossover_child(tmp_path):
    from train.runs import plots
    from train.runs import run_data as rd

    path, (root, a, b, c) = build(tmp_path, crossover=True)
    with ReadOnlyArchive(path) as arch:
        tree = rd.lineage_tree(arch, c)
    mates = [n for n in tree.nodes if n.mate]
    assert [(n.id, n.depth) for n in mates] == [(b, 1)]
    pos = plots.lineage_layout(tree)
    assert pos[b] == (1.0, 1.0) and pos[c] == (2.0, 0.0) and pos[a] == (1.0, 0.0)
    fig = plots.plot_lineage(tree)
    dashed = [line for line in fig.axes[0].lines if line.get_linestyle() == "--"]
    assert [(tuple(line.get_xdata()), tuple(line.get_ydata())) for line in dashed] == [((1.0, 2.0), (1.0, 0.0))]
    solid = {(tuple(line.get_xdata()), tuple(line.get_ydata())) for line in fig.axes[0].lines if line.get_linestyle() == "-"}
    assert ((1.0, 2.0), (0.0, 0.0)) in solid  # the first parent's edge, on the chain


# ---- what the children came to ----
STARTER = "import numpy as np\n\nc = np.array([0.5, 0.5])\nr = 0.1\n"


def test_children_outcomes_distinct_programs_and_the_most_written(tmp_path, capsys):
    """Fourteen children of realistic circle rewards: 2 edits that did not apply, 1 unchanged, 1 repeat
    left unrun (evolution.repeats: zero), 2 that ran and failed (one a repeat run under repeats:
    score), and 8 valid ones that are only 3 programs (one written 5 times, twice with other layout
    but the same hash). Programs that ran carry status_ok, as the loop records them."""
    path = tmp_path / "archive.sqlite"
    row = dict(feedback="f", eval_time_s=0.1)
    ok, failed = {"status_ok": 1.0}, {"status_ok": 0.0}
    safe = STARTER.replace("c = np.array([0.5, 0.5])\n", "")
    better = STARTER.replace("0.5, 0.5", "0.45, 0.5")
    with Archive(path) as arch:
        (root,) = arch.add_many([dict(row, parent_id=None, epoch=0, code=STARTER, reward=1.8365015544609251, valid=True,
                                      metrics={})])
        kids = [(STARTER, 0.0, False, {"edit_failed": 1.0}, 1), (STARTER, 0.0, False, {"edit_failed": 1.0}, 1),
                (STARTER, 0.0, False, {"unchanged": 1.0}, 1), (safe, 1.7600112, True, ok, 1),
                (better, 1.8414480, True, ok, 1), (safe, 1.7600112, True, {"repeat": 1.0, **ok}, 2),
                (safe, 0.0, False, {"repeat": 1.0}, 2), (safe + "\n", 1.7600112, True, {"repeat": 1.0, **ok}, 2),
                (STARTER + "x = (\n", 0.0, False, failed, 3), (better, 1.8414480, True, ok, 3),
                ("# same\n" + safe, 1.7600112, True, ok, 3), (safe, 1.7600112, True, ok, 3),
                (STARTER.replace("0.1", "0.11"), 1.8546416, True, ok, 4),
                (better + "y = (\n", 0.0, False, {"repeat": 1.0, **failed}, 4)]
        ids = arch.add_many([dict(row, parent_id=root, epoch=e, code=c, reward=r, valid=v, metrics=m)
                             for c, r, v, m, e in kids])
        # the loop stores a canonical hash for the programs it indexes: layout and comments do not count
        hashes = {safe: "h-safe", safe + "\n": "h-safe", "# same\n" + safe: "h-safe", better: "h-better"}
        valid = [(i, c) for i, (c, _, v, _, _) in zip(ids, kids) if v and c in hashes]
        arch.put_embeddings([i for i, _ in valid], np.zeros((len(valid), 2), np.float32), [hashes[c] for _, c in valid])

    with ReadOnlyArchive(path) as arch:
        out = outcomes.child_outcomes(arch, k=2)
    assert out.children == 14
    assert out.counts == {"edit_failed": 2, "unchanged": 1, "repeat": 1, "valid": 8, "ran_failed": 2}
    assert out.frac("valid") == 8 / 14
    assert out.distinct_valid == 3  # safe (x5), better (x2), the 0.11 radius (x1)
    assert out.best == 1.8546416 and out.best_epoch == 4
    (first, second) = out.most_written
    assert (first.count, first.first_id, first.epoch, first.reward) == (5, ids[3], 1, 1.7600112)
    assert first.change == "- c = np.array([0.5, 0.5])"
    assert (second.count, second.first_id, second.reward) == (2, ids[4], 1.841448)
    assert second.change == "- c = np.array([0.5, 0.5]) | + c = np.array([0.45, 0.5])"

    assert inspect_archive.main([str(path), "children", "-k", "2"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0] == ("14 children: edit did not apply 2 (0.14), unchanged 1 (0.07), repeat, not run 1 (0.07), "
                       "valid 8 (0.57), ran and failed 2 (0.14)")
    assert text[1] == "best: 1.8546416, first reached in epoch 4"
    assert text[2].startswith("3 distinct valid programs among 8 valid children")
    assert text[4].split()[:4] == ["5", str(ids[3]), "1", "1.7600112"]


def test_children_of_a_run_where_nothing_was_valid(tmp_path):
    path = tmp_path / "archive.sqlite"
    with Archive(path) as arch:
        (root,) = arch.add_many([dict(parent_id=None, epoch=0, code="x", reward=0.0, valid=False, feedback="f")])
        arch.add_many([dict(parent_id=root, epoch=1, code="x", reward=0.0, valid=False, feedback="f",
                            metrics={"edit_failed": 1.0})])
    with ReadOnlyArchive(path) as arch:
        out = outcomes.child_outcomes(arch)
    assert (out.children, out.distinct_valid, out.most_written, out.best, out.best_epoch) == (1, 0, [], None, None)


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    # `inspect_archive.py RUN top | head -1`: the pipe is closed before the script writes
    path, _ = build(tmp_path)
    script = Path(__file__).resolve().parents[2] / "scripts" / "inspect_archive.py"
    proc = subprocess.Popen([sys.executable, str(script), str(path), "top"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 1
    assert err == ""


def test_inspecting_never_writes_the_archive(tmp_path, capsys):
    """Read-only: an archive from before the operator column keeps its bytes (a writer would migrate
    it) and still reads, its children as made by edit; a file that is not an archive is a clear exit."""
    import sqlite3
    path, (root, a, b, c) = build(tmp_path)
    db = sqlite3.connect(path)
    for table in ("solutions", "discarded_solutions"):
        db.execute(f"ALTER TABLE {table} DROP COLUMN operator")
    db.commit()
    db.close()
    before = path.read_bytes()
    for command in (["top"], ["lineage", str(c)], ["front"], ["children"]):
        assert inspect_archive.main([str(path), *command]) == 0
    assert path.read_bytes() == before
    assert f"solution {c} (epoch 2, by edit)" in capsys.readouterr().out
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not a database, just notes\n" * 100)
    with pytest.raises(SystemExit, match="not a readable SQLite archive"):
        inspect_archive.main([str(bad), "top"])
