"""Watching one sandboxed process: the fences it reports, its output, its deadline, the driver's
requests, a search's reports, and the kill of everything it made at the end (``rewards.sandbox`` runs it).

The process is a ``subprocess.Popen`` (started through ``rewards.launcher``) or a
``rewards.zygote.Child`` (forked by a template process); neither is reaped before every kill is
done, so its pid, and its process group's, cannot name another process in between.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import time

from rewards import cgroup
from rewards.channel import Link
from rewards.search_channel import Reports
from rewards.zygote import Child

OUTPUT_TAIL_BYTES = 4096
_ENDED = select.POLLHUP | select.POLLERR | select.POLLNVAL
log = logging.getLogger(__name__)


def read_status(fd: int, deadline: float) -> set[str]:
    """The layers the launcher says took hold, read until it execs or dies (none if it said nothing)."""
    data, poller = b"", select.poll()
    poller.register(fd, select.POLLIN)
    try:
        while len(data) < 4096 and (left := deadline - time.monotonic()) > 0:
            if not poller.poll(max(1, int(min(left, 0.1) * 1000))):
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    return set(data.decode("ascii", "replace").split())


def supervise(proc: subprocess.Popen | Child, deadline: float, tail: bytearray, link: Link | None = None,
              reports: Reports | None = None) -> bool:
    """Pump output (and run the driver, and take a search's reports) until the child exits or the driver
    is finished (False), or the deadline passes (True); never reaps the child."""
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    poller = select.poll()  # not select(): the trainer may hold more than 1024 descriptors
    poller.register(fd, select.POLLIN)
    watched, writing, nap = {fd}, False, 0.002
    if link is not None:
        poller.register(link.reply_fd, select.POLLIN)
        watched.add(link.reply_fd)
    report_fd = reports.fd if reports is not None else -1
    if reports is not None:
        poller.register(report_fd, select.POLLIN)
        watched.add(report_fd)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return True
        if link is not None and link.wants_write() != writing:  # the request pipe matters only while one is stuck
            writing = not writing
            (poller.register(link.request_fd, select.POLLOUT) if writing else poller.unregister(link.request_fd))
        quiet = True  # nothing came, or a pipe ended: time to look whether the child is still there
        if watched:
            events = poller.poll(max(1, int(min(remaining, 0.1) * 1000)))
            quiet = not events or any(flags & _ENDED for _, flags in events)
            for ready, _ in events:
                if ready == fd and not read_some(fd, tail):
                    poller.unregister(fd)
                    watched.discard(fd)
                elif link is not None and ready == link.reply_fd:
                    link.read()
                    if not link.reply_open:
                        poller.unregister(ready)
                        watched.discard(ready)
                elif link is not None and ready == link.request_fd:
                    link.write()
                elif ready == report_fd and ready in watched:
                    reports.read()
                    if not reports.open:  # end-of-file, or a broken channel (closed: never polled again)
                        poller.unregister(ready)
                        watched.discard(ready)
        else:  # output closed (normally: the child is exiting): wait for the exit itself
            time.sleep(min(remaining, nap))
            nap = min(nap * 2, 0.05)
        if link is not None and link.finished:
            return False
        if (quiet or link is None) and exited(proc):  # driven: a reply each step says it is alive
            if link is not None and link.reply_open:
                link.read()  # a reply written just before the end still counts
            return False


def exited(proc: subprocess.Popen | Child) -> bool:
    """Exited, without reaping: the pid stays reserved, so killpg(pid) cannot hit a stranger."""
    if isinstance(proc, Child):
        return proc.exited()  # the template reaps it only when the sandbox asks
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def read_some(fd: int, tail: bytearray) -> bool:
    """Read what is available, keep only the tail; False once the pipe is closed."""
    for _ in range(64):  # bounded, so a program that prints forever cannot starve the deadline check
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not chunk:
            return False
        tail.extend(chunk)
        del tail[:-OUTPUT_TAIL_BYTES]
    return True


def kill_all(proc: subprocess.Popen | Child, net, group: cgroup.PidsCgroup | None = None) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # grandchildren too, finished or not
    except (ProcessLookupError, PermissionError):
        pass
    if group is not None:
        group.kill_all()  # every process it made, wherever it went
    if net is not None:
        _kill_netns(net)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # stuck in the kernel; SIGKILL is pending, nothing more to do
        log.warning("sandboxed process %d did not die within 10 s of SIGKILL", proc.pid)


def netns(pid) -> tuple[int, int] | None:
    try:
        info = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _kill_netns(net: tuple[int, int]) -> None:
    """SIGKILL every process still in the sandbox's own network namespace (escapers of killpg)."""
    for _ in range(20):
        found = False
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and netns(entry.name) == net:
                found = True
                try:  # a pidfd pins the process, so a recycled pid cannot be hit by mistake
                    pidfd = os.pidfd_open(int(entry.name))
                except OSError:
                    continue
                try:
                    if netns(entry.name) == net:
                        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                except OSError:
                    pass
                finally:
                    os.close(pidfd)
        if not found:
            return
        time.sleep(0.01)
