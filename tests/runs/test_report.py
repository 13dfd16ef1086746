"""scripts/report.py (train/runs/): the pure data functions against hand-computed values, and the HTML report
end to end on a small synthetic run (a real circle-packing program, evaluated once as the loop does, its
artefact recorded in the archive and drawn from there)."""

import base64
import functools
import json
import math
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from population.archive import Archive, ReadOnlyArchive
from train.runs import drawing, plots, report
from train.runs import run_data as rd
from train.runs.page import new_figure

ROOT = Path(__file__).resolve().parents[2]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
INITIAL = (ROOT / "tasks" / "circle_packing_26" / "initial_program.py").read_text()
TRUE_REWARD = 1.8365015544609251  # the verifier's sum of radii for the starter program
BASE = dict(feedback="ok", metrics={}, eval_time_s=0.0)

# k = 2 over 2-D embeddings; Div by hand at epoch 2 (programs root, a, b2, c, d; cosines):
#   a (0,1):   others 0, .7071, 0, .8      -> top-2 mean .75355 -> Div .24645
#   c (1,0):   others 1, 0, .7071, .6      -> top-2 mean .85355 -> Div .14645
#   d (.6,.8): others .6, .8, .98995, .6   -> top-2 mean .89497 -> Div .10503
DIV_E2 = [1 - (0.8 + math.sqrt(0.5)) / 2, 1 - (1 + math.sqrt(0.5)) / 2, 1 - (1.4 / math.sqrt(2) + 0.8) / 2]

METRICS = [
    {"epoch": 1, "reward_mean": 0.6, "reward_max": 1.2, "best_reward": None, "valid_frac": 0.5,
     "gen_time_s": 2.0, "eval_time_s": 1.0, "train_time_s": 0.5, "epoch_time_s": 3.5},
    {"epoch": 2, "reward_mean": 1.0, "reward_max": 1.8, "best_reward": 1.8, "valid_frac": 1.0,
     "gen_time_s": 3.0, "eval_time_s": 1.5, "train_time_s": 0.25, "embed_select_time_s": 0.1, "epoch_time_s": 4.85},
]
CONFIG = {"task": {"name": "circle_packing_26", "timeout_s": 20.0, "memory_mb": None},
          "model": {"policy": "tiny-random"}, "trainer": {"epochs": 2, "lr": 1e-6},
          "population": {"size": 3, "knn_k": 2}, "selection": {"strategy": "nsga2"}, "run": {"name": "synthetic", "seed": 0}}


@functools.lru_cache(maxsize=1)
def starter_artefact() -> str:
    """What the starter returns, recorded as the loop records it: the evaluator with keep_artefacts (a sandbox run)."""
    from rewards.evaluator import Evaluator
    from tasks import load_task

    evaluation = Evaluator(load_task("circle_packing_26"), workers=1, keep_artefacts=True).evaluate(INITIAL)
    assert evaluation.valid and evaluation.reward == pytest.approx(TRUE_REWARD, rel=1e-12)
    return evaluation.artefact


def build_archive(path, embeddings=True, artefact=True):
    """root -> a -> c (best, the real starter program); siblings b (invalid), b2 of a, d of c."""
    with Archive(path) as arch:
        (root,) = arch.add_many([dict(BASE, parent_id=None, epoch=0, code=INITIAL, reward=1.0, valid=True)])
        a, b, b2 = arch.add_many([dict(BASE, parent_id=root, epoch=1, code="a = 1\n", reward=1.2, valid=True),
                                  dict(BASE, parent_id=root, epoch=1, code=INITIAL, reward=0.0, valid=False),
                                  dict(BASE, parent_id=root, epoch=1, code="b2 = 1\n", reward=1.1, valid=True)])
        art = dict(artefact=starter_artefact()) if artefact else {}
        c, d = arch.add_many([dict(BASE, parent_id=a, epoch=2, code=INITIAL, reward=TRUE_REWARD, valid=True, **art),
                              dict(BASE, parent_id=a, epoch=2, code="d = 1\n", reward=1.5, valid=True)])
        if embeddings:  # b is an edit failure: archived, never embedded
            arch.put_embeddings([root, a, b2, c, d], np.array([[1, 0], [0, 1], [1, 1], [1, 0], [3, 4]], np.float32))
        arch.set_population(0, [root], diversity=[1.0])
        arch.set_population(1, [root, a, b2], diversity=[0.5, 0.2, 0.9])
        arch.set_population(2, [a, c, d])  # no stored Div: the report recomputes it
    return dict(root=root, a=a, b=b, b2=b2, c=c, d=d)


