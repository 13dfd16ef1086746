"""How far circle_packing_26's starter goes by changing its own numbers, and what structural edits give.

The warm-started 135M policy writes one-number and one-line edits. This asks what that kind of
edit can reach at all: a (1+8) evolution strategy changes the starter's decimal literals (the ones
the warm start's numeric edit draws from: ring radii, centres, clip bounds), one to three at a
time, every candidate scored by the task's own sandboxed evaluator, and keeps the best. Its result
is a lower bound on the numeric ceiling, from a far larger search than any 256-child run makes.
Two structural rewrites are scored beside it: radii from a linear programme on the starter's
centres, and a 5 x 5 grid plus one circle under the starter's radius rule.

    python scripts/bench/bench_circle_reach.py [--evaluations 1200] [--seeds 0 1 2] [--workers 2]
"""

from __future__ import annotations

import argparse

from benchlib.reach import search, structural  # scripts/bench/ is first on sys.path: this is run as a script

from rewards import Evaluator
from tasks import load_task

BUDGETS = (64, 256)


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
