"""Run one untrusted program in its own process, under hard limits, and read back only JSON.

The program's process is a fork of a template process (``rewards.zygote``: a fresh interpreter that
has imported numpy and the runner, and never runs program code), which puts up the layers below
(``launcher.fence``) and empties its capabilities before the program's first line; where templates
are off, ``rewards.launcher``, a fresh interpreter per program, puts them up and execs the runner.
Never a preexec_fn in a fork of the threaded trainer (at-fork hooks of its libraries would run
there: see the launcher's docstring).

Layers (``isolation()`` reports which ones this machine allows):
* its own session and process group; at the end, timeout or not, the group gets SIGKILL, and so
  does every process left in the child's pids cgroup or network namespace (grandchildren that
  left the group);
* a pids cgroup of its own (``rewards.cgroup``), joined first, before anything else: at most
  SANDBOX_NPROC tasks, for root too, so a fork bomb cannot take the machine's pids (the read-only
  mounts below keep a uid-0 program from raising or leaving it). Where no pids cgroup is writable
  (not root, no delegation), RLIMIT_NPROC below is the only cap, and as root without a usable
  ``nobody`` only the time limit and pid_max bound it;
* not root: a user namespace of its own first (same uid and gid inside), which gives the child the
  capabilities, over its own namespaces only, to create the network, PID and mount namespaces
  below; where the kernel refuses unprivileged user namespaces, the probe turns this off;
* a fresh network namespace via ``unshare(CLONE_NEWNET)``: only a loopback that is down. Where
  unshare is refused the child silently keeps the host network;
* a fresh IPC namespace: System V shared memory, semaphores and message queues are destroyed
  with the program (on the host's, a segment outlives its creator and holds memory until reboot);
* as root, the program runs as ``nobody`` if that account can run this Python with numpy: it
  then cannot write outside its directory and /tmp, signal the trainer or touch runs/, and
  RLIMIT_NPROC applies (the kernel ignores it for root, so a root child does not get it);
* as root, after its last uid change, a user namespace of its own (no ids mapped): programs share
  a uid and the host's /proc lists them all, but across user namespaces the kernel refuses one
  program another's /proc/<pid>/cwd, root, fd targets and memory, the way into a sibling's
  directory and result file (the non-root path has a user namespace per program already);
* a private mount namespace (``rewards.fs_jail``) whose root shows only an allow list, read-only:
  the system directories (``fs_jail.SYSTEM_PATHS``), the Python installation and the runner, plus
  the program's own writable directory and a /dev/shm of its own (a tmpfs of memory_mb: the
  host's would outlive it and pass files between programs). The repository, other checkouts, /root, /tmp and the run
  directories do not exist for it (held-out data); the capability bounding set is emptied, so even
  a uid-0 child cannot remount, override permissions or write the trainer's files. Refused: the
  uid's permissions apply;
* a fresh PID namespace via ``unshare(CLONE_NEWPID)``: the runner forks a reaping init
  (PID 1) and the program runs as PID 2 (``child_runner.enter_pid_namespace``), so no pid it can
  name is outside (a uid-0 program needs no capability to kill a uid-0 trainer), and the kernel
  kills everything left inside when it ends. Refused: the program shares the host's pids;
* rlimits: address space (memory_mb), CPU (timeout + 1 s), file size (16 MB), no core dumps;
* its own directory (cwd, HOME, TMPDIR): in the jail a tmpfs of memory_mb, so file after file of
  16 MB stops there and not when the disk the trainer checkpoints to is full; the program, a
  task's data files and its harness (tasks/base.py, run after the program) appear in it
  read-only from a host folder that is removed afterwards whatever happened;
* a minimal environment: PATH, HOME, one BLAS/OpenMP thread, PYTHONHASHSEED=0. The child runs
  with ``-s -P`` and this controlled environment instead of ``-I``, whose ``-E`` would drop
  PYTHONHASHSEED (the environment holds nothing else for ``-E`` to ignore);
* output read incrementally, keeping the last 4 KB; the result comes back through a file the
  child inherits open (the jailed program cannot see its path) and the parent reads through its
  own descriptor with an 8 MB cap;
* a driven task (``driver``): the data stay here, in the evaluating process; the child gets one
  more inherited pipe pair and answers one request at a time (``rewards.channel``), and the
  artefact is what the driver returns, not anything the child writes;
* a search-form task (``search``): the construction goes in through a sealed memfd the runner reads
  before the program runs, and ``report(construction)`` frames come back over a pipe of their own,
  of which only the last complete one is kept (``rewards.search_channel``); it counts only when the
  time limit stopped the program, and is decoded and verified like a returned value.
Not covered: /proc is the host's, so a program can list every process and read its world-readable entries (cmdline, stat),
though not, across user namespaces, what needs ptrace access; and where no namespace can be created
(not root and no unprivileged user namespaces) the program can touch, and signal, whatever the
evaluator's uid can, and its directory is the host folder (16 MB per file, no quota).
"""

