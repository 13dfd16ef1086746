"""Hostile programs: each ends with reward 0 or its true reward, on time, leaving no process or directory behind."""

import glob
import json
import math
import os
import pwd
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest

from rewards import Evaluator, cgroup, isolation, run_program, sandbox
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


@pytest.fixture(autouse=True)
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


@pytest.fixture()
def pid_dir(monkeypatch):
    """Where a sandboxed program may write pid files, whatever account it runs as (and with the
    read-only filesystem on: this one folder stays writable)."""
    path = tempfile.mkdtemp(prefix="helix-test-", dir="/tmp")
    os.chmod(path, 0o777)
    plan = sandbox.fs_jail.plan
    monkeypatch.setattr(sandbox.fs_jail, "plan",
                        lambda workdir, root, visible, hide=(), writable=(), **kw:
                        plan(workdir, root, visible, hide, (*writable, path), **kw))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def pids_in(path):
    with open(path) as fh:
        return [int(p) for p in fh.read().split()]


def test_starter_program_scores_its_true_reward():
    r = evaluate(TASK.initial_program)
    assert r.status == "ok" and r.valid and 0.9 < r.reward < 2.0 and r.reward == r.metrics["sum_radii"]
    assert r.eval_time_s < 3 and "valid packing" in r.feedback


@pytest.mark.parametrize("loop", ["pass", "print('spam' * 1000)"])
def test_infinite_loops_time_out(loop):
    r = evaluate(f"def run_packing():\n    while True:\n        {loop}\n", timeout=1.5)
    assert r.status == "timeout" and r.reward == 0.0 and "1.5 s limit" in r.feedback
    assert 1.4 < r.eval_time_s < 2.5 and ("spam" in r.feedback) == ("spam" in loop)


def test_exception_feedback_names_type_and_user_line():
    r = evaluate("import numpy as np\n\ndef helper():\n    return np.zeros(3) / undefined_name\n\n"
                 "def run_packing():\n    return helper()\n")
    assert r.status == "error" and r.reward == 0.0
    assert "NameError" in r.feedback and "undefined_name" in r.feedback
    assert 'File "program.py", line 4, in helper' in r.feedback and "line 7, in run_packing" in r.feedback
    assert "child_runner" not in r.feedback and "importlib" not in r.feedback


@pytest.mark.parametrize("code, status, words", [
    ("def construct_packing():\n    return 1\n", "error", ["run_packing()", "construct_packing"]),
    ("run_packing = 3\n", "error", ["run_packing()"]),
    ("def run_packing(:\n    pass\n", "error", ["SyntaxError", "line 1"]),
    ("import sys\nsys.exit(3)\n", "error", ["SystemExit"]),
    ("import no_such_module_xyz\n", "error", ["ModuleNotFoundError", "no_such_module_xyz"]),
    ("def run_packing():\n    return run_packing()\n", "error", ["RecursionError"]),
    ("def run_packing():\n    open('big.bin', 'wb').write(b'0' * (20 << 20))\n", "error", ["File too large"]),
    ("import os\ndef run_packing():\n    print('about to leave')\n    os._exit(0)\n", "crash",
     ["exited with code 0", "about to leave"]),
    ("import os, signal\ndef run_packing():\n    os.kill(os.getpid(), signal.SIGSEGV)\n", "crash", ["SIGSEGV"]),
])
def test_broken_programs_get_a_clear_message(code, status, words):
    r = evaluate(code)
    assert r.status == status and r.reward == 0.0
    for word in words:
        assert word in r.feedback, r.feedback


def test_printed_fake_reward_is_ignored():
    r = evaluate(program("""
        def run_packing():
            print('reward: 100\\nsum_radii: 100\\n{"ok": true, "value": 100}')
            c, r = grid(0.5)
            return c, r, 100.0
    """))
    assert r.valid and r.reward == pytest.approx(GRID_SUM / 2, abs=1e-12)


