"""Symbolic-regression tasks: reward and evaluation time per program kind, cascade on vs off.

What the cascade costs (one extra sandbox start for a program that passes stage 1) and what it
saves (the rest of the full time limit for a program that hangs), on the real sandbox.

    python scripts/bench/bench_symreg.py [--repeats 3] [--timeout 20] [--tasks symreg_chemistry ...]
"""

from __future__ import annotations

import argparse
import statistics
import time

from rewards import Evaluator
from tasks import load_task

TRUE = {
    "symreg_chemistry": "t, a = x[:, 0], x[:, 1]\n    return -params[0] * a**2 - params[1] * a * np.exp(-params[2] * t)",
    "symreg_biology": "p = x[:, 1]\n    return params[0] * p * (1 - params[1] * p) - params[2] * p**2 / (1 + p**2)",
    "symreg_physics": "q, v = x[:, 0], x[:, 1]\n    return -params[0] * q - params[1] * v - params[2] * q**3",
}


def programs(task) -> dict[str, str]:
    head = "import numpy as np\n\ndef func(x, params):\n    "
    return {"true law": head + TRUE[task.name], "linear starter": task.initial_program,
            "wrong shape": head + "return x * params[0]",
            "hangs": "import time\n" + head + "time.sleep(3600)\n    return x[:, 0]"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=20.0, help="full time limit (configs/symreg_*.yaml use 20 s)")
    ap.add_argument("--tasks", nargs="+", default=list(TRUE))
    args = ap.parse_args()
    print("| task | program | reward | status | eval s, cascade off | eval s, cascade on |")
    print("|---|---|---|---|---|---|")
    for name in args.tasks:
        task = load_task(name)
        for label, code in programs(task).items():
            cells = {}
            for cascade in (False, True):
                ev = Evaluator(task, workers=1, timeout_s=args.timeout, cascade=cascade)
                repeats = 1 if label == "hangs" else args.repeats
                times, results = [], []
                for _ in range(repeats):
                    start = time.monotonic()
                    results.append(ev.evaluate(code))
                    times.append(time.monotonic() - start)
                cells[cascade] = (statistics.median(times), results[0])
            result = cells[True][1]
            print(f"| {name} | {label} | {result.reward:.3f} | {result.status} | {cells[False][0]:.2f} | {cells[True][0]:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