from __future__ import annotations

import ctypes
import json
import logging
import marshal
import math
import os
import pwd
import resource
import secrets
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rewards import cgroup, fs_jail, zygote
from rewards.channel import Link, close_all, open_link
from rewards.search_channel import Reports, input_fd, open_reports
from rewards.supervise import kill_all, netns, read_some, read_status, supervise

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child_runner.py")
LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launcher.py")
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASKS_DIR = os.path.join(REPO_DIR, "tasks")  # held-out data lives there: never visible to programs
USER_TASK_ENVS = ("HELIX_TASKS", "HELIX_TASK_PATHS")  # tasks.paths.ENV, CONFIG_ENV: a user's task folders, hidden too
MAX_RESULT_BYTES = 8 << 20
MAX_FILE_BYTES = 16 << 20
SANDBOX_USER = "nobody"
SANDBOX_NPROC = 256  # per program's pids cgroup; as RLIMIT_NPROC: shared by all sandboxes running as SANDBOX_USER
PROGRAM_NAME, HARNESS_NAME = "program.py", "harness.py"
log = logging.getLogger(__name__)

try:  # only whether this libc has unshare(2): rewards.launcher makes the calls (tests set it to None)
    _unshare = ctypes.CDLL(None, use_errno=True).unshare
except (OSError, AttributeError):
    _unshare = None


@dataclass(frozen=True)
class RunResult:
    status: str  # ok | error | timeout | crash | bad_output
    value: object = None  # the JSON-decoded return value when status == "ok"
    error: str = ""  # "Type: message" of the program's exception, or why there is no result
    traceback: str = ""  # the program's own frames only
    output_tail: str = ""  # the last bytes the program printed (stdout and stderr)
    elapsed_s: float = 0.0
    net_isolated: bool = False  # it ran in its own network namespace
    returncode: int | None = None  # exit code, or -signal, when it ended without a result
    phase: str = ""  # for errors: "load" (running the module) or "call" (the entry function)
    pids_capped: bool = False  # it ran in a pids cgroup of its own (at most SANDBOX_NPROC tasks)
    reports: int = 0  # search form: the complete report() frames that came back
    reported: bool = False  # search form, status timeout: ``value`` is the last report, decoded


class InfraError(RuntimeError):
    """Raised by a runner (rewards.ray_eval) when the infrastructure, not the program, failed: no
    result exists, so the evaluator records status "infra" instead of judging the program."""


@dataclass(frozen=True)
class Isolation:
    network: bool  # programs get their own, empty network namespace
    user: str | None  # the unprivileged account programs run as; None: the evaluator's own uid
    notes: str = ""
    filesystem: bool = False  # programs see a read-only filesystem (writable: their directory) without tasks/
    processes: bool = False  # programs run in their own PID namespace: no pid names the trainer
    pids_cap: bool = False  # programs run in a pids cgroup of their own: a fork bomb stops at SANDBOX_NPROC