def test_fake_result_files_are_only_artefacts_that_get_verified():
    fake = '{"ok": true, "value": {"centers": [[0.5, 0.5]] * 26, "radii": [0.5] * 26}, "reward": 1e9}'
    r = evaluate(program(f"""
        def run_packing():
            for name in ("result.json", "metrics.json", "reward.txt", "result-0.json"):
                open(name, "w").write('{fake}')
            c, r = grid()
            return c, [x * 2 for x in r], 1e9
    """))
    assert r.status == "invalid" and r.reward == 0.0 and "overlap" in r.feedback
    # A record forged into the real result file is still just an artefact: verified, its claims ignored.
    r = evaluate(program(f"""
        import json, os
        def run_packing():
            c, r = grid()
            os.write({RESULT_FD}, json.dumps({{"ok": True, "value": [c, r, 1e9], "reward": 1e9}}).encode())
            os._exit(0)
    """))
    assert r.status == "ok" and r.reward == pytest.approx(GRID_SUM, abs=1e-12)
    # What a program writes there and then returns over is replaced by the runner's record.
    r = evaluate(program(f"""
        import os
        def run_packing():
            os.write({RESULT_FD}, b'{{"ok": true, "value": 1e9}}' + b" " * 100)
            return grid(0.5)
    """))
    assert r.status == "ok" and r.reward == pytest.approx(GRID_SUM / 2, abs=1e-12)


@pytest.mark.parametrize("junk", ["b'{not json'", "b'[1, 2]'", "b' ' * (9 << 20)", "b''"])
def test_odd_results_are_bad_output_or_missing_and_never_hang_the_parent(junk):
    r = evaluate(f"import os\ndef run_packing():\n    os.write({RESULT_FD}, {junk})\n    os._exit(0)\n")
    assert r.status == ("crash" if junk == "b''" else "bad_output") and r.reward == 0.0
    if junk.startswith("b' ' *"):
        assert "over the 8 MB limit" in r.feedback


# Pids as the host sees them: inside its PID namespace a program's os.getpid() is 2, but /proc
# here is the host's, so /proc/self names the process by its host pid.
HOST_PID = "(os.readlink('/proc/self') + ' ').encode()"
SLEEPER = f"import os, sys, time; os.write(int(sys.argv[1]), {HOST_PID}); time.sleep(60)"


