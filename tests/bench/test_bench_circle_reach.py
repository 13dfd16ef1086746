"""scripts/bench/bench_circle_reach.py (scripts/bench/benchlib/reach.py): the literal rewriting, the two structural
rewrites' scores (checked against sums computed here with numpy/scipy, not through the script), and the search's
bookkeeping."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from benchlib import reach
from scipy.optimize import linprog

from rewards import Evaluator
from tasks import load_task
from train.warm_start.data import _numbers

ROOT = Path(__file__).resolve().parents[2]


def starter_centres() -> np.ndarray:
    c = np.zeros((26, 2))
    c[0] = [0.5, 0.5]
    for i in range(8):
        t = 2 * np.pi * i / 8
        c[1 + i] = [0.5 + 0.3 * np.cos(t), 0.5 + 0.3 * np.sin(t)]
    for i in range(17):
        t = 2 * np.pi * i / 17
        c[9 + i] = [0.5 + 0.45 * np.cos(t), 0.5 + 0.45 * np.sin(t)]
    return np.clip(c, 0.01, 0.99)


def greedy_sum(c: np.ndarray) -> float:
    r = np.min([c[:, 0], c[:, 1], 1 - c[:, 0], 1 - c[:, 1]], axis=0)
    for i in range(len(c)):
        for j in range(i + 1, len(c)):
            d = np.linalg.norm(c[i] - c[j])
            if r[i] + r[j] > d:
                r[i], r[j] = r[i] * d / (r[i] + r[j]), r[j] * d / (r[i] + r[j])
    return float(r.sum())


def lp_sum(c: np.ndarray) -> float:
    n = len(c)
    rows, bounds = [], []
    for i in range(n):
        for j in range(i + 1, n):
            row = np.zeros(n)
            row[[i, j]] = 1
            rows.append(row)
            bounds.append(np.linalg.norm(c[i] - c[j]))
    edge = np.min([c[:, 0], c[:, 1], 1 - c[:, 0], 1 - c[:, 1]], axis=0)
    return float(-linprog(-np.ones(n), A_ub=rows, b_ub=bounds, bounds=[(0, e) for e in edge]).fun)


@pytest.fixture(scope="module")
def task():
    return load_task("circle_packing_26")


def test_with_values_rewrites_exactly_the_chosen_literals(task):
    starter = task.initial_program
    sites = [s for s in _numbers(starter) if "." in s[2]]
    assert [t for _, _, t in sites][:4] == ["0.5", "0.5", "0.5", "0.3"]  # centre, then the inner ring
    values = np.array([float(t) for _, _, t in sites])
    values[3] = 0.2875  # the inner ring's x radius only
    code = reach.with_values(starter, sites, values)
    changed = [(a, b) for a, b in zip(starter.splitlines(), code.splitlines()) if a != b]
    assert changed == [("        centers[1 + i] = [0.5 + 0.3 * np.cos(angle), 0.5 + 0.3 * np.sin(angle)]",
                        "        centers[1 + i] = [0.5 + 0.2875 * np.cos(angle), 0.5 + 0.3 * np.sin(angle)]")]
    assert code.count("\n") == starter.count("\n")
    values[-1] = 0.98  # the clip's upper bound, the last decimal literal
    assert "np.clip(centers, 0.01, 0.9800)" in reach.with_values(starter, sites, values)


def test_structural_rewrites_score_what_numpy_and_scipy_compute(task):
    ev = Evaluator(task, workers=2)
    results = {label: ev.evaluate(code) for label, code in reach.structural(task.initial_program).items()}
    lp = results["LP radii on the starter's centres"]
    grid = results["5 x 5 grid + 1 circle, starter's radius rule"]
    assert lp.valid and grid.valid, (lp.feedback, grid.feedback)
    assert lp.reward == pytest.approx(lp_sum(starter_centres()), abs=1e-6)
    assert lp.reward == pytest.approx(2.16033, abs=1e-5)
    centres = np.array([[0.1 + 0.2 * (k // 5), 0.1 + 0.2 * (k % 5)] for k in range(25)] + [[0.2, 0.2]])
    assert grid.reward == pytest.approx(greedy_sum(centres), abs=1e-9)
    assert ev.evaluate(task.initial_program).reward == pytest.approx(greedy_sum(starter_centres()), abs=1e-9)


def test_search_trace_is_monotone_and_its_program_scores_its_last_value(task):
    ev = Evaluator(task, workers=2)
    trace, code = reach.search(ev, task.initial_program, evaluations=41, seed=3)
    assert len(trace) == 41  # the starter, then 5 rounds of 8
    assert trace[0] == pytest.approx(1.8365015544609251, abs=1e-9)
    assert all(b >= a for a, b in zip(trace, trace[1:]))
    assert ev.evaluate(code).reward == trace[-1]
    if trace[-1] > trace[0]:
        assert code != task.initial_program


@pytest.mark.slow
def test_cli_prints_a_row_per_seed_and_the_two_rewrites():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_circle_reach.py"), "--evaluations", "17",
                           "--seeds", "0", "1"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| program | best after 17 | vs starter |" in proc.stdout
    assert len(re.findall(r"^\| numeric search, seed [01] \(\d+ lines changed\) \| 1\.\d{5} \| [+-]\d", proc.stdout,
                          re.M)) == 2
    assert re.search(r"^\| LP radii on the starter's centres \| 2\.16033 \| \+17\.63% \|", proc.stdout, re.M)
