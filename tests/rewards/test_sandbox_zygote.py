"""The template process programs are forked from (rewards/zygote.py): one program's state never
reaches the next, the fork holds no capability the exec used to drop, and a template that dies, or
an evaluator that dies, leaves a clear error and no process behind."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from rewards import isolation, run_program, zygote
from tests.helpers import sandbox_cases as cases
from tests.helpers.env import child_env
from tests.helpers.sandbox_cases import running


@pytest.fixture(autouse=True)
def nothing_left_behind(monkeypatch, tmp_path_factory):
    yield from cases.nothing_left_behind(monkeypatch, tmp_path_factory)


@pytest.fixture()
def one_template():
    """A fresh pool, so the runs of a test come from one template process this test started."""
    if zygote.disabled():
        pytest.skip(f"no template process here: {zygote.disabled()}")
    zygote.shutdown()
    yield
    zygote.shutdown()


def template_pids() -> list[int]:
    return sorted(zygote.templates())


# Leaves all it can behind: module globals, patched numpy/json/builtins/os, a module of its own in
# sys.modules, files in its directory, $TMPDIR and /dev/shm, a thread that writes a file after it
# has returned, a daemon thread, a lingering subprocess, an environment variable, a changed umask.
LITTERER = """
import builtins, json, os, subprocess, sys, threading, time, types
import numpy as np

def late():
    time.sleep(0.5)
    for folder in (".", "/dev/shm", os.environ["TMPDIR"]):
        try:
            open(os.path.join(folder, "late.txt"), "w").write("late")
        except OSError:
            pass

def run():
    global LEFT
    LEFT = "mine"
    np.MARK = json.MARK = "patched"
    np.sum = lambda *a, **k: -1
    builtins.print = lambda *a, **k: None
    os.getcwd = lambda: "/forged"
    sys.modules["litter"] = types.ModuleType("litter")
    sys.path.append("/litter")
    os.environ["LITTER"] = "1"
    os.umask(0)
    for folder in (".", "/dev/shm", os.environ["TMPDIR"]):
        open(os.path.join(folder, "left.txt"), "w").write("left")
    threading.Thread(target=late, name="left-thread").start()
    threading.Thread(target=time.sleep, args=(30,), name="left-daemon", daemon=True).start()
    subprocess.Popen(["sleep", "30.123"])
    return threading.active_count()
"""
INSPECTOR = """
import builtins, json, os, sys, threading, time
import numpy as np

def run():
    time.sleep(1.0)  # past the moment the litterer's thread would have written late.txt
    found = [f"{folder}/{name}" for folder in (".", "/dev/shm", os.environ["TMPDIR"])
             for name in ("left.txt", "late.txt") if os.path.exists(os.path.join(folder, name))]
    return {"found": found, "globals": "LEFT" in globals(), "np_mark": hasattr(np, "MARK"),
            "json_mark": hasattr(json, "MARK"), "np_sum": int(np.sum([1, 2])),
            "print": type(builtins.print).__name__ == "builtin_function_or_method",
            "getcwd": os.getcwd() != "/forged", "litter": "litter" in sys.modules,
            "path": "/litter" in sys.path, "env": os.environ.get("LITTER"), "umask": os.umask(0o022),
            "threads": sorted(t.name for t in threading.enumerate())}
"""


def test_nothing_one_program_leaves_reaches_the_next(one_template):
    """Both programs come from the same template process, one after the other: the second sees none
    of the first's globals, patched modules, files, threads, subprocesses or environment."""
    first = run_program(LITTERER, "run", 10, 512)
    assert first.status == "ok", first.error
    assert first.value == 3  # the litter is really there: its own thread and the two it started
    (template,) = template_pids()
    second = run_program(INSPECTOR, "run", 10, 512)
    assert second.status == "ok", second.error
    assert template_pids() == [template], "the second program did not come from the same template"
    umask = os.umask(0o022)
    os.umask(umask)
    assert second.value == {"found": [], "globals": False, "np_mark": False, "json_mark": False, "np_sum": 3,
                            "print": True, "getcwd": True, "litter": False, "path": False, "env": None, "umask": umask,
                            "threads": ["MainThread"]}
    assert cases.processes_mentioning("30.123") == [], "the first program's subprocess outlived it"
    with open(f"/proc/{template}/status") as fh:
        assert "Threads:\t1\n" in fh.read()  # the template itself never ran any of it


def test_programs_draw_their_own_random_numbers(one_template):
    """A fork copies the template's generator state; each program's numpy and random draw anew,
    as a fresh interpreter's would."""
    code = "import random\nimport numpy as np\ndef run():\n    return [float(np.random.rand()), random.random()]\n"
    draws = [run_program(code, "run", 10, 512) for _ in range(3)]
    assert all(r.status == "ok" for r in draws), [r.error for r in draws]
    assert len({r.value[0] for r in draws}) == 3 and len({r.value[1] for r in draws}) == 3
    assert len(template_pids()) == 1


CAPS = """
import ctypes, os
def run():
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
    libc = ctypes.CDLL(None, use_errno=True)
    unmounted = libc.umount2(b"/dev/shm", 2) == 0  # MNT_DETACH: a way to the host's, or to a hidden tasks/
    new_ns = libc.unshare(0x00020000) == 0  # CLONE_NEWNS without a user namespace: needs CAP_SYS_ADMIN
    return {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapAmb", "NoNewPrivs")} | \\
        {"unmounted": unmounted, "new_ns": new_ns, "title": open("/proc/self/cmdline").read().split(chr(0))[3:6]}
"""


