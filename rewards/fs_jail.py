"""A filesystem for a sandboxed child that shows only what it needs: its own mount namespace whose
root is an empty tmpfs holding read-only binds of the system directories (/usr, /etc, ...), the
Python installation and the runner, plus two small tmpfs mounts of its own that it may write: its
working directory (where its input files are bound read-only) and /dev/shm. Nothing else on the
machine exists for it: not the repository or another copy of it, not /root, not /tmp, not the
run directories. Held-out data stays with the verifier in the parent.

Why an allow list: hiding named folders (the repository's tasks/) missed every other place the
same files live (a second checkout, a wheel in a cache, a copy in /tmp). Why a mount namespace:
where the child cannot run as an unprivileged user (the venv's Python sits where ``nobody``
cannot read it), it runs as root, and only the jail keeps it from writing the trainer's run
directory, checkpoints or code; an ordinary user gets the same jail inside a user namespace of
the child's own. Needs CAP_SYS_ADMIN (root, or over that user namespace); where the kernel
refuses, ``enter`` returns False and the child runs with the uid's permissions as its only fence
(``rewards.sandbox.isolation()`` reports which). Inside, the child keeps its uid (0 as root) but
no capabilities, so it can neither undo the mounts nor override file permissions.

``plan`` runs in the parent; ``enter`` runs in ``rewards.launcher``, the sandboxed process's first
program, on the plan the parent computed (its fields travel there marshalled).
"""

from __future__ import annotations

import ctypes
import os
from collections import namedtuple

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
MNT_DETACH = 0x2
AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = -100, 0x8000, 0x1
# mount_setattr(2) (Linux 5.12+): recursive read-only in one call; pivot_root(2). Per arch.
SYS_MOUNT_SETATTR = {"x86_64": 442, "aarch64": 442}.get(os.uname().machine)
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine)
# What every program needs to start a Python with numpy: binaries, libraries, the loader's cache,
# device nodes and the kernel's views. Missing ones are skipped.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/dev", "/proc", "/sys")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _mount = _libc.mount
    _mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    _unshare = _libc.unshare
    _unshare.argtypes = [ctypes.c_int]
    _umount2 = _libc.umount2
    _umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
except (OSError, AttributeError):
    _libc = None


PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 63


# The jail for one child: computed by ``plan`` in the parent, entered by ``enter`` in the launcher.
# A namedtuple rather than a dataclass: the launcher imports this file once per program, and
# dataclasses (with inspect, re, tokenize) is most of what that import would cost.
Plan = namedtuple("Plan", (
    "root",  # bytes: an empty directory of the parent's: the tmpfs that becomes "/" is mounted on it
    "dirs",  # bytes paths created in the tmpfs, parents first (mount points, symlink folders)
    "files",  # bytes paths of empty files in the tmpfs: mount points of single-file binds
    "links",  # (target, link): symlinks met on the way to a bound path
    "binds",  # (host path, path in the tmpfs), read-only ones first
    "hide",  # final paths covered by an empty tmpfs (held-out data under a bound dir)
    "writable",  # final paths remounted writable: the workdir, extra dirs, /dev/shm
    "scratch",  # bytes: mount options of the tmpfs mounts on the workdir and /dev/shm
    "inputs",  # (host file, path in the tmpfs): bound read-only into the workdir
    "shm",  # bool: /dev is bound, so the child gets a /dev/shm of its own
    "workdir",  # bytes: the workdir's path inside the jail
    "last_cap",  # int: the highest capability number, to empty the bounding set
))


