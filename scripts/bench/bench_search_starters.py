"""How far a search-form task's starter gets on its own: the `iterate` baseline without HELIX.

Each call runs the task's program (its starter unless --program names another) as the search form
calls it, ``entry(construction, budget_s, seed)``: the first with None, each later one with the
construction the previous call returned (the last valid one, if a call fails), a fresh seed, and the
budget. Every call is a subprocess of its own with one BLAS thread (as in the sandbox), killed at
the hard limit; a program killed there counts its last ``report(construction)``, as the sandbox's
anytime reports do. Each result is scored by the task's own verifier.py. The script prints
best-so-far over wall time, then the best after each mark and the time to reach each target.

    python scripts/bench/bench_search_starters.py circle_packing_26_search --minutes 10 --targets 2.60 2.62 2.63

The budget defaults to 80% of the task's cpu_timeout_s and the hard limit to cpu_timeout_s (the
CPU-scale limit). Nothing here needs the search form in tasks/base.py: the task folder's files are
read directly. Run one at a time on a shared machine: a call's search is as good as the CPU it gets
(the load average is printed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks"
BUDGET_SHARE = 0.8  # the budget a call is told, as a share of the hard limit
MARKS_MIN = (1, 5, 10)
RECORD_MARGIN = 1e-9  # relative: tasks/base.py IMPROVEMENT_TOLERANCE, below which two rewards are the same

# The child: runs the program with report() injected as a global (each report replaces the file
# atomically, so a kill mid-write leaves the previous one), calls the entry, writes the result.
CHILD = """
import json, os, sys
program, entry, given, result, reported, budget, seed = sys.argv[1:8]

def report(construction):
    with open(reported + ".tmp", "w") as f:
        json.dump(construction, f, default=lambda o: o.tolist())
    os.replace(reported + ".tmp", reported)

namespace = {"__name__": "program", "report": report}
exec(compile(open(program).read(), program, "exec"), namespace)
with open(given) as f:
    construction = json.load(f)
returned = namespace[entry](construction, float(budget), int(seed))
with open(result, "w") as f:
    json.dump(returned, f, default=lambda o: o.tolist())
