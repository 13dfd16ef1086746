"""Resident memory of a HELIX run, by phase: where the peak comes from, and what each phase keeps.

Runs ``train/helix.py`` in this process (the same ``main`` as the command line) while a thread reads
the process's resident set size (``/proc/self/statm``) every few milliseconds. The run's steps are
wrapped by name (the warm start, loading the policy, the learner, the engine, each epoch step, the
export) so each sample is charged to the innermost step running. Prints one row per phase: RSS when
it started, its peak, RSS when it ended (what it kept), and the process's high-water mark (VmHWM,
what ``/usr/bin/time -v`` calls "Maximum resident set size"). A warm start is built in a child
process (train.warm_start.isolated), so its phases are not charged here: the last line gives the
largest child's high-water mark (``getrusage(RUSAGE_CHILDREN)``), which is that build's peak.

    .venv/bin/python scripts/bench/bench_memory.py --config configs/quickstart.yaml trainer.epochs=2
    .venv/bin/python scripts/bench/bench_memory.py --json out.json --config configs/quickstart.yaml

Results: BENCHMARKS.md "Quickstart memory by phase".
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
# (module, attribute path) of each step charged as a phase; missing ones are skipped, so the
# benchmark keeps working while code moves between modules.
PHASES = [
    ("train.api.start", "_run_tools", "evaluator, prompt builder"),
    ("train.api.start", "resolve_policy", "warm start (found or built)"),
    ("train.warm_start.isolated", "build_in_child", "warm start: build (child process)"),
    ("train.learner.models", "load_policy", "load policy"),
    ("train.learner.learner", "Learner.__init__", "learner init (reference, optimizer)"),
    ("rollout.engines", "build_engine", "engine init"),
    ("train.loop.epoch_loop", "HelixRun._build_main", "archive, embedder"),
    ("train.loop.epoch_loop", "HelixRun.prompts", "prompts"),
    ("train.loop.epoch_loop", "HelixRun.generate", "generate"),
    ("train.loop.epoch_loop", "HelixRun.evaluate", "evaluate"),
    ("train.loop.epoch_loop", "HelixRun.grpo_step", "grpo step"),
    ("train.learner.learner", "Learner.step", "  learner step (forward, backward, optimizer)"),
    ("train.learner.lora", "merged_state", "  adapters merged, all at once (export)"),
    ("rollout.vllm_engine", "VLLMEngine.sync_weights", "  engine weight sync"),
    ("train.loop.epoch_loop", "HelixRun.archive_and_select", "embed, archive, select"),
    ("train.loop.epoch_loop", "HelixRun.log_and_checkpoint", "log, checkpoint"),
    ("train.loop.epoch_loop", "HelixRun.finish", "export, close"),
]


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


class PhaseMeter:
    """Charges RSS samples to the innermost running phase."""

    def __init__(self, interval_s: float = 0.005):
        self.stack: list[str] = []
        self.rows: dict[str, dict] = {}
        self.interval_s = interval_s
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.done.wait(self.interval_s):
            now = rss()
            with self.lock:
                if self.stack:
                    row = self.rows[self.stack[-1]]
                    row["peak"] = max(row["peak"], now)

    def enter(self, name: str) -> None:
        now = rss()
        with self.lock:
            row = self.rows.setdefault(name, {"calls": 0, "start": now, "peak": now, "end": now, "seconds": 0.0})
            row["calls"] += 1
            row["_t"] = time.perf_counter()
            for outer in self.stack:  # an inner phase's samples count for the outer peaks too
                self.rows[outer]["peak"] = max(self.rows[outer]["peak"], now)
            self.stack.append(name)

    def leave(self, name: str) -> None:
        now = rss()
        with self.lock:
            row = self.rows[name]
            row["peak"] = max(row["peak"], now)
            row["end"] = now
            row["seconds"] += time.perf_counter() - row.pop("_t")
            self.stack.pop()
            for outer in self.stack:
                self.rows[outer]["peak"] = max(self.rows[outer]["peak"], row["peak"])

    def wrap(self, fn, name: str):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            self.enter(name)
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave(name)

        return wrapped


def install(meter: PhaseMeter) -> list[str]:
    """Wrap every phase that exists, in its module and wherever it was imported by name."""
    found = []
    for module_name, attr, label in PHASES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        owner_name, _, leaf = attr.rpartition(".")
        owner = getattr(module, owner_name, None) if owner_name else module
        original = getattr(owner, leaf, None) if owner is not None else None
        if original is None:
            continue
        wrapped = meter.wrap(original, label)
        setattr(owner, leaf, wrapped)
        if not owner_name:  # a module-level function: rebind it where `from m import f` copied it
            for other in list(sys.modules.values()):
                if getattr(other, "__name__", "").split(".")[0] in ("train", "rollout", "population", "rewards") \
                        and getattr(other, leaf, None) is original:
                    setattr(other, leaf, wrapped)
        found.append(f"{module_name}.{attr}")
    return found


def table(meter: PhaseMeter, peak: int) -> str:
    mib = 2**20
    lines = [f"{'phase':38s} {'calls':>5s} {'start MiB':>10s} {'peak MiB':>9s} {'end MiB':>8s} {'+peak':>7s} {'sec':>7s}"]
    for name, row in meter.rows.items():
        lines.append(f"{name:38s} {row['calls']:5d} {row['start'] / mib:10.0f} {row['peak'] / mib:9.0f} "
                     f"{row['end'] / mib:8.0f} {(row['peak'] - row['start']) / mib:7.0f} {row['seconds']:7.1f}")
    lines.append(f"process high-water mark (VmHWM): {peak / mib:.0f} MiB")
    lines.append(f"largest child's high-water mark (a warm start built here): {children_peak() / mib:.0f} MiB")
    return "\n".join(lines)


def children_peak() -> int:
    """ru_maxrss of the largest child waited for (kB on Linux), in bytes."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--config", required=True, help="the run's config; the remaining arguments go to train/helix.py too")
    args, rest = parser.parse_known_args(argv)
    rest = ["--config", args.config, *rest]
    meter = PhaseMeter()
    from train import helix  # every module the run uses is imported by now

    wrapped = install(meter)
    meter.thread.start()
    rc = helix.main(rest)
    meter.done.set()
    peak = hwm()
    print(table(meter, peak), flush=True)
    if args.json:
        rows = {k: {kk: vv for kk, vv in v.items() if not kk.startswith("_")} for k, v in meter.rows.items()}
        args.json.write_text(json.dumps({"rows": rows, "vmhwm": peak, "children_peak": children_peak(),
                                         "wrapped": wrapped, "rc": rc}, indent=1))
    return rc


if __name__ == "__main__":
    sys.exit(main())