def _real(path: str, links: dict[str, str]) -> str:
    """``path`` with every symlink resolved, each one met recorded in ``links`` so that the same
    name still leads there inside the jail."""
    parts = [p for p in os.path.abspath(path).split("/") if p]
    current = "/"
    for i, part in enumerate(parts):
        step = os.path.join(current, part)
        if os.path.islink(step):
            links[step] = os.readlink(step)
            rest = os.path.join(*parts[i + 1:]) if i + 1 < len(parts) else ""
            return _real(os.path.join(os.path.realpath(step), rest), links)
        current = step
    return current


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def plan(workdir: str, root: str, visible: tuple[str, ...], hide: tuple[str, ...] = (),
         writable: tuple[str, ...] = (), userns: bool = False, scratch_mb: int = 64,
         inputs: tuple[str, ...] = ()) -> Plan | None:
    """The jail for one child, or None where this machine cannot build one (not root, no syscall).
    ``root``: an empty directory, removed by the caller afterwards; ``visible``: what the child
    sees, read-only, at the same paths (directories or files; missing ones are skipped);
    ``hide``: folders to empty even where they lie under a visible one; ``writable``: directories
    besides the workdir the child may write (a shared results folder); ``userns``: the child enters
    its own user namespace first, which gives a non-root evaluator the capabilities (over that
    namespace's mounts only) to build the jail.

    The workdir the child sees is a tmpfs of ``scratch_mb``, not the host folder: what it writes
    there stays in memory and in bounds (RLIMIT_FSIZE caps one file, not how many: on the host
    disk a program could fill the disk the trainer checkpoints to). ``inputs``: names of files in
    the host workdir (the program, the harness, data) that appear in it read-only. Its /dev/shm
    (POSIX shared memory, multiprocessing's semaphores) is another tmpfs of ``scratch_mb``: the
    host's would outlive the child and let programs pass files to each other."""
    if _libc is None or None in (SYS_MOUNT_SETATTR, SYS_PIVOT_ROOT) or (os.geteuid() != 0 and not userns):
        return None
    links: dict[str, str] = {}
    shown = sorted({_real(p, links) for p in visible if os.path.exists(p)}, key=lambda p: (p.count("/"), p))
    read_only: list[str] = []
    for path in shown:  # a path under one already bound comes with it
        if not any(_inside(path, outer) for outer in read_only):
            read_only.append(path)
    rw = list(dict.fromkeys(_real(p, links) for p in (workdir, *writable)))  # rw[0]: the workdir, a tmpfs
    dirs, files = set(), set()
    for path in (*read_only, *rw, *links):
        parent = os.path.dirname(path)
        while parent != "/":
            dirs.add(parent)
            parent = os.path.dirname(parent)
        if path in links:
            continue
        (dirs if os.path.isdir(path) else files).add(path)
    base = os.path.realpath(root)

    def inner(path: str) -> bytes:
        return os.fsencode(base + path)

    hidden = tuple(os.fsencode(h) for h in (os.path.realpath(p) for p in hide if os.path.isdir(p))
                   if any(_inside(h, outer) for outer in read_only))
    shm = "/dev" in read_only and os.path.isdir("/dev/shm")
    return Plan(os.fsencode(base), tuple(inner(d) for d in sorted(dirs, key=lambda d: (d.count("/"), d))),
                tuple(inner(f) for f in sorted(files)), tuple((os.fsencode(t), inner(p)) for p, t in links.items()),
                tuple((os.fsencode(p), inner(p)) for p in (*read_only, *rw[1:])), hidden,
                tuple(os.fsencode(p) for p in rw) + ((b"/dev/shm",) if shm else ()),
                f"size={max(1, scratch_mb)}m,mode=1777".encode(),
                tuple((os.fsencode(os.path.join(workdir, n)), inner(os.path.join(rw[0], n))) for n in inputs),
                shm, os.fsencode(rw[0]), _last_cap())


def enter(p: Plan) -> bool:
    """In the child: a private mount namespace whose root shows only the planned paths, all
    read-only but its own workdir and /dev/shm (tmpfs). False where a step is refused: then the
    child must not run (the caller's probe sees it)."""
    if _unshare(CLONE_NEWNS) != 0:
        return False
    if _mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:  # nothing propagates back to the host
        return False
    if _mount(b"tmpfs", p.root, b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64k,mode=755") != 0:
        return False
    try:
        for path in p.dirs:
            os.mkdir(path, 0o755)
        for path in p.files:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
        for target, link in p.links:
            os.symlink(target, link)
    except OSError:
        return False
    for source, target in p.binds:  # recursive: /proc's and /sys's own mounts come along
        if _mount(source, target, None, MS_BIND | MS_REC, None) != 0:
            return False
    if _mount(b"tmpfs", p.root + p.workdir, b"tmpfs", MS_NOSUID | MS_NODEV, p.scratch) != 0:
        return False
    for source, target in p.inputs:  # read-only once "/" is made so below; the tmpfs is remounted writable
        try:
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
        except OSError:
            return False
        if _mount(source, target, None, MS_BIND, None) != 0:
            return False
    if p.shm and _mount(b"tmpfs", p.root + b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, p.scratch) != 0:
        return False
    for path in p.hide:
        if _mount(b"tmpfs", p.root + path, b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=4k,mode=555") != 0:
            return False
    # The tmpfs becomes "/"; the old root is stacked under it and detached, so no path reaches it.
    os.chdir(p.root)
    if _libc.syscall(SYS_PIVOT_ROOT, b".", b".") != 0 or _umount2(b".", MNT_DETACH) != 0:
        return False
    os.chdir(b"/")
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)  # read-only, recursively
    if _libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr)) != 0:
        return False
    for path in p.writable:  # a bind remount without MS_RDONLY makes that one mount writable
        flags = MS_NOSUID | MS_NODEV | (MS_NOEXEC if path == b"/dev/shm" else 0)
        if _mount(None, path, None, MS_REMOUNT | MS_BIND | flags, None) != 0 and not flags & MS_NOEXEC:
            # In a user namespace a noexec the mount already had is locked on: ask again keeping it.
            _mount(None, path, None, MS_REMOUNT | MS_BIND | flags | MS_NOEXEC, None)
    os.chdir(p.workdir)
    # A root program could simply remount / read-write. Empty the capability bounding set: at
    # exec, uid 0 gets only what the bounding set still holds, i.e. nothing (no CAP_SYS_ADMIN to
    # mount, no CAP_DAC_OVERRIDE, no CAP_KILL), and no_new_privs keeps setuid binaries from
    # giving any back.
    for cap in range(p.last_cap + 1):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    return True


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when the thread that started it dies (an evaluator, or a Ray worker,
    killed mid-run), so no sandbox outlives its supervisor; exits at once if that already happened.
    Call it after the last uid change: the kernel clears the setting when credentials change."""
    if _libc is not None:
        _libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)
