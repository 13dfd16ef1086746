"""How far circle_packing_26's starter goes by changing its own numbers, and two structural rewrites
that numeric edits cannot make: the logic of ``scripts/bench/bench_circle_reach.py``, kept in the
benchmarks' package so its tests import it. The numbers are the ones the warm start's numeric edit draws from
(``train.warm_start.data._numbers``); every candidate is scored by the task's own sandboxed evaluator.
"""

from __future__ import annotations

import numpy as np

from rewards import Evaluator
from train.warm_start.data import _numbers  # the literals the warm start's numeric edit may change

LP_RADII = '''def compute_max_radii(centers):
    """Radii maximising their sum subject to no overlap and staying inside the square (an LP)."""
    from scipy.optimize import linprog
    n = centers.shape[0]
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    a = np.zeros((len(pairs), n))
    for row, (i, j) in enumerate(pairs):
        a[row, i] = a[row, j] = 1.0
    d = np.array([np.linalg.norm(centers[i] - centers[j]) for i, j in pairs])
    edge = np.min([centers[:, 0], centers[:, 1], 1 - centers[:, 0], 1 - centers[:, 1]], axis=0)
    return linprog(-np.ones(n), A_ub=a, b_ub=d, bounds=list(zip(np.zeros(n), edge))).x
'''

GRID_LAYOUT = '''    centers = np.zeros((n, 2))
    centers[:25] = [[0.1 + 0.2 * (k // 5), 0.1 + 0.2 * (k % 5)] for k in range(25)]
    centers[25] = [0.2, 0.2]
'''


def with_values(code: str, sites: list[tuple[int, int, str]], values: np.ndarray) -> str:
    """``code`` with each changed literal rewritten to its value (4 decimals), right to left."""
    for (start, end, text), value in sorted(zip(sites, values), key=lambda item: -item[0][0]):
        if value != float(text):
            code = code[:start] + f"{value:.4f}" + code[end:]
    return code


def search(ev: Evaluator, starter: str, evaluations: int, seed: int) -> tuple[list[float], str]:
    """(1+8)-ES over the starter's decimal literals; the step halves after 4 rounds without progress.
    Returns the best reward after each evaluation, and the best program."""
    rng = np.random.default_rng(seed)
    sites = [site for site in _numbers(starter) if "." in site[2]]
    best_x = np.array([float(text) for _, _, text in sites])
    best = ev.evaluate(starter).reward
    step, stale, trace = 0.05, 0, [best]
    while len(trace) + 8 <= evaluations:
        xs = []
        for _ in range(8):
            x = best_x.copy()
            for k in rng.choice(len(x), size=int(rng.integers(1, 4)), replace=False):
                x[k] = round(x[k] + step * rng.standard_normal() * max(abs(x[k]), 0.05), 4)
            xs.append(x)
        codes = [with_values(starter, sites, x) for x in xs]
        rewards = [r.reward for r in ev.evaluate_many(codes)]
        trace += list(np.maximum.accumulate([best] + rewards)[1:])
        top = int(np.argmax(rewards))
        if rewards[top] > best:
            best, best_x, stale = rewards[top], xs[top], 0
        else:
            stale += 1
            if stale == 4:
                step, stale = max(step / 2, 0.002), 0
    return trace, with_values(starter, sites, best_x)


def structural(starter: str) -> dict[str, str]:
    """Two whole-function rewrites, edits the one-line edits cannot make."""
    start, end = starter.index("def compute_max_radii"), starter.index("# EVOLVE-BLOCK-END")
    lp = starter[:start] + LP_RADII + starter[end:]
    first, last = starter.index("    centers = np.zeros((n, 2))"), starter.index("    centers = np.clip(")
    return {"LP radii on the starter's centres": lp,
            "5 x 5 grid + 1 circle, starter's radius rule": starter[:first] + GRID_LAYOUT + starter[last:]}
