"""Checkpoint benchmark: what the quickstart loop waits for its checkpoints, synchronous
(``run.async_checkpoint=false``) next to asynchronous (the default), in one run.

    .venv/bin/python scripts/bench/bench_checkpoint.py                 # the quickstart, 3 epochs each way
    .venv/bin/python scripts/bench/bench_checkpoint.py --epochs 2 trainer.prompts_per_epoch=1
    .venv/bin/python scripts/bench/bench_checkpoint.py --order async,sync     # the other mode first

Each mode is the real quickstart (``configs/quickstart.yaml``: the warm-started SmolLM2-135M,
fp32 weights and AdamW state, a checkpoint every epoch) in its own run directory, same seed. The
per-epoch ``checkpoint_time_s`` is the time the loop waited: the whole write when synchronous, the
copy to CPU memory plus the small files (and any wait for the previous write) when asynchronous.
The background write itself competes with the next epoch for the same cores, so the epoch times
are printed too: a faster checkpoint that slows the next epoch by as much would gain nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_mode(out: Path, asynchronous: bool, epochs: int, overrides: list[str]) -> list[dict]:
    name = "async" if asynchronous else "sync"
    cmd = [sys.executable, str(ROOT / "train" / "helix.py"), "--config", str(ROOT / "configs" / "quickstart.yaml"),
           f"trainer.epochs={epochs}", "run.checkpoint_every=1", "run.export=false", "run.progress=false",
           f"run.async_checkpoint={str(asynchronous).lower()}", f"run.output_dir={out}", f"run.name={name}", *overrides]
    print(f"[bench_checkpoint] {name}: {' '.join(cmd[1:])}", flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{name} run failed:\n{proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in (out / name / "metrics.jsonl").read_text().splitlines()]
    size = sum(p.stat().st_size for p in (out / name / "checkpoints").rglob("*") if p.is_file())
    for row in rows:
        row["checkpoint_gb"] = size / len(list((out / name / "checkpoints").glob("epoch-*"))) / 1e9
    return rows


def summary(rows: list[dict]) -> dict:
    ckpt = [r["checkpoint_time_s"] for r in rows]
    epoch = [r["epoch_time_s"] for r in rows]
    return {"checkpoint_s": statistics.median(ckpt), "epoch_s": statistics.median(epoch),
            "share": statistics.median(c / e for c, e in zip(ckpt, epoch)), "train_s": statistics.median(r["train_time_s"] for r in rows),
            "gb": rows[0]["checkpoint_gb"], "per_epoch": [round(c, 2) for c in ckpt]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--order", default="sync,async", help="which mode runs first (the page cache warms up)")
    parser.add_argument("overrides", nargs="*", help="dotted overrides for both runs, e.g. trainer.prompts_per_epoch=1")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-checkpoint-") as tmp:
        modes = args.order.split(",")
        if sorted(modes) != ["async", "sync"]:
            parser.error(f"--order must name sync and async once each, not {args.order!r}")
        results = {mode: summary(run_mode(Path(tmp), mode == "async", args.epochs, args.overrides)) for mode in modes}
    sync, asyn = results["sync"], results["async"]
    print("| checkpoint | size | loop waits per epoch (median) | per epoch | epoch time (median) | share of epoch | train step (median) |")
    print("|---|---|---|---|---|---|---|")
    for mode, r in results.items():
        print(f"| {mode} | {r['gb']:.2f} GB | {r['checkpoint_s']:.2f} s | {r['per_epoch']} | {r['epoch_s']:.1f} s | "
              f"{100 * r['share']:.1f}% | {r['train_s']:.1f} s |")
    print(f"async waits {100 * asyn['checkpoint_s'] / sync['checkpoint_s']:.1f}% of the synchronous time "
          f"(goal: at most 10%); epoch time async / sync: {asyn['epoch_s'] / sync['epoch_s']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
