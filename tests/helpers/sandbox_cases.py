"""What the sandbox test modules share: the task, a packing program to build on, and the check that a test
leaves no process, directory or cgroup behind (each module makes it an autouse fixture)."""

import glob
import math
import os
import shutil
import tempfile
import textwrap
import time

from rewards import Evaluator, cgroup
from tasks import load_task

TASK = load_task("circle_packing_26")
LIMIT = 3.0
GRID_SUM = 2.5 + 0.1 * math.sqrt(2) - 0.1
GRID = """
import math
def grid(scale=1.0):
    centers = [[0.1 + 0.2 * i, 0.1 + 0.2 * j] for i in range(5) for j in range(5)] + [[0.2, 0.2]]
    return centers, [0.1 * scale] * 25 + [(0.1 * math.sqrt(2) - 0.1) * scale]
"""
# The descriptor the runner writes the result to (its argv: PROGRAM ENTRY RESULT_FD ...).
RESULT_FD = ("(lambda a: int(a[[i for i, x in enumerate(a) if x.endswith('child_runner.py')][0] + 3]))"
             "(open('/proc/self/cmdline').read().split(chr(0)))")


def program(body: str) -> str:
    """A program with grid(scale): a valid packing whose sum of radii is GRID_SUM * scale."""
    return GRID + textwrap.dedent(body)


def evaluate(code, timeout=LIMIT, memory_mb=None):
    start = time.perf_counter()
    result = Evaluator(TASK, timeout_s=timeout, memory_mb=memory_mb).evaluate(textwrap.dedent(code))
    assert time.perf_counter() - start < timeout + 3, "the time limit did not hold"
    assert len(result.feedback) <= 2000 and (result.valid or result.reward == 0.0)
    return result


def running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan is reparented to PID 1, which may not reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


def processes_mentioning(text: str) -> list[int]:
    pids = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as fh:
                if text.encode() in fh.read():
                    pids.append(int(path.split("/")[2]))
        except OSError:
            pass
    return [p for p in pids if running(p)]


def our_cgroups() -> list[str]:
    """Pids cgroups this test process's sandboxes made (another run's have another pid in their names)."""
    mine = f"{cgroup.PREFIX}{os.getpid()}-"
    return [os.path.join(parent, name) for parent in cgroup._parents() for name in os.listdir(parent)
            if name.startswith(mine)]


def nothing_left_behind(monkeypatch, tmp_path_factory):
    """Sandboxes of this test get a private temp root, so other users of /tmp cannot confuse the check."""
    tmp_path_factory.getbasetemp()  # settle pytest's own temp root first, or it would land in ours and go with it
    root = tempfile.mkdtemp(prefix="helix-test-root-")
    os.chmod(root, 0o755)
    monkeypatch.setattr(tempfile, "tempdir", root)
    yield
    left = [n for n in os.listdir(root) if n.startswith("helix-sandbox-")]
    deadline = time.monotonic() + 2  # SIGKILLed processes take a moment to die
    while (procs := processes_mentioning(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    shutil.rmtree(root, ignore_errors=True)
    assert left == [], "temp dir left"
    assert procs == [], "sandboxed process left"
    assert our_cgroups() == [], "pids cgroup left"
