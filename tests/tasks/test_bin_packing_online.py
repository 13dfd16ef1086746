"""Online bin packing cannot see the future (issue 31, item 1): programs that try to read the items still
to come, and would lift their reward with an offline plan if they could.

Each cheat is one ``find_future(seen, count, cap)``: given the sizes of the first K items of an
instance (the current one included), the sizes of the ``count`` items after them, or None. The
program around it (CHEAT) packs the first K - 1 items by best fit, asks find_future once per
instance, and on success packs the rest by first fit decreasing from the bins as they are,
steering each item into its planned bin; otherwise it stays best fit, the starter, exactly. It
finds its place (which instance, which item, the bins) in the harness's frame, and raises if it
cannot, so a harness change cannot turn these tests into ones that pass without trying.

So, through ``Evaluator(task).evaluate(code)``: a cheat that finds nothing scores exactly the
starter's reward; one that finds the future scores several points more (98.6 against 94.76 on
bin_packing_or before the driver). Every test asserts the starter's reward exactly, and, as its
positive control, that the same program does lift the reward where the items are in reach: run
with the harness of before the driver (scripts/bench/bin_packing_harness_before.py: the whole instance in
the program's process, data.npz in its directory). These tests fail on the code of before the
driver (9816832): there the cheats score 98.6.
"""

import ast
import json
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rewards import Evaluator
from rewards.sandbox import isolation, run_program
from tasks import load_task

ROOT = Path(__file__).resolve().parents[2]
BEFORE = ROOT / "scripts" / "bench" / "bin_packing_harness_before.py"
TASK = load_task("bin_packing_or")
K = 8

CHEAT = '''
import sys

import numpy as np

K = {k}
S = {{}}  # per instance: the sizes seen, the plan
GIVE_UP = False  # True: after one fruitless look, stop looking (for the slow ones)
HOPELESS = []


def match(values, seen, count):
    """The ``count`` numbers after the first place ``seen`` appears in ``values``, or None."""
    try:
        v = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        return None
    k = len(seen)
    if v.size < k + count:
        return None
    for c in np.flatnonzero(v[: v.size - k - count + 1] == seen[0]):
        if np.array_equal(v[c:c + k], seen):
            return v[c + k:c + k + count].tolist()
    return None


def search(value, seen, count, depth=2):
    """``value``, or what it holds (depth levels down), as a sequence that continues ``seen``."""
    if isinstance(value, np.ndarray) or (isinstance(value, (list, tuple)) and value
                                         and all(isinstance(x, (int, float)) for x in value[:4])):
        found = match(value, seen, count)
        if found is not None:
            return found
    if depth and isinstance(value, (list, tuple, dict)):
        for item in list(value.values() if isinstance(value, dict) else value)[:100]:
            found = search(item, seen, count, depth - 1)
            if found is not None:
                return found
    return None


def plan_ffd(rem, sizes, start):
    """First fit decreasing of items start, start + 1, ... into the bins as they are: {{item: bin}}."""
    rem, plan = rem.copy(), {{}}
    for j in sorted(range(len(sizes)), key=lambda j: -sizes[j]):
        b = int(np.flatnonzero(rem >= sizes[j])[0])
        rem[b] -= sizes[j]
        plan[start + j] = b
    return plan


def place():
    """The instance being packed, from the harness's frame (both harnesses name these locals so):
    its name, the item's number in it and the bins' remaining capacities (the real array)."""
    frame = sys._getframe(2)
    while frame is not None:
        names = frame.f_locals
        if "where" in names and "i" in names and isinstance(names.get("remaining"), np.ndarray):
            return str(names["where"]), int(names["i"]), names["remaining"]
        frame = frame.f_back
    raise RuntimeError("the cheat cannot find its place in the harness: fix the test, not the task")


def priority(item, bins):
    name, i, rem = place()
    s = S.setdefault(name, {{"seen": [], "plan": None}})
    s["seen"].append(float(item))
    if len(s["seen"]) != i + 1:
        raise RuntimeError(f"the cheat lost count in {{name}}: fix the test, not the task")
    if i == K - 1 and not HOPELESS:
        n, cap = len(rem), float(rem.max())  # an empty bin is always left: its room is the capacity
        future = find_future(list(s["seen"]), n - K, cap)
        if future is not None and len(future) == n - K:
            s["plan"] = plan_ffd(rem, [float(item)] + [float(x) for x in future], i)
        elif GIVE_UP:
            HOPELESS.append(name)
    b = s["plan"].get(i) if s["plan"] is not None else None
    if b is None or rem[b] < item:
        return -(bins - item)  # best fit: the starter
    return (np.flatnonzero(rem >= item) == b).astype(float)
'''

