"""Sandbox benchmark: evaluations per second through ``rewards`` next to a bare
``subprocess.run([python, -c, ...])`` doing the same work, in one run; the overhead is the ratio.

    .venv/bin/python scripts/bench/bench_sandbox.py                 # 24 evaluations per row
    .venv/bin/python scripts/bench/bench_sandbox.py --n 48 --workers 4
    .venv/bin/python scripts/bench/bench_sandbox.py --record        # and the sandbox rates into BENCHMARKS.json

``--record`` writes the first table's sandbox column into BENCHMARKS.json (its ``sandbox`` entry, with the
command, the date and the machine), where ``scripts/plan_scale.py`` reads its evaluations per second per core.

Rows (each the median of --repeats batches of --n evaluations):
- ``trivial``: a program whose entry returns 1 (numpy imported, as every task program does).
- ``circle_packing_26 starter``: the real starter through ``Evaluator`` (sandbox + JSON artefact
  + the trusted verifier in the parent).
- Sandboxed two ways: forked from a template process (``rewards.zygote``, the default) and
  through the launcher (two fresh interpreters a program, ``zygote.set_enabled(False)``).
- The bare baselines run the same code with ``python -c`` (the program, then a print of the
  entry's result), no limits, no isolation, no verification: once with this process's
  environment, once with BLAS/OpenMP pinned to one thread as the sandbox does; and a bare
  ``python -c "import numpy"`` (one BLAS thread), the floor of any fresh interpreter that runs a
  task program. The last two columns are sandboxed evaluations per second over that floor's.
Batches of every column alternate (--repeats rounds), so a busy machine slows them alike.
Sequential (1 worker) and parallel (``--workers``, default: the machine's cores) for each. What
the sandbox adds per program: a fresh temporary directory, rlimits, the network namespace,
the child runner, JSON result transport, process-group cleanup, and the verifier.

A second table times the online bin-packing starters before and after the trusted driver
(rewards/channel.py), each evaluation checked by the task's verifier: "before" is the harness that
packed every instance inside the sandbox from a copy of data.npz (scripts/bench/bin_packing_harness_before.py,
a bench-only copy), "after" the task as it is, whose driver in this process hands the program one item
per request. Batches of the two alternate (--repeats pairs, --binpack-n evaluations each), so a busy
machine slows both alike; both must give the same reward.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BEFORE_HARNESS = Path(__file__).resolve().parent / "bin_packing_harness_before.py"
MEASURED = Path(__file__).resolve().parents[2] / "BENCHMARKS.json"  # the measured figures, beside BENCHMARKS.md
BINPACK_TASKS = ("bin_packing_or", "bin_packing_weibull")

TRIVIAL = "import numpy as np\n\n\ndef run():\n    return 1\n"


def rates(fns, n: int, workers: int, repeats: int) -> list[float]:
    """Median evaluations per second of ``n`` calls of each of ``fns`` on ``workers`` threads, their
    batches alternating. A callable may be a (setup, fn) pair: setup() runs before each of its batches."""
    got: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, out in zip(fns, got):
            setup, fn = fn if isinstance(fn, tuple) else (lambda: None, fn)
            setup()
            start = time.perf_counter()
            with ThreadPoolExecutor(max_workers=workers) as pool:
                results = list(pool.map(lambda _: fn(), range(n)))
            out.append(n / (time.perf_counter() - start))
            assert all(results), "an evaluation failed: the benchmark would time a failure path"
    return [statistics.median(r) for r in got]


# The sandbox's child environment pins BLAS/OpenMP to one thread; numpy's import then skips
# starting a thread pool. The second baseline gets the same environment, to separate that
# effect from the sandbox's own cost.
ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def bare(code: str, entry: str, env: dict | None = None):
    script = code + f"\nprint({entry}())\n"

    def run() -> bool:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
        return out.returncode == 0

    return run


def bare_numpy() -> bool:
    """``python -c "import numpy"`` with one BLAS thread: what any fresh interpreter running a task program costs."""
    return subprocess.run([sys.executable, "-c", "import numpy"], env=ONE_THREAD).returncode == 0


def binpack_runs(task):
    """(before, after): callables that evaluate the starter with the old in-sandbox harness and the
    data file, and with the task's driver; each returns the verified reward (0 if invalid)."""
    from rewards.sandbox import run_program

    before_source = BEFORE_HARNESS.read_text(encoding="utf-8")
    code, data = task.initial_program, (task.folder / "data.npz",)

    def score(run) -> float:
        verdict = task.verify(run.value) if run.status == "ok" else None
        return verdict.reward if verdict is not None and verdict.valid else 0.0

    def before() -> float:
        return score(run_program(code, "helix_online_binpack", task.timeout_s, task.memory_mb, harness=before_source,
                                 files=data))

    def after() -> float:
        return score(run_program(code, task.run_entry, task.timeout_s, task.memory_mb, harness=task.harness,
                                 driver=task.driver))

    return before, after