@pytest.mark.parametrize("spawn, count", [
    (f"subprocess.Popen([sys.executable, '-c', {SLEEPER!r}, str(fd)], pass_fds=(fd,))", 1),
    ("for _ in range(150):\n        if os.fork() == 0:\n            os.write(fd, " + HOST_PID + ")\n"
     "            time.sleep(60)\n            os._exit(0)", 150),
])
@pytest.mark.parametrize("netns", [True, False], ids=["netns", "killpg-only"])
def test_descendants_sleeping_past_the_limit_are_killed(pid_dir, spawn, count, netns, monkeypatch):
    if not netns:  # the process-group kill alone, as on machines without network or PID namespaces
        monkeypatch.setattr(sandbox, "_unshare", None)
    pidfile = os.path.join(pid_dir, "pids")
    r = evaluate(f"import os, subprocess, sys, time\ndef run_packing():\n"
                 f"    fd = os.open({pidfile!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND)\n"
                 f"    {spawn}\n    time.sleep(60)\n", timeout=2)
    assert r.status == "timeout" and r.reward == 0.0
    pids = pids_in(pidfile)
    deadline = time.monotonic() + 2  # SIGKILLed processes take a moment to die
    while [p for p in pids if running(p)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(pids) == count and [p for p in pids if running(p)] == []


@pytest.mark.parametrize("sweep", ["netns", "pids-cgroup"])
def test_grandchild_that_leaves_the_process_group_is_killed(pid_dir, sweep, monkeypatch):
    """A setsid() escaper is out of reach of the process-group kill; the network-namespace sweep
    finds it, and so, on its own (no namespaces at all here), does the pids cgroup's."""
    if sweep == "netns" and not isolation().network:
        pytest.skip("no network namespace here: a setsid() escaper outlives the run (documented in sandbox.py)")
    if sweep == "pids-cgroup":
        if not isolation().pids_cap:
            pytest.skip("no writable pids cgroup here (not root, no delegation)")
        monkeypatch.setattr(sandbox, "_unshare", None)
    pidfile = os.path.join(pid_dir, "pid")
    r = evaluate(program(f"""
        import os, subprocess, sys, time
        def run_packing():
            subprocess.Popen([sys.executable, "-c", "import os, time; open({pidfile!r}, 'w').write(os.readlink('/proc/self')); "
                              "time.sleep(60)"], start_new_session=True)
            while not os.path.exists({pidfile!r}):
                time.sleep(0.01)
            return grid()
    """))
    assert r.status == "ok" and r.reward == pytest.approx(GRID_SUM)
    time.sleep(0.2)
    assert not running(pids_in(pidfile)[0])


def test_huge_stdout_is_bounded():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = program("""
        import sys
        def run_packing():
            for _ in range(1024):  # 1 GiB
                sys.stdout.write("x" * 1_048_576)
            print("THE END")
            return grid()
    """)
    run = run_program(code, "run_packing", 20, 1024)
    assert run.status == "ok" and len(run.output_tail) <= 4096 and run.output_tail.endswith("THE END\n")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 30_000  # KB: nothing was buffered
    assert evaluate(code, timeout=20).reward == pytest.approx(GRID_SUM)


@pytest.mark.parametrize("bomb", ["x = bytearray(8 * 1024 ** 3)",
                                  "x = []\n    while True:\n        x.append(bytearray(10 ** 7))"])
def test_memory_bomb_is_contained(bomb):
    r = evaluate(f"def run_packing():\n    {bomb}\n    return x\n", memory_mb=512)
    assert r.reward == 0.0 and r.status in ("error", "crash") and "512 MB" in r.feedback


FORK_BOMB = """
import os
def run_packing():
    while True:
        try:
            os.fork()
        except OSError:  # EAGAIN at the cap: keep trying, as a real bomb does
            pass
"""


def process_count() -> int:
    return sum(name.isdigit() for name in os.listdir("/proc"))


def test_fork_bomb_is_capped_and_cleaned_up():
    """A true fork bomb: every process forks forever. Its pids cgroup (or, for a non-root uid,
    RLIMIT_NPROC) stops it at about SANDBOX_NPROC tasks, so the machine's process count barely
    moves; without a cap it would reach thousands (pid_max). The timeout then ends it, and every
    process goes (the autouse fixture checks none, no directory and no cgroup is left)."""
    iso = isolation()
    probe = cgroup.create(sandbox.SANDBOX_NPROC)  # where a pids cgroup is writable, the probe must use it
    if probe is not None:
        probe.remove()
    assert iso.pids_cap == (probe is not None), iso
    if not iso.pids_cap and os.geteuid() == 0 and iso.user is None:
        pytest.skip("no cap can exist here: no writable pids cgroup, and programs run as root "
                    "(the kernel ignores RLIMIT_NPROC for root), so only the time limit would bound a fork bomb")
    baseline = min(process_count() for _ in range(5))
    peak, stop = [baseline], threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], process_count())
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        r = evaluate(FORK_BOMB, timeout=2.5)
        time.sleep(0.2)
    finally:
        stop.set()
        sampler.join()
    print(f"fork bomb: {baseline} processes before, peak {peak[0]} (+{peak[0] - baseline})")
    assert r.status == "timeout" and r.reward == 0.0 and r.eval_time_s < 2.5 + 1
    assert peak[0] - baseline <= sandbox.SANDBOX_NPROC + 64, f"{peak[0] - baseline} more processes: no cap held"


def test_patching_or_shadowing_the_verifier_cannot_lift_the_reward():
    """The program imports the task's verifier (tasks.circles.verify_packing, behind
    tasks/circle_packing_26/verifier.py) from the repository and patches it to return a perfect
    score, and writes a fake tasks package, first on its path, whose verifiers all say perfect.
    That all stays in the child: the parent scores the returned artefact with its own verifier."""
    repo = os.path.dirname(sandbox.TASKS_DIR)
    r = evaluate(program(f"""
        import os, sys
        PERFECT = "from tasks.base import Verdict\\ndef verify(*a, **k):\\n    return Verdict(1e9, True, 'perfect')\\n"
        sys.path.insert(0, {repo!r})
        try:  # the real one (hidden from the child where the read-only mount namespace is on)
            import tasks.circles, tasks.base
            tasks.circles.verify_packing = lambda *a, **k: tasks.base.Verdict(1e9, True, "perfect")
            tasks.base.Task.verify = lambda self, returned: tasks.base.Verdict(1e9, True, "perfect")
        except Exception as exc:
            print("real verifier:", type(exc).__name__)
        os.makedirs("tasks/circle_packing_26", exist_ok=True)
        open("tasks/__init__.py", "w").write("")
        open("tasks/base.py", "w").write("class Verdict:\\n    def __init__(self, *a):\\n        self.args = a\\n")
        open("tasks/circles.py", "w").write(PERFECT.replace("def verify", "def verify_packing"))
        open("tasks/circle_packing_26/verifier.py", "w").write(PERFECT)
        sys.path.insert(0, os.getcwd())
        for name in [m for m in sys.modules if m == "tasks" or m.startswith("tasks.")]:
            del sys.modules[name]
        import tasks.circle_packing_26.verifier

        def run_packing():
            c, r = grid(0.5)
            return c, r, 1e9
    """))
    scope = {}
    exec(GRID, scope)
    centers, radii = scope["grid"](0.5)
    true = TASK.verify(json.loads(json.dumps([centers, radii, 1e9])))
    assert true.valid and true.reward == pytest.approx(GRID_SUM / 2, abs=1e-12)
    assert r.status == "ok" and r.reward == true.reward and r.feedback.startswith(true.feedback)


