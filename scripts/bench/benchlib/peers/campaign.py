"""The whole comparison: model settings x tasks x seeds x systems, one system at a time, each row cached.

For each model setting and task: the model directory (``smollm2``: the embedded SmolLM2-135M-Instruct as
setup converts it; ``warm``: HELIX's warm start of it for that task, built once by ``train.warm_start`` with
the quickstart's recipe), one vLLM server for every row that samples from it (all seeds), stopped before the
rows that hold their model in-process run. The optimiser uses no model: its rows are run once per task and
seed and shown in every setting's table.

Layout under OUT: ``<setting>/<task>/<system>-s<seed>/`` per row (result.json, system.log, evals.jsonl or
HELIX's run/, the peer's own output), ``<task>/slsqp-s<seed>/``, ``logs/`` (installs, servers, warm starts),
``results.json`` (every row) and ``peers.md`` (the tables). A row whose result.json holds the same key
(system, task, setting, seed, budget, model, pins and workarounds) is not run again; a failed row is.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from benchlib.peers.install import cache_root
from benchlib.peers.results import RowResult, cached, markdown, save
from benchlib.peers.rows import failed, run_row
from benchlib.peers.server import ServerError, served
from benchlib.peers.systems import QUICKSTART, ROOT, SYSTEMS, Row

SETTINGS = ("smollm2", "warm")
BENCH_VERSION = 1  # bump when a change to the bench changes what a row measures
RESULT = "result.json"


@dataclass(frozen=True)
class Plan:
    out: Path
    settings: list[str]
    tasks: list[str]
    seeds: list[int]
    systems: list[str]
    children: int
    wall_s: float
    optimiser_s: float


def say(text: str) -> None:
    print(f"[peers] {text}", flush=True)


def problem_text(task_name: str) -> tuple[str, float]:
    """What every system is told (the prompt text HELIX's quickstart shows: the task's brief, else its
    description, plus the time limit the sandbox enforces), and that limit."""
    from tasks import load_task, own_timeout_s

    task = load_task(task_name)
    limit = own_timeout_s(task_name, "cpu")
    text = (task.brief or task.description).strip()
    return f"{text}\n\n{task.entry_function}() must return within {limit:g} seconds.\n", limit


class ModelError(RuntimeError):
    """A model setting's weights could not be found or built; one line."""


def model_dir(setting: str, task: str, logs: Path) -> Path:
    """The HF directory a setting serves for a task (built once, then found in HELIX's cache)."""
    if setting == "smollm2":
        path = cache_root() / "models" / "SmolLM2-135M-Instruct"
        if not (path / "config.json").is_file():
            cmd = [sys.executable, "-c", "from train.learner.models import resolve_policy_path; "
                   "resolve_policy_path('smollm2-135m-instruct')"]
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            if proc.returncode != 0:
                raise ModelError(f"converting SmolLM2-135M-Instruct failed: {proc.stderr.strip().splitlines()[-1:]}")
        return path
    if setting == "warm":
        log = logs / f"warm_start-{task}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "train.warm_start", "--config", str(QUICKSTART), f"task.name={task}"]
        say(f"warm/{task}: finding or building HELIX's warm start (minutes the first time; log: {log})")
        with open(log, "w") as out:
            proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=out, text=True)
        out_lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not out_lines or not (Path(out_lines[-1]) / "config.json").is_file():
            raise ModelError(f"the warm start for {task} failed (exit {proc.returncode}; log: {log})")
        return Path(out_lines[-1])
    raise ModelError(f"unknown model setting {setting!r}; choose from {', '.join(SETTINGS)}")


def row_folder(plan: Plan, system: str, setting: str, task: str, seed: int) -> Path:
    if system == "slsqp":
        return plan.out / task / f"slsqp-s{seed}"
    return plan.out / setting / task / f"{system}-s{seed}"


def row_key(row: Row) -> dict:
    return {"bench": BENCH_VERSION, "system": row.system, "task": row.task, "seed": row.seed,
            "setting": None if row.system == "slsqp" else row.setting,
            "model": None if row.system == "slsqp" else row.model_dir.name,
            "children": None if row.system == "slsqp" else row.children, "wall_s": row.wall_s,
            **SYSTEMS[row.system].key()}


def make_row(plan: Plan, system: str, setting: str, task: str, seed: int, model: Path) -> Row:
    problem, limit = problem_text(task)
    wall = plan.optimiser_s if system == "slsqp" else plan.wall_s
    return Row(system, task, setting, seed, plan.children, wall, model, row_folder(plan, system, setting, task, seed),
               problem, limit)


def report(result: RowResult) -> None:
    if result.status == "failed":
        say(f"{result.system} {result.setting}/{result.task} seed {result.seed}: FAILED: {result.error}")
        return
    say(f"{result.system} {result.setting}/{result.task} seed {result.seed}: {result.status}, best {result.best:.6g}, "
        f"{result.valid}/{result.children} valid, {result.wall_s:.0f} s, peak {result.peak_rss_mb:.0f} MB")


