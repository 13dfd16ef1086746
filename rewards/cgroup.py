"""A pids cgroup per sandboxed program: a cap on its processes and threads that holds for root too.

Why: the kernel ignores RLIMIT_NPROC for root, so where programs run as uid 0 (no usable
``nobody``) a fork bomb would otherwise be bounded only by the time limit and pid_max, taking
the machine's pids from everyone else. The pids controller counts every task in the group,
whatever its uid, and fork() fails with EAGAIN at ``pids.max``. The group is made under the
evaluator's own pids cgroup: cgroup v1's ``pids`` hierarchy, or cgroup v2 where ``pids`` is
already enabled in that cgroup's ``cgroup.subtree_control`` and the directory is writable (root,
or delegation). Where nothing is writable ``create`` returns None and the sandbox keeps its
other limits. The group also lists every process the program made, wherever it went (a new
session, a new namespace), so the sandbox kills through it at the end.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import time

V1_MOUNT, V2_MOUNTS = "/sys/fs/cgroup/pids", ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")
PREFIX = "helix-sandbox-"  # + the evaluator's pid, so runs can tell their own groups apart
log = logging.getLogger(__name__)


class PidsCgroup:
    def __init__(self, path: str):
        self.path = path
        self.procs = os.path.join(path, "cgroup.procs")  # the child writes b"0" here to join

    def pids(self) -> list[int]:
        try:
            with open(self.procs) as fh:
                return [int(p) for p in fh.read().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self, rounds: int = 200) -> bool:
        """SIGKILL every process in the group until none is left (True), at most ``rounds`` times.
        Each pid is pinned with a pidfd and signalled only if it is still listed afterwards, so a
        pid that was freed and reused by a stranger in between is never hit."""
        for _ in range(rounds):
            listed = self.pids()
            if not listed:
                return True
            pinned = {}
            for pid in listed:
                try:
                    pinned[pid] = os.pidfd_open(pid)
                except OSError:
                    pass
            still = set(self.pids())
            for pid, fd in pinned.items():
                try:
                    if pid in still:
                        signal.pidfd_send_signal(fd, signal.SIGKILL)
                except OSError:
                    pass
                finally:
                    os.close(fd)
            time.sleep(0.005)
        return not self.pids()

    def remove(self) -> None:
        """rmdir, retried briefly (killed tasks take a moment to leave); never raises."""
        for _ in range(100):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)
        log.warning("sandbox: could not remove the pids cgroup %s (%d processes left)", self.path, len(self.pids()))


def create(max_pids: int) -> PidsCgroup | None:
    """A new group capped at ``max_pids`` tasks, or None where no pids cgroup is writable."""
    for parent in _parents():
        path = os.path.join(parent, f"{PREFIX}{os.getpid()}-{secrets.token_hex(6)}")
        try:
            os.mkdir(path)
        except OSError:
            continue
        try:
            with open(os.path.join(path, "pids.max"), "w") as fh:
                fh.write(str(max_pids))
            return PidsCgroup(path)
        except OSError:
            PidsCgroup(path).remove()
    return None


def _parents() -> list[str]:
    """The evaluator's own pids cgroup directories: v1 first, then v2 where pids is delegated there."""
    try:
        with open("/proc/self/cgroup") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        rel = path.lstrip("/")
        if "pids" in controllers.split(","):
            found.append(os.path.join(V1_MOUNT, rel))
        elif hierarchy == "0" and controllers == "":
            for mount in V2_MOUNTS:
                here = os.path.join(mount, rel)
                try:
                    with open(os.path.join(here, "cgroup.subtree_control")) as fh:
                        delegated = "pids" in fh.read().split()
                except OSError:
                    continue
                if delegated:
                    found.append(here)
                break  # the first mount that has v2 files is the v2 one
    return [p.rstrip("/") for p in found if os.path.isdir(p) and os.access(p, os.W_OK)]
