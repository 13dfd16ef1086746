"""Evaluation through Ray (``task.eval_backend: ray``) vs the local sandbox pool, same programs, one run.

    .venv/bin/python scripts/bench/bench_ray_eval.py                  # a private 2-CPU Ray on this machine
    .venv/bin/python scripts/bench/bench_ray_eval.py --address 10.0.0.5:6379 --workers 32

Rows (evaluations per second, median of --repeats batches; the ratio is Ray's rate over the local
pool's, both with --workers programs at once: the local pool's threads, and the private cluster's
CPUs, which is what Ray admits at once):
- ``trivial``: an entry that returns 1 (numpy imported): almost all of the cost is per-task overhead.
- ``circle_packing_26 starter``: the real task through its verifier (about 0.1 s of program).
- ``1 s program``: an entry that spins the CPU for 1 s, where Ray's overhead should stop mattering.
Ray's first batch after start-up pays for worker processes and the runtime_env upload; one warm-up
batch per row runs before timing. The two backends' batches alternate (local, Ray, Ray, local, ...),
so a busy neighbour on the machine slows both alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from types import SimpleNamespace

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # a private cluster stays on 127.0.0.1
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from rewards import Evaluator, make_runner
from tasks import load_task
from tasks.base import Verdict

TRIVIAL = "import numpy as np\n\n\ndef main():\n    return 1\n"
SPIN = "import time\n\n\ndef main():\n    end = time.process_time() + 1.0\n    n = 0\n" \
       "    while time.process_time() < end:\n        n += 1\n    return 1\n"


def bare_task(name: str, code: str):
    return SimpleNamespace(name=name, timeout_s=30.0, memory_mb=1024, cascade_entry=None, harness=None, data_files=(),
                           run_entry="main", entry_function="main", initial_program=code,
                           verify=lambda value: Verdict(float(value), True, "ok", {}))


def rates(evaluators: list[Evaluator], code: str, n: int, repeats: int) -> list[float]:
    """Median evaluations/s of each evaluator, their batches interleaved (A B, then B A, ...) so that
    what else the machine does at the time weighs on both alike."""
    programs = [f"{code}\n# {k}\n" for k in range(n)]  # distinct texts: nothing can be cached
    for evaluator in evaluators:
        evaluator.evaluate_many(programs[: evaluator.workers])  # warm-up
    found: list[list[float]] = [[] for _ in evaluators]
    for repeat in range(repeats):
        order = range(len(evaluators)) if repeat % 2 == 0 else reversed(range(len(evaluators)))
        for i in order:
            start = time.perf_counter()
            results = evaluators[i].evaluate_many(programs)
            found[i].append(n / (time.perf_counter() - start))
            bad = [r.status for r in results if r.status != "ok"]
            if bad:
                raise SystemExit(f"bench_ray_eval: {len(bad)} evaluations failed ({bad[0]})")
    return [statistics.median(r) for r in found]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default="", help="task.ray_address ('' starts a private Ray here)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="programs at once (both backends)")
    parser.add_argument("--n", type=int, default=24, help="evaluations per batch (the 1 s row uses n/3)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = [("trivial", bare_task("trivial", TRIVIAL), args.n),
            ("circle_packing_26 starter", load_task("circle_packing_26"), args.n),
            ("1 s program", bare_task("spin", SPIN), max(args.workers, args.n // 3))]
    start = time.perf_counter()
    runner = make_runner("ray", rows[0][1], args.address, args.workers)
    print(f"Ray connected in {time.perf_counter() - start:.1f} s ({runner.cpus()} CPUs); workers={args.workers}, "
          f"{os.cpu_count()} cores here\n")
    print("| programs | n | local pool (evals/s) | Ray (evals/s) | Ray / local |")
    print("|---|---|---|---|---|")
    for label, task, n in rows:
        code = task.initial_program
        row_runner = make_runner("ray", task, args.address)  # the task's own data files, in the first runner's session
        local, remote = rates([Evaluator(task, workers=args.workers),
                               Evaluator(task, workers=args.workers, runner=row_runner)], code, n, args.repeats)
        row_runner.close()
        print(f"| {label} | {n} | {local:.2f} | {remote:.2f} | {remote / local:.2f} |", flush=True)
    runner.close()


if __name__ == "__main__":
    main()