_PROBE = "import os\nimport numpy\ntry:\n    import scipy\nexcept ImportError:\n    scipy = None\n\n" \
         "def probe():\n    return {'numpy': True, 'scipy': scipy is not None, " \
         "'read_only_root': bool(os.statvfs('/').f_flag & os.ST_RDONLY), " \
         "'own_pids': os.getpid() == 2 and os.getppid() == 1}\n"
_probe_lock = threading.Lock()
_isolation: Isolation | None = None
_userns_allowed = True  # not root: give each child a user namespace; off when the probe shows it fails


def isolation() -> Isolation:
    """What this machine allows, found once per process by running a probe program."""
    global _isolation
    with _probe_lock:
        if _isolation is None:
            _isolation = _probe()
    return _isolation


def _probe() -> Isolation:
    global _userns_allowed
    base = _run(_PROBE, "probe", 60.0, 2048, None)
    if base.status != "ok" and not zygote.disabled():
        zygote.disable(f"a program started from it failed the probe ({base.status}: {base.error[:200]})")
        base = _run(_PROBE, "probe", 60.0, 2048, None)
    if base.status != "ok" and os.geteuid() != 0 and _userns_allowed:
        _userns_allowed = False
        plain = _run(_PROBE, "probe", 60.0, 2048, None)
        if plain.status == "ok":  # the user namespace was what failed
            log.warning("sandbox: a user namespace per program fails here (%s: %s); programs run without one",
                        base.status, base.error[:200])
            base = plain
        else:  # something else is wrong (no numpy...): say that, keep the namespace
            _userns_allowed = True
    ids = _unprivileged_ids()
    jailed = base.status == "ok" and bool(base.value.get("read_only_root"))
    pids = base.status == "ok" and bool(base.value.get("own_pids"))
    capped = base.status == "ok" and base.pids_capped
    if base.status != "ok" or ids is None:
        note = f"probe failed: {base.status}: {base.error}" if base.status != "ok" else \
            ("not root: programs run as the evaluator's uid" + (" in a user namespace of their own" if _userns_allowed else "")) \
            if os.geteuid() else f"no {SANDBOX_USER} account: programs run as root"
        return Isolation(base.net_isolated, None, note[:300], jailed, pids, capped)
    dropped = _run(_PROBE, "probe", 60.0, 2048, ids)
    if dropped.status == "ok" and dropped.value == base.value:
        return Isolation(dropped.net_isolated, SANDBOX_USER, f"programs run as {SANDBOX_USER}", jailed, pids,
                         dropped.pids_capped)
    note = f"programs run as root: {SANDBOX_USER} cannot run this Python with numpy/scipy ({dropped.error[:150]})"
    if jailed:
        note += "; a read-only mount namespace keeps them from writing outside their directory"
    log.warning("sandbox: %s", note)
    return Isolation(base.net_isolated, None, note, jailed, pids, capped)


def _unprivileged_ids() -> tuple[int, int] | None:
    try:
        return (pwd.getpwnam(SANDBOX_USER).pw_uid, pwd.getpwnam(SANDBOX_USER).pw_gid) if os.geteuid() == 0 else None
    except KeyError:
        return None


def _tasks_of(uid: int) -> int:
    """Threads of ``uid`` now (RLIMIT_NPROC counts them all, the trainer's included)."""
    count = 0
    for entry in os.scandir("/proc"):
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                count += len(os.listdir(f"/proc/{entry.name}/task"))
        except OSError:
            pass
    return count