def build_run(tmp_path, config=CONFIG, metrics=METRICS, archive=True, embeddings=True, artefact=True):
    run = tmp_path / "run"
    run.mkdir()
    if config is not None:
        (run / "config.yaml").write_text(yaml.safe_dump(config))
    if metrics is not None:
        (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics) + '{"epoch": 3, "rew')
    ids = build_archive(run / "archive.sqlite", embeddings, artefact) if archive else None
    return run, ids


# ---- pure data ---------------------------------------------------------------------------
def test_reward_curves_sorted_with_best_so_far_fallback():
    c = rd.reward_curves(list(reversed(METRICS)))
    assert c["epoch"].tolist() == [1, 2]
    assert c["reward_mean"].tolist() == [0.6, 1.0]
    assert c["reward_max"].tolist() == [1.2, 1.8]
    assert c["best_reward"].tolist() == [1.2, 1.8]  # epoch 1 logged null: running max of reward_max
    assert c["valid_frac"].tolist() == [0.5, 1.0]


def test_phase_times_fill_partial_and_name_missing():
    epochs, phases, missing = rd.phase_times(METRICS)
    assert epochs.tolist() == [1, 2]
    assert {k: v.tolist() for k, v in phases.items()} == {
        "generate": [2.0, 3.0], "evaluate": [1.0, 1.5], "train": [0.5, 0.25], "embed + select": [0.0, 0.1]}
    assert missing == ["weight_sync_time_s", "checkpoint_time_s"]
    _, phases, missing = rd.phase_times([{"epoch": 1, "gen_time_s": 4.0, "checkpoint_time_s": None}])
    assert list(phases) == ["generate"]
    assert missing == ["eval_time_s", "train_time_s", "weight_sync_time_s", "embed_select_time_s", "checkpoint_time_s"]


def test_read_metrics_skips_torn_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"epoch": 1, "reward_max": 2}\n[1, 2]\n{"epoch": 2, "rew')
    rows, skipped = rd.read_metrics(path)
    assert rows == [{"epoch": 1, "reward_max": 2}] and skipped == 2


def test_config_summary_in_fixed_order_without_absent_keys():
    assert rd.config_summary(CONFIG) == [
        ("task.name", "circle_packing_26"), ("model.policy", "tiny-random"), ("trainer.epochs", 2),
        ("trainer.lr", 1e-6), ("population.size", 3), ("population.knn_k", 2), ("selection.strategy", "nsga2"),
        ("run.name", "synthetic"), ("run.seed", 0)]
    assert rd.config_summary(None) == []


def test_pareto_front_by_hand():
    # (reward, Div): 0 (1, .5) is dominated by 2 (1.1, .9); 1 has the best reward; 3 ties 2 exactly.
    assert rd.pareto_front(np.array([1.0, 1.2, 1.1, 1.1]), np.array([0.5, 0.2, 0.9, 0.9])).tolist() == [1, 2, 3]
    assert rd.pareto_front(np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])).tolist() == [0, 1, 2]
    assert rd.pareto_front(np.array([1.0, 2.0]), np.array([np.nan, 0.1])).tolist() == [1]
    assert rd.pareto_front(np.array([1.0]), np.array([np.nan])).tolist() == []


