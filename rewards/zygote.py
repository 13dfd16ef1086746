"""Start sandboxed programs as forks of a template process instead of two fresh interpreters each.

A fresh interpreter per program (``rewards.launcher``, then the runner, which imports numpy) cost
more than a bare ``python -c "import numpy"``. A template (``rewards.zygote_server``) is started
once, as a fresh interpreter (never a fork of the trainer), imports numpy and the runner, and
forks one child per program; the child puts up the same fences the launcher does before any of the
program's code runs, so every program still runs in a process of its own, from the template's clean
state (nothing one program does reaches the next: the template never runs untrusted code).

The templates form a pool: one per program running at the same time (an evaluator worker thread
takes one, runs its program, gives it back), per interpreter and environment. A template holds no
trainer state and none of its descriptors but its socket. When one dies, the next program gets a
fresh one (logged); one that cannot start at all (or ``HELIX_SANDBOX_ZYGOTE=0``) turns the pool off
for this process, and programs are started through the launcher as before. ``shutdown`` (also at
exit) closes every template; one whose evaluator died sees end-of-file and exits, killing its child.
"""

from __future__ import annotations

import atexit
import logging
import marshal
import os
import select
import socket
import subprocess
import sys
import threading

log = logging.getLogger(__name__)
RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child_runner.py")
START_TIMEOUT_S = 120.0  # a template's start (numpy's import) on a loaded machine
TITLE_PAD = "-" * 8192  # argument space the child rewrites into the runner's command line
_NOT_FOR_TEMPLATE = ("HOME", "TMPDIR")  # per program: the child sets them


class ZygoteError(OSError):
    """The template could not start a program (it died, or refused): no program code ran."""


class StartError(ZygoteError):
    """No template process could be started here at all."""


class Child:
    """A program's process, the template's child: what ``subprocess.Popen`` gives the sandbox
    (pid, stdout, wait, returncode), with ``exited`` through a pidfd since it is not our child.
    The template reaps it only when ``wait`` asks, so its pid cannot name another process before."""

    def __init__(self, zygote: Zygote, pid: int, stdout):
        self.zygote, self.pid, self.stdout = zygote, pid, stdout
        self.returncode: int | None = None
        self.lost = ""  # why no exit status came back (the template died)
        self.pidfd = os.pidfd_open(pid)

    def exited(self) -> bool:
        return self._ready(0)

    def _ready(self, timeout: float | None) -> bool:
        """The pidfd is readable once the process has exited (poll, not select: it may be past 1024)."""
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        return bool(poller.poll(None if timeout is None else int(timeout * 1000)))

    def wait(self, timeout: float | None = None) -> int | None:
        if self.pidfd is None:
            return self.returncode
        if not self._ready(timeout):
            self.zygote.broken = True  # stuck in the kernel: this template is not used again
            self._done()
            raise subprocess.TimeoutExpired("sandboxed program", timeout)
        status = self.zygote.reap()
        if status is None:
            self.lost = "the sandbox's template process died during the run"
        else:
            self.returncode = os.waitstatus_to_exitcode(status)
        self._done()
        return self.returncode

    def _done(self) -> None:
        os.close(self.pidfd)
        self.pidfd = None
        release(self.zygote)


class Zygote:
    """One template process and its socket; serves one program at a time."""

    def __init__(self, executable: str, env: dict[str, str], flags: list[str], key: tuple = ()):
        self.executable, self.env, self.flags, self.key, self.broken = executable, env, flags, key, False
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen([executable, *flags, RUNNER, "--zygote", str(theirs.fileno()), TITLE_PAD],
                                         env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         start_new_session=True, pass_fds=(theirs.fileno(),))
        finally:
            theirs.close()
        self.sock.settimeout(START_TIMEOUT_S)  # every answer: a template that hangs is given up, not waited for
        try:
            ready = self.sock.recv(4096)
        except OSError as exc:
            ready = f"no answer: {exc}".encode()
        if ready != b"ready":
            self.close()
            raise StartError(f"the sandbox's template process did not start ({ready.decode(errors='replace') or 'it exited'}, "
                              f"exit code {self.proc.poll()})")

    def start(self, request: dict, fds: list[int], stdout) -> Child:
        """Fork a child for ``request``; ZygoteError (the template is broken) when none was made."""
        try:
            socket.send_fds(self.sock, [marshal.dumps({**request, "flags": self.flags, "runner": RUNNER})], fds)
            answer = self.sock.recv(4096)
        except OSError as exc:
            answer = f"error: {exc}".encode()
        if not answer.startswith(b"pid "):
            self.broken = True
            raise ZygoteError(answer.decode(errors="replace").removeprefix("error: ") or
                              f"the sandbox's template process died (exit code {self.proc.poll()})")
        try:
            return Child(self, int(answer[4:]), stdout)
        except OSError as exc:  # no pidfd_open (Linux < 5.3): the launcher it is
            self.reap()
            raise StartError(f"cannot watch a template's child here: {exc}") from exc

    def reap(self) -> int | None:
        """The child's wait status, once the template has killed what is left and reaped it."""
        try:
            self.sock.send(b"reap")
            answer = self.sock.recv(64)
        except OSError:
            answer = b""
        if not answer.startswith(b"status "):
            self.broken = True
            return None
        return int(answer[7:])

    def alive(self) -> bool:
        return not self.broken and self.proc.poll() is None

    def close(self) -> None:
        self.sock.close()  # end-of-file: the template exits (killing a child it still has)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_lock = threading.Lock()