def run_program(code: str, entry: str, timeout_s: float, memory_mb: int, harness: str | None = None,
                files: Sequence[str | Path] = (), driver=None, search: tuple | None = None) -> RunResult:
    """Run ``entry()`` of ``code`` in a fresh sandbox; never raises for anything the program does.

    ``harness``: trusted source executed after the program, in its module (``entry`` may be one of
    its functions); ``files``: copied into the sandbox's working directory under their base names.
    ``driver``: a driven run (``rewards.channel``): a callable (picklable, for Ray) that returns a
    fresh generator, run here; the child calls ``entry(request)`` for each of its requests, and
    the result's value is the generator's return value. A reply the driver refuses ends the run
    as bad_output; a program that stops answering times out; one that dies crashed.
    ``search``: a search-form call (``rewards.search_channel``), ``(construction, budget_s, seed)``
    in plain JSON data (so it crosses to a Ray worker as it is): ``entry(construction, budget_s,
    seed)`` is called, and a program the time limit stops ends as status timeout with its last
    report in ``value`` (``reported``), if it made one. ValueError, before anything starts, for a
    construction that may not be handed in (NaN, infinity, over MAX_CONSTRUCTION_BYTES)."""
    files = tuple(Path(f) for f in files)
    names = [f.name for f in files]
    for name in names:
        if name in (PROGRAM_NAME, HARNESS_NAME) or name.startswith(("result-", ".")) or names.count(name) > 1:
            raise ValueError(f"sandbox data file name {name!r} is reserved or repeated")
    if search is not None:
        if driver is not None:
            raise ValueError("a run is driven (driver) or a search (search), not both")
        if not (isinstance(search, (tuple, list)) and len(search) == 3):
            raise ValueError(f"search must be (construction, budget_s, seed), got {search!r:.100}")
        os.close(input_fd(*search))  # refused here, one line, before the sandbox exists
    return _run(code, entry, timeout_s, memory_mb, _unprivileged_ids() if isolation().user else None, harness, files,
                driver, search)


def visible_paths() -> tuple[str, ...]:
    """What a jailed program sees besides its own directory: the system, this Python (venv and
    base installation, wherever they live) and the runner; nothing of the repository but that."""
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              os.path.dirname(os.path.realpath(sys.executable)), os.path.dirname(sys.executable)}
    python.update(v for k, v in sysconfig.get_paths().items() if k != "data")  # "data" is the prefix itself
    python.update(site.getsitepackages())
    return (*fs_jail.SYSTEM_PATHS, *sorted(python), RUNNER)


def hidden_paths() -> tuple[str, ...]:
    """tasks/ and the user's task folders, whose held-out data no program may read even where a visible folder
    holds them: HELIX_TASKS's and the loaded config's task.paths (HELIX_TASK_PATHS), read from the environment
    as tasks/paths.py keeps them (this package imports nothing of tasks/: a Ray worker has only rewards/)."""
    extra = [p for name in USER_TASK_ENVS for p in os.environ.get(name, "").split(os.pathsep) if p.strip()]
    return (TASKS_DIR, *dict.fromkeys(os.path.abspath(os.path.expanduser(p)) for p in extra))


def _launch_plan(memory_mb: int, timeout_s: float, ids: tuple[int, int] | None, workdir: str,
                 cgroup_procs: str | None, jail_root: str, inputs: tuple[str, ...] = ()) -> dict:
    """What ``rewards.launcher`` does in the new process before it execs the runner, all computed here."""
    cpu = math.ceil(timeout_s) + 1
    wanted = [(resource.RLIMIT_AS, memory_mb << 20, memory_mb << 20), (resource.RLIMIT_CPU, cpu, cpu + 1),
              (resource.RLIMIT_FSIZE, MAX_FILE_BYTES, MAX_FILE_BYTES), (resource.RLIMIT_CORE, 0, 0)]
    uid = ids[0] if ids is not None else os.geteuid()
    fallback = []  # RLIMIT_NPROC: only where the program's own pids cgroup did not take hold (see below)
    if uid != 0:  # the kernel ignores RLIMIT_NPROC for root; it counts all tasks of the uid
        nproc = SANDBOX_NPROC + (_tasks_of(uid) if ids is None else 0)
        # It counts every task of the uid, so programs running side by side as SANDBOX_USER share it: one
        # program's fork bomb would make its siblings' forks fail (their children scored "error"). A pids
        # cgroup caps each program on its own, so the shared limit is set only when joining one failed.
        (fallback if cgroup_procs else wanted).append((resource.RLIMIT_NPROC, nproc, nproc))
    limits, without_cgroup = [_within_hard(*w) for w in wanted], [_within_hard(*w) for w in fallback]
    userns = _userns_maps() if os.geteuid() != 0 and _unshare is not None and _userns_allowed else None
    # tasks/ is hidden even where a visible folder holds it (a non-editable install's site-packages), a user's too
    jail = fs_jail.plan(workdir, jail_root, visible_paths(), hide=hidden_paths(), userns=userns is not None,
                        scratch_mb=memory_mb, inputs=inputs)
    return {"cgroup_procs": cgroup_procs, "userns_maps": userns, "namespaces": _unshare is not None,
            "jail": jail._asdict() if jail is not None else None,
            "ids": ids,
            "own_userns": os.geteuid() == 0 and _unshare is not None,  # as root: one after the last uid change
            "limits": limits, "limits_without_cgroup": without_cgroup, "parent": os.getpid()}


