"""One live run per run directory. A second process that would write into a directory a live run holds (the
same run.name started twice, a --resume of a run still going, an ablation started twice over one --out) is
refused before it changes a file there, instead of interleaving two archives and two metrics logs.

The lock is the kernel's (``flock`` on ``<run dir>/.run.lock``), so it goes with its process however that ends:
a killed run leaves no stale lock behind. Within one process a directory is held once (a run retried from
Python after an error reuses its own hold).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from train.config.config import ConfigError

LOCK_NAME = ".run.lock"
_held: dict[Path, int] = {}  # this process's holds: resolved run dir -> the lock file's descriptor


class RunDirInUse(ConfigError):
    """Another live process holds the run directory."""


def _message(run_dir: Path, pid: str) -> str:
    who = f"pid {pid}" if pid else "another process"
    return (f"{run_dir} is in use by a run that is still going ({who}): wait for it to end, stop it, or give "
            "this run another run.name")


def _owner(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, 32).decode(errors="replace").strip()


def hold(run_dir: Path) -> None:
    """Hold ``run_dir`` for this process until ``release`` or exit; RunDirInUse when a live process holds it."""
    key = Path(run_dir).resolve()
    if key in _held:
        return
    fd = os.open(key / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _owner(fd)
        os.close(fd)
        raise RunDirInUse(_message(Path(run_dir), pid)) from None
    except OSError as err:  # a file system without flock (some network mounts): run as before, unguarded
        os.close(fd)
        print(f"[helix] {key} cannot be locked ({err.strerror}): nothing stops a second run from writing there",
              flush=True)
        return
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _held[key] = fd


def release(run_dir: Path) -> None:
    """Let ``run_dir`` go (a no-op when this process does not hold it)."""
    fd = _held.pop(Path(run_dir).resolve(), None)
    if fd is not None:
        os.close(fd)


def holder(run_dir: Path) -> str | None:
    """The pid (as its lock file says; "" before it has written it) of another live process holding ``run_dir``;
    None when none does."""
    key = Path(run_dir).resolve()
    path = key / LOCK_NAME
    if key in _held or not path.is_file():
        return None
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _owner(fd)
    except OSError:  # no flock on this file system: nobody can be seen holding it
        return None
    finally:
        os.close(fd)  # a shared lock taken to look is dropped with its descriptor
    return None


def refuse_if_held(run_dir: Path) -> None:
    """RunDirInUse when another live process holds ``run_dir``: call before deleting or rewriting it."""
    pid = holder(run_dir)
    if pid is not None:
        raise RunDirInUse(_message(Path(run_dir), pid))
