"""Run a set of ablations with several seeds under one budget, and write one comparison table.

    python scripts/ablate.py --task circle_packing_26 --seeds 0 1 2 --evaluations 64
    python scripts/ablate.py --task circle_packing_26 --variants helix evo_only --wall-s 900
    python scripts/ablate.py --task circle_packing_26 --seeds 0 --evaluations 8 --set model.policy=tiny-random

Each (variant, seed) is its own `train/helix.py` process on `configs/ablations/<task>/<variant>.yaml`,
stopped by the same budget (children evaluated, or wall-clock seconds), so every variant gets the
same number of evaluated programs. Runs land in OUT/<variant>-s<seed>; a run finished with the
same command is not redone, so an interrupted ablation continues where it stopped (a run made
with other settings is run again). The table (markdown + JSON) goes
to OUT/ablation.md and OUT/ablation.json.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ABLATIONS = ROOT / "configs" / "ablations"
DONE = "ablation_result.json"


@dataclass(frozen=True)
class RunResult:
    variant: str
    seed: int
    best_reward: float  # best valid reward in the archive (the starter counts: it is the floor)
    child_reward_mean: float  # mean trusted reward over every child
    child_valid_frac: float
    children: int  # evaluated programs = generated children, edit failures included
    wall_s: float


def collect(run_dir: Path, variant: str, seed: int, wall_s: float) -> RunResult:
    """Read a finished run's outcome from its archive (read-only)."""
    db = sqlite3.connect(f"file:{run_dir / 'archive.sqlite'}?mode=ro", uri=True)
    try:
        best = db.execute("SELECT MAX(reward) FROM solutions WHERE valid = 1").fetchone()[0]
        rewards = np.array([r[0] for r in db.execute("SELECT reward FROM solutions WHERE parent_id IS NOT NULL")])
        valid = np.array([r[0] for r in db.execute("SELECT valid FROM solutions WHERE parent_id IS NOT NULL")])
    finally:
        db.close()
    return RunResult(variant, seed, float(best if best is not None else 0.0),
                     float(rewards.mean()) if len(rewards) else 0.0,
                     float(valid.mean()) if len(valid) else 0.0, int(len(rewards)), wall_s)


def summarize(results: list[RunResult]) -> list[dict]:
    """Per variant, in first-seen order: mean and sample std (ddof=1) over seeds."""
    rows = []
    for variant in dict.fromkeys(r.variant for r in results):
        mine = [r for r in results if r.variant == variant]
        best = np.array([r.best_reward for r in mine])
        mean = np.array([r.child_reward_mean for r in mine])
        spread = (lambda x: float(x.std(ddof=1)) if len(x) > 1 else 0.0)
        rows.append(dict(variant=variant, seeds=len(mine), best_mean=float(best.mean()), best_std=spread(best),
                         best_max=float(best.max()), reward_mean=float(mean.mean()), reward_std=spread(mean),
                         valid_frac=float(np.mean([r.child_valid_frac for r in mine])),
                         children=float(np.mean([r.children for r in mine])),
                         wall_s=float(np.mean([r.wall_s for r in mine]))))
    return rows


def markdown(rows: list[dict], title: str) -> str:
    lines = [f"### {title}", "",
             "| variant | seeds | best reward (mean ± std) | best (max) | child reward (mean ± std) | valid | children | wall s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['variant']} | {r['seeds']} | {r['best_mean']:.6g} ± {r['best_std']:.2g} | {r['best_max']:.6g} | "
                     f"{r['reward_mean']:.4g} ± {r['reward_std']:.2g} | {r['valid_frac']:.2f} | {r['children']:.0f} | "
                     f"{r['wall_s']:.0f} |")
    return "\n".join(lines) + "\n"


def run_one(task: str, variant: str, seed: int, out: Path, budget: list[str], overrides: list[str], quiet: bool) -> RunResult:
    run_dir = out / f"{variant}-s{seed}"
    config = ABLATIONS / task / f"{variant}.yaml"
    cmd = [sys.executable, str(ROOT / "train" / "helix.py"), "--config", str(config), f"run.seed={seed}",
           f"run.output_dir={out}", f"run.name={run_dir.name}", "run.export=false", "run.checkpoint_every=0",
           "run.progress=false", *budget, *overrides]
    if (run_dir / DONE).is_file():  # finished earlier with the same settings: an interrupted ablation continues
        done = json.loads((run_dir / DONE).read_text())
        if done.get("command") == cmd[1:]:
            return RunResult(**done["result"])
        print(f"[ablate] {run_dir} was run with other settings (budget, overrides or config); running it again",
              flush=True)
    if run_dir.exists():  # unfinished, or other settings: start again from scratch
        import shutil

        shutil.rmtree(run_dir)
    print(f"[ablate] {variant} seed {seed}: {' '.join(cmd[1:])}", flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL if quiet else None, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{variant} seed {seed} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = collect(run_dir, variant, seed, wall)
    (run_dir / DONE).write_text(json.dumps({"command": cmd[1:], "result": asdict(result)}))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", required=True, help="a folder under configs/ablations/")
    parser.add_argument("--variants", nargs="+", help="default: every config in configs/ablations/<task>/")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    budget = parser.add_mutually_exclusive_group(required=True)
    budget.add_argument("--evaluations", type=int, help="children evaluated per run (the same for every variant)")
    budget.add_argument("--wall-s", type=float, help="wall-clock seconds per run")
    parser.add_argument("--out", type=Path, help="default: runs/ablate-<task>")
    parser.add_argument("--quiet", action="store_true", help="hide each run's console table")
    parser.add_argument("--set", nargs="+", default=[], dest="overrides", metavar="KEY=VALUE",
                        help="dotted overrides applied to every run, e.g. --set rollout.max_new_tokens=128")
    args = parser.parse_args(argv)

    folder = ABLATIONS / args.task
    available = sorted(p.stem for p in folder.glob("*.yaml"))
    if not available:
        tasks = sorted(p.name for p in ABLATIONS.iterdir() if p.is_dir())
        parser.error(f"no ablation configs in {folder}; tasks with ablations: {', '.join(tasks)}")
    variants = args.variants or (["helix"] + [v for v in available if v != "helix"])
    unknown = [v for v in variants if v not in available]
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; available for {args.task}: {', '.join(available)}")
    if args.evaluations is not None:
        if args.evaluations < 1:
            parser.error("--evaluations must be >= 1")
        budget_args = [f"run.max_evaluations={args.evaluations}", "trainer.epochs=100000"]
        title = f"{args.task}: {args.evaluations} evaluated programs per run"
    else:
        budget_args = [f"run.time_budget_s={args.wall_s}", "trainer.epochs=100000"]
        title = f"{args.task}: {args.wall_s:.0f} s wall clock per run"
    out = args.out or ROOT / "runs" / f"ablate-{args.task}"
    out.mkdir(parents=True, exist_ok=True)

    results = [run_one(args.task, v, s, out, budget_args, args.overrides, args.quiet)
               for v in variants for s in args.seeds]
    rows = summarize(results)
    table = markdown(rows, title)
    command = "python scripts/ablate.py " + " ".join(sys.argv[1:] if argv is None else argv)
    (out / "ablation.md").write_text(table + f"\nReproduce: `{command}`\n")
    (out / "ablation.json").write_text(json.dumps({"title": title, "command": command, "rows": rows,
                                                   "runs": [asdict(r) for r in results]}, indent=1))
    print(table)
    print(f"[ablate] wrote {out / 'ablation.md'} and {out / 'ablation.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