FROM_FILE = '''
def find_future(seen, count, cap):
    for path in ("data.npz", {data!r}):  # its own directory, then the task folder
        try:
            with np.load(path, allow_pickle=False) as data:
                for key in data.files:
                    found = match(data[key], seen, count)
                    if found is not None:
                        return found
        except Exception:
            pass
    return None
'''

FROM_FRAMES = '''
import sys

def find_future(seen, count, cap):
    frame = sys._getframe().f_back
    while frame is not None:
        for value in [*frame.f_locals.values(), *frame.f_globals.values()]:
            found = search(value, seen, count)
            if found is not None:
                return found
        frame = frame.f_back
    return None
'''

FROM_INSPECT = '''
import inspect

def find_future(seen, count, cap):
    for info in inspect.stack():
        for value in info.frame.f_locals.values():
            found = search(value, seen, count)
            if found is not None:
                return found
    return None
'''

FROM_GC = '''
import gc

def find_future(seen, count, cap):
    for obj in gc.get_objects():
        found = search(obj, seen, count, depth=1)
        if found is not None:
            return found
    return None
'''

# Raw memory: the sizes seen so far as the bytes of every usual array type, and what follows them.
SCAN = '''
import os

ENCODINGS = ("<f8", "<i8", "<i4", "<i2")


def plausible(values, cap):
    return bool(np.all(np.isfinite(values)) and np.all(values == np.round(values)) and np.all(values >= 1)
                and np.all(values <= cap))


def scan(read, regions, seen, count, cap):
    """Look through ``read(lo, hi)`` of each (lo, hi) region for ``seen`` followed by ``count`` item sizes."""
    patterns = [(np.asarray(seen).astype(dtype).tobytes(), np.dtype(dtype)) for dtype in ENCODINGS]
    for lo, hi in regions:
        try:
            blob = read(lo, hi)
        except OSError:
            continue
        for pattern, dtype in patterns:
            at = blob.find(pattern)
            while at >= 0:
                start = at + len(pattern)
                if start + count * dtype.itemsize <= len(blob):
                    follow = np.frombuffer(blob, dtype=dtype, count=count, offset=start).astype(float)
                    if plausible(follow, cap):
                        return follow.tolist(), lo + at, pattern
                at = blob.find(pattern, at + 1)
    return None


def writable_regions(pid):
    regions = []
    with open(f"/proc/{{pid}}/maps") as fh:
        for line in fh:
            span, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in span.split("-"))
            if perms.startswith("rw") and hi - lo <= globals().get("REGION_CAP", 1 << 28):
                regions.append((lo, hi))
    return regions


def every_pid():
    return sorted({{int(p) for p in os.listdir("/proc") if p.isdigit()}})
'''

FROM_PROC_MEM = SCAN + '''
PIDS = {pids!r}
GIVE_UP = True


def find_future(seen, count, cap):
    for pid in (PIDS or ["self", *every_pid()]):  # every process it may open, itself first
        try:
            regions = writable_regions(pid)
            fd = os.open(f"/proc/{{pid}}/mem", os.O_RDONLY)
        except OSError:
            continue
        try:
            found = scan(lambda lo, hi: os.pread(fd, hi - lo, lo), regions, seen, count, cap)
        finally:
            os.close(fd)
        if found is not None:
            return found[0]
    return None
'''

