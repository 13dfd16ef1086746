"""Hostile programs: each ends with reward 0 or its true reward, on time, leaving no process or directory behind.
The fences around a program are in test_sandbox_fences.py, and what one program may do to another in
test_sandbox_neighbours.py."""

import json
import os
import resource
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

import tests.helpers.sandbox_cases as cases
from rewards import Evaluator, cgroup, isolation, run_program, sandbox
from tests.helpers.sandbox_cases import GRID, GRID_SUM, LIMIT, RESULT_FD, TASK, evaluate, program, running

# Fork-heavy programs run as one uid share its RLIMIT_NPROC (rewards/sandbox.py): these files never run
# at the same time on two pytest-xdist workers.
pytestmark = pytest.mark.xdist_group("sandbox_forks")


@pytest.fixture()
def nproc_headroom():
    """These programs need most of the sandbox user's RLIMIT_NPROC (sandbox.SANDBOX_NPROC), which every program
    run as that user shares: wait (30 s at most) until what earlier tests left dying, or another xdist worker's
    programs, is down to a quarter of it, so a fork here fails for the reason the test sets up, not for theirs."""
    import pwd

    if os.geteuid() != 0:
        return
    uid = pwd.getpwnam(sandbox.SANDBOX_USER).pw_uid
    deadline = time.monotonic() + 30
    while sandbox._tasks_of(uid) > sandbox.SANDBOX_NPROC // 4 and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.fixture(autouse=True)
def nothing_left_behind(monkeypatch, tmp_path_factory):
    yield from cases.nothing_left_behind(monkeypatch, tmp_path_factory)


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
def test_descendants_sleeping_past_the_limit_are_killed(pid_dir, spawn, count, netns, monkeypatch, nproc_headroom):
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
def test_grandchild_that_leaves_the_process_group_is_killed(pid_dir, sweep, monkeypatch, nproc_headroom):
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


def sessions() -> dict[int, int]:
    """Processes per session id. Every sandboxed program runs in a session of its own (setsid), so a
    program's tasks are counted apart from what else the machine (another xdist worker) runs."""
    counts: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:  # gone meanwhile
            continue
        sid = int(stat.rsplit(")", 1)[1].split()[3])  # after "(comm)": state ppid pgrp session
        counts[sid] = counts.get(sid, 0) + 1
    return counts


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
    before = set(sessions())
    peak, stop = [0], threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max([peak[0], *(n for sid, n in sessions().items() if sid not in before)])
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        r = evaluate(FORK_BOMB, timeout=2.5)
        time.sleep(0.2)
    finally:
        stop.set()
        sampler.join()
    print(f"fork bomb: the largest new session held {peak[0]} processes")
    assert r.status == "timeout" and r.reward == 0.0 and r.eval_time_s < 2.5 + 1
    assert peak[0] > 20  # the control: the bomb did fork, and its session was seen
    assert peak[0] <= sandbox.SANDBOX_NPROC + 8, f"{peak[0]} processes in the bomb's session: no cap held"


@pytest.mark.parametrize("namespaces", [True, False], ids=["own-user-namespaces", "no-namespaces"])
def test_a_fork_bomb_does_not_starve_a_program_running_beside_it(namespaces, monkeypatch, nproc_headroom):
    """Programs run side by side as one user. Where each has a pids cgroup, that cgroup is its cap and the
    per-user RLIMIT_NPROC is not set: without a user namespace of its own per program (unshare refused) the
    kernel counts that limit over all of them, so a fork bomb filled it and the honest program beside it
    failed its forks, scored "error" (a hostile child lowering a sibling's reward)."""
    if not isolation().pids_cap:
        pytest.skip("no writable pids cgroup here: RLIMIT_NPROC, shared by the sandbox user, is the only cap")
    if not namespaces:
        monkeypatch.setattr(sandbox, "_unshare", None)
    honest = program("""
        import os, time
        def run_packing():
            time.sleep(0.8)  # the bomb beside it has filled its own cap by now
            kids = []
            for _ in range(120):
                pid = os.fork()
                if pid == 0:
                    os._exit(0)
                kids.append(pid)
            for pid in kids:
                os.waitpid(pid, 0)
            return grid()
    """)
    results = {}
    bomb = threading.Thread(target=lambda: results.update(bomb=evaluate(FORK_BOMB, timeout=3)))
    bomb.start()
    results["honest"] = evaluate(honest, timeout=6)
    bomb.join()
    assert results["bomb"].status == "timeout"
    assert results["honest"].status == "ok" and results["honest"].reward == pytest.approx(GRID_SUM), results["honest"]


