"""A system's process tree: its peak memory while it runs, a wall-clock cap, and a stop that leaves nothing.

Every system in the comparison (a peer, HELIX, the optimiser) runs as one subprocess in a session of its own;
what it starts (a peer's worker pool, its evaluator subprocesses, HELIX's sandboxes) are its descendants.
Memory is the peak over time of the summed RSS of the whole tree, sampled from /proc (Linux), so a worker
pool counts once per process it really holds. At the end, cap or not, the session's group and every
descendant seen get SIGTERM, then SIGKILL after a grace period: a program that left the group (a
sandbox's own session) is still found as a descendant.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

PROC = Path("/proc")
SAMPLE_S = 0.5  # memory sampling period: a 135M policy's process lives for minutes, not milliseconds


def parent_map(proc: Path = PROC) -> dict[int, int]:
    """pid -> parent pid of every process now alive (a process that ends while read is skipped)."""
    parents = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name is in parentheses and may hold spaces or ')': fields start after the last ')'
        fields = stat[stat.rfind(")") + 2:].split()
        parents[int(entry.name)] = int(fields[1])
    return parents


def descendants(pid: int, parents: dict[int, int]) -> list[int]:
    """Every process below ``pid`` (children, their children, ...), from one ``parent_map``."""
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def rss_kb(pid: int, proc: Path = PROC) -> int:
    """VmRSS of one process in kB; 0 when it is gone or has no memory of its own (a zombie, a kernel thread)."""
    try:
        for line in (proc / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def tree_rss_kb(pid: int, proc: Path = PROC) -> tuple[int, list[int]]:
    """(summed RSS of ``pid`` and its descendants, the descendants' pids)."""
    below = descendants(pid, parent_map(proc))
    return sum(rss_kb(p, proc) for p in [pid, *below]), below


class PeakSampler:
    """Samples the summed RSS of a process tree every SAMPLE_S in a thread; remembers the peak and every
    descendant ever seen (so a stop can reach a grandchild that left the group)."""

    def __init__(self, pid: int, period_s: float = SAMPLE_S, proc: Path = PROC):
        self.pid, self.period_s, self.proc = pid, period_s, proc
        self.peak_kb = 0
        self.seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rss-{pid}", daemon=True)

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.period_s):
                return

    def sample(self) -> None:
        total, below = tree_rss_kb(self.pid, self.proc)
        self.peak_kb = max(self.peak_kb, total)
        self.seen.update(below)

    def __enter__(self) -> "PeakSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still answers kill(0); it holds nothing and its parent reaps it
    try:
        return (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _signal_all(group: int, pids: list[int], sig: int) -> None:
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop_tree(popen: subprocess.Popen, also: set[int] = frozenset(), grace_s: float = 10.0) -> None:
    """SIGTERM ``popen``'s process group (it was started with ``start_new_session``) and every descendant
    alive now or in ``also``; SIGKILL whatever is left after ``grace_s``; reap ``popen``. Safe to call
    on a process that has already ended."""
    pid = popen.pid
    family = set(also) | set(descendants(pid, parent_map())) | {pid}
    _signal_all(pid, sorted(family), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if popen.poll() is not None and not any(alive(p) for p in family if p != pid):
            break
        time.sleep(0.1)
    family |= set(descendants(pid, parent_map()))
    left = [p for p in family if alive(p)]
    if left:
        _signal_all(pid, left, signal.SIGKILL)
    try:
        popen.wait(timeout=30)
    except subprocess.TimeoutExpired:  # unkillable (D state): say so rather than hang the bench
        pass


def tail_error(log: Path, limit: int = 300) -> str:
    """The line of a log that says what went wrong: the last one naming an error, else the last line."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    errors = [ln for ln in lines if "Error" in ln or "error:" in ln or "ERROR" in ln]
    return (errors or lines or [""])[-1][:limit]


@dataclass(frozen=True)
class Finished:
    returncode: int | None  # None: stopped by the bench (wall cap or ``stop_when``)
    wall_s: float
    peak_rss_kb: int
    capped: bool  # stopped at the wall cap
    stopped: bool = False  # stopped because ``stop_when`` said so


def run_capped(cmd: list[str], wall_s: float, log: Path, env: dict[str, str] | None = None,
               cwd: Path | None = None, grace_s: float = 10.0, stop_when: Callable[[], bool] | None = None,
               poll_s: float = 1.0) -> Finished:
    """Run ``cmd`` in a session of its own, its output to ``log``, sampling its tree's memory, and stop it
    (the whole tree) at ``wall_s``, or as soon as ``stop_when()`` (polled every ``poll_s``) is true, if it
    has not ended by then. Whatever happens (Ctrl-C included), nothing it started is left running."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    deadline = start + max(wall_s, 0.0)
    capped = stopped = False
    with open(log, "ab") as out:
        popen = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                 cwd=cwd, start_new_session=True)
        sampler = PeakSampler(popen.pid)
        try:
            with sampler:
                while True:
                    try:
                        popen.wait(timeout=max(0.0, min(poll_s, deadline - time.monotonic())))
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    if time.monotonic() >= deadline:
                        capped = True
                        break
                    if stop_when is not None and stop_when():
                        stopped = True
                        break
        finally:
            stop_tree(popen, sampler.seen, grace_s)
    code = None if capped or stopped else popen.returncode
    return Finished(code, time.monotonic() - start, sampler.peak_kb, capped, stopped)
