"""The driven-task contract (issue 31, item 5): task.yaml ``driver`` (tasks/base.py), the sandbox's side of the
channel (rewards/sandbox.py, rewards/channel.py) with a generic driver, and the fence that keeps the
driver's memory from the program as root (the program runs as nobody) and as an ordinary user (the
program runs in a user namespace of its own)."""

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from array import array

import pytest

from rewards import isolation, run_program
from rewards.sandbox import SANDBOX_USER
from tasks import load_task
from tests.helpers.env import child_env
from tests.helpers.task_copies import copy_task, load_error

OR = load_task("bin_packing_or")


# ---- task.yaml: driver -----------------------------------------------------------------------------

@pytest.fixture()
def tasks_dir(tmp_path, monkeypatch):
    """A private tasks/ folder: bin_packing_or copied as `copy`, with the shared harness."""
    return copy_task(OR, "bin_packing", tmp_path, monkeypatch)


def test_a_copy_loads_with_its_driver(tasks_dir):
    task = load_task("copy")
    assert callable(task.driver) and task.run_entry == "helix_online_step" and task.data_files == ()


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace("driver: DRIVER", "drivr: DRIVER"), ["unknown key 'drivr'", "Did you mean 'driver'"]),
    (lambda t: t.replace("driver: DRIVER", "driver: NOPE"), ["does not define the callable NOPE named as 'driver'"]),
    (lambda t: t.replace("driver: DRIVER", "driver: INSTANCES"), ["does not define the callable INSTANCES"]),
    (lambda t: t.replace("driver: DRIVER", "driver: 3"), ["'driver' must be a Python identifier"]),
    (lambda t: t.replace("driver: DRIVER", "driver: drive.r"), ["'driver' must be a Python identifier"]),
    (lambda t: t.replace("harness: families/bin_packing/harness.py", "").replace("harness_entry: helix_online_step", ""),
     ["'driver' drives the harness's entry step by step: add 'harness' and 'harness_entry'"]),
    (lambda t: t + "cascade_entry: helix_online_step\ncascade_timeout_s: 5\n", ["'driver' and 'cascade_entry' cannot be combined"]),
])
def test_the_driver_key_is_validated(tasks_dir, edit, words):
    error = load_error(tasks_dir, edit)
    for word in words:
        assert word in error


# ---- the sandbox's side, with a generic driver --------------------------------------------------------

def count_to_three():
    """Asks three questions; the artefact is the answers."""
    answers = []
    for n in range(3):
        answers.append((yield {"n": n}))
    return answers


def picky():
    answer = yield {"n": 0}
    if answer != 1:
        raise ValueError(f"the answer {answer!r} is not 1")
    return "fine"


def buggy():
    yield {"n": 0}
    raise KeyError("a bug in trusted code")


def not_json():
    yield {"n": {1, 2}}


def silent():
    return "nothing to ask"
    yield


ANSWER = "def step(request):\n    return request['n'] + 1\n"


@pytest.mark.parametrize("driver, code, status, value_or_words", [
    (count_to_three, ANSWER, "ok", [1, 2, 3]),
    (silent, ANSWER, "ok", "nothing to ask"),
    (picky, ANSWER, "ok", "fine"),
    (picky, "def step(request):\n    return 2\n", "bad_output", "the answer 2 is not 1"),
    (count_to_three, "def step(request):\n    raise RuntimeError('no')\n", "error", "RuntimeError: no"),
    (count_to_three, "import time\ndef step(request):\n    time.sleep(60)\n", "timeout", "time limit of 2 s exceeded"),
    (count_to_three, "import os\ndef step(request):\n    os._exit(3)\n", "crash", "no result"),
    (count_to_three, "def step(request):\n    return object()\n", "bad_output", "cannot return a value of type object"),
    (buggy, ANSWER, "bad_output", "the task's driver failed after 1 replies: KeyError"),
    (not_json, ANSWER, "bad_output", "the task's driver made a request that is not JSON"),
])
def test_a_driven_run_ends_as_its_driver_or_its_program_decides(driver, code, status, value_or_words, caplog):
    with caplog.at_level(logging.WARNING, logger="rewards.channel"):
        out = run_program(code, "step", 2, 512, driver=driver)
    assert out.status == status, (out.status, out.error)
    if status == "ok":
        assert out.value == value_or_words
    else:
        assert value_or_words in out.error, out.error
    assert (driver in (buggy, not_json)) == bool(caplog.records)  # a bug in trusted code is logged as one