def test_populations_stored_and_recomputed_div(tmp_path):
    ids = build_archive(tmp_path / "archive.sqlite")
    with ReadOnlyArchive(tmp_path / "archive.sqlite") as arch:
        pops = rd.populations(arch, knn_k=2)
    assert [p.epoch for p in pops] == [0, 1, 2]
    assert [p.source for p in pops] == ["stored", "stored", "recomputed"]
    assert pops[1].ids == [ids["root"], ids["a"], ids["b2"]]
    assert pops[1].rewards.tolist() == [1.0, 1.2, 1.1]
    assert pops[1].diversity.tolist() == [0.5, 0.2, 0.9]
    assert pops[1].front.tolist() == [1, 2]  # root (1.0, .5) is dominated by b2 (1.1, .9)
    assert pops[2].ids == [ids["a"], ids["c"], ids["d"]]
    np.testing.assert_allclose(pops[2].diversity, DIV_E2, atol=1e-6)
    assert pops[2].front.tolist() == [0, 1]  # d (1.5, .105) is dominated by c (1.84, .146)


def test_populations_without_embeddings_are_reward_only(tmp_path):
    build_archive(tmp_path / "archive.sqlite", embeddings=False)
    with ReadOnlyArchive(tmp_path / "archive.sqlite") as arch:
        pops = rd.populations(arch, knn_k=2)
    assert [p.source for p in pops] == ["stored", "stored", "unavailable"]
    assert np.isnan(pops[2].diversity).all() and pops[2].front.tolist() == []


def test_lineage_tree_chain_and_siblings(tmp_path):
    ids = build_archive(tmp_path / "archive.sqlite")
    with ReadOnlyArchive(tmp_path / "archive.sqlite") as arch:
        tree = rd.lineage_tree(arch, ids["c"])
        capped = rd.lineage_tree(arch, ids["c"], max_siblings=1)
    assert [(n.id, n.depth, n.on_chain) for n in tree.nodes] == [
        (ids["root"], 0, True), (ids["a"], 1, True), (ids["c"], 2, True),
        (ids["b2"], 1, False), (ids["b"], 1, False), (ids["d"], 2, False)]  # valid siblings first
    assert tree.hidden == {} and tree.best_id == ids["c"]
    assert [n.id for n in capped.nodes] == [ids["root"], ids["a"], ids["c"], ids["b2"], ids["d"]]
    assert capped.hidden == {1: 1}
    assert plots.lineage_layout(tree) == {ids["root"]: (0.0, 0.0), ids["a"]: (1.0, 0.0), ids["c"]: (2.0, 0.0),
                                       ids["b2"]: (1.0, -1.0), ids["b"]: (1.0, -2.0), ids["d"]: (2.0, -1.0)}


def test_lineage_plot_draws_every_node(tmp_path):
    ids = build_archive(tmp_path / "archive.sqlite")
    with ReadOnlyArchive(tmp_path / "archive.sqlite") as arch:
        fig = plots.plot_lineage(rd.lineage_tree(arch, ids["c"]))
    ax = fig.axes[0]
    assert sum(len(c.get_offsets()) for c in ax.collections) == 6  # 5 valid + 1 invalid marker
    labels = [t.get_text() for t in ax.texts]
    assert f"#{ids['c']}\n{TRUE_REWARD:.4g}" in labels and len(labels) == 6


def test_pick_epochs():
    assert rd.pick_epochs(list(range(10)), 4) == [0, 3, 6, 9]
    assert rd.pick_epochs([0, 1, 2], 5) == [0, 1, 2]
    assert rd.pick_epochs([3, 4, 5], 1) == [5]
    with pytest.raises(ValueError):
        rd.pick_epochs([1], 0)


def test_circle_render_draws_every_circle():
    from matplotlib.collections import PatchCollection

    render = drawing.load_render(ROOT / "tasks" / "circle_packing_26" / "render.py")
    fig = new_figure(4, 4)
    ax = fig.subplots()
    centers = [[0.25, 0.25], [0.75, 0.75], [0.25, 0.75]]
    render({"centers": centers, "radii": [0.25, 0.25, 0.1]}, ax)
    (circles,) = [c for c in ax.collections if isinstance(c, PatchCollection)]
    assert len(circles.get_paths()) == 3 and circles.get_array().tolist() == [0.25, 0.25, 0.1]
    with pytest.raises(ValueError, match="centers must be"):
        render([[0.5, 0.5], [0.1, 0.2]], ax)