def test_patching_numpy_builtins_and_json_cannot_lift_the_reward():
    r = evaluate(program("""
        import builtins, json, numpy as np
        np.sum = lambda *a, **k: 1e9
        builtins.sum = lambda *a, **k: 1e9
        builtins.open = None
        json.dumps = lambda *a, **k: '{"ok": true, "value": 1e9}'
        np.linalg.norm = lambda *a, **k: 1e9
        def run_packing():
            c, r = grid()
            return np.array(c), tuple(np.float64(x) for x in r), np.sum(r)
    """))
    assert r.status == "ok" and r.reward == pytest.approx(GRID_SUM, abs=1e-12)


def test_leftover_threads_and_atexit_hooks_do_not_delay_the_result():
    r = evaluate(program("""
        import atexit, threading, time
        atexit.register(time.sleep, 60)
        threading.Thread(target=time.sleep, args=(60,)).start()
        def run_packing():
            return grid()
    """))
    assert r.status == "ok" and r.eval_time_s < 2


@pytest.mark.parametrize("body, status", [
    ("return [[0.5, 0.5]] * 26, [float('nan')] * 26, 1.0", "invalid"),
    ("return [[0.5, 0.5]] * 26, [float('inf')] * 26, 1.0", "invalid"),
    ("return [[0.5, 0.5]] * 3, [0.1] * 3, 0.3", "invalid"),
    ("return [[0.5, 0.5]] * 26, [-0.1] * 26, -2.6", "invalid"),
    ("return 'a string'", "invalid"),
    ("return None", "invalid"),
    ("return object()", "bad_output"),
    ("return {1, 2}", "bad_output"),
    ("x = []\n    x.append(x)\n    return x", "bad_output"),
    ("return 10 ** 5000", "bad_output"),
    ("return [0.0] * 3_000_000", "bad_output"),
])
def test_bad_return_values_score_zero(body, status):
    r = evaluate(f"def run_packing():\n    {body}\n")
    assert r.status == status and r.reward == 0.0 and not r.valid and r.feedback


def test_network_is_unreachable_from_the_sandbox():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.setblocking(False)
    try:
        r = evaluate(program(f"""
            import socket
            def run_packing():
                socket.create_connection(("127.0.0.1", {server.getsockname()[1]}), timeout=1).close()
                return grid()
        """))
        if not isolation().network:  # documented fallback: the program keeps the host network
            assert r.status == "ok"
            return
        assert r.status == "error" and "unreachable" in r.feedback and r.reward == 0.0
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected
    finally:
        server.close()


def test_parallel_evaluate_many_keeps_order():
    codes = [program(f"""
        import time
        def run_packing():
            time.sleep(0.5)
            c, r = grid({(i + 1) / 6})
            return c, r, 1000.0
    """) for i in range(6)]
    codes[2] = "def run_packing():\n    raise ValueError('program 2')\n"
    start = time.perf_counter()
    results = Evaluator(TASK, workers=3, timeout_s=LIMIT).evaluate_many(codes, progress=True)
    assert time.perf_counter() - start < 2.8  # 6 x 0.5 s serially
    assert [r.status for r in results] == ["ok", "ok", "error", "ok", "ok", "ok"]
    assert "program 2" in results[2].feedback
    for i in (0, 1, 3, 4, 5):
        assert results[i].reward == pytest.approx(GRID_SUM * (i + 1) / 6, abs=1e-12)
    assert Evaluator(TASK).evaluate_many([]) == []