def paired_rates(first, second, n: int, workers: int, repeats: int) -> tuple[float, float, set]:
    """Median evaluations per second of ``first`` and ``second``, their batches alternating; the rewards seen."""
    rates: tuple[list, list] = ([], [])
    rewards = set()
    for _ in range(repeats):
        for fn, out in ((first, rates[0]), (second, rates[1])):
            start = time.perf_counter()
            with ThreadPoolExecutor(max_workers=workers) as pool:
                got = list(pool.map(lambda _: fn(), range(n)))
            out.append(n / (time.perf_counter() - start))
            assert all(got), "an evaluation failed: the benchmark would time a failure path"
            rewards.update(got)
    return statistics.median(rates[0]), statistics.median(rates[1]), rewards


def record(path: Path, rows: list[dict], command: str, loads: tuple[str, str]) -> None:
    """The sandbox rates of this run as the ``sandbox`` entry of the measured figures at ``path`` (the other
    entries kept)."""
    measured = json.loads(path.read_text()) if path.is_file() else {}
    machine = f"{os.cpu_count()}-core {platform.processor() or platform.machine()}, load average {loads[0]} before, " \
              f"{loads[1]} after"
    measured["sandbox"] = {
        "what": "sandbox evaluations per second through rewards (the template process, every fence on), per program "
                "and worker count: BENCHMARKS.md 'Sandbox'",
        "command": command, "date": time.strftime("%Y-%m-%d"), "machine": machine, "rows": rows}
    path.write_text(json.dumps(measured, indent=1) + "\n")


def main(argv=None) -> None:
    from rewards import Evaluator, zygote
    from rewards.sandbox import isolation, run_program
    from tasks import load_task

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=24, help="evaluations per batch")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="parallel sandboxes (default: cores)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--binpack", nargs="*", default=list(BINPACK_TASKS), choices=BINPACK_TASKS,
                    help="bin-packing tasks for the before/after driver table (none: skip it)")
    ap.add_argument("--binpack-n", type=int, default=4, help="evaluations per bin-packing batch")
    ap.add_argument("--record", nargs="?", const=str(MEASURED), metavar="JSON",
                    help=f"write the sandbox rates into this measured-figures file (default {MEASURED.name})")
    args = ap.parse_args(argv)

    task = load_task("circle_packing_26")
    evaluator = Evaluator(task, workers=1)
    starter = task.initial_program
    cases = [
        ("trivial", lambda: run_program(TRIVIAL, "run", 20, 1024).status == "ok", TRIVIAL, "run"),
        ("circle_packing_26 starter", lambda: evaluator.evaluate(starter).valid, starter, task.entry_function),
    ]
    iso = isolation()
    cmd = " ".join(["scripts/bench/bench_sandbox.py", *(argv if argv is not None else sys.argv[1:])])
    print(f"Command: `.venv/bin/python {cmd}`")
    print(f"{args.n} evaluations per batch, median of {args.repeats} batches; isolation on this machine: {iso}\n")
    load_before = ' '.join(open('/proc/loadavg').read().split()[:3])
    print(f"Load average before: {load_before}\n")
    print("| program | workers | sandbox evals/s | launcher evals/s | bare `python -c` evals/s | bare, 1 BLAS thread evals/s "
          "| bare `import numpy` evals/s | sandbox rate / bare `import numpy` | launcher rate / bare `import numpy` |")
    print("|---|---|---|---|---|---|---|---|---|")
    template, launcher = (lambda: zygote.set_enabled(True)), (lambda: zygote.set_enabled(False))
    recorded = []
    for name, sandboxed, code, entry in cases:
        for workers in sorted({1, args.workers}):
            ours, old, base, base1, floor = rates([(template, sandboxed), (launcher, sandboxed), bare(code, entry),
                                                   bare(code, entry, ONE_THREAD), bare_numpy], args.n, workers, args.repeats)
            print(f"| {name} | {workers} | {ours:.1f} | {old:.1f} | {base:.1f} | {base1:.1f} | {floor:.1f} "
                  f"| {ours / floor:.2f}x | {old / floor:.2f}x |", flush=True)
            recorded.append({"program": name, "workers": workers, "sandbox_evals_per_s": round(ours, 1)})
    zygote.set_enabled(True)
    load_after = ' '.join(open('/proc/loadavg').read().split()[:3])
    print(f"\nLoad average after: {load_after}")
    if args.record:
        record(Path(args.record), recorded, f".venv/bin/python {cmd}", (load_before, load_after))
        print(f"Sandbox rates recorded in {args.record}")
    if not args.binpack:
        return
    print(f"\nOnline bin packing, starter: before (harness + data.npz in the sandbox) and after (trusted driver), "
          f"{args.binpack_n} evaluations per batch, batches alternating, median of {args.repeats} each\n")
    print("| task | workers | before evals/s | after evals/s | after time / before | reward (both) |")
    print("|---|---|---|---|---|---|")
    for name in args.binpack:
        before, after = binpack_runs(load_task(name))
        for workers in sorted({1, args.workers}):
            old, new, rewards = paired_rates(before, after, args.binpack_n, workers, args.repeats)
            assert len(rewards) == 1, f"before and after disagree on the starter's reward: {sorted(rewards)}"
            print(f"| {name} | {workers} | {old:.3f} | {new:.3f} | {old / new:.2f}x | {rewards.pop():.6f} |", flush=True)


if __name__ == "__main__":
    main()
