"""What a killed evaluator leaves on its machine, found and removed by the next one (Ray workers).

A sandbox cleans up after itself (``rewards.sandbox._run``: its directories, its pids cgroup), but
not when the process that runs it is killed first: ``ray.cancel(force=True)``, a Ray worker or
node that dies, a job that ends while its workers hold their data files. So each Ray worker keeps
everything it makes in one folder of its own, ``<tmp>/helix-ray-worker-<job>-<pid>-<start>``
(``work_dir``: the sandboxes' directories, the task's data files), and before each program it
removes what dead owners left (``reap``):

* a worker folder whose ``pid`` is gone or now names another process (its start time differs);
* a pids cgroup ``helix-sandbox-<pid>-<hex>`` (``rewards.cgroup``) whose owner is gone, or whose
  ``pid`` was reused by a process that started after the group was made; what is still in it
  (escaped grandchildren of a dead owner) is killed first.

State of a live owner is never touched: its sandboxes may be running. At the end of a run,
``sweep(job)`` also removes the folders of that job's workers, and the cgroups they made: the job
is over, its workers are idle or being killed (they hold the data files until Ray stops them, and
a stopped worker cannot clean up).
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
import time

from rewards import cgroup

WORK_PREFIX = "helix-ray-worker-"
_WORK = re.compile(rf"^{WORK_PREFIX}(?P<job>[0-9a-f]+)-(?P<pid>\d+)-(?P<start>\d+)$")
_GROUP = re.compile(rf"^{cgroup.PREFIX}(?P<pid>\d+)-[0-9a-f]+$")
_lock = threading.Lock()
_mine: dict[str, str] = {}  # job -> this process's folder


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks after boot), or None: a pid plus this names one process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _started_at(pid: int) -> float | None:
    """Wall-clock start of ``pid`` (seconds since the epoch), or None when it does not exist."""
    ticks = start_ticks(pid)
    if ticks is None:
        return None
    boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)  # /proc/stat's btime is whole seconds
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def work_dir(job: str, root: str | None = None) -> str:
    """This process's folder for ``job`` (a hex id), made once; traversable by the sandbox's
    unprivileged user, listable only by its owner."""
    with _lock:
        if job not in _mine or not os.path.isdir(_mine[job]):
            root = root or tempfile.gettempdir()
            path = os.path.join(root, f"{WORK_PREFIX}{job}-{os.getpid()}-{start_ticks(os.getpid())}")
            os.makedirs(path, mode=0o711, exist_ok=True)
            os.chmod(path, 0o711)  # the umask may have taken bits off
            _mine[job] = path
        return _mine[job]


def _remove_tree(path: str) -> bool:
    from rewards.sandbox import _remove

    _remove(path)
    return not os.path.exists(path)


def reap(root: str | None = None, groups: tuple[str, ...] | None = None, job: str | None = None) -> dict[str, int]:
    """Remove the worker folders under ``root`` (default: the temp dir) and the sandbox cgroups
    (default: this machine's pids hierarchies) whose owner is dead; with ``job``, also the folders of
    that job's live workers (``sweep``). Returns what was removed, by kind. Never raises for a
    folder or group it cannot read or remove (another user's, or gone in between)."""
    root = root or tempfile.gettempdir()
    removed = {"folders": 0, "cgroups": 0}
    try:
        names = os.listdir(root)
    except OSError:
        names = []
    ended = set()  # live workers of the ended ``job``: what their sandboxes still hold goes too
    for name in names:
        found = _WORK.match(name)
        if found is None:
            continue
        pid, start = int(found["pid"]), int(found["start"])
        alive = start_ticks(pid) == start and not _exited(pid)  # a zombie left its folder for good
        if pid == os.getpid() and alive:
            continue  # this process's own folder: it may be running a sandbox
        if alive and found["job"] == job:
            ended.add(pid)
        if (not alive or found["job"] == job) and _remove_tree(os.path.join(root, name)):
            removed["folders"] += 1
    for parent in groups if groups is not None else _group_parents():
        try:
            entries = os.listdir(parent)
        except OSError:
            continue
        for name in entries:
            found = _GROUP.match(name)
            path = os.path.join(parent, name)
            if found is None or not (int(found["pid"]) in ended or _owner_gone(int(found["pid"]), path)):
                continue
            group = cgroup.PidsCgroup(path)
            group.kill_all()
            group.remove()
            if not os.path.exists(path):
                removed["cgroups"] += 1
    return removed


def sweep(job: str, root: str | None = None) -> dict[str, int]:
    """The end of a run on this machine: what ``reap`` removes, plus every folder of ``job``."""
    found = reap(root, job=job)
    with _lock:
        path = _mine.pop(job, None)
    if path is not None and os.path.isdir(path) and _remove_tree(path):
        found["folders"] += 1
    return found


def _exited(pid: int) -> bool:
    """``pid`` has ended but its parent has not collected it yet (a zombie): a killed Ray worker stays
    so until its raylet waits for it, and what it left is already an orphan."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _owner_gone(pid: int, path: str) -> bool:
    """The group's maker is dead: ``pid`` does not exist or has exited (a zombie), or it started after
    the group was made (a reused pid). One second of slack: a process that started within it counts
    as the owner."""
    if _exited(pid):
        return True
    started = _started_at(pid)
    if started is None:
        return not os.path.exists(f"/proc/{pid}")
    try:
        made = os.stat(path).st_ctime
    except OSError:
        return False
    return started > made + 1.0


def _group_parents() -> list[str]:
    """Where this machine's sandboxes make their groups (rewards.cgroup's choice for this process)."""
    return cgroup._parents()
