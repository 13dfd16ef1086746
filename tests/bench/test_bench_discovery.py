"""bench_discovery's figures from a run's epochs, against values worked out by hand."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "bench_discovery.py"
_spec = importlib.util.spec_from_file_location("bench_discovery", _SCRIPT)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

METRICS = [{"epoch_time_s": 30.0, "best_reward": 2.5}, {"epoch_time_s": 50.0, "best_reward": 2.62},
           {"epoch_time_s": 20.0, "best_reward": 2.61}]  # a later epoch's best never lowers the curve


def test_the_best_so_far_curve_starts_at_the_starter_and_never_falls():
    times, bests = bench.best_so_far(METRICS, 2.0)
    assert times.tolist() == [0.0, 30.0, 80.0, 100.0]
    assert bests.tolist() == [2.0, 2.5, 2.62, 2.62]


def test_mean_best_so_far_is_the_step_curve_area_over_its_span():
    times, bests = bench.best_so_far(METRICS, 2.0)
    # by hand: 2.0 for 30 s, 2.5 for 50 s, 2.62 for 20 s, over 100 s
    assert bench.mean_best(times, bests) == pytest.approx((2.0 * 30 + 2.5 * 50 + 2.62 * 20) / 100)
    assert bench.mean_best(np.array([0.0]), np.array([1.5])) == 1.5  # no epoch yet: the start


def test_time_to_a_target_is_the_end_of_the_first_epoch_that_reached_it():
    times, bests = bench.best_so_far(METRICS, 2.0)
    assert bench.time_to(times, bests, 2.5) == 30.0
    assert bench.time_to(times, bests, 2.6) == 80.0
    assert bench.time_to(times, bests, 2.0) == 0.0  # the starter already has it
    assert bench.time_to(times, bests, 2.63) is None


def test_report_starts_no_run_and_names_the_unfinished_ones(tmp_path, monkeypatch, capsys):
    def no_runs(argv):
        raise AssertionError("--report started a run")

    monkeypatch.setattr(bench.ablate, "main", no_runs)
    (tmp_path / "circle_packing_26_search" / "entropic-s1").mkdir(parents=True)  # a run still going: no result yet
    assert bench.main(["--tasks", "circle_packing_26_search", "--variants", "entropic", "--seeds", "1",
                       "--out", str(tmp_path), "--report"]) == 0
    captured = capsys.readouterr()
    assert "not finished, left out: entropic-s1" in captured.err
    assert "| entropic |" not in captured.out and (tmp_path / "discovery.md").is_file()


def test_a_refused_ablation_ends_the_campaign_with_its_code(tmp_path, monkeypatch):
    monkeypatch.setattr(bench.ablate, "main", lambda argv: 2)  # ablate.py: error: ... is in use by a run ...
    assert bench.main(["--tasks", "circle_packing_26_search", "--variants", "entropic", "--seeds", "1",
                       "--out", str(tmp_path)]) == 2
    assert not (tmp_path / "discovery.md").exists()
