"""The sandbox's template process: numpy and the runner imported once, a fresh fork per program.

Started by ``rewards.zygote`` as ``python -s -P child_runner.py --zygote SOCKET_FD PAD`` (a fresh
interpreter, never a fork of the trainer: no at-fork hooks of its libraries, no threads, nothing of
its state). It imports numpy, freezes its heap for the garbage collector, checks that it is
single-threaded (a multithreaded process cannot unshare a user namespace), says ``ready`` and then
serves one program at a time over a SOCK_SEQPACKET socket:

* request: the launch plan, environment, directory and runner arguments (marshalled) plus the
  descriptors the program gets (its output pipe, the result file, the status pipe, and a driver's
  channel or a search-form run's input and report pipe) as SCM_RIGHTS;
* it forks, answers with the child's pid, and waits for ``reap`` (the evaluator has watched and
  killed it); then SIGKILLs what is left of the child's process group, reaps it and answers with its
  wait status. End-of-file instead (the evaluator died): the same kill, then exit.

The fork is the program's own process; before any of the program's code runs it puts up the same
fences ``rewards.launcher`` puts up before its exec (``launcher.fence``: pids cgroup, namespaces,
jail, uid, rlimits, death with its parent), and, since no exec drops them, empties its capability
sets itself. No untrusted code ever runs in the template, so each program starts from the same
clean state: nothing one program patches, writes or leaves running reaches the next.
"""

import ctypes
import fcntl
import gc
import marshal
import os
import signal
import socket
import sys

import launcher  # a sibling (with fs_jail), loaded by path: rewards/ is on sys.path while the template starts

PRELOAD = ("numpy", "numpy.random")  # what nearly every program imports; missing ones are skipped
MAX_REQUEST = 1 << 20
MAX_FDS = 8
RESULT_FD, CHANNEL_FDS, STATUS_FD, SEARCH_FDS = 3, (4, 5), 6, (7, 8)  # where the child finds its descriptors
PR_SET_DUMPABLE, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 4, 47, 4
_CAP_VERSION_3 = 0x20080522
_libc = ctypes.CDLL(None, use_errno=True)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """Empty the effective, permitted, inheritable and ambient sets: what an exec as a non-root uid
    (or as root with an empty bounding set) does. Without it a child that made its own user
    namespace would keep CAP_SYS_ADMIN there and could unmount its jail's covers. Raises if refused."""
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if _libc.capset(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), (_CapData * 2)()) != 0:
        raise OSError(ctypes.get_errno(), "capset refused")


def set_title(argv: list[str]) -> None:
    """Show ``argv`` as this process's command line (what ``ps`` and /proc/<pid>/cmdline read), in
    the argument area the template was started with (padded for it), as setproctitle does: the
    program's process looks like the runner it replaces, arguments and all."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])
    except (OSError, ValueError, IndexError):
        return
    data = b"\0".join(os.fsencode(a) for a in argv)[:end - start - 1]
    ctypes.memmove(start, data.ljust(end - start, b"\0"), end - start)


def _arrange(fds: list[int], channel: bool, search: bool = False) -> None:
    """The child's descriptors: 0 /dev/null, 1 and 2 the output pipe, then RESULT_FD, the channel,
    STATUS_FD and the search pipes; everything else (the template's socket above all) closed."""
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in fds]  # out of the way of the numbers below
    for fd in fds:
        os.close(fd)
    out, result, status, *theirs = moved
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.dup2(result, RESULT_FD)
    if channel:
        for fd, target in zip(theirs, CHANNEL_FDS):
            os.dup2(fd, target)
    os.dup2(status, STATUS_FD)
    if search:
        for fd, target in zip(theirs, SEARCH_FDS):
            os.dup2(fd, target)
    last = SEARCH_FDS[-1] if search else STATUS_FD
    os.closerange(last + 1, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 65536)
    if not channel:
        os.closerange(CHANNEL_FDS[0], CHANNEL_FDS[-1] + 1)


def _child(request: dict, fds: list[int], runner_main) -> None:
    """In the fork: fences up, capabilities gone, then the runner; never returns."""
    try:
        os.setsid()
        search = bool(request.get("search"))
        channel = len(fds) > 3 and not search
        argv = [sys.executable, *request["flags"], request["runner"], request["program"], request["entry"],
                str(RESULT_FD), str(request["max_bytes"]), ",".join(map(str, CHANNEL_FDS)) if channel else "-",
                ",".join(map(str, SEARCH_FDS)) if search else "-", *request["extra"]]
        set_title(argv)
        _arrange(fds, channel, search)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if "tempfile" in sys.modules:
            sys.modules["tempfile"].tempdir = None  # found again from TMPDIR
        done = launcher.fence(request["plan"])
        drop_capabilities()
        _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # as after an exec: a setuid left it off
        os.write(STATUS_FD, " ".join(k for k, ok in done.items() if ok).encode())
        os.close(STATUS_FD)
    except BaseException as exc:  # never run the program half fenced
        os.write(2, f"sandbox template: {type(exc).__name__}: {exc}\n".encode())
        os._exit(126)
    random = sys.modules.get("numpy.random")
    if random is not None:
        random.seed()  # the global generator: fresh entropy, as a fresh interpreter's import gives it
    for name in ("zygote_server", "launcher", "fs_jail"):
        sys.modules.pop(name, None)
    sys.argv = argv[len(request["flags"]) + 1:]
    try:
        runner_main(sys.argv[1:])
        sys.stdout.flush()
    except BaseException:
        pass
    os._exit(0)  # no teardown: atexit hooks and threads the program left behind do not run


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _reap(pid: int) -> int:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return os.waitpid(pid, 0)[1]


def serve(sock_fd: int, runner_main) -> None:
    """The template's loop; returns when the evaluator closes its end."""
    sock = socket.socket(fileno=sock_fd)
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    gc.collect()
    gc.freeze()  # the template's objects stay out of every child's collections (no copy-on-write)
    if _threads() != 1:
        sock.send(b"error: the template process has %d threads after its imports" % _threads())
        return
    sock.send(b"ready")
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, MAX_FDS)
        except OSError:
            return
        if not message:
            return
        try:
            request = marshal.loads(message)
            request["plan"]["parent"] = os.getpid()  # it dies with this process
            if _threads() != 1:
                raise OSError(f"the template process has {_threads()} threads")
            pid = os.fork()
        except (OSError, ValueError, EOFError, TypeError, KeyError) as exc:
            for fd in fds:
                os.close(fd)
            sock.send(f"error: {type(exc).__name__}: {exc}".encode())
            continue
        if pid == 0:
            sock.close()
            _child(request, fds, runner_main)
        for fd in fds:
            os.close(fd)
        del request, message
        sock.send(b"pid %d" % pid)
        try:
            command = sock.recv(64)
        except OSError:
            command = b""
        status = _reap(pid)
        if command != b"reap":
            return
        sock.send(b"status %d" % status)
