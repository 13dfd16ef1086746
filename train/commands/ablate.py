"""Run a set of ablations with several seeds under one budget, and write one comparison table.

    python scripts/ablate.py --task circle_packing_26 --seeds 0 1 2 --evaluations 64
    python scripts/ablate.py --task keane_bump_20 --variants helix evo_only --wall-s 900
    python scripts/ablate.py --config configs/base/paper_14b.yaml --set task.name=circle_packing_26 --seeds 0 --evaluations 512
    python scripts/ablate.py --task circle_packing_26 --seeds 0 --evaluations 8 --set model.policy=tiny-random

A variant is an overlay, configs/ablations/<variant>.yaml: the one setting it changes (helix: none), for any task.
Each (variant, seed) is its own `train/helix.py` process on the task's config (`--task T`: configs/base/cpu.yaml
task.name=T, the task at CPU scale with its own time limit; or `--config PATH`) with the variant's setting(s) as dotted
overrides, given last so that they hold; its run directory's config.yaml is the resolved config. Every run is
stopped by the same budget (children evaluated, or wall-clock seconds), so every variant gets the same number of
evaluated programs. A variant that would not change the task's
config (its setting is already the config's) repeats helix: it is skipped with a note, or refused when named in
--variants; so is one the task cannot run (iterate, the no-LLM baseline, needs a search-form task). Runs land in
OUT/<variant>-s<seed>; a run finished with the same settings is not redone (from any checkout), so an
interrupted ablation continues where it stopped. A finished run made with other settings is moved aside to
OUT/<variant>-s<seed>.replaced-<k>, never deleted, and run again. The table (markdown + JSON) goes to
OUT/ablation.md and OUT/ablation.json.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import yaml

from train.config.variants import CONFIGS, ROOT, available_variants, variant_settings
from train.loop import run_lock
from train.runs.ablation import RunResult, markdown, run_result, summarize

CPU_BASE = CONFIGS / "base" / "cpu.yaml"  # what --task T runs T on (task.name=T)
DONE = "ablation_result.json"


def available_tasks() -> list[str]:
    """The names --task accepts: every task under tasks/ and in HELIX_TASKS's folders (tasks/paths.py)."""
    from tasks import available_tasks as tasks

    return tasks()


def _as_yaml(value) -> str:
    """A value as the text after '=' in a dotted override (parsed back as YAML)."""
    if isinstance(value, str) and yaml.safe_load(value) == value:
        return value
    return json.dumps(value)


def variant_overrides(variant: str) -> list[str]:
    """The variant as dotted overrides for train/helix.py (and train.config.config.load_config)."""
    return [f"{key}={_as_yaml(value)}" for key, value in variant_settings(variant).items()]


def unchanged_by(config: Path, variants: list[str], overrides: list[str]) -> dict[str, list[str]]:
    """For each variant that leaves the config (with overrides) exactly as it is, its settings: it would repeat
    helix. Loading every variant also validates it on this config now, not hours later when its turn comes."""
    from train.config.config import load_config, to_dict

    base = to_dict(load_config(config, overrides))
    same = {}
    for variant in variants:
        extra = variant_overrides(variant)
        if extra and to_dict(load_config(config, overrides + extra)) == base:
            same[variant] = extra
    return same


def inapplicable(config: Path, variants: list[str], overrides: list[str]) -> dict[str, str]:
    """For each variant the config's task cannot run, why (train.config.config.check_form: the iterate baseline
    needs a search-form task); checked on the task's folder now, not when the variant's turn comes."""
    from train.config.config import ConfigError, check_form, load_config

    why = {}
    for variant in variants:
        try:
            check_form(load_config(config, overrides + variant_overrides(variant)))
        except ConfigError as err:
            why[variant] = str(err)
    return why


def settings(command: list[str]) -> list[str]:
    """What decides a recorded run (``train/helix.py`` and its arguments): the arguments, with a config inside the
    checkout named relative to it and without the output folder. A recorded command holds absolute paths, and a
    clone or a moved checkout must still find its finished runs instead of running them again."""
    if not command:
        return []
    root, args = Path(command[0]).parents[1], list(command[1:])
    if "--config" in args[:-1]:
        i = args.index("--config") + 1
        if Path(args[i]).is_relative_to(root):
            args[i] = str(Path(args[i]).relative_to(root))
    return [a for a in args if not a.startswith("run.output_dir=")]


