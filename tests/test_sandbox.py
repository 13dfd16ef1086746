"""Hostile programs: each ends with reward 0 or its true reward, on time, leaving nothing behind."""

import glob
import os
import socket
import tempfile
import textwrap
import time

import pytest

from rewards import Evaluator
from tasks import load_task

TASK = load_task("circle_packing_26")
TRUE = Evaluator(TASK).evaluate(TASK.initial_program).reward
LIMIT = 3.0


def evaluate(code, timeout=LIMIT, memory_mb=None):
    start = time.perf_counter()
    result = Evaluator(TASK, timeout_s=timeout, memory_mb=memory_mb).evaluate(textwrap.dedent(code))
    assert time.perf_counter() - start < timeout + 3, "the limit did not hold"
    return result


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan killed here is reparented to PID 1, which may not reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def with_starter(extra):
    return TASK.initial_program + "\n" + textwrap.dedent(extra)


@pytest.fixture(autouse=True)
def no_leftover_sandbox_dirs():
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "helix-sandbox-*")))
    yield
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "helix-sandbox-*"))) <= before


def test_starter_program_scores_its_true_reward():
    r = evaluate(TASK.initial_program)
    assert r.status == "ok" and r.valid and r.reward == pytest.approx(TRUE) and r.reward > 1


def test_infinite_loop_times_out():
    r = evaluate("def run_packing():\n    while True:\n        pass\n", timeout=1.5)
    assert r.status == "timeout" and r.reward == 0.0 and "time limit" in r.feedback


def test_exception_feedback_names_type_and_user_line():
    r = evaluate("import numpy as np\n\ndef run_packing():\n    return np.zeros(3) / undefined_name\n")
    assert r.status == "error" and r.reward == 0.0
    assert "NameError" in r.feedback and "line 4" in r.feedback and "child_runner" not in r.feedback


def test_missing_entry_function():
    r = evaluate("def construct_packing():\n    return 1\n")
    assert r.reward == 0.0 and "run_packing" in r.feedback


def test_os_exit_before_returning():
    r = evaluate("import os\ndef run_packing():\n    os._exit(0)\n")
    assert r.status == "crash" and r.reward == 0.0


def test_printed_fake_reward_is_ignored():
    r = evaluate(with_starter("""
        _real = run_packing
        def run_packing():
            print('reward: 100\\nsum_radii: 100\\n{"ok": true, "value": 100}')
            c, r, s = _real()
            return c, r, 100.0
    """))
    assert r.valid and r.reward == pytest.approx(TRUE)


def test_fake_result_files_are_ignored_or_verified():
    r = evaluate("""
        import json, sys, os
        def run_packing():
            for name in ("result.json", "metrics.json", sys.argv[-1]):
                with open(name, "w") as fh:
                    json.dump({"ok": True, "value": {"centers": [[0.5, 0.5]] * 26, "radii": [0.5] * 26}, "reward": 1e9}, fh)
            os._exit(0)
    """)
    # Even a forged result at the real path is only an artefact: the parent verifies it (overlapping -> 0).
    assert r.reward == 0.0 and not r.valid


def test_grandchild_sleeping_past_the_limit_is_killed(tmp_path):
    pidfile = tmp_path / "pid"
    r = evaluate(f"""
        import subprocess, sys, time
        def run_packing():
            p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            open({str(pidfile)!r}, "w").write(str(p.pid))
            time.sleep(60)
    """, timeout=1.5)
    assert r.status == "timeout"
    pid = int(pidfile.read_text())
    time.sleep(0.2)
    assert not running(pid)


def test_huge_stdout_is_bounded():
    r = evaluate(with_starter("""
        import sys
        _real = run_packing
        def run_packing():
            chunk = "x" * 1_000_000
            for _ in range(200):
                sys.stdout.write(chunk)
            return _real()
    """), timeout=10)
    assert r.reward == pytest.approx(TRUE) and len(r.feedback) <= 2000


def test_memory_bomb_is_contained():
    r = evaluate("def run_packing():\n    x = bytearray(8 * 1024 ** 3)\n    return x\n", memory_mb=512)
    assert r.reward == 0.0 and r.status in ("error", "crash")


def test_patching_numpy_and_builtins_cannot_lift_the_reward():
    r = evaluate(with_starter("""
        import builtins, numpy as np
        np.sum = lambda *a, **k: 1e9
        builtins.sum = lambda *a, **k: 1e9
        np.linalg.norm = lambda *a, **k: 1e9
    """))
    assert r.reward == pytest.approx(TRUE) or r.reward == 0.0
    assert r.reward < 3


@pytest.mark.parametrize("body", [
    "return [[0.5, 0.5]] * 26, [float('nan')] * 26, 1.0",
    "return [[0.5, 0.5]] * 26, [float('inf')] * 26, 1.0",
    "return [[0.5, 0.5]] * 3, [0.1] * 3, 0.3",
    "return [[0.5, 0.5]] * 26, [-0.1] * 26, -2.6",
    "return 'a string'",
    "return object()",
    "return [0.0] * 3_000_000",
])
def test_bad_return_values_score_zero(body):
    r = evaluate(f"def run_packing():\n    {body}\n")
    assert r.reward == 0.0 and not r.valid and r.feedback


def test_network_is_unreachable_from_the_sandbox():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        r = evaluate(with_starter(f"""
            import socket
            _real = run_packing
            def run_packing():
                s = socket.socket()
                s.settimeout(1)
                s.connect(("127.0.0.1", {port}))
                return _real()
        """))
    finally:
        server.close()
    # In its own network namespace the loopback is down: connect fails and the program errors.
    assert r.reward == 0.0 and r.status == "error"


def test_files_outside_the_workdir_cannot_be_reached_through_cwd(tmp_path):
    r = evaluate(with_starter("""
        import os
        _real = run_packing
        def run_packing():
            open("scratch.txt", "w").write("x")
            return _real()
    """))
    assert r.reward == pytest.approx(TRUE)  # writing in its own cwd is fine, and the dir is removed (fixture)


def test_parallel_evaluation_keeps_order():
    codes = [f"def run_packing():\n    raise ValueError('program {i}')\n" for i in range(6)]
    codes[3] = TASK.initial_program
    results = Evaluator(TASK, workers=2, timeout_s=LIMIT).evaluate_many(codes)
    assert [r.valid for r in results] == [False, False, False, True, False, False]
    for i, r in enumerate(results):
        if i != 3:
            assert f"program {i}" in r.feedback
