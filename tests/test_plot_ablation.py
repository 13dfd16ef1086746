"""scripts/plot_ablation.py: best-so-far curves and the fixed-budget table from real archives."""

import numpy as np
import pytest
from conftest import load_script

from population.archive import Archive

plot_ablation = load_script("plot_ablation")


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
    curve = plot_ablation.best_so_far(tmp_path / "helix-s0" / "archive.sqlite")
    assert curve.tolist() == [1.8365, 1.8365, 1.8414, 1.8414, 1.85]


def test_table_and_plot_over_variants_and_seeds(tmp_path):
    make_run(tmp_path / "helix-s0", [1.84, 1.86], [True, True])
    make_run(tmp_path / "helix-s1", [1.90, 0.0], [True, False])
    make_run(tmp_path / "evo_only-s0", [0.0, 1.80], [False, True])
    (tmp_path / "latest").mkdir()  # not a run: ignored
    curves = plot_ablation.collect(tmp_path)
    assert sorted(curves) == ["evo_only", "helix"] and len(curves["helix"]) == 2
    text = plot_ablation.table(curves, [1, 2])
    helix_after_2 = np.mean([1.86, 1.90]), np.std([1.86, 1.90], ddof=1)
    assert f"| helix | 2 | {np.mean([1.84, 1.90]):.4f} ± {np.std([1.84, 1.90], ddof=1):.4f} (n=2) | " \
           f"{helix_after_2[0]:.4f} ± {helix_after_2[1]:.4f} (n=2) |" in text
    assert "| evo_only | 1 | 1.8365 ± 0.0000 (n=1) | 1.8365 ± 0.0000 (n=1) |" in text
    assert plot_ablation.main([str(tmp_path), "--budgets", "2"]) == 0
    assert (tmp_path / "best_so_far.png").stat().st_size > 10_000


def test_a_folder_without_runs_is_a_clear_exit(tmp_path):
    with pytest.raises(SystemExit, match="no <variant>-s<seed>/archive.sqlite"):
        plot_ablation.collect(tmp_path)