def test_the_deadline_holds_while_the_driver_waits():
    out = run_program("import time\ndef step(request):\n    time.sleep(0.4 * (request['n'] + 1))\n    return 0\n", "step", 1,
                      512, driver=count_to_three)
    assert out.status == "timeout" and 1 <= out.elapsed_s < 3


def test_the_driver_reaches_ray_workers_without_the_repository(tmp_path):
    """A Ray worker need not hold the repository (docs/scale.md: Evaluation on a Ray cluster): the driver's
    module travels by value, and an interpreter that cannot import tasks runs the unpickled driver."""
    cloudpickle = pytest.importorskip("ray.cloudpickle")
    from rewards.ray_eval import ship_by_value

    ship_by_value(OR.driver)
    (tmp_path / "driver.pkl").write_bytes(cloudpickle.dumps(OR.driver))
    code = ("import pickle, sys\nd = pickle.load(open('driver.pkl', 'rb'))\nfirst = next(d())\n"
            "print(len(first['open']), first['items'][0], 'tasks' in sys.modules)")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-1500:]
    assert out.stdout.split() == ["21", "[0,", f"{int(OR.driver.sets['OR1'][0][0])}]", "False"]


# ---- the driver's memory, as root and as an ordinary user ------------------------------------------

SECRET = [987_654_321_012, 123_456_789_098, 555_555_555_555]  # "items": the program is sent the first two

# A program (standard library only) that, at its first request, looks for the two values it was sent
# as raw int64 in the memory of every process it can open, and reports what follows them, then
# tries PTRACE_ATTACH on every pid it can name; it answers every request with its report.
SNOOP = r'''
import ctypes, os, struct

SEEN, REPORT = [], {}


def regions(pid):
    with open(f"/proc/{pid}/maps") as fh:
        for line in fh:
            span, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in span.split("-"))
            if perms.startswith("rw") and hi - lo <= 1 << 26:
                yield lo, hi


def scan(pattern, pids):
    """What follows ``pattern`` in the memory of each of ``pids`` it may open: (values, pids opened)."""
    follows, opened = set(), []
    for pid in pids:
        try:
            fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
        except OSError:
            continue
        opened.append(pid)
        try:
            for lo, hi in regions(pid):
                try:
                    blob = os.pread(fd, hi - lo, lo)
                except OSError:
                    continue
                at = blob.find(pattern)
                while at >= 0 and len(follows) < 1000:
                    follows.add(int.from_bytes(blob[at + 16:at + 24], "little", signed=True))
                    at = blob.find(pattern, at + 1)
        except OSError:
            pass
        finally:
            os.close(fd)
    return follows, opened


def snoop(pattern):
    """Every process: /proc/<pid>/mem, then PTRACE_ATTACH (only ever run inside the sandbox: as root
    outside, it would stop whatever it attaches to)."""
    follows, opened = scan(pattern, ["self"] + sorted(p for p in os.listdir("/proc") if p.isdigit()))
    if os.getpid() != 2:  # not the sandbox's PID namespace (where it is PID 2): never attach to anything
        raise RuntimeError("SNOOP attaches to every process: it runs only as PID 2 of a sandbox")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    attached = []
    for pid in sorted({int(p) for p in os.listdir("/proc") if p.isdigit()} | set(range(1, 65)) - {os.getpid()}):
        if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
            attached.append(pid)
            try:
                os.waitpid(pid, 0x40000000)  # __WALL: until it is stopped, so that the detach lets it go
            except OSError:
                pass
            libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    return {"follows": sorted(follows), "opened": opened, "attached": attached, "pid_ns_pid": os.getpid()}


def step(request):
    SEEN.append(request["item"])
    if len(SEEN) == 2:
        REPORT.update(snoop(struct.pack("<qq", *SEEN)))
    return REPORT
'''