def test_many_short_parallel_runs_do_not_disturb_each_other():
    codes = [program(f"def run_packing():\n    return grid({(i + 1) / 16})\n") for i in range(16)]
    results = Evaluator(TASK, workers=4, timeout_s=10).evaluate_many(codes)
    assert [r.status for r in results] == ["ok"] * 16
    assert [r.reward for r in results] == pytest.approx([GRID_SUM * (i + 1) / 16 for i in range(16)], abs=1e-12)


def test_environment_is_minimal_and_deterministic():
    code = "import os\ndef probe():\n    return hash('abc'), sorted(os.environ), os.getcwd() == os.environ['HOME']\n"
    first, second = (run_program(code, "probe", 10, 1024) for _ in range(2))
    assert first.status == "ok" and first.value == second.value and first.value[2]
    assert {"PATH", "HOME", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONHASHSEED"} <= set(first.value[1])
    assert not {k for k in first.value[1] if k.startswith(("HF_", "WANDB", "CUDA", "AWS", "GITHUB"))}


def test_evaluator_settings():
    ev = Evaluator(TASK)
    assert (ev.timeout_s, ev.memory_mb, ev.workers) == (60.0, 2048, os.cpu_count())
    for bad in ({"timeout_s": 0}, {"memory_mb": -1}, {"workers": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Evaluator(TASK, **bad)


def test_unprivileged_account_when_root(monkeypatch):
    """The switch to `nobody`, run with the system Python (the venv's may sit where nobody cannot read)."""
    if os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"):
        pytest.skip("needs root and a system python")
    try:
        ids = (pwd.getpwnam("nobody").pw_uid, pwd.getpwnam("nobody").pw_gid)
    except KeyError:
        pytest.skip("no nobody account")
    locked = tempfile.mkdtemp(prefix="helix-test-locked-", dir="/tmp")  # root-owned, 0700
    monkeypatch.setattr(sys, "executable", "/usr/bin/python3")
    code = f"""
import os, time
def attempt(action):
    try:
        action()
        return True
    except OSError:  # PermissionError; ProcessLookupError inside a PID namespace
        return False
def run_packing():
    out = {{"uid": os.getuid(), "write": attempt(lambda: open({locked!r} + "/x", "w")),
           "signal": attempt(lambda: os.kill({os.getpid()}, 0)), "own_dir": attempt(lambda: open("f", "w"))}}
    out["forks"] = 0
    try:
        for out["forks"] in range(1000):
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
    except OSError:
        pass
    return out
"""
    try:
        run = sandbox._run(code, "run_packing", 10, 512, ids)
    finally:
        shutil.rmtree(locked)
    if run.status == "crash" and "could not start" in run.error:
        pytest.skip("nobody cannot run /usr/bin/python3")
    assert run.status == "ok", run
    forks = run.value.pop("forks")
    # getuid() inside the program's own user namespace (no ids mapped) reads the overflow uid
    overflow = int(open("/proc/sys/kernel/overflowuid").read())
    assert run.value["uid"] in (ids[0], overflow)
    assert run.value == {"uid": run.value["uid"], "write": False, "signal": False, "own_dir": True}
    assert 0 < forks < sandbox.SANDBOX_NPROC  # RLIMIT_NPROC holds for nobody


def test_isolation_report_matches_what_the_kernel_allows():
    allowed = run_program("import ctypes\ndef probe():\n    return ctypes.CDLL(None).unshare(0x40000000)\n", "probe", 10, 1024)
    assert allowed.status == "ok"
    assert isolation().network == (allowed.value == 0 or allowed.net_isolated)
    if os.geteuid() == 0:  # root may always unshare; if this fails, the sandbox's own call is broken
        assert isolation().network and allowed.net_isolated


def test_timing_note_is_stable_for_fast_programs_and_exact_for_slow_ones():
    from rewards.evaluator import timing_note

    assert timing_note(0.21, 20) == timing_note(4.9, 20) == "(ran well within the 20 s time limit)"
    assert timing_note(12.34, 20) == "(ran in 12.3 s of the 20 s time limit)"


ATTEMPT = '''
import errno


def attempt(fn):
    """"done", or the name of the errno the action failed with."""
    try:
        fn()
        return "done"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
'''
OUTSIDE = ATTEMPT + '''
import ctypes, os


def run_packing():
    out = {{}}
    out["write_outside"] = attempt(lambda: open({target!r}, "w").write("pwned"))
    out["write_runner"] = attempt(lambda: open({runner!r}, "a").write("pwned"))
    out["write_venv"] = attempt(lambda: open({venv_file!r}, "w").write("pwned"))
    out["read_heldout"] = attempt(lambda: open({heldout!r}, "rb").read())
    out["write_own_dir"] = attempt(lambda: open("mine.txt", "w").write("ok"))
    out["repo_listing"] = attempt(lambda: os.listdir({repo!r}))
    libc = ctypes.CDLL(None, use_errno=True)
    out["remount_rw"] = "done" if libc.mount(None, b"/", None, 0x20, None) == 0 else errno.errorcode[ctypes.get_errno()]
    return out
'''


def test_writing_or_reading_outside_its_directory_is_refused(tmp_path):
    """Even as root (this machine's venv Python is out of `nobody`'s reach), the program sees a
    read-only filesystem that holds only the system, this Python and the runner: not the
    repository (tasks/, .git/), not a folder writable by anyone, and it cannot remount its way out."""
    if os.geteuid() != 0:
        pytest.skip("the read-only mount namespace needs root; unprivileged runs rely on file permissions")
    assert isolation().filesystem
    outside = tmp_path / "shared"
    outside.mkdir()
    outside.chmod(0o777)  # writable by anyone: only the mount namespace can refuse the write
    before = open(sandbox.RUNNER).read()
    heldout = os.path.join(sandbox.TASKS_DIR, "symreg_chemistry", "heldout.npz")
    assert os.path.isfile(heldout)
    venv_file = os.path.join(sys.prefix, "helix-test-written")
    code = OUTSIDE.format(target=str(outside / "x.txt"), runner=sandbox.RUNNER, venv_file=venv_file, heldout=heldout,
                          repo=sandbox.REPO_DIR)
    result = run_program(code, "run_packing", LIMIT, 1024)
    assert result.status == "ok", result.error
    assert result.value["write_runner"] in ("EROFS", "EACCES"), result.value  # EACCES first where it runs as nobody
    assert result.value == {"write_outside": "ENOENT", "write_runner": result.value["write_runner"],
                            "write_venv": "EROFS", "read_heldout": "ENOENT", "write_own_dir": "done",
                            "repo_listing": "ENOENT" if not sys.prefix.startswith(sandbox.REPO_DIR + "/") else "done",
                            "remount_rw": "EPERM"}
    assert not (outside / "x.txt").exists() and open(sandbox.RUNNER).read() == before
    assert not os.path.exists(venv_file)


HUNT_COPIES = """
import os


def run_packing():
    return sorted(p for p in PATHS if os.path.exists(p))
"""


def test_copies_of_held_out_data_elsewhere_on_the_machine_are_invisible():
    """Held-out files live in more places than this checkout's tasks/: a second checkout beside it
    (as on a CI machine), a copy in /tmp, one in the home directory. None exists for a program."""
    heldout = os.path.join(sandbox.TASKS_DIR, "symreg_chemistry", "heldout.npz")
    homes = [os.path.expanduser("~"), os.path.dirname(sandbox.REPO_DIR), "/tmp"]
    copies = []
    try:
        for where in homes:
            folder = tempfile.mkdtemp(prefix="helix-test-copy-", dir=where)
            os.chmod(folder, 0o755)
            copy = os.path.join(folder, "tasks", "symreg_chemistry", "heldout.npz")
            os.makedirs(os.path.dirname(copy))
            shutil.copy(heldout, copy)
            os.chmod(copy, 0o644)
            copies.append(copy)
        result = run_program(HUNT_COPIES.replace("PATHS", repr([heldout, *copies])), "run_packing", LIMIT, 1024)
    finally:
        for copy in copies:
            shutil.rmtree(os.path.dirname(os.path.dirname(os.path.dirname(copy))), ignore_errors=True)
    assert result.status == "ok", result.error
    if not isolation().filesystem:
        pytest.skip("no mount namespace here: file permissions are the only fence")
    assert result.value == [], "held-out data visible to programs"


def test_a_visible_folder_that_holds_tasks_gets_tasks_emptied(tmp_path):
    """A non-editable install puts tasks/ (held-out data included) inside site-packages, which
    programs must see: the plan covers it with an empty tmpfs."""
    site = tmp_path / "site-packages"
    (site / "tasks" / "boston_housing").mkdir(parents=True)
    (site / "numpy").mkdir()
    plan = sandbox.fs_jail.plan(str(tmp_path / "work"), str(tmp_path / "root"), (str(site),),
                                hide=(str(site / "tasks"), str(tmp_path / "elsewhere")), userns=True)
    if plan is None:
        pytest.skip("no mount syscalls on this machine")
    assert plan.hide == (os.fsencode(str(site / "tasks")),)
    assert (os.fsencode(str(site)), os.fsencode(str(tmp_path / "root") + str(site))) in plan.binds


CGROUP_ESCAPE = ATTEMPT + '''
import os


def run_packing():
    rel = [line.split(":", 2)[2] for line in open("/proc/self/cgroup").read().splitlines()
           if "pids" in line.split(":")[1].split(",")][0]
    own = "/sys/fs/cgroup/pids" + rel
    out = {"raise_cap": attempt(lambda: open(own + "/pids.max", "w").write("max")),
           "leave": attempt(lambda: open(os.path.dirname(own) + "/cgroup.procs", "w").write("0")),
           "nest": attempt(lambda: os.mkdir(own + "/inner"))}
    out["cap"] = open(own + "/pids.max").read().strip()
    return out
'''


def test_a_program_cannot_lift_or_leave_its_pids_cap():
    """A uid-0 program may write cgroup files it owns; the read-only mounts (no capabilities to
    remount) keep it from raising pids.max or moving itself back to the evaluator's cgroup."""
    if not (isolation().pids_cap and isolation().filesystem and os.path.isdir(cgroup.V1_MOUNT)):
        pytest.skip("needs a cgroup v1 pids cap and the read-only mount namespace")
    run = run_program(CGROUP_ESCAPE, "run_packing", LIMIT, 1024)
    assert run.status == "ok" and run.pids_capped, run
    assert run.value["cap"] == str(sandbox.SANDBOX_NPROC), run.value
    assert "done" not in (run.value["raise_cap"], run.value["leave"], run.value["nest"]), run.value


SIGNALS = ATTEMPT + '''
import os, signal


def run_packing():
    out = {"pid": os.getpid(), "ppid": os.getppid()}
    out["kill_evaluator"] = attempt(lambda: os.kill(EVALUATOR_PID, signal.SIGKILL))
    out["kill_parent"] = attempt(lambda: os.kill(os.getppid(), signal.SIGKILL))
    if os.getpid() == 2:  # only inside a namespace of its own: outside this would hit every root process
        out["kill_everything"] = attempt(lambda: os.kill(-1, signal.SIGKILL))
    return out
'''
# A throwaway "trainer": evaluates argv[2] (with its own pid filled in) and prints the result as JSON.
EVALUATOR = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from rewards import run_program

code = open(sys.argv[2]).read().replace("EVALUATOR_PID", str(os.getpid()))
result = run_program(code, "run_packing", 5.0, 1024)
print(json.dumps({"status": result.status, "value": result.value, "error": result.error}))
"""


def test_a_program_cannot_signal_the_trainer():
    """A uid-0 program keeps the right to signal uid-0 processes (no capability is needed for the
    same uid), so without a PID namespace `os.kill(trainer_pid, SIGKILL)` ends the run. Inside its
    own namespace no pid names anything outside. The evaluator here is a throwaway process, so a
    regression kills it, not pytest."""
    if os.geteuid() != 0:
        pytest.skip("the PID namespace needs root; an unprivileged program runs as the trainer's uid")
    assert isolation().processes
    path = os.path.join(tempfile.mkdtemp(), "signals.py")  # in the fixture's private root
    with open(path, "w") as fh:
        fh.write(SIGNALS)
    root = os.path.dirname(os.path.dirname(sandbox.RUNNER))
    out = subprocess.run([sys.executable, "-c", EVALUATOR, root, path], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"the evaluating process died ({out.returncode}): {out.stderr[-500:]}"
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["status"] == "ok", report
    value = report["value"]
    # It is PID 2 under a reaper init (PID 1) that ignores signals from inside its namespace;
    # the evaluator's pid names nothing there, and kill(-1) finds no one else to hit.
    assert value == {"pid": 2, "ppid": 1, "kill_evaluator": "ESRCH", "kill_parent": "done", "kill_everything": "ESRCH"}


def test_exit_codes_and_signals_reach_the_sandbox_through_the_namespace():
    """The runner outside the namespace mirrors the program's wait status exactly."""
    code = run_program("import os\ndef run():\n    os._exit(7)\n", "run", LIMIT, 1024)
    assert (code.status, code.returncode) == ("crash", 7)
    killed = run_program("import os, signal\ndef run():\n    os.kill(os.getpid(), signal.SIGKILL)\n", "run", LIMIT, 1024)
    assert (killed.status, killed.returncode) == ("crash", -9)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_program_may_use_a_process_pool(context):
    """Legitimate parallel programs still work inside the namespaces: fork workers, and spawn workers
    that re-import the program by name (its folder is on their path)."""
    code = program(f"""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        def scale(s):
            return grid(s)

        def run_packing():
            with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context({context!r})) as pool:
                return list(pool.map(scale, [0.5, 1.0]))[1]
    """)
    r = evaluate(code, timeout=30)
    assert r.status == "ok" and r.reward == pytest.approx(GRID_SUM), r.feedback


UNPRIVILEGED = ATTEMPT + '''
import os, signal, socket


def run():
    out = {"uid": os.getuid(), "pid": os.getpid()}
    out["write_outside"] = attempt(lambda: open(OUTSIDE_DIR + "/x", "w").write("pwned"))
    out["read_only_root"] = bool(os.statvfs("/").f_flag & os.ST_RDONLY)
    out["read_heldout"] = attempt(lambda: open(HELDOUT, "rb").read())
    out["write_own_dir"] = attempt(lambda: open("mine.txt", "w").write("ok"))
    out["kill_evaluator"] = attempt(lambda: os.kill(EVALUATOR_PID, signal.SIGKILL))
    out["connect"] = attempt(lambda: socket.create_connection(("127.0.0.1", 9), timeout=1))
    return out
'''
UNPRIVILEGED_EVALUATOR = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from rewards import run_program

code = open(sys.argv[2]).read().replace("EVALUATOR_PID", str(os.getpid()))
result = run_program(code.replace("OUTSIDE_DIR", repr(sys.argv[3])).replace("HELDOUT", repr(sys.argv[4])), "run", 10.0, 512)
print(json.dumps({"status": result.status, "value": result.value, "error": result.error}))
"""


def test_an_unprivileged_evaluator_gets_every_namespace_through_a_user_namespace():
    """Most GPU nodes run the trainer as an ordinary user. A user namespace per program gives it the
    same fences as root gets: its own network, pids and read-only mounts. As root, the evaluator is
    run as `nobody` with the system Python (numpy is not needed); otherwise as this user."""
    root = os.path.dirname(os.path.dirname(sandbox.RUNNER))
    if os.geteuid() == 0:
        if not (shutil.which("runuser") and os.path.exists("/usr/bin/python3")):
            pytest.skip("needs runuser and a system python to act as an unprivileged evaluator")
        prefix, uid = ["runuser", "-u", sandbox.SANDBOX_USER, "--", "/usr/bin/python3"], pwd.getpwnam(sandbox.SANDBOX_USER).pw_uid
    else:
        if not isolation().processes:
            pytest.skip("this kernel refuses unprivileged user namespaces: programs share the evaluator's namespaces")
        prefix, uid = [sys.executable], os.getuid()
    private = tempfile.mkdtemp()  # in the fixture's private root
    os.chmod(private, 0o755)
    outside = tempfile.mkdtemp(dir=private)
    os.chmod(outside, 0o777)  # writable by anyone: only the read-only mounts can refuse the write
    path = os.path.join(private, "program.py")
    with open(path, "w") as fh:
        fh.write(UNPRIVILEGED)
    os.chmod(path, 0o644)
    heldout = os.path.join(sandbox.TASKS_DIR, "symreg_chemistry", "heldout.npz")
    out = subprocess.run([*prefix, "-c", UNPRIVILEGED_EVALUATOR, root, path, outside, heldout],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-800:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["status"] == "ok", report
    assert report["value"] == {"uid": uid, "pid": 2, "write_outside": "ENOENT", "read_only_root": True, "read_heldout": "ENOENT",
                               "write_own_dir": "done", "kill_evaluator": "ESRCH", "connect": "ENETUNREACH"}
    assert os.listdir(outside) == []


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
sys.path.insert(0, sys.argv[1])
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
    out = subprocess.run([sys.executable, "-c", AT_FORK, sandbox.REPO_DIR], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-800:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["status"] == "ok", report
    (user, net), (host_user, host_net) = report["value"], report["host"]
    assert net != host_net and user != host_user, report