FROM_PTRACE = SCAN + '''
import ctypes
import json

PTRACE_PEEKDATA, PTRACE_ATTACH, PTRACE_DETACH, WALL = 2, 16, 17, 0x40000000


def host_pid(pid):
    """The /proc entry of ``pid`` of this PID namespace (/proc is the host's, whose numbers differ)."""
    mine = os.readlink("/proc/self/ns/pid")
    for entry in every_pid():
        try:
            with open(f"/proc/{{entry}}/status") as fh:
                nspid = next(line.split()[1:] for line in fh if line.startswith("NSpid:"))
            if int(nspid[-1]) == pid and os.readlink(f"/proc/{{entry}}/ns/pid") == mine:
                return entry
        except (OSError, StopIteration, ValueError):
            pass
    return None


GIVE_UP = True


def hunt(seen, count, cap):
    """In a forked helper: PTRACE_ATTACH to every pid there is a chance of (its parent first, then
    those /proc lists and the low ones of this PID namespace); read each tracee's memory as its
    tracer (in bulk, then the first word of a find again with PTRACE_PEEKDATA)."""
    if os.getppid() != 2:  # not forked by PID 2 of a sandbox's PID namespace: never attach to anything
        raise RuntimeError("the ptrace cheat attaches to every process: it runs only inside a sandbox")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    others = sorted((set(every_pid()) | set(range(1, 65))) - {{os.getpid(), os.getppid()}})
    for pid in [os.getppid(), *others]:
        if libc.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
            continue
        try:
            os.waitpid(pid, WALL)
            entry = host_pid(pid)
            if entry is None:
                continue
            fd = os.open(f"/proc/{{entry}}/mem", os.O_RDONLY)
            try:
                found = scan(lambda lo, hi: os.pread(fd, hi - lo, lo), writable_regions(entry), seen, count, cap)
            finally:
                os.close(fd)
            if found is not None:
                word = libc.ptrace(PTRACE_PEEKDATA, pid, ctypes.c_void_p(found[1]), None)
                if word.to_bytes(8, "little", signed=True) == found[2][:8]:
                    return found[0]
        except OSError:
            pass
        finally:
            libc.ptrace(PTRACE_DETACH, pid, None, None)
    return None


def find_future(seen, count, cap):
    r, w = os.pipe()
    helper = os.fork()
    if helper == 0:
        os.close(r)
        try:
            os.write(w, json.dumps(hunt(seen, count, cap)).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 20):
        data += chunk
    os.close(r)
    os.waitpid(helper, 0)
    return json.loads(data) if data else None
'''


def cheat(find_future: str, **fill) -> str:
    code = CHEAT.format(k=K) + textwrap.dedent(find_future).format(**fill)
    ast.parse(code)
    return code


@pytest.fixture(scope="module")
def starter_reward():
    result = Evaluator(TASK, workers=1).evaluate(TASK.initial_program)
    assert result.valid and result.reward > 90, result.feedback
    return result.reward


def before_driver(code: str) -> float:
    """The reward ``code`` gets with the harness of before the driver: data.npz and the whole instance in reach."""
    out = run_program(code, "helix_online_binpack", TASK.timeout_s, TASK.memory_mb, harness=BEFORE.read_text(),
                      files=(TASK.folder / "data.npz",))
    assert out.status == "ok", out.error
    verdict = TASK.verify(out.value)
    assert verdict.valid, verdict.feedback
    return verdict.reward


CHEATS = {
    "data_file": cheat(FROM_FILE, data=str(TASK.folder / "data.npz")),
    "frames_f_back": cheat(FROM_FRAMES),
    "frames_inspect_stack": cheat(FROM_INSPECT),
    "gc_get_objects": cheat(FROM_GC),
}


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_a_program_cannot_read_the_items_to_come(name, starter_reward):
    result = Evaluator(TASK, workers=1).evaluate(CHEATS[name])
    assert result.valid, result.feedback
    assert result.reward == starter_reward, f"{name}: {result.reward} against best fit's {starter_reward}"
    assert before_driver(CHEATS[name]) > starter_reward + 3  # the control: with the items in reach, it works


