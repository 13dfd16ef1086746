"""The first thing every sandboxed process runs: it puts up the fences, then becomes the runner.

``rewards.sandbox`` starts ``python -I -S launcher.py PLAN STATUS_FD -- RUNNER_ARGV...`` without a
preexec_fn, so the namespace and privilege changes are made by a fresh, single-threaded interpreter
and not by a fork of the threaded trainer. In such a fork Python runs the at-fork hooks that
libraries register: OpenTelemetry (pulled in by wandb and vLLM) restarts its threads there, and a
multithreaded process cannot unshare a user namespace (EINVAL), so the fences quietly failed in a
real run; a hook could also deadlock the fork before exec, out of reach of any time limit.

PLAN is the parent's plan (``rewards.sandbox._launch_plan``), marshalled and hex-encoded (marshal
needs no import: this runs once per program). The names of the layers that took hold are written
to STATUS_FD, space-separated, before the exec; the runner never sees that descriptor. Only the
standard library and ``fs_jail`` are imported (``-S``: no site-packages).
"""

import ctypes
import marshal
import os
import resource
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fs_jail  # a sibling file, loaded by path: no package, no site-packages

CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWUSER, CLONE_NEWIPC = 0x40000000, 0x20000000, 0x10000000, 0x08000000


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def fence(plan: dict) -> dict:
    """Apply the plan in its one safe order; returns which layers took hold."""
    unshare = ctypes.CDLL(None, use_errno=True).unshare
    done: dict[str, bool] = {}
    if plan["cgroup_procs"]:  # first: while still in the evaluator's namespaces, mounts and uid
        try:
            _write(plan["cgroup_procs"], b"0")  # "0": the writing process itself (v1 and v2)
            done["cgroup"] = True
        except OSError:
            done["cgroup"] = False  # the other limits still hold
    if plan["userns_maps"]:  # not root: a user namespace first, the same uid and gid inside
        done["userns"] = unshare(CLONE_NEWUSER) == 0
        if done["userns"]:
            for path, data in plan["userns_maps"]:
                _write(path, data)
    if plan["namespaces"]:  # -1 where refused: then that fence is missing (isolation() says so)
        done["net"] = unshare(CLONE_NEWNET) == 0
        done["pid"] = unshare(CLONE_NEWPID) == 0  # for the runner's children (child_runner.enter_pid_namespace)
        done["ipc"] = unshare(CLONE_NEWIPC) == 0  # System V shared memory dies with the program
    if plan["jail"] is not None:
        done["jail"] = fs_jail.enter(fs_jail.Plan(**plan["jail"]))  # False: permissions only
    if plan["ids"] is not None:
        # Drop root for good. NPROC is lowered only afterwards, so that the kernel's check at
        # setuid() (PF_NPROC_EXCEEDED) cannot fail the exec when other sandboxes are busy.
        os.setgroups([])
        os.setgid(plan["ids"][1])
        os.setuid(plan["ids"][0])
    if plan["own_userns"]:
        # As root, a user namespace of its own after the last uid change (no ids mapped: it needs
        # none). Programs share a uid and the host's /proc lists them all; across user namespaces
        # the kernel refuses one program another's /proc/<pid>/cwd, root, fd targets and memory.
        done["own_userns"] = unshare(CLONE_NEWUSER) == 0
    for res, soft, hard in plan["limits"] + ([] if done.get("cgroup") else plan["limits_without_cgroup"]):
        resource.setrlimit(res, (soft, hard))
    fs_jail.die_with_parent(plan["parent"])
    return done


def main() -> None:
    plan, status_fd, cmd = marshal.loads(bytes.fromhex(sys.argv[1])), int(sys.argv[2]), sys.argv[4:]
    try:
        done = fence(plan)
    except Exception as exc:  # e.g. setuid refused: never run the program half fenced
        os.write(2, f"sandbox launcher: {type(exc).__name__}: {exc}\n".encode())
        os._exit(126)
    os.write(status_fd, " ".join(k for k, ok in done.items() if ok).encode())
    os.close(status_fd)
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main()