def _within_hard(res: int, soft: int, hard: int) -> tuple[int, int, int]:
    """A limit lowered to this process's own hard limit where that is lower (a child cannot raise it)."""
    cur_hard = resource.getrlimit(res)[1]
    if cur_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, cur_hard), min(hard, cur_hard)
    return int(res), soft, hard


def _userns_maps() -> tuple[tuple[str, bytes], ...]:
    """What the child writes after unshare(CLONE_NEWUSER): its own uid and gid, mapped to themselves.
    It then holds every capability over its new namespaces (which is what lets a non-root evaluator
    unshare the network, the pids and the mounts), and loses them at exec, as any non-zero uid does."""
    uid, gid = os.geteuid(), os.getegid()
    return (("/proc/self/setgroups", b"deny"), ("/proc/self/uid_map", f"{uid} {uid} 1".encode()),
            ("/proc/self/gid_map", f"{gid} {gid} 1".encode()))


def _run(code: str, entry: str, timeout_s: float, memory_mb: int, ids: tuple[int, int] | None,
         harness: str | None = None, files: tuple[Path, ...] = (), driver=None, search: tuple | None = None) -> RunResult:
    workdir = jail_root = group = None
    try:  # an OSError here (a full disk...) costs this program its result, not the trainer its run
        workdir = tempfile.mkdtemp(prefix="helix-sandbox-")
        jail_root = tempfile.mkdtemp(prefix="helix-sandbox-root-")  # stays empty out here
        group = cgroup.create(SANDBOX_NPROC)
        return _run_in(workdir, jail_root, group, code, entry, timeout_s, memory_mb, ids, harness, files, driver, search)
    except OSError as exc:
        return RunResult("crash", error=f"the sandbox failed: {exc}")
    finally:
        if group is not None:
            group.kill_all()  # a no-op after kill_all, unless _run_in failed half-way
            group.remove()
        for path in (workdir, jail_root):
            if path is not None:
                _remove(path)


