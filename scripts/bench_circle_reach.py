"""How far circle_packing_26's starter goes by changing its own numbers, and what structural edits give.

The warm-started 135M policy writes one-number and one-line edits. This asks what that kind of
edit can reach at all: a (1+8) evolution strategy changes the starter's decimal literals (the ones
the warm start's numeric edit draws from: ring radii, centres, clip bounds), one to three at a
time, every candidate scored by the task's own sandboxed evaluator, and keeps the best. Its result
is a lower bound on the numeric ceiling, from a far larger search than any 256-child run makes.
Two structural rewrites are scored beside it: radii from a linear programme on the starter's
centres, and a 5 x 5 grid plus one circle under the starter's radius rule.

    python scripts/bench_circle_reach.py [--evaluations 1200] [--seeds 0 1 2] [--workers 2]
"""

from __future__ import annotations

import argparse

import numpy as np

from rewards import Evaluator
from tasks import load_task
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

BUDGETS = (64, 256)

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evaluations", type=int, default=1200, help="per seed, the starter included")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    task = load_task("circle_packing_26")
    ev = Evaluator(task, workers=args.workers)
    starter = task.initial_program
    base = ev.evaluate(starter).reward
    print(f"starter {base:.5f}; +10% over it: {1.1 * base:.5f}")
    budgets = [b for b in BUDGETS if b < args.evaluations] + [args.evaluations]
    print("| program | " + " | ".join(f"best after {b}" for b in budgets) + " | vs starter |")
    print("|---|" + "---|" * len(budgets) + "---|")
    for seed in args.seeds:
        trace, code = search(ev, starter, args.evaluations, seed)
        changed = sum(a != b for a, b in zip(starter.splitlines(), code.splitlines()))
        cells = " | ".join(f"{trace[min(b, len(trace)) - 1]:.5f}" for b in budgets)
        print(f"| numeric search, seed {seed} ({changed} lines changed) | {cells} | {trace[-1] / base - 1:+.2%} |",
              flush=True)
    for label, code in structural(starter).items():
        result = ev.evaluate(code)
        note = "" if result.valid else f" (invalid: {result.feedback[:80]!r})"
        print(f"| {label} | " + " | ".join([""] * (len(budgets) - 1) + [f"{result.reward:.5f}"])
              + f" | {result.reward / base - 1:+.2%}{note} |")


if __name__ == "__main__":
    main()
