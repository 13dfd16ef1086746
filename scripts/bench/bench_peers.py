"""HELIX side by side with its peers, OpenEvolve 0.4.0 and ShinkaEvolve 0.0.7, on the same model, the same
problems, the same starter, the same children budget and wall-time cap, on this box, one system at a time.

    .venv/bin/python scripts/bench/bench_peers.py --children 8 --wall-s 1800 --seeds 0      # a small look
    .venv/bin/python scripts/bench/bench_peers.py --children 64 --wall-s 1800 --seeds 0 1 2 --out runs/peers-64

Rows: openevolve, shinka (each installed once into a venv of its own under HELIX's cache, driven through its own
entry point with its own prompts and defaults), HELIX evo_only, helix and entropic (configs/quickstart.yaml), and
slsqp (no LLM: scipy SLSQP restarts for --optimiser-s). Model settings: smollm2 (the embedded SmolLM2-135M-Instruct)
and warm (HELIX's warm start of it for the task), served by vLLM's OpenAI server on loopback. Every program any
system writes is scored by HELIX's verifier in HELIX's sandbox. A row that finished is not run again (its
result.json under --out); a failed row is one line and the others still run. Tables: OUT/peers.md and
OUT/results.json. The modules are scripts/bench/benchlib/peers/ (campaign.py says what goes where).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from benchlib.peers.campaign import SETTINGS, Plan, run
from benchlib.peers.systems import ROOT, SYSTEMS

from tasks import available_tasks

TASKS = ("circle_packing_26", "keane_bump_10")  # the default pair; slsqp knows these and keane_bump_20/30


def choices(values: list[str], allowed, what: str, parser: argparse.ArgumentParser) -> list[str]:
    for value in values:
        if value not in allowed:
            near = difflib.get_close_matches(value, list(allowed), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            parser.error(f"unknown {what} {value!r}{hint}; choose from {', '.join(allowed)}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_peers.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--children", type=int, default=64, help="LLM completions per run (0: the wall cap alone)")
    parser.add_argument("--wall-s", type=float, default=1800.0, help="wall-clock cap per run, seconds")
    parser.add_argument("--optimiser-s", type=float, default=None, help="the optimiser's wall time (default: --wall-s)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), help="model settings")
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), help="rows, in table order")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "peers")
    args = parser.parse_args(argv)
    if args.children < 0 or args.wall_s <= 0:
        parser.error("--children must be >= 0 and --wall-s > 0")
    choices(args.settings, SETTINGS, "model setting", parser)
    choices(args.systems, SYSTEMS, "system", parser)
    choices(args.tasks, available_tasks(), "task", parser)
    plan = Plan(args.out.resolve(), args.settings, args.tasks, args.seeds, args.systems, args.children, args.wall_s,
                args.optimiser_s if args.optimiser_s is not None else args.wall_s)
    try:
        run(plan)
    except KeyboardInterrupt:  # every row and server has been stopped on the way out (their finally blocks)
        print(f"[peers] interrupted; the finished rows are kept in {plan.out}: the same command continues", flush=True)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