def _run_in(workdir: str, jail_root: str, group: cgroup.PidsCgroup | None, code: str, entry: str, timeout_s: float, memory_mb: int,
            ids, harness: str | None = None, files: tuple[Path, ...] = (), driver=None, search: tuple | None = None) -> RunResult:
    program = os.path.join(workdir, PROGRAM_NAME)
    with open(program, "w", encoding="utf-8", errors="replace") as fh:
        fh.write(code)
    extra = []
    if harness is not None:  # read by the runner before the program runs, so the program cannot swap it
        extra.append(os.path.join(workdir, HARNESS_NAME))
        with open(extra[0], "w", encoding="utf-8") as fh:
            fh.write(harness)
    for path in files:
        shutil.copyfile(path, os.path.join(workdir, path.name))
    inputs = (PROGRAM_NAME, *([HARNESS_NAME] if harness is not None else []), *(p.name for p in files))
    if ids is not None:
        os.chown(workdir, *ids)
    # The result comes back through a file only this process names: the child inherits it open
    # (jailed, it cannot see the path), and it is read back through this descriptor, never reopened.
    result_fd = os.open(os.path.join(workdir, f"result-{secrets.token_hex(16)}.json"),
                        os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        return _start(workdir, jail_root, group, entry, timeout_s, memory_mb, ids, program, extra, inputs, result_fd, driver,
                      search)
    finally:
        os.close(result_fd)


def _start(workdir: str, jail_root: str, group: cgroup.PidsCgroup | None, entry: str, timeout_s: float, memory_mb: int,
           ids, program: str, extra: list[str], inputs: tuple[str, ...], result_fd: int, driver=None,
           search: tuple | None = None) -> RunResult:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": workdir, "TMPDIR": workdir,
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUTF8": "1",
           "PYTHONUNBUFFERED": "1"}  # unbuffered: output printed before a crash is not lost
    flags = ["-s", "-P"] if sys.version_info >= (3, 11) else ["-s"]
    plan = _launch_plan(memory_mb, timeout_s, ids, workdir, group.procs if group is not None else None, jail_root, inputs)
    link, theirs = open_link(driver) if driver is not None else (None, [])
    reports = None
    if search is not None:  # the child's ends: the sealed input, the report pipe's write end
        theirs = [input_fd(*search)]
        try:
            reports, write_end = open_reports()
        except OSError:
            close_all(theirs)
            raise
        theirs.append(write_end)
    runner = [sys.executable, *flags, RUNNER, program, entry, str(result_fd), str(MAX_RESULT_BYTES),
              ",".join(map(str, theirs)) if link is not None else "-",
              ",".join(map(str, theirs)) if reports is not None else "-", *extra]
    template = _template(env, flags)  # started here if none is idle: not on the program's clock
    try:
        status_r, status_w = os.pipe()
        start = time.monotonic()
        try:
            template, proc = None, _spawn(template, plan, env, flags, workdir, runner, result_fd, status_w, theirs,
                                          search=reports is not None)
        except (OSError, subprocess.SubprocessError) as exc:
            os.close(status_r)
            return RunResult("crash", error=f"the sandbox could not start the program: {exc}")
        finally:
            os.close(status_w)
            close_all(theirs)  # now: the driver sees end-of-file once the program's copies are gone
        return _watch(proc, workdir, group, timeout_s, result_fd, start, status_r, link, reports)
    finally:
        if template is not None:  # it never got the program
            zygote.release(template)
        close_all(theirs)
        if link is not None:
            link.close()
        if reports is not None:
            reports.close()


def _template(env: dict, flags: list[str]) -> zygote.Zygote | None:
    """An idle template process for this program, or None: templates are off (or none can start here)."""
    if zygote.disabled():
        return None
    try:
        return zygote.acquire(env, flags)
    except zygote.StartError as exc:
        zygote.disable(str(exc))
        return None


def _spawn(template: zygote.Zygote | None, plan: dict, env: dict, flags: list[str], workdir: str, runner: list[str],
           result_fd: int, status_w: int, theirs: list[int], search: bool = False):
    """The program's process: a fork of ``template`` (``rewards.zygote``, which takes it over), or
    without one a fresh launcher that puts up the fences and execs the runner. Either way its first
    program code runs behind the same fences."""
    if template is not None:
        request = {"plan": plan, "env": env, "cwd": workdir, "program": runner[len(flags) + 2],
                   "entry": runner[len(flags) + 3], "max_bytes": MAX_RESULT_BYTES, "extra": runner[len(flags) + 8:],
                   "search": search}
        try:
            return zygote.spawn(template, request, [result_fd, status_w, *theirs])
        except zygote.StartError as exc:
            zygote.disable(str(exc))
    return subprocess.Popen([sys.executable, "-I", "-S", LAUNCHER, marshal.dumps(plan).hex(), str(status_w), "--", *runner],
                            cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True, pass_fds=(result_fd, status_w, *theirs))


