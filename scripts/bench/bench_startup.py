"""Start-up: what a config error, ``--help`` and loading a config cost before a run starts, in fresh interpreters.

    .venv/bin/python scripts/bench/bench_startup.py                      # this checkout
    .venv/bin/python scripts/bench/bench_startup.py --checkout OTHER     # another checkout (an older commit), same venv

Each case runs ``--repeats`` times in a new ``python`` (cases alternating, so a busy box slows them alike) and
reports the median wall time, and whether torch was imported (``python -X importtime``: the modules it names):

- ``load_config``: ``train.config.config.load_config('configs/quickstart.yaml')``, as a command that reads a
  config does;
- ``--help``: ``python train/helix.py --help``;
- ``config error``: ``python train/helix.py --config configs/quickstart.yaml trainer.epoch=2`` (exit code 2).

The checkout's own packages are imported (PYTHONPATH and the working directory are the checkout's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = {
    "load_config": ["-c", "from train.config.config import load_config; load_config('configs/quickstart.yaml')"],
    "--help": ["train/helix.py", "--help"],
    "config error": ["train/helix.py", "--config", "configs/quickstart.yaml", "trainer.epoch=2"],
}
HEAVY = ("torch", "transformers", "verl", "vllm")


def run(checkout: Path, args: list[str]) -> tuple[float, int, set[str]]:
    """(wall seconds, exit code, the heavy top-level packages imported) of ``python -X importtime ARGS``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=checkout, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    return took, proc.returncode, {m for m in HEAVY if m in imported}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout to time (default: this one)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"{args.checkout}, median of {args.repeats}, load average before: {load}\n")
    times: dict[str, list[float]] = {name: [] for name in CASES}
    seen: dict[str, tuple[int, set[str]]] = {}
    for _ in range(args.repeats):
        for name, case in CASES.items():
            took, code, heavy = run(args.checkout, case)
            times[name].append(took)
            seen[name] = (code, heavy)
    print("| case | wall s (median) | exit code | heavy packages imported |")
    print("|---|---|---|---|")
    for name in CASES:
        code, heavy = seen[name]
        print(f"| {name} | {statistics.median(times[name]):.2f} | {code} | {', '.join(sorted(heavy)) or 'none'} |")
    print(f"\nLoad average after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