# ---- the report end to end -----------------------------------------------------------------
def _images(text):
    return [base64.b64decode(m) for m in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", text)]


def test_report_full(tmp_path):
    run, ids = build_run(tmp_path)
    before = (run / "archive.sqlite").read_bytes()
    out = report.build_report(run)
    assert out == run / "report" / "report.html"
    text = out.read_text()
    names = ["rewards.png", "pareto.png", "lineage.png", "best_solution.png", "phases.png"]
    images = _images(text)
    assert len(images) == 5
    for name, data in zip(names, images):
        png = (out.parent / name).read_bytes()
        assert png.startswith(PNG_MAGIC) and len(png) > 1000 and png == data
    assert f"{TRUE_REWARD:.10g}" in text  # best reward in the header and the drawing's note
    assert f"drawn from the artefact solution #{ids['c']}&#x27;s program returned when the run evaluated it" in text
    assert "nothing was re-run" in text
    assert "recomputed from the archived embeddings" in text
    assert "Pareto front size per epoch: 0: 1, 1: 2, 2: 2" in text
    assert f"ancestor chain of 3 solution(s), root to #{ids['c']}" in text and "6 nodes drawn" in text
    assert "<th>archive size</th><td>6 solutions</td>" in text and "<th>epochs</th><td>2</td>" in text
    assert "1 unreadable line(s) skipped" in text  # the torn last line of metrics.jsonl
    assert "http" not in text.replace("http-equiv", "")  # nothing fetched from a network
    assert (run / "archive.sqlite").read_bytes() == before  # read-only: not a byte changed
    wal = run / "archive.sqlite-wal"  # SQLite's WAL reader may create an empty one; it holds no write
    assert not wal.exists() or wal.stat().st_size == 0


def test_report_cli(tmp_path):
    run, _ = build_run(tmp_path)
    out = tmp_path / "elsewhere" / "index.html"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "report.py"), str(run), "--out", str(out), "--no-exec"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert str(out) in proc.stdout
    text = out.read_text()
    assert len(_images(text)) == 4  # --no-exec: no drawing
    assert "--no-exec" in text
    assert sorted(p.name for p in out.parent.glob("*.png")) == ["lineage.png", "pareto.png", "phases.png", "rewards.png"]


