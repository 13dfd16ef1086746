"""The fences around a program: its account, a read-only filesystem that hides the repository and held-out
data, a pids cap it cannot lift, and namespaces through which it cannot signal the trainer, as root or not."""

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

import pytest

import tests.helpers.sandbox_cases as cases
from rewards import cgroup, isolation, run_program, sandbox
from tests.helpers.env import child_env
from tests.helpers.sandbox_cases import GRID_SUM, LIMIT, evaluate, program

# Fork-heavy programs run as one uid share its RLIMIT_NPROC (rewards/sandbox.py): these files never run
# at the same time on two pytest-xdist workers.
pytestmark = pytest.mark.xdist_group("sandbox_forks")


@pytest.fixture(autouse=True)
def nothing_left_behind(monkeypatch, tmp_path_factory):
    yield from cases.nothing_left_behind(monkeypatch, tmp_path_factory)


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
# A throwaway "trainer": evaluates argv[1] (with its own pid filled in) and prints the result as JSON.
# It imports this checkout's rewards/ through PYTHONPATH (tests.helpers.env.child_env).
EVALUATOR = """
import json, os, sys
from rewards import run_program

code = open(sys.argv[1]).read().replace("EVALUATOR_PID", str(os.getpid()))
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
    out = subprocess.run([sys.executable, "-c", EVALUATOR, path], capture_output=True, text=True, timeout=60, env=child_env())
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
from rewards import run_program

code = open(sys.argv[1]).read().replace("EVALUATOR_PID", str(os.getpid()))
result = run_program(code.replace("OUTSIDE_DIR", repr(sys.argv[2])).replace("HELDOUT", repr(sys.argv[3])), "run", 10.0, 512)
print(json.dumps({"status": result.status, "value": result.value, "error": result.error}))
"""


def test_an_unprivileged_evaluator_gets_every_namespace_through_a_user_namespace():
    """Most GPU nodes run the trainer as an ordinary user. A user namespace per program gives it the
    same fences as root gets: its own network, pids and read-only mounts. As root, the evaluator is
    run as `nobody` with the system Python (numpy is not needed); otherwise as this user."""
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
    out = subprocess.run([*prefix, "-c", UNPRIVILEGED_EVALUATOR, path, outside, heldout],
                         capture_output=True, text=True, timeout=120, env=child_env())
    assert out.returncode == 0, out.stderr[-800:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["status"] == "ok", report
    assert report["value"] == {"uid": uid, "pid": 2, "write_outside": "ENOENT", "read_only_root": True, "read_heldout": "ENOENT",
                               "write_own_dir": "done", "kill_evaluator": "ESRCH", "connect": "ENETUNREACH"}
    assert os.listdir(outside) == []