"""
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


@dataclass(frozen=True)
class Call:
    elapsed_s: float  # since the run started, when this call's result was scored
    index: int
    seed: int
    status: str  # returned | report (killed at the limit, its last report scored) | failed
    reward: float  # the verifier's; 0 when invalid or failed
    valid: bool
    best: float  # best valid reward so far, this call included (0 before any)
    note: str  # the verifier's feedback or why the call failed, one line


def load_folder(name: str) -> tuple[dict, object, Path]:
    """(task.yaml, the verifier's verify, initial_program.py) of a task folder, read directly."""
    folder = TASKS_DIR / name
    if not (folder / "task.yaml").is_file():
        names = sorted(p.parent.name for p in TASKS_DIR.glob("*_search/task.yaml"))
        raise SystemExit(f"no task folder tasks/{name}/ with a task.yaml; search-form tasks: {', '.join(names)}")
    spec = yaml.safe_load((folder / "task.yaml").read_text(encoding="utf-8"))
    module_spec = importlib.util.spec_from_file_location(f"helix_bench_{name}_verifier", folder / "verifier.py")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return spec, module.verify, folder / "initial_program.py"


def run_call(program: Path, entry: str, construction, budget_s: float, limit_s: float, seed: int):
    """(status, construction or None, note) of one call in its own process, killed at ``limit_s``."""
    with tempfile.TemporaryDirectory(prefix="helix-bench-search-") as tmp:
        given, result, reported = (os.path.join(tmp, f) for f in ("given.json", "result.json", "report.json"))
        with open(given, "w") as f:
            json.dump(construction, f)
        argv = [sys.executable, "-c", CHILD, str(program), entry, given, result, reported, repr(budget_s), str(seed)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=limit_s, cwd=tmp,
                                  env={**os.environ, **ONE_THREAD})
        except subprocess.TimeoutExpired:
            if not os.path.exists(reported):
                return "failed", None, f"killed at the {limit_s:g} s limit with nothing reported"
            with open(reported) as f:
                return "report", json.load(f), f"killed at the {limit_s:g} s limit: its last report counts"
        if done.returncode != 0 or not os.path.exists(result):
            lines = (done.stderr or done.stdout).strip().splitlines()
            return "failed", None, f"exit {done.returncode}: {lines[-1] if lines else 'no output'}"
        with open(result) as f:
            return "returned", json.load(f), ""


def iterate(program: Path, entry: str, verify, budget_s: float, limit_s: float, wall_s: float, seed: int,
            show=print, max_calls: int | None = None) -> list[Call]:
    """Call after call for ``wall_s`` seconds (or ``max_calls`` calls), each from the last valid
    construction; one line per call."""
    calls: list[Call] = []
    construction, best, start = None, 0.0, time.monotonic()
    while time.monotonic() - start < wall_s and (max_calls is None or len(calls) < max_calls):
        call_seed = seed * 100_003 + len(calls)
        status, value, note = run_call(program, entry, construction, budget_s, limit_s, call_seed)
        reward, valid = 0.0, False
        if value is not None:
            verdict = verify(value)
            reward, valid = (float(verdict.reward), True) if verdict.valid else (0.0, False)
            note = note or verdict.feedback
            if valid:
                construction, best = value, max(best, reward)
        call = Call(time.monotonic() - start, len(calls), call_seed, status, reward, valid, best, note.splitlines()[0] if note else "")
        calls.append(call)
        what = f"{call.reward:.13g}" if valid else f"invalid: {call.note[:100]}"
        show(f"{call.elapsed_s:7.1f} s  call {call.index:3d}  {status:8s}  {what}  best {best:.13g}  "
             f"load {os.getloadavg()[0]:.2f}", flush=True)
    return calls


def best_at(calls: list[Call], t_s: float) -> float | None:
    """The best reward scored by ``t_s`` seconds (None: no call had finished by then)."""
    done = [c.best for c in calls if c.elapsed_s <= t_s]
    return done[-1] if done else None


def time_to(calls: list[Call], target: float) -> float | None:
    """When the best first reached ``target`` (None: never)."""
    return next((c.elapsed_s for c in calls if c.best >= target), None)


def summary(name: str, calls: list[Call], wall_s: float, marks_s: list[float], targets: list[float],
            budget_s: float, limit_s: float, load: tuple[float, float], best_known: float | None = None) -> list[str]:
    """The run in a few lines; ``best_known`` counts as reached within the tasks' default relative
    margin of a new best (1e-9, tasks/base.py IMPROVEMENT_TOLERANCE), so float noise is no shortfall."""
    statuses = {s: sum(c.status == s for c in calls) for s in ("returned", "report", "failed")}
    invalid = sum(not c.valid and c.status != "failed" for c in calls)
    lines = [f"{name}: {len(calls)} calls in {calls[-1].elapsed_s:.0f} s (budget {budget_s:g} s, limit {limit_s:g} s): "
             f"{statuses['returned']} returned, {statuses['report']} killed at the limit (last report scored), "
             f"{statuses['failed']} failed, {invalid} invalid; load average {load[0]:.2f} at the start, {load[1]:.2f} at the end"]
    cells = []
    for mark in [m for m in marks_s if m <= wall_s]:
        value = best_at(calls, mark)
        cells.append(f"{mark / 60:g} min: {'-' if value is None else f'{value:.13g}'}")
    cells.append(f"the end ({calls[-1].elapsed_s:.0f} s): {calls[-1].best:.13g}")
    lines.append("best after " + " | ".join(cells))
    if targets:
        reach = [(t, time_to(calls, t)) for t in targets]
        lines.append("time to " + " | ".join(f"{t}: {'not reached' if s is None else f'{s:.0f} s'}" for t, s in reach))
    if best_known is not None:
        reached = time_to(calls, best_known - RECORD_MARGIN * abs(best_known))
        lines.append(f"best known {best_known}: " + (f"reached at {reached:.0f} s (best {calls[-1].best:.13g})" if reached is not None
                                                      else f"not reached, the best is {best_known - calls[-1].best:.3g} below"))
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("task", help="a search-form task folder, e.g. circle_packing_26_search")
    ap.add_argument("--minutes", type=float, default=3.0, help="wall time of the whole run")
    ap.add_argument("--budget", type=float, help=f"budget_s each call is told (default {BUDGET_SHARE:g} x the limit)")
    ap.add_argument("--limit", type=float, help="hard limit per call, seconds (default: the task's cpu_timeout_s)")
    ap.add_argument("--seed", type=int, default=0, help="call k gets seed * 100003 + k")
    ap.add_argument("--program", type=Path, help="a program to run instead of the task's starter")
    ap.add_argument("--targets", type=float, nargs="*", default=[], help="print when the best first reached each")
    ap.add_argument("--calls", type=int, help="stop after this many calls, even before --minutes")
    args = ap.parse_args(argv)
    spec, verify, starter = load_folder(args.task)
    limit = args.limit if args.limit is not None else float(spec.get("cpu_timeout_s", spec["timeout_s"]))
    budget = args.budget if args.budget is not None else BUDGET_SHARE * limit
    if not 0 < budget <= limit:
        raise SystemExit(f"--budget must be > 0 and at most the limit ({limit:g} s), got {budget:g}")
    wall = 60 * args.minutes
    load_start = os.getloadavg()[0]
    print(f"{args.task}: {spec['entry_function']}(construction, {budget:g}, seed), killed at {limit:g} s, "
          f"for {args.minutes:g} min; best known {spec['best_known']}; load average {load_start:.2f}", flush=True)
    calls = iterate(args.program or starter, spec["entry_function"], verify, budget, limit, wall, args.seed,
                    max_calls=args.calls)
    for line in summary(args.task, calls, wall, [60 * m for m in MARKS_MIN], args.targets, budget, limit,
                        (load_start, os.getloadavg()[0]), float(spec["best_known"])):
        print(line)


if __name__ == "__main__":
    main()