def _watch(proc: subprocess.Popen | zygote.Child, workdir: str, group: cgroup.PidsCgroup | None, timeout_s: float, result_fd: int,
           start: float, status_r: int, link: Link | None, reports: Reports | None = None) -> RunResult:
    """From the launcher's start to the RunResult: fences, supervision (and the driver), cleanup, the verdict."""
    fenced = read_status(status_r, start + timeout_s)  # until the launcher execs the runner (or fails)
    # Holding the namespace open keeps its identity from being recycled for another sandbox's.
    try:
        net_fd = os.open(f"/proc/{proc.pid}/ns/net", os.O_RDONLY)
        net = (os.fstat(net_fd).st_dev, os.fstat(net_fd).st_ino)
    except OSError:
        net_fd = net = None
    isolated = net is not None and net != netns("self")
    capped = "cgroup" in fenced
    tail = bytearray()
    try:
        if link is not None:
            link.start()  # the first request waits in the pipe until the program reads it
        timed_out = supervise(proc, start + timeout_s, tail, link, reports)
        elapsed = time.monotonic() - start
    finally:
        kill_all(proc, net if isolated else None, group)
        read_some(proc.stdout.fileno(), tail)  # what was still in the pipe
        if reports is not None:
            reports.drain()  # a report written just before the end counts
        proc.stdout.close()
        if net_fd is not None:
            os.close(net_fd)
    output = tail.decode("utf-8", "replace").replace(workdir + os.sep, "")  # no temp paths in feedback
    common = dict(output_tail=output, elapsed_s=elapsed, net_isolated=isolated, pids_capped=capped,
                  reports=reports.count if reports is not None else 0)
    if link is not None and link.done:
        return RunResult("ok", value=link.value, **common)
    if link is not None and link.failure is not None:
        return RunResult("bad_output", error=link.failure, **common)
    if timed_out and reports is not None and (reports.count or reports.failure):
        try:  # stopped at the limit: the last report stands in for the return value
            value = reports.value()
        except ValueError as exc:
            return RunResult("bad_output", error=f"stopped at the time limit of {timeout_s:g} s, and its last report "
                             f"cannot be used: {exc}", **common)
        return RunResult("timeout", value=value, error=f"time limit of {timeout_s:g} s exceeded", reported=True, **common)
    if timed_out:
        return RunResult("timeout", error=f"time limit of {timeout_s:g} s exceeded", **common)
    status, payload = _read_result(result_fd)
    if status == "missing":
        return RunResult("crash", error=getattr(proc, "lost", "") or "no result", returncode=proc.returncode, **common)
    if status != "ok":
        return RunResult("bad_output", error=payload, **common)
    if payload.get("ok") is True and link is not None:  # it stopped before the driver was done
        return RunResult("crash", error=f"the program exited (code {proc.returncode}) after answering {link.replies} "
                         "of the driver's requests, before the last one", **common)
    if payload.get("ok") is True and "value" in payload:
        return RunResult("ok", value=payload["value"], **common)
    if payload.get("kind") == "bad_output":
        return RunResult("bad_output", error=str(payload.get("message", ""))[:1000], **common)
    message = f"{payload.get('error', 'Error')}: {payload.get('message', '')}"[:1000]
    return RunResult("error", error=message, traceback=str(payload.get("traceback", ""))[-1500:],
                     phase="load" if payload.get("phase") == "load" else "call", **common)


def _read_result(fd: int) -> tuple[str, object]:
    """("ok", dict) | ("missing", None) | ("bad", why), from the result file's descriptor."""
    size = os.fstat(fd).st_size
    if size == 0:
        return "missing", None
    if size > MAX_RESULT_BYTES:
        return "bad", f"the result is {size / 2**20:.1f} MB, over the {MAX_RESULT_BYTES >> 20} MB limit"
    data = os.pread(fd, MAX_RESULT_BYTES + 1, 0)
    try:
        payload = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return "bad", f"the result could not be parsed as JSON: {str(exc)[:200]}"
    if not isinstance(payload, dict) or not isinstance(payload.get("ok"), bool):
        return "bad", "the result file does not hold a result record"
    return "ok", payload


def _remove(path: str) -> None:
    try:
        shutil.rmtree(path)
    except (OSError, RecursionError):  # e.g. very deep trees, or modes the program changed
        subprocess.run(["chmod", "-R", "u+rwX", path], capture_output=True, check=False)
        subprocess.run(["rm", "-rf", "--one-file-system", path], capture_output=True, check=False)