def _run_measured(cmd: list[str], quiet: bool) -> tuple[int, str, int]:
    """(exit code, stderr, peak resident set in kB) of one run: reaped with wait4, whose rusage gives the
    largest resident set among the run's process and the ones it waited for (the sandboxed children)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL if quiet else None, stderr=subprocess.PIPE, text=True)
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.append(proc.stderr.read()), daemon=True)
    reader.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:  # Ctrl-C: the run goes with us
        proc.kill()
        proc.wait()
        raise
    reader.join()
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    return proc.returncode, "".join(stderr), int(usage.ru_maxrss)


def run_one(config: Path, variant: str, seed: int, out: Path, budget: list[str], overrides: list[str],
            quiet: bool) -> RunResult:
    run_dir = out / f"{variant}-s{seed}"
    cmd = [sys.executable, str(ROOT / "train" / "helix.py"), "--config", str(config), f"run.seed={seed}",
           f"run.output_dir={out}", f"run.name={run_dir.name}", "run.export=false", "run.checkpoint_every=0",
           "run.progress=false", *budget, *overrides, *variant_overrides(variant)]
    run_lock.refuse_if_held(run_dir)  # a run still going there (an ablation started twice): never delete it
    if (run_dir / DONE).is_file():  # finished earlier with the same settings: an interrupted ablation continues
        done = json.loads((run_dir / DONE).read_text())
        if settings(done.get("command", [])) == settings(cmd[1:]):
            return RunResult(**done["result"])
        k = 1
        while (kept := run_dir.with_name(f"{run_dir.name}.replaced-{k}")).exists():
            k += 1
        run_dir.rename(kept)
        print(f"[ablate] {run_dir} was run with other settings (budget, overrides or config): kept as {kept}, "
              "running it again", flush=True)
    elif run_dir.exists():  # unfinished: start again from scratch
        shutil.rmtree(run_dir)
    print(f"[ablate] {variant} seed {seed}: {' '.join(cmd[1:])}", flush=True)
    start = time.perf_counter()
    returncode, stderr, peak_kb = _run_measured(cmd, quiet)
    wall = time.perf_counter() - start
    if returncode != 0:
        raise RuntimeError(f"{variant} seed {seed} failed (exit {returncode}):\n{stderr[-3000:]}")
    result = run_result(run_dir, variant, seed, wall, peak_kb)
    (run_dir / DONE).write_text(json.dumps({"command": cmd[1:], "result": asdict(result)}))
    return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ablate.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--task", help="T: ablate task T at CPU scale (configs/base/cpu.yaml task.name=T), e.g. keane_bump_20")
    target.add_argument("--config", type=Path, help="ablate this config file instead")
    parser.add_argument("--variants", nargs="+", help="default: every overlay in configs/ablations/, helix first")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    budget = parser.add_mutually_exclusive_group(required=True)
    budget.add_argument("--evaluations", type=int, help="children evaluated per run (the same for every variant)")
    budget.add_argument("--wall-s", type=float, help="wall-clock seconds per run")
    parser.add_argument("--out", type=Path, help="default: runs/ablate-<task or config name>")
    parser.add_argument("--quiet", action="store_true", help="hide each run's console table")
    parser.add_argument("--set", nargs="+", default=[], dest="overrides", metavar="KEY=VALUE",
                        help="dotted overrides applied to every run, e.g. --set rollout.max_new_tokens=128")
    args = parser.parse_args(argv)
    if args.evaluations is not None and args.evaluations < 1:
        parser.error("--evaluations must be >= 1")
    args.error = parser.error
    return args


def target(args: argparse.Namespace) -> tuple[Path, str]:
    """The config file to ablate and its label (the task, or the config's name). ``--task T`` puts
    ``task.name=T`` first in args.overrides, so a --set given with it still wins."""
    if args.task is not None:
        try:
            names = available_tasks()
        except ValueError as exc:  # a HELIX_TASKS entry that is no folder, or a task shadowing a shipped one
            args.error(str(exc))
        if args.task not in names:
            near = difflib.get_close_matches(args.task, names, n=3, cutoff=0.6)
            hint = f" Did you mean {' or '.join(near)}?" if near else ""
            args.error(f"no task {args.task!r} under tasks/ or in HELIX_TASKS's folders.{hint} Tasks: {', '.join(names)}")
        args.overrides = [f"task.name={args.task}", *args.overrides]
        return CPU_BASE, args.task
    config = args.config.resolve()
    if not config.is_file():
        args.error(f"no config file {args.config}")
    return config, args.config.stem


def chosen_variants(args: argparse.Namespace, config: Path, label: str) -> list[str]:
    """--variants (default: every overlay, helix first), less those that would repeat helix on this config."""
    available = available_variants()
    variants = args.variants or (["helix"] + [v for v in available if v != "helix"])
    unknown = [v for v in variants if v not in available]
    if unknown:
        args.error(f"unknown variant(s) {unknown}; available (configs/ablations/): {', '.join(available)}")
    try:
        same = unchanged_by(config, variants, args.overrides)
    except ValueError as err:  # train.config.config.ConfigError is one
        args.error(f"config error: {err}")
    for variant, extra in same.items():
        why = f"variant {variant} ({' '.join(extra)}) leaves {label} unchanged: it would repeat helix"
        if args.variants:
            args.error(why)
        print(f"[ablate] skipping {why}", flush=True)
    cannot = inapplicable(config, [v for v in variants if v not in same], args.overrides)
    for variant, why in cannot.items():
        if args.variants:
            args.error(f"variant {variant}: {why}")
        print(f"[ablate] skipping variant {variant} on {label}: {why}", flush=True)
    return [v for v in variants if v not in same and v not in cannot]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config, label = target(args)
    variants = chosen_variants(args, config, label)
    if args.evaluations is not None:
        budget_args = [f"run.max_evaluations={args.evaluations}", "trainer.epochs=100000"]
        title = f"{label}: {args.evaluations} evaluated programs per run"
    else:
        budget_args = [f"run.time_budget_s={args.wall_s}", "trainer.epochs=100000"]
        title = f"{label}: {args.wall_s:.0f} s wall clock per run"
    out = args.out or ROOT / "runs" / f"ablate-{label}"
    out.mkdir(parents=True, exist_ok=True)

    try:
        results = [run_one(config, v, s, out, budget_args, args.overrides, args.quiet)
                   for v in variants for s in args.seeds]
    except run_lock.RunDirInUse as err:  # the runs before it are kept: rerun this command once that run ends
        print(f"ablate.py: error: {err}", file=sys.stderr)
        return 2
    rows = summarize(results)
    table = markdown(rows, title)
    command = "python scripts/ablate.py " + " ".join(sys.argv[1:] if argv is None else argv)
    (out / "ablation.md").write_text(table + f"\nReproduce: `{command}`\n")
    (out / "ablation.json").write_text(json.dumps({"title": title, "command": command, "rows": rows,
                                                   "runs": [asdict(r) for r in results]}, indent=1))
    print(table)
    print(f"[ablate] wrote {out / 'ablation.md'} and {out / 'ablation.json'}")
    return 0
