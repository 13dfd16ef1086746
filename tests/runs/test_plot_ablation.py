"""scripts/plot_ablation.py (train/runs/ablation.py): best-so-far curves and the fixed-budget table from real archives."""

import numpy as np
import pytest

from population.archive import Archive
from train.runs import ablation, plot_ablation, report
from train.runs.run_data import RunDirError


def make_run(folder, rewards, valid, starter=1.8365):
    """An archive as ablate.py leaves it: the starter (epoch 0), then children in order."""
    folder.mkdir(parents=True)
    with Archive(folder / "archive.sqlite") as arch:
        root = arch.add_many([dict(parent_id=None, epoch=0, code="start", reward=starter, valid=True, feedback="f")])[0]
        arch.add_many([dict(parent_id=root, epoch=1 + k // 4, code=f"c{k}", reward=r, valid=v, feedback="f")
                       for k, (r, v) in enumerate(zip(rewards, valid))])


def test_best_so_far_counts_every_child_and_only_valid_rewards(tmp_path):
    # an invalid child's reward never counts, even when higher; a failed edit (0, invalid) is a child too
    make_run(tmp_path / "helix-s0", [1.70, 0.0, 1.8414, 2.5, 1.85], [True, False, True, False, True])
    curve = ablation.best_so_far(tmp_path / "helix-s0" / "archive.sqlite")
    assert curve.tolist() == [1.8365, 1.8365, 1.8414, 1.8414, 1.85]


def test_table_and_plot_over_variants_and_seeds(tmp_path):
    make_run(tmp_path / "helix-s0", [1.84, 1.86], [True, True])
    make_run(tmp_path / "helix-s1", [1.90, 0.0], [True, False])
    make_run(tmp_path / "evo_only-s0", [0.0, 1.80], [False, True])
    (tmp_path / "latest").mkdir()  # not a run: ignored
    curves = ablation.collect(tmp_path)
    assert sorted(curves) == ["evo_only", "helix"] and len(curves["helix"]) == 2
    text = ablation.table(curves, [1, 2])
    helix_after_2 = np.mean([1.86, 1.90]), np.std([1.86, 1.90], ddof=1)
    assert f"| helix | 2 | {np.mean([1.84, 1.90]):.4f} ± {np.std([1.84, 1.90], ddof=1):.4f} (n=2) | " \
           f"{helix_after_2[0]:.4f} ± {helix_after_2[1]:.4f} (n=2) |" in text
    assert "| evo_only | 1 | 1.8365 ± 0.0000 (n=1) | 1.8365 ± 0.0000 (n=1) |" in text
    assert plot_ablation.main([str(tmp_path), "--budgets", "2"]) == 0
    assert (tmp_path / "best_so_far.png").stat().st_size > 10_000


def test_a_folder_without_runs_is_a_clear_exit(tmp_path):
    with pytest.raises(RunDirError, match="no <variant>-s<seed>/archive.sqlite"):
        ablation.collect(tmp_path)
    with pytest.raises(SystemExit, match="plot_ablation: no <variant>-s<seed>/archive.sqlite"):
        plot_ablation.main([str(tmp_path)])


def test_a_run_whose_archive_is_not_an_archive_is_a_clear_exit(tmp_path):
    make_run(tmp_path / "helix-s0", [1.84], [True])
    (tmp_path / "helix-s1").mkdir()
    (tmp_path / "helix-s1" / "archive.sqlite").write_text("not sqlite\n" * 100)
    with pytest.raises(SystemExit, match="helix-s1/archive.sqlite is not a readable SQLite archive"):
        plot_ablation.main([str(tmp_path)])
    assert not (tmp_path / "best_so_far.png").exists()


def test_valid_fraction_per_epoch_and_default_budgets(tmp_path):
    # epochs of 4 children (make_run): epoch 1 has 2 valid of 4, epoch 2 has 1 of 2 (a failed edit is a child)
    make_run(tmp_path / "helix-s0", [1.84, 0.0, 1.85, 0.0, 1.86, 0.0], [True, False, True, False, True, False])
    assert ablation.valid_by_epoch(tmp_path / "helix-s0" / "archive.sqlite").tolist() == [0.5, 0.5]
    make_run(tmp_path / "evo_only-s0", [1.7] * 3, [True, True, False])
    assert ablation.collect_valid(tmp_path)["evo_only"][0].tolist() == pytest.approx([2 / 3])
    long = {"helix": [np.zeros(70), np.zeros(64)], "evo_only": [np.zeros(100)]}
    assert ablation.default_budgets(long) == [16, 32, 64]  # 64 is the shortest run: the last budget
    assert ablation.default_budgets({"helix": [np.zeros(40)]}) == [16, 32, 40]


def test_report_of_ablation_folders(tmp_path, capsys):
    import json

    import yaml
    circles, keane = tmp_path / "q-circles", tmp_path / "q-keane"
    make_run(circles / "helix-s0", [1.84, 1.86], [True, True])
    make_run(circles / "helix-s1", [1.90, 0.0], [True, False])
    make_run(circles / "evo_only-s0", [0.0, 1.80], [False, True])
    (circles / "helix-s0" / "config.yaml").write_text(yaml.safe_dump({"task": {"name": "circle_packing_26"}}))
    (circles / "ablation.json").write_text(json.dumps({"title": "circle_packing_26: 2 evaluated programs per run",
                                                       "command": "python scripts/ablate.py --seeds 0 1", "rows": [
        dict(variant="helix", seeds=2, best_mean=1.88, best_std=0.028284, best_max=1.9, reward_mean=1.4,
             reward_std=0.3, valid_frac=0.75, children=2, wall_s=356.4)]}))
    make_run(keane / "helix-s0", [0.31, 0.0, 0.45], [True, False, True], starter=0.2945)

    assert report.main([str(circles)]) == 0
    html = (circles / "report" / "report.html").read_text()
    assert "circle_packing_26: best so far against children (q-circles)" in html
    assert html.count("data:image/png;base64,") == 2
    # best so far after 2 children: helix mean of 1.86 and 1.90; evo_only 1.8365 -> 1.8365 (its child is invalid first)
    assert f"<td>{np.mean([1.86, 1.90]):.4f} ± {np.std([1.86, 1.90], ddof=1):.4f} (n=2)</td>" in html
    # top-10 mean and area after 2 children (the starter counts in the top 10): helix s0 {1.8365, 1.84, 1.86},
    # s1 {1.8365, 1.90}; area of the best curve: s0 (1.84 + 1.86) / 2, s1 (1.90 + 1.90) / 2
    ms = lambda v: f"{np.mean(v):.4f} ± {np.std(v, ddof=1):.4f}"  # noqa: E731
    top = [np.mean([1.8365, 1.84, 1.86]), np.mean([1.8365, 1.90])]
    assert "top-10 mean and area under the curve after 2 children (q-circles)" in html
    assert "".join(f"<td>{c}</td>" for c in ["helix", "2", ms([1.86, 1.90]), ms(top), "0.7500 ± 0.3536", ms([1.85, 1.90])]) in html
    assert "<td>1.88 ± 0.028</td>" in html and "<td>356</td>" in html  # ablate.py's own summary
    assert "reproduce: python scripts/ablate.py --seeds 0 1" in html
    # per run: evo_only's valid child (1.80) is below the starter, which stays the best (epoch 0);
    # one edit failed to run, one valid program written once
    row = ["evo_only-s0", "2", "1.8365", "0", "0.00", "0.00", "0.00", "0.50", "0.50", "1", "1 (1.8)"]
    assert "".join(f"<td>{cell}</td>" for cell in row) in html
    assert "".join(f"<td>{c}</td>" for c in ["helix-s1", "2", "1.9", "1"]) in html

    out = tmp_path / "both" / "quality.html"
    assert report.main([str(circles), str(keane), "--out", str(out)]) == 0
    html = out.read_text()
    assert html.count("data:image/png;base64,") == 4 and "unknown task: best so far" in html  # keane has no config.yaml
    assert "no ablation.json" in html
    assert sorted(p.name for p in out.parent.glob("*.png")) == [
        "best_so_far-q-circles.png", "best_so_far-q-keane.png", "valid_per_epoch-q-circles.png", "valid_per_epoch-q-keane.png"]

    capsys.readouterr()
    assert report.main([str(circles), str(tmp_path / "both")]) == 2  # a folder with no runs
    assert "both holds no <variant>-s<seed>/archive.sqlite runs" in capsys.readouterr().err
    assert report.main([str(circles), "--lineage", "3"]) == 2
    assert report.main([str(circles / "helix-s0"), "--no-exec"]) == 0  # one run of the ablation: the run report
    assert (circles / "helix-s0" / "report" / "report.html").is_file()