_idle: dict[tuple, list[Zygote]] = {}
_busy: set[Zygote] = set()
_off = "" if os.environ.get("HELIX_SANDBOX_ZYGOTE", "1") != "0" else "HELIX_SANDBOX_ZYGOTE=0"


def disabled() -> str:
    """Why programs are not started from a template here ("" when they are)."""
    return _off


def set_enabled(on: bool) -> None:
    """Start programs from templates (True, the default) or through the launcher (False), from now
    on in this process; for comparisons (scripts/bench/bench_sandbox.py). HELIX_SANDBOX_ZYGOTE=0
    turns them off before anything runs."""
    global _off
    _off = "" if on else "turned off (zygote.set_enabled)"
    if not on:
        shutdown()


def disable(reason: str) -> None:
    global _off
    if not _off:
        log.warning("sandbox: programs start through the launcher, without a template process: %s", reason)
    _off = reason


def acquire(env: dict[str, str], flags: list[str]) -> Zygote:
    """An idle template for this interpreter and environment, or a new one (StartError if it cannot start)."""
    base = {k: v for k, v in env.items() if k not in _NOT_FOR_TEMPLATE}
    key = (sys.executable, tuple(flags), tuple(sorted(base.items())))
    with _lock:
        pool = _idle.setdefault(key, [])
        while pool:
            zygote = pool.pop()
            if zygote.alive():
                _busy.add(zygote)
                return zygote
            log.warning("sandbox: the template process %d died (exit code %s); starting a new one",
                        zygote.proc.pid, zygote.proc.poll())
            zygote.close()
    zygote = Zygote(sys.executable, {**base, "HOME": "/", "TMPDIR": "/tmp"}, flags, key)
    with _lock:
        _busy.add(zygote)
    return zygote


def release(zygote: Zygote) -> None:
    with _lock:
        _busy.discard(zygote)
        if zygote.alive() and _pid == os.getpid():
            _idle.setdefault(zygote.key, []).append(zygote)
            return
    zygote.close()


def spawn(template: Zygote, request: dict, fds: list[int]) -> Child:
    """The program's process, forked by ``template`` (taken over: given back when the child is
    reaped, or now if it fails) with ``fds`` (result file, status pipe, a driver's channel) and a new
    output pipe. A template that failed is replaced once (logged); StartError where none can start,
    ZygoteError where a fresh one failed too."""
    out_r, out_w = os.pipe()
    stdout = os.fdopen(out_r, "rb", buffering=0)
    try:
        try:
            return template.start(request, [out_w, *fds], stdout)
        except ZygoteError as exc:
            release(template)
            if isinstance(exc, StartError):
                raise
            log.warning("sandbox: the template process %d failed (%s); starting a new one", template.proc.pid, exc)
        template = acquire(template.env, template.flags)
        try:
            return template.start(request, [out_w, *fds], stdout)
        except ZygoteError:
            release(template)
            raise
    except BaseException:
        stdout.close()
        raise
    finally:
        os.close(out_w)


def templates() -> list[int]:
    """Pids of this process's template processes (idle and busy)."""
    with _lock:
        return [z.proc.pid for z in (*_busy, *(z for pool in _idle.values() for z in pool))]


def shutdown() -> None:
    """Close every idle template (busy ones are closed when given back)."""
    with _lock:
        idle = [z for pool in _idle.values() for z in pool]
        _idle.clear()
    for zygote in idle:
        zygote.close()


def _forget() -> None:
    """In a fork of this process: the templates are the parent's, never to be used here; its copies
    of their sockets are closed, so a long-lived fork does not keep them alive."""
    global _lock, _idle, _busy, _pid
    for zygote in (*_busy, *(z for pool in _idle.values() for z in pool)):
        try:
            os.close(zygote.sock.detach())
        except OSError:
            pass
    _lock, _idle, _busy, _pid = threading.Lock(), {}, set(), os.getpid()


_pid = os.getpid()
os.register_at_fork(after_in_child=_forget)
atexit.register(shutdown)
