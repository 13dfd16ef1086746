"""Run one untrusted program in its own process group, with hard limits, and read back JSON.

Isolation, in order of strength: a fresh network namespace (``unshare(CLONE_NEWNET)``, works
as root; elsewhere the child keeps the host network, which we document rather than fake),
rlimits on address space, CPU time, file size and core dumps, its own temporary working
directory, and a wall-clock timeout that SIGKILLs the whole process group.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

RUNNER = Path(__file__).with_name("child_runner.py")
CLONE_NEWNET = 0x40000000
MAX_RESULT_BYTES = 8 * 1024 * 1024
OUTPUT_TAIL_BYTES = 4096


@dataclass(frozen=True)
class RunResult:
    status: str  # ok | error | timeout | crash | bad_output
    value: object = None  # the JSON-decoded return value when status == "ok"
    error: str = ""  # exception type, message and user traceback, or why there is no result
    output_tail: str = ""  # the last bytes the program printed
    elapsed_s: float = 0.0


def _limits(memory_mb: int, cpu_s: int):
    def apply() -> None:
        os.setsid()
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.unshare(CLONE_NEWNET)  # best effort: no network when the kernel lets us
        except OSError:
            pass
        mem = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_FSIZE, (16 * 1024 * 1024, 16 * 1024 * 1024))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _drain(stream, tail: bytearray) -> None:
    """Read everything, keep only the tail: a program printing a gigabyte costs no memory."""
    while chunk := stream.read(65536):
        tail.extend(chunk)
        del tail[:-OUTPUT_TAIL_BYTES]


def run_program(code: str, entry: str, timeout_s: float, memory_mb: int) -> RunResult:
    workdir = Path(tempfile.mkdtemp(prefix="helix-sandbox-"))
    result_path = workdir / f"result-{secrets.token_hex(8)}.json"
    program = workdir / "program.py"
    program.write_text(code)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir), "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.perf_counter()
    tail = bytearray()
    proc = subprocess.Popen([sys.executable, "-I", str(RUNNER), str(program), entry, str(result_path)],
                            cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, preexec_fn=_limits(memory_mb, int(timeout_s) + 2))
    reader = threading.Thread(target=_drain, args=(proc.stdout, tail), daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # grandchildren too, finished or not
        except ProcessLookupError:
            pass
        proc.wait()
        reader.join(timeout=5)
        proc.stdout.close()
    elapsed = time.perf_counter() - start
    output = tail.decode("utf-8", "replace")
    try:
        if timed_out:
            return RunResult("timeout", error=f"time limit of {timeout_s:g} s exceeded", output_tail=output, elapsed_s=elapsed)
        if not result_path.is_file():
            how = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exited with code {proc.returncode}"
            return RunResult("crash", error=f"the program {how} before returning a result (memory limit {memory_mb} MB)",
                             output_tail=output, elapsed_s=elapsed)
        if result_path.stat().st_size > MAX_RESULT_BYTES:
            return RunResult("bad_output", error=f"result larger than {MAX_RESULT_BYTES} bytes", output_tail=output, elapsed_s=elapsed)
        try:
            payload = json.loads(result_path.read_text())
        except (ValueError, UnicodeDecodeError) as exc:
            return RunResult("bad_output", error=f"unreadable result: {exc}", output_tail=output, elapsed_s=elapsed)
        if not isinstance(payload, dict) or "ok" not in payload:
            return RunResult("bad_output", error="malformed result", output_tail=output, elapsed_s=elapsed)
        if not payload["ok"]:
            err = f"{payload.get('error')}: {payload.get('message')}\n{payload.get('traceback', '')}"
            return RunResult("error", error=err, output_tail=output, elapsed_s=elapsed)
        return RunResult("ok", value=payload.get("value"), output_tail=output, elapsed_s=elapsed)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