EVALUATOR = r'''
import json, os, sys
from array import array
from rewards import run_program

SECRET = json.loads(sys.argv[2])
HELD = array("q", SECRET)  # the driver's data, raw int64 in this process


def driver():
    answers = []
    for item in HELD[:2]:
        answers.append((yield {"item": item}))
    return answers


out = run_program(open(sys.argv[1]).read(), "step", 60.0, 512, driver=driver)
with open("/proc/self/mem", "rb", buffering=0) as mem:  # the data are there to be found by whoever may read it
    mem.seek(HELD.buffer_info()[0])
    here = mem.read(24) == HELD.tobytes()
print(json.dumps({"status": out.status, "error": out.error, "value": out.value, "pid": os.getpid(), "here": here}))
'''


def check_snoop(report: dict, evaluator_pid: int) -> None:
    assert report["status"] == "ok", report
    found = report["value"][-1]
    assert SECRET[2] not in found["follows"], "the program read the driver's future item"
    assert str(evaluator_pid) not in found["opened"] and found["pid_ns_pid"] == 2, found
    assert all(pid < 64 for pid in found["attached"]), found  # at most its own processes, by their namespace pids
    assert report["here"], "the evaluator's memory does not hold the data: the test proves nothing"


def test_the_program_cannot_read_the_drivers_memory_when_the_evaluator_is_root(tmp_path):
    if os.geteuid() != 0 or isolation().user != SANDBOX_USER:
        pytest.skip("the root path: the evaluator is root and programs run as nobody")
    program = tmp_path / "snoop.py"
    program.write_text(SNOOP)
    out = subprocess.run([sys.executable, "-c", EVALUATOR, str(program), json.dumps(SECRET)], capture_output=True, text=True,
                         timeout=120, env=child_env())
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    check_snoop(report, report["pid"])


def test_the_program_cannot_read_the_drivers_memory_when_the_evaluator_is_an_ordinary_user():
    """Most GPU nodes run the trainer as an ordinary user: the program then has the evaluator's uid, and
    only its own user namespace keeps the kernel from letting it read the evaluator's memory. As root,
    the evaluator is run as nobody with the system Python (the snooping program needs no numpy)."""
    if os.geteuid() == 0:
        if not (shutil.which("runuser") and os.path.exists("/usr/bin/python3")):
            pytest.skip("needs runuser and a system python to act as an unprivileged evaluator")
        prefix = ["runuser", "-u", SANDBOX_USER, "--", "/usr/bin/python3"]
    else:
        if not isolation().processes:
            pytest.skip("this kernel refuses unprivileged user namespaces: programs share the evaluator's uid")
        prefix = [sys.executable]
    folder = tempfile.mkdtemp()  # readable by nobody, unlike pytest's own temporary folders
    try:
        os.chmod(folder, 0o755)
        program = os.path.join(folder, "snoop.py")
        with open(program, "w") as fh:
            fh.write(SNOOP)
        os.chmod(program, 0o644)
        out = subprocess.run([*prefix, "-c", EVALUATOR, program, json.dumps(SECRET)], capture_output=True, text=True,
                             timeout=120, env=child_env())
    finally:
        shutil.rmtree(folder)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    check_snoop(report, report["pid"])


def test_the_snooping_program_does_find_data_it_may_read():
    """The control: run on this process's own memory, the same scan finds what follows (its ptrace
    part is not run here: as root it would stop every process it attaches to)."""
    namespace = {}
    exec(SNOOP, namespace)  # our own test code
    held = array("q", SECRET)
    follows, opened = namespace["scan"](held.tobytes()[:16], ["self"])
    assert SECRET[2] in follows and opened == ["self"]