@pytest.mark.slow  # end to end, 15-30 s: kept out of the -m 'not slow' tier
def test_a_program_cannot_read_the_drivers_memory(starter_reward):
    """It opens /proc/<pid>/mem of every process it can (itself included) and looks for the sizes seen so
    far, as float64, int64, int32 or int16, followed by plausible sizes. The driver lives in this very
    process, whose memory does hold the items (checked here with the same scanner); the sandboxed
    program's user namespace keeps the kernel from opening it."""
    with np.load(TASK.folder / "data.npz", allow_pickle=False) as data:  # read here, as 9816832 stored it too
        items = data["items_OR2"]
        sizes = (np.split(items, np.cumsum(data["lengths_OR2"])[:-1]) if "lengths_OR2" in data.files else items)[3].tolist()
    # The control reads its own regions whatever their size: a long-lived pytest(-xdist) worker's heap passes the
    # cheat's 256 MB cap (the sandboxed cheat keeps it; its memory is small).
    own = {"REGION_CAP": 1 << 40}
    exec(cheat(FROM_PROC_MEM, pids=["self"]), own)  # our own test code, run here on purpose
    found = own["find_future"]([float(x) for x in sizes[:K]], len(sizes) - K, 150.0)
    assert found == [float(x) for x in sizes[K:]], "the scanner cannot find the items in the evaluator's memory"
    code = cheat(FROM_PROC_MEM, pids=[])
    result = Evaluator(TASK, workers=1).evaluate(code)
    assert result.valid and result.reward == starter_reward, (result.reward, starter_reward, result.feedback)
    assert before_driver(code) > starter_reward + 3


@pytest.mark.slow
def test_a_program_cannot_ptrace_the_driver(starter_reward):
    """A helper it forks PTRACE_ATTACHes to every pid it can name and reads the tracee's memory; the
    driver has no pid in the program's PID namespace and another user namespace, so nothing is found."""
    if not isolation().processes:
        pytest.skip("no PID or user namespace here: a program shares the evaluator's uid (docs/sandbox.md)")
    code = cheat(FROM_PTRACE)
    result = Evaluator(TASK, workers=1).evaluate(code)
    assert result.valid and result.reward == starter_reward, (result.reward, starter_reward, result.feedback)
    assert before_driver(code) > starter_reward + 3  # attached to its own parent, it finds the items there


def test_the_items_are_not_in_the_sandbox_and_arrive_one_round_at_a_time():
    """What the program's side receives: the next item of every instance, one round at a time, the
    first round naming each instance's bin count and capacity, and nothing else; the task copies no
    file into the sandbox."""
    assert TASK.data_files == ()
    probe = ("import json, os\nSEEN = []\n\n"
             "def helix_online_step(request):\n    SEEN.append(request)\n"
             "    if len(SEEN) == 3:\n        print(json.dumps([SEEN, sorted(os.listdir('.'))]))\n"
             "        raise RuntimeError('seen enough')\n"
             "    return [len(SEEN)] * len(request['items'])  # a new bin each round: always room\n")
    out = run_program(probe, TASK.run_entry, 30, TASK.memory_mb, driver=TASK.driver)
    assert out.status == "error" and out.error == "RuntimeError: seen enough", out.error
    seen, listing = json.loads(out.output_tail)
    instances = [(name, k, sizes.tolist()) for name, sets in TASK.driver.sets.items() for k, sizes in enumerate(sets)]
    assert seen[0]["open"] == [{"name": f"{name} instance {k}", "bins": len(sizes), "capacity": 150}
                               for name, k, sizes in instances]
    for i, request in enumerate(seen):
        assert set(request) == ({"open", "items"} if i == 0 else {"items"})
        assert request["items"] == [[j, sizes[i]] for j, (_, _, sizes) in enumerate(instances)]  # item i, nothing beyond
    assert listing == ["program.py"]
    assert os.path.getsize(TASK.folder / "data.npz") > 0  # the verifier's copy stays in the task folder
