"""What one program may do to others: reach a sibling through /proc, leave shared memory behind, fill the
disk; and fences that must hold in a trainer whose libraries start threads at fork."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

import tests.helpers.sandbox_cases as cases
from rewards import isolation, run_program
from tests.helpers.env import child_env

# Fork-heavy programs run as one uid share its RLIMIT_NPROC (rewards/sandbox.py): these files never run
# at the same time on two pytest-xdist workers.
pytestmark = pytest.mark.xdist_group("sandbox_forks")


@pytest.fixture(autouse=True)
def nothing_left_behind(monkeypatch, tmp_path_factory):
    yield from cases.nothing_left_behind(monkeypatch, tmp_path_factory)


SIBLING_VICTIM = """
import os, time
def run():
    with open("secret.txt", "w") as fh:
        fh.write("victim data")
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline and not os.path.exists("/dev/shm/done"):  # its own /dev/shm: never set
        time.sleep(0.05)
    return open("secret.txt").read()
"""
SIBLING_ATTACKER = """
import os, time
def run():
    mine = os.readlink("/proc/self/cwd")
    seen, opened = set(), []
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if b"child_runner.py" not in open(f"/proc/{pid}/cmdline", "rb").read():
                    continue
            except OSError:
                continue
            try:
                if os.readlink(f"/proc/{pid}/cwd") == mine:
                    continue  # itself (its runner, init and program)
            except OSError:
                pass
            seen.add(pid)
            for way in ("cwd", "root" + os.path.dirname(mine)):
                try:
                    opened.append([way, sorted(os.listdir(f"/proc/{pid}/{way}"))[:4]])
                    open(f"/proc/{pid}/cwd/secret.txt", "w").write("tampered")
                except OSError:
                    pass
            try:  # the numbers are listed to the same uid; what they point at must not be
                opened += [["fd", os.readlink(f"/proc/{pid}/fd/{n}")] for n in os.listdir(f"/proc/{pid}/fd")]
            except OSError:
                pass
        time.sleep(0.05)
    return {"siblings_seen": len(seen), "opened": opened[:3]}
"""


def test_a_program_cannot_reach_into_a_sibling_through_proc():
    """Programs of one evaluator run side by side as the same uid, and /proc lists them all. Through
    another program's /proc/<pid>/cwd (or root, or fd) one could read its directory and rewrite its
    result file; each program's own user namespace makes the kernel refuse that."""
    if not isolation().processes:
        pytest.skip("no namespaces here: programs share the evaluator's uid and its /proc")
    out = {}
    victim = threading.Thread(target=lambda: out.setdefault("victim", run_program(SIBLING_VICTIM, "run", 10, 512)))
    victim.start()
    time.sleep(0.3)
    attacker = run_program(SIBLING_ATTACKER, "run", 10, 512)
    victim.join()
    assert attacker.status == "ok", attacker.error
    assert attacker.value["siblings_seen"] >= 1, "the attacker never saw the victim: the test proves nothing"
    assert attacker.value["opened"] == []
    assert (out["victim"].status, out["victim"].value) == ("ok", "victim data")


SHM = """
import os
def run():
    from multiprocessing import shared_memory
    block = shared_memory.SharedMemory(create=True, size=1 << 20)
    block.buf[:3] = b"abc"
    kept = bytes(block.buf[:3])
    block.close()
    block.unlink()
    before = sorted(os.listdir("/dev/shm"))
    with open("/dev/shm/helix-test-NAME", "w") as fh:
        fh.write("left behind?")
    written = 0
    try:
        for i in range(40):  # 16 MB files (RLIMIT_FSIZE) until its /dev/shm is full
            with open(f"/dev/shm/fill-{i}", "wb") as fh:
                fh.write(bytes(16 << 20))
            written += 16
    except OSError as exc:
        full = exc.errno
    return {"kept": kept.decode(), "before": before, "written_mb": written, "full": full}
"""


def test_each_program_gets_a_private_bounded_dev_shm():
    """POSIX shared memory works, but /dev/shm is the program's own tmpfs: empty at the start,
    nothing written there reaches the host or the next program, and it holds at most memory_mb."""
    if not isolation().filesystem:
        pytest.skip("no mount namespace here: programs share the host's /dev/shm")
    name = f"{os.getpid()}-{time.monotonic_ns()}"
    code = SHM.replace("NAME", name)
    first, second = (run_program(code, "run", 20, 256) for _ in range(2))
    for r in (first, second):
        assert r.status == "ok", r.error
        assert r.value["kept"] == "abc"
        assert r.value["before"] == []  # the first program's files are not there for the second
        assert r.value["full"] == 28  # ENOSPC
        assert 256 - 16 <= r.value["written_mb"] <= 256
    assert not os.path.exists(f"/dev/shm/helix-test-{name}")