def execute(plan: Plan, row: Row, server, install_log: Path) -> RowResult:
    path = row.out / RESULT
    key = row_key(row)
    hit = cached(path, key)
    if hit is not None:
        say(f"{row.system} {row.setting}/{row.task} seed {row.seed}: finished earlier, kept ({path})")
        return hit
    say(f"{row.system} {row.setting}/{row.task} seed {row.seed}: running (up to {row.wall_s:.0f} s)")
    try:
        result = run_row(row, SYSTEMS[row.system], server, install_log)
    except Exception as err:  # the bench's own fault on this row: one line here, the traceback in the row's folder
        row.out.mkdir(parents=True, exist_ok=True)
        (row.out / "bench_error.txt").write_text(traceback.format_exc())
        result = failed(row, f"the bench failed on this row ({type(err).__name__}: {err}); see {row.out / 'bench_error.txt'}")
    save(result, path, key)  # a failed row is saved too (to read), but cached() runs it again
    report(result)
    return result


def run_setting_task(plan: Plan, setting: str, task: str, logs: Path) -> list[RowResult]:
    """Every row of one model setting and task, the optimiser's excepted."""
    systems = [s for s in plan.systems if s != "slsqp"]
    try:
        model = model_dir(setting, task, logs)
    except ModelError as err:
        say(f"{setting}/{task}: {err}")
        return [failed(make_row(plan, s, setting, task, seed, Path(setting)), str(err)) for seed in plan.seeds for s in systems]
    rows = [make_row(plan, s, setting, task, seed, model) for seed in plan.seeds for s in systems]
    results: dict[Row, RowResult] = {}
    for row in rows:  # what finished earlier needs no server
        hit = cached(row.out / RESULT, row_key(row))
        if hit is not None:
            say(f"{row.system} {setting}/{task} seed {row.seed}: finished earlier, kept")
            results[row] = hit
    served_rows = [r for r in rows if r not in results and SYSTEMS[r.system].gate is not None]
    if served_rows:
        log = logs / f"server-{setting}-{task}.log"
        say(f"{setting}/{task}: starting vLLM's OpenAI server on {model} (log: {log})")
        try:
            with served(model, setting, log) as server:
                say(f"{setting}/{task}: serving {server.url} (model {server.model!r})")
                for row in served_rows:
                    results[row] = execute(plan, row, server, logs / "install.log")
        except ServerError as err:
            say(f"{setting}/{task}: {err}")
            for row in served_rows:
                results.setdefault(row, failed(row, str(err)))
        say(f"{setting}/{task}: server stopped")
    for row in rows:
        if row not in results:
            results[row] = execute(plan, row, None, logs / "install.log")
    return [results[r] for r in rows]


def run(plan: Plan) -> list[RowResult]:
    """Every row of the plan, then the tables: OUT/results.json and OUT/peers.md."""
    plan.out.mkdir(parents=True, exist_ok=True)
    logs = plan.out / "logs"
    start = time.time()
    results: list[RowResult] = []
    for setting in plan.settings:
        for task in plan.tasks:
            results += run_setting_task(plan, setting, task, logs)
    if "slsqp" in plan.systems:
        for task in plan.tasks:
            for seed in plan.seeds:
                results.append(execute(plan, make_row(plan, "slsqp", "-", task, seed, Path("-")), None, logs / "install.log"))
    write_tables(plan, results, time.time() - start)
    return results


def tables(plan: Plan, results: list[RowResult]) -> str:
    parts = []
    for setting in plan.settings:
        for task in plan.tasks:
            mine = [r for r in results if r.task == task and (r.setting == setting or r.system == "slsqp")]
            budget = f"{plan.children} children" if plan.children else "no children limit"
            title = f"{task}, model {setting}: {budget}, {plan.wall_s:.0f} s cap, {len(plan.seeds)} seed(s)"
            parts.append(markdown(title, mine, plan.systems))
    return "\n".join(parts)


def write_tables(plan: Plan, results: list[RowResult], elapsed_s: float) -> None:
    text = tables(plan, results)
    notes = sorted({n for r in results for n in r.notes})
    body = text + ("\nNotes:\n" + "\n".join(f"- {n}" for n in notes) + "\n" if notes else "")
    (plan.out / "peers.md").write_text(body)
    (plan.out / "results.json").write_text(json.dumps({"plan": {k: str(v) if isinstance(v, Path) else v
                                                                 for k, v in asdict(plan).items()},
                                                        "elapsed_s": elapsed_s,
                                                        "rows": [asdict(r) for r in results]}, indent=1))
    print(body, flush=True)
    say(f"wrote {plan.out / 'peers.md'} and {plan.out / 'results.json'} ({elapsed_s / 60:.1f} min this invocation)")
