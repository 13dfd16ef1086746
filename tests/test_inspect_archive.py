import sys
from pathlib import Path

import numpy as np

from population.archive import Archive

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import inspect_archive


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
    import report
    import report_data as rd

    path, (root, a, b, c) = build(tmp_path, crossover=True)
    with rd.ReadOnlyArchive(path) as arch:
        tree = rd.lineage_tree(arch, c)
    mates = [n for n in tree.nodes if n.mate]
    assert [(n.id, n.depth) for n in mates] == [(b, 1)]
    pos = report.lineage_layout(tree)
    assert pos[b] == (1.0, 1.0) and pos[c] == (2.0, 0.0) and pos[a] == (1.0, 0.0)
    fig = report.plot_lineage(tree)
    dashed = [line for line in fig.axes[0].lines if line.get_linestyle() == "--"]
    assert [(tuple(line.get_xdata()), tuple(line.get_ydata())) for line in dashed] == [((1.0, 2.0), (1.0, 0.0))]
    solid = {(tuple(line.get_xdata()), tuple(line.get_ydata())) for line in fig.axes[0].lines if line.get_linestyle() == "-"}
    assert ((1.0, 2.0), (0.0, 0.0)) in solid  # the first parent's edge, on the chain