SYSV_SHM = """
import ctypes
def run():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
    return libc.shmget(KEY, 64 << 20, 0o1000 | 0o600)  # IPC_CREAT: 64 MB, never removed
"""


def host_sysv_keys() -> set[int]:
    with open("/proc/sysvipc/shm") as fh:
        return {int(line.split()[0]) for line in fh.readlines()[1:]}


def test_system_v_shared_memory_dies_with_the_program():
    """A System V segment outlives its creator on the host (until removed or reboot): a program
    could leave memory-holding segments behind. In its own IPC namespace they go with it."""
    if not isolation().processes:
        pytest.skip("no namespaces here: programs share the host's IPC objects")
    key = 0x48000000 + os.getpid() % 0xFFFFFF
    result = run_program(SYSV_SHM.replace("KEY", str(key)), "run", 10, 512)
    left = key in host_sysv_keys()
    if left:  # remove it, so a failing run leaves no 64 MB behind
        import ctypes
        libc = ctypes.CDLL(None)
        libc.shmctl(libc.shmget(key, 0, 0), 0, None)  # IPC_RMID
    assert result.status == "ok" and result.value >= 0, result  # it made one
    assert not left


FILL = """
import errno, os
def run():
    out = {"program_py": "", "written_mb": 0, "stopped_by": ""}
    try:
        open("program.py", "a").write("# edited")
    except OSError as exc:
        out["program_py"] = errno.errorcode[exc.errno]
    try:
        for i in range(60):  # 16 MB files (RLIMIT_FSIZE caps one file, not how many)
            with open(f"fill-{i}", "wb") as fh:
                fh.write(bytes(16 << 20))
            out["written_mb"] += 16
    except OSError as exc:
        out["stopped_by"] = errno.errorcode[exc.errno]
    return out
"""


def test_a_program_cannot_fill_the_disk_through_its_directory():
    """Its directory is a tmpfs of memory_mb: a program writing file after file stops there, not
    when the host disk (where checkpoints go) is full; its input files in it are read-only."""
    if not isolation().filesystem:
        pytest.skip("no mount namespace here: the directory is on the host disk (RLIMIT_FSIZE per file only)")
    r = run_program(FILL, "run", 30, 256)
    assert r.status == "ok", r.error
    assert r.value["program_py"] in ("EROFS", "EACCES")  # EACCES first where it runs as nobody
    assert r.value["stopped_by"] == "ENOSPC" and 256 - 16 <= r.value["written_mb"] <= 256, r.value


AT_FORK = """
import json, os, sys, threading, time
# What OpenTelemetry (pulled in by wandb and vLLM) does: restart its worker thread in every forked child.
os.register_at_fork(after_in_child=lambda: threading.Thread(target=time.sleep, args=(2,), daemon=True).start())
from rewards import run_program
code = "import os\\ndef run():\\n    return [os.readlink('/proc/self/ns/user'), os.readlink('/proc/self/ns/net')]\\n"
r = run_program(code, "run", 10, 512)
print(json.dumps({"status": r.status, "value": r.value, "error": r.error,
                  "host": [os.readlink('/proc/self/ns/user'), os.readlink('/proc/self/ns/net')]}))
"""


def test_the_fences_hold_in_a_trainer_whose_libraries_start_threads_at_fork():
    """A fork of the trainer runs the at-fork hooks libraries register, and a hook that starts a
    thread leaves a multithreaded process, which cannot unshare a user namespace: with the fences
    put up in such a fork, the per-program user namespace quietly went missing in real runs. The
    launcher, a fresh interpreter, puts them up instead."""
    if not isolation().processes:
        pytest.skip("no namespaces here")
    out = subprocess.run([sys.executable, "-c", AT_FORK], capture_output=True, text=True, timeout=120, env=child_env())
    assert out.returncode == 0, out.stderr[-800:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["status"] == "ok", report
    (user, net), (host_user, host_net) = report["value"], report["host"]
    assert net != host_net and user != host_user, report
