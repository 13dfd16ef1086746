"""A read-only filesystem for a sandboxed child: its own mount namespace in which every mount is
read-only except its working directory (and /dev, /dev/shm, which programs need for /dev/null
and multiprocessing), and the task folders are hidden under an empty tmpfs, so held-out data
stays with the verifier in the parent.

Why: where the child cannot be run as an unprivileged user (the venv's Python sits where
``nobody`` cannot read it), it runs as root, and only a mount namespace keeps it from writing
the trainer's run directory, checkpoints or code; an ordinary user gets the same jail inside a
user namespace of the child's own. Needs CAP_SYS_ADMIN (root, or over that user namespace);
where the kernel refuses,
``enter`` returns False and the child runs with the uid's permissions as its only fence
(``rewards.sandbox.isolation()`` reports which). Inside, the child keeps its uid (0 as root) but
no capabilities, so it can neither undo the mounts nor override file permissions.

``plan`` runs in the parent; ``enter`` runs in the forked child before exec and makes only
syscalls on precomputed arguments (the parent is threaded).
"""

from __future__ import annotations

import ctypes
import os
import platform
from dataclasses import dataclass

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = -100, 0x8000, 0x1
# mount_setattr(2) (Linux 5.12+): recursive read-only in one call. Same number on these arches.
SYS_MOUNT_SETATTR = {"x86_64": 442, "aarch64": 442}.get(platform.machine())


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _mount = _libc.mount
    _mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    _unshare = _libc.unshare
    _unshare.argtypes = [ctypes.c_int]
except (OSError, AttributeError):
    _libc = None


PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 63


@dataclass(frozen=True)
class Plan:
    workdir: bytes
    hide: tuple[bytes, ...]  # directories covered by an empty read-only tmpfs
    writable: tuple[bytes, ...]  # mounts kept writable besides the workdir
    bound: tuple[bytes, ...]  # more writable directories, bound onto themselves first
    attr: _MountAttr
    last_cap: int


def plan(workdir: str, hide: tuple[str, ...] = (), writable: tuple[str, ...] = (), userns: bool = False) -> Plan | None:
    """The jail for one child, or None where this machine cannot build one (not root, no syscall).
    ``writable``: directories besides the workdir the child may write (a shared results folder).
    ``userns``: the child enters its own user namespace first, which gives a non-root evaluator
    the capabilities (over that namespace's mounts only) to build the jail."""
    if _libc is None or SYS_MOUNT_SETATTR is None or (os.geteuid() != 0 and not userns):
        return None
    mounts = tuple(p.encode() for p in ("/dev", "/dev/shm") if os.path.ismount(p))
    hidden = tuple(os.fsencode(os.path.realpath(p)) for p in hide if os.path.isdir(p))
    bound = (os.fsencode(os.path.realpath(workdir)),) + tuple(os.fsencode(os.path.realpath(p)) for p in writable)
    return Plan(bound[0], hidden, mounts, bound, _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0), _last_cap())


def enter(p: Plan) -> bool:
    """In the child: a private mount namespace, task folders hidden, everything read-only but the
    workdir (and /dev). False, with nothing half-done that matters, where a step is refused."""
    if _unshare(CLONE_NEWNS) != 0:
        return False
    if _mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:  # nothing propagates back to the host
        return False
    for path in p.bound:  # each its own mount, to re-enable writes on after the read-only pass
        if _mount(path, path, None, MS_BIND, None) != 0:
            return False
    for path in p.hide:
        _mount(b"tmpfs", path, b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=4k,mode=555")
    if _libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(p.attr), ctypes.sizeof(p.attr)) != 0:
        return False
    for path in (*p.bound, *p.writable):  # a bind remount without MS_RDONLY makes that one mount writable
        flags = MS_NOSUID | MS_NOEXEC if path == b"/dev" else MS_NOSUID | MS_NODEV  # /dev keeps its device nodes
        if _mount(None, path, None, MS_REMOUNT | MS_BIND | flags, None) != 0 and not flags & MS_NOEXEC:
            # In a user namespace a noexec the mount already had is locked on: ask again keeping it.
            # (Never add nodev here: /dev would lose /dev/null.)
            _mount(None, path, None, MS_REMOUNT | MS_BIND | flags | MS_NOEXEC, None)
    os.chdir(p.workdir)  # the old cwd is the directory on the read-only mount underneath
    # A root program could simply remount / read-write. Empty the capability bounding set: at
    # exec, uid 0 gets only what the bounding set still holds, i.e. nothing (no CAP_SYS_ADMIN to
    # mount, no CAP_DAC_OVERRIDE, no CAP_KILL), and no_new_privs keeps setuid binaries from
    # giving any back.
    for cap in range(p.last_cap + 1):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    return True