def test_report_draws_the_lineage_of_any_solution_asked_for(tmp_path, capsys):
    run, ids = build_run(tmp_path)
    with Archive(run / "archive.sqlite") as arch:  # a crossover child of d and b2
        (x,) = arch.add_many([dict(BASE, parent_id=ids["d"], second_parent_id=ids["b2"], operator="crossover", epoch=3,
                                   code="x = 1\n", reward=1.7, valid=True)])
    assert report.main([str(run), "--no-exec", "--lineage", str(x)]) == 0
    text = (run / "report" / "report.html").read_text()
    assert f"Lineage of solution #{x}" in text and f"made by crossover in epoch 3, reward 1.7; second parent #{ids['b2']}" in text
    png = (run / "report" / f"lineage-{x}.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and png in _images(text)
    with ReadOnlyArchive(run / "archive.sqlite") as arch:
        title = plots.plot_lineage(rd.lineage_tree(arch, x), "solution").axes[0].get_title()
    assert title.startswith(f"Lineage of solution #{x}:")  # not "the best solution"
    assert report.main([str(run), "--no-exec", "--lineage", "999"]) == 2
    assert "--lineage 999: the archive holds no solution 999" in capsys.readouterr().err


def test_report_degrades_without_archive_config_or_render(tmp_path):
    run, _ = build_run(tmp_path, config=None, archive=False,
                       metrics=[{k: v for k, v in m.items() if k != "train_time_s"} for m in METRICS])
    text = report.build_report(run).read_text()
    assert len(_images(text)) == 2  # rewards and phases
    assert "no archive.sqlite" in text and "no config.yaml" in text and "not logged: train_time_s" in text
    assert "<th>best reward</th><td>1.8</td>" in text  # from metrics when there is no archive

    other = tmp_path / "other"
    other.mkdir()
    run, _ = build_run(other, config=dict(CONFIG, task={"name": "keane_bump_10"}), embeddings=False)
    text = report.build_report(run).read_text()
    assert "has no render.py: the drawing is skipped" in text
    assert "some populations have neither stored Div nor embeddings" in text
    assert len(_images(text)) == 4

    unrecorded = tmp_path / "unrecorded"
    unrecorded.mkdir()
    run, ids = build_run(unrecorded, artefact=False)  # the best solution's artefact was not recorded
    text = report.build_report(run).read_text()
    assert f"solution #{ids['c']} is not drawn: the run recorded no artefact for it" in text and len(_images(text)) == 4
    db = sqlite3.connect(run / "archive.sqlite")  # an archive from before the column
    for table in ("solutions", "discarded_solutions"):
        db.execute(f"ALTER TABLE {table} DROP COLUMN artefact")
    db.commit()
    db.close()
    text = report.build_report(run).read_text()
    assert "this archive predates recorded artefacts" in text and len(_images(text)) == 4


def test_report_while_a_writer_holds_the_archive_open(tmp_path):
    run, ids = build_run(tmp_path)
    with Archive(run / "archive.sqlite") as writer:  # a live run: WAL mode, connection open
        writer.add_many([dict(BASE, parent_id=ids["c"], epoch=3, code="e = 1\n", reward=0.5, valid=True)])
        text = report.build_report(run, draw=False).read_text()
        writer.add_many([dict(BASE, parent_id=ids["c"], epoch=3, code="f = 1\n", reward=0.4, valid=True)])
    assert "<td>7 solutions</td>" in text


@pytest.mark.parametrize("make", ["missing", "empty", "file", "corrupt"])
def test_bad_run_dir_exits_2(tmp_path, make, capsys):
    target = tmp_path / "run"
    if make == "empty":
        target.mkdir()
    elif make == "file":
        target.write_text("x")
    elif make == "corrupt":
        target.mkdir()
        (target / "archive.sqlite").write_bytes(b"not a database at all" * 100)
    assert report.main([str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("report: error: ") and str(target) in err


def test_bad_run_dir_cli_exit_code(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "report.py"), str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "is not a directory" in proc.stderr


def test_old_archive_without_diversity_column(tmp_path):
    """Runs from before populations had a diversity column: Div is recomputed."""
    ids = build_archive(tmp_path / "archive.sqlite")
    db = sqlite3.connect(tmp_path / "archive.sqlite")
    db.execute("ALTER TABLE populations DROP COLUMN diversity")
    db.commit()
    db.close()
    with ReadOnlyArchive(tmp_path / "archive.sqlite") as arch:
        pops = rd.populations(arch, knn_k=2)
    assert [p.source for p in pops] == ["recomputed"] * 3
    # epoch 1 pool: root (1,0), a (0,1), b2 (1,1): each has the two others as neighbours.
    r = math.sqrt(0.5)
    np.testing.assert_allclose(pops[1].diversity, [1 - r / 2, 1 - r / 2, 1 - r], atol=1e-6)
    assert pops[1].ids == [ids["root"], ids["a"], ids["b2"]]


def test_an_artefact_is_kept_as_json_up_to_the_limit():
    """What the evaluator keeps for drawing (rewards.evaluator.artefact_json): compact JSON up to ARTEFACT_LIMIT
    bytes; a larger artefact, or one that is not JSON, is not kept (the page and report say so)."""
    from rewards.evaluator import ARTEFACT_LIMIT, artefact_json

    value = {"centers": [[0.25, 0.5]], "radii": [0.125]}
    assert json.loads(artefact_json(value)) == value and artefact_json(value) == '{"centers":[[0.25,0.5]],"radii":[0.125]}'
    big = {"radii": [0.1] * (ARTEFACT_LIMIT // 4)}  # "0.1," is 4 bytes: just over the limit
    assert len(json.dumps(big, separators=(",", ":"))) > ARTEFACT_LIMIT and artefact_json(big) is None
    assert artefact_json({"radii": [0.1] * 100}, limit=300) is None and artefact_json({1, 2}) is None