def test_a_forked_program_holds_no_capability(one_template):
    """The launcher's exec dropped the capabilities a child gets from its own user namespace; a
    fork does not exec, so the template's child empties its sets itself: no unmounting the jail."""
    r = run_program(CAPS, "run", 10, 512)
    assert r.status == "ok", r.error
    title = r.value.pop("title")
    assert r.value == {"CapInh": "0" * 16, "CapPrm": "0" * 16, "CapEff": "0" * 16, "CapAmb": "0" * 16,
                       "NoNewPrivs": "1" if isolation().filesystem else r.value["NoNewPrivs"],
                       "unmounted": False, "new_ns": False}
    # its command line is the runner's, as if started as one (ps, and a program's own view)
    assert title[0].endswith("child_runner.py") and title[1].endswith("program.py") and title[2] == "run", title


def test_a_dead_template_is_replaced(one_template, caplog):
    r = run_program("def run():\n    return 1\n", "run", 10, 512)
    (old,) = template_pids()
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while running(old) and time.monotonic() < deadline:
        time.sleep(0.01)
    r = run_program("def run():\n    return 2\n", "run", 10, 512)
    assert (r.status, r.value) == ("ok", 2), r.error
    (new,) = template_pids()
    assert new != old and "died" in caplog.text


def test_a_template_that_dies_mid_run_takes_its_program_with_it(one_template):
    """The program gets SIGKILL with its template (parent-death signal), the run ends at once
    with a clear crash, and the next program gets a new template."""
    out = {}
    code = "import os, time\ndef run():\n    time.sleep(30)\n"
    worker = threading.Thread(target=lambda: out.setdefault("r", run_program(code, "run", 20, 512)))
    start = time.monotonic()
    worker.start()
    while not zygote._busy and time.monotonic() - start < 10:
        time.sleep(0.01)
    (template,) = template_pids()
    time.sleep(0.5)
    children = [int(p) for p in open(f"/proc/{template}/task/{template}/children").read().split()]
    assert len(children) == 1
    os.kill(template, signal.SIGKILL)
    worker.join(15)
    assert time.monotonic() - start < 10, "the run waited for its time limit"
    assert out["r"].status == "crash" and "template process died" in out["r"].error, out["r"]
    assert not running(children[0])
    r = run_program("def run():\n    return 3\n", "run", 10, 512)
    assert (r.status, r.value) == ("ok", 3) and template_pids() != [template]


def test_the_template_holds_only_its_socket(one_template):
    run_program("def run():\n    return 1\n", "run", 10, 512)
    (template,) = template_pids()
    fds = {int(n): os.readlink(f"/proc/{template}/fd/{n}") for n in os.listdir(f"/proc/{template}/fd")}
    assert sorted(fds) == [0, 1, 2, *[n for n in fds if fds[n].startswith("socket:")]], fds
    assert sum(target.startswith("socket:") for target in fds.values()) == 1, fds
    assert fds[0] == fds[1] == "/dev/null"


EVALUATOR = """
import json, sys
from rewards import run_program, zygote
code = "import time\\ndef run():\\n    time.sleep(60)\\n"
if sys.argv[1] == "quick":
    r = run_program("import numpy\\ndef run():\\n    return 1\\n", "run", 10, 512)
    print(json.dumps({"status": r.status, "templates": zygote.templates(), "off": zygote.disabled()}), flush=True)
else:
    import threading
    threading.Thread(target=run_program, args=(code, "run", 60, 512), daemon=True).start()
    import time
    while not zygote.templates():
        time.sleep(0.01)
    time.sleep(1.0)
    print(json.dumps({"templates": zygote.templates()}), flush=True)
    time.sleep(60)
"""


def test_an_evaluator_that_exits_or_is_killed_leaves_no_template_or_program():
    if zygote.disabled():
        pytest.skip(f"no template process here: {zygote.disabled()}")
    quick = subprocess.run([sys.executable, "-c", EVALUATOR, "quick"], capture_output=True, text=True, timeout=120,
                           env=child_env())
    report = json.loads(quick.stdout.splitlines()[-1])
    assert report["status"] == "ok" and len(report["templates"]) == 1 and report["off"] == ""
    assert not running(report["templates"][0]), "the template outlived its evaluator's exit"
    killed = subprocess.Popen([sys.executable, "-c", EVALUATOR, "kill"], stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        (template,) = json.loads(killed.stdout.readline())["templates"]
        program = [int(p) for p in open(f"/proc/{template}/task/{template}/children").read().split()]
        assert len(program) == 1
    finally:
        killed.kill()
        killed.wait()
    deadline = time.monotonic() + 5
    while (running(template) or running(program[0])) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not running(template) and not running(program[0])


def test_without_templates_programs_start_through_the_launcher():
    """HELIX_SANDBOX_ZYGOTE=0 (or a template that cannot start) : the launcher path, same result."""
    out = subprocess.run([sys.executable, "-c", EVALUATOR, "quick"], capture_output=True, text=True, timeout=120,
                         env=child_env(HELIX_SANDBOX_ZYGOTE="0"))
    report = json.loads(out.stdout.splitlines()[-1])
    assert report == {"status": "ok", "templates": [], "off": "HELIX_SANDBOX_ZYGOTE=0"}


def test_a_template_that_cannot_start_turns_the_pool_off(monkeypatch, caplog):
    monkeypatch.setattr(zygote, "_off", "")
    monkeypatch.setattr(zygote, "RUNNER", "/nonexistent/child_runner.py")
    zygote.shutdown()
    r = run_program(textwrap.dedent("def run():\n    return 4\n"), "run", 10, 512)
    assert (r.status, r.value) == ("ok", 4), r.error
    assert "did not start" in zygote.disabled() and "without a template process" in caplog.text