def test_patching_or_shadowing_the_verifier_cannot_lift_the_reward():
    """The program imports the task's verifier (tasks.families.circles.verify.verify_packing, behind
    tasks/circle_packing_26/verifier.py) from the repository and patches it to return a perfect
    score, and writes a fake tasks package, first on its path, whose verifiers all say perfect.
    That all stays in the child: the parent scores the returned artefact with its own verifier."""
    repo = os.path.dirname(sandbox.TASKS_DIR)
    r = evaluate(program(f"""
        import os, sys
        PERFECT = "from tasks.base import Verdict\\ndef verify(*a, **k):\\n    return Verdict(1e9, True, 'perfect')\\n"
        sys.path.insert(0, {repo!r})
        try:  # the real one (hidden from the child where the read-only mount namespace is on)
            import tasks.families.circles.verify, tasks.base
            tasks.families.circles.verify.verify_packing = lambda *a, **k: tasks.base.Verdict(1e9, True, "perfect")
            tasks.base.Task.verify = lambda self, returned: tasks.base.Verdict(1e9, True, "perfect")
        except Exception as exc:
            print("real verifier:", type(exc).__name__)
        os.makedirs("tasks/circle_packing_26", exist_ok=True)
        os.makedirs("tasks/families/circles", exist_ok=True)
        for package in ("tasks", "tasks/families", "tasks/families/circles"):
            open(package + "/__init__.py", "w").write("")
        open("tasks/base.py", "w").write("class Verdict:\\n    def __init__(self, *a):\\n        self.args = a\\n")
        open("tasks/families/circles/verify.py", "w").write(PERFECT.replace("def verify", "def verify_packing"))
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



def test_timing_note_is_stable_for_fast_programs_and_exact_for_slow_ones():
    from rewards.evaluator import timing_note

    assert timing_note(0.21, 20) == timing_note(4.9, 20) == "(ran well within the 20 s time limit)"
    assert timing_note(12.34, 20) == "(ran in 12.3 s of the 20 s time limit)"



def test_the_shared_process_limit_is_the_fallback_only_where_a_pids_cgroup_is_joined(tmp_path, monkeypatch):
    """The plan: with a cgroup to join, RLIMIT_NPROC waits in limits_without_cgroup (rewards.launcher sets it
    when the join fails); without one it is among the limits always set. Run as a non-root uid either way."""
    import resource as r

    nobody = (65534, 65534)
    with_group = sandbox._launch_plan(256, 2.0, nobody, str(tmp_path), "/sys/fs/cgroup/x/cgroup.procs", str(tmp_path))
    without = sandbox._launch_plan(256, 2.0, nobody, str(tmp_path), None, str(tmp_path))
    nproc = [lim for lim in with_group["limits_without_cgroup"] if lim[0] == r.RLIMIT_NPROC]
    assert nproc and nproc[0][1] <= sandbox.SANDBOX_NPROC
    assert not [lim for lim in with_group["limits"] if lim[0] == r.RLIMIT_NPROC]
    assert [lim for lim in without["limits"] if lim[0] == r.RLIMIT_NPROC] == nproc
    assert without["limits_without_cgroup"] == []
    assert {lim[0] for lim in with_group["limits"]} == {r.RLIMIT_AS, r.RLIMIT_CPU, r.RLIMIT_FSIZE, r.RLIMIT_CORE}
