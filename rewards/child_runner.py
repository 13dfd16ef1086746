"""Runs inside the sandboxed child: import the candidate, call its entry function, write JSON.

Invoked as ``python child_runner.py PROGRAM ENTRY RESULT_FD MAX_BYTES CHANNEL SEARCH [HARNESS]`` (by the
launcher's exec), or ``main([PROGRAM, ...])`` in a fork of the template process that ``python
child_runner.py --zygote SOCKET_FD`` becomes (``rewards.zygote_server``),
RESULT_FD an open file the sandbox reads back (the program's own directory is not where it lies).
A task's HARNESS (trusted code, see tasks/base.py) is read before the program runs and executed
after it in the same module, so its definitions win; ENTRY may then be one of its functions.
Only JSON leaves this process (never pickle), and only as an artefact: the parent recomputes
the reward from it, so whatever the program prints, patches or forges here cannot raise it.

CHANNEL is ``-``, or ``R,W`` for a driven task (task.yaml ``driver``): two inherited pipe ends to
the trusted driver in the evaluating process (``rewards.channel``). ENTRY is then called once per
request, ``ENTRY(request) -> reply``, until the driver closes R; the driver, not this process,
holds the data and builds the artefact, so nothing here can see what it has not been sent yet.
Frames both ways are a 4-byte little-endian length and UTF-8 JSON (the same as rewards.channel's).

SEARCH is ``-``, or ``IN,REPORT`` for a search-form task (task.yaml ``form: search``,
rewards/search_channel.py): IN a sealed memfd holding the call's arguments as JSON, read and closed
here before the program runs; REPORT a pipe the program's ``report(construction)`` writes frames to.
ENTRY is then called once, ``ENTRY(construction, budget_s, seed)``. ``report`` is put into the
program's module as a global before its first line runs; a program that defines its own ``report``
replaces it, and then nothing it reports reaches the sandbox.
"""

import builtins
import json
import linecache
import os
import signal
import struct
import sys
import traceback
import types

# Taken before the program runs, so a program that patches builtins.open or json.dumps for its
# own purposes does not also break the reporting of its result.
_open, _dumps, _isinstance, _exit = builtins.open, json.dumps, builtins.isinstance, os._exit
_pwrite, _ftruncate = os.pwrite, os.ftruncate
_write, _loads, _frame = os.write, json.loads, struct.Struct("<I")
MAX_DEPTH = 32
SHOWN_NAME = "program.py"


class BadOutput(Exception):
    """The entry function returned something that cannot be turned into JSON."""


def to_jsonable(value, depth=0):
    """numpy arrays -> nested lists, numpy scalars -> int/float, tuples -> lists; NaN/inf stay floats."""
    if depth > MAX_DEPTH:
        raise BadOutput(f"the result is nested more than {MAX_DEPTH} levels deep (or contains itself)")
    if value is None or _isinstance(value, (bool, int, float, str)):
        return value
    np = sys.modules.get("numpy")
    if np is not None and _isinstance(value, (np.ndarray, np.generic)):
        if value.dtype.kind not in "biuf":
            raise BadOutput(f"numpy array of dtype {value.dtype} is not numeric")
        return to_jsonable(value.tolist(), depth + 1)
    if _isinstance(value, dict):
        return {str(k): to_jsonable(v, depth + 1) for k, v in value.items()}
    if _isinstance(value, (list, tuple)):
        return [to_jsonable(v, depth + 1) for v in value]
    if callable(getattr(value, "tolist", None)):  # other array types
        return to_jsonable(value.tolist(), depth + 1)
    raise BadOutput(f"cannot return a value of type {type(value).__name__}; return numbers, lists, tuples, "
                    "dicts or numpy arrays")


def _text(exc: BaseException) -> str:
    try:
        return str(exc)[:800]
    except BaseException:
        return "(the exception's message could not be turned into text)"


def user_traceback(exc: BaseException) -> str:
    """Only the frames in the candidate program: the runner is noise to the LLM."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == SHOWN_NAME]
    lines = [f'  File "program.py", line {f.lineno}, in {f.name}\n' + (f"    {f.line.strip()}\n" if f.line else "")
             for f in frames[-6:]]
    return "".join(lines)[-1500:]


def _serve(fn, channel: tuple[int, int]) -> None:
    """Answer the driver's requests with ``fn(request)``, one at a time, until it closes the channel."""
    requests = _open(channel[0], "rb", buffering=1 << 16, closefd=False)
    while True:
        head = requests.read(4)
        if len(head) < 4:  # the driver is done (or gone): nothing more is coming
            return None
        request = _loads(requests.read(_frame.unpack(head)[0]).decode("utf-8"))
        data = _dumps(to_jsonable(fn(request)), allow_nan=True).encode("utf-8", "surrogatepass")
        data = _frame.pack(len(data)) + data
        while data:
            data = data[_write(channel[1], data):]


def reporter(fd: int, max_bytes: int):
    """The ``report`` a search-form program gets: each call writes one frame, which replaces the previous
    report. It raises in the program for a value that cannot be handed on (not JSON data, NaN or infinity,
    over ``max_bytes``), so a program learns of its mistake where it made it, not at the time limit."""
    broken = []

    def report(construction):
        """Hand the sandbox the best construction so far: if the time limit stops the program, the last
        one reported is verified and scored (a normal return counts over any report)."""
        if broken:
            raise RuntimeError("report(): an earlier report was cut off half-written; nothing more can be reported")
        try:
            data = _dumps(to_jsonable(construction), allow_nan=False).encode("utf-8", "surrogatepass")
        except BadOutput as exc:
            raise TypeError(f"report(): {exc}") from None
        except ValueError as exc:
            why = "it holds NaN or infinity, which JSON has not" if "Out of range float" in str(exc) else str(exc)[:200]
            raise ValueError(f"report(): the construction cannot be handed on: {why}") from None
        if len(data) > max_bytes:
            raise ValueError(f"report(): the construction is {len(data):,} bytes as JSON, over the {max_bytes:,} "
                             "bytes a construction may hold")
        frame = memoryview(_frame.pack(len(data)) + data)
        try:
            while frame:
                frame = frame[_write(fd, frame):]
        except BaseException:  # a frame cut off here would garble every later one: stop reporting
            broken.append(True)
            raise

    return report


def read_search_input(fd: int) -> dict:
    """The call's arguments from the sealed memfd (rewards/search_channel.py), which is then closed."""
    size, data = os.fstat(fd).st_size, b""
    while len(data) < size:
        chunk = os.pread(fd, size - len(data), len(data))
        if not chunk:
            break
        data += chunk
    os.close(fd)
    return _loads(data.decode("utf-8"))


def run(program: str, entry: str, harness: str | None = None, channel: tuple[int, int] | None = None,
        search: dict | None = None, report=None) -> dict:
    """``search``: the arguments of a search-form call (construction, budget_s, seed), and ``report`` the
    function the program finds as a global of that name."""
    phase = "load"
    try:
        with _open(program, encoding="utf-8") as fh:
            source = fh.read()
        harness_source = None
        if harness is not None:
            with _open(harness, encoding="utf-8") as fh:
                harness_source = fh.read()
        # Compiled as plain "program.py" so tracebacks and warnings carry no temp paths.
        linecache.cache[SHOWN_NAME] = (len(source), None, source.splitlines(True), SHOWN_NAME)
        module = types.ModuleType("program")
        module.__file__ = program
        sys.modules["program"] = module  # so the program's own classes/functions resolve as a module
        if report is not None:  # before its first line, like a builtin: a definition of its own replaces it
            module.report = report
        exec(compile(source, SHOWN_NAME, "exec"), module.__dict__)
        if harness_source is not None:  # its own file name: its frames stay out of the program's traceback
            exec(compile(harness_source, "harness.py", "exec"), module.__dict__)
        fn = getattr(module, entry, None)
        if not callable(fn):
            names = sorted(n for n in vars(module) if not n.startswith("_") and callable(vars(module)[n]))
            raise NameError(f"the program does not define the required function {entry}() "
                            f"(it defines: {', '.join(names[:12]) or 'no functions'})")
        phase = "call"
        if search is not None:
            returned = fn(search["construction"], search["budget_s"], search["seed"])
        else:
            returned = fn() if channel is None else _serve(fn, channel)
    except BadOutput as exc:  # a reply that is not JSON (driven tasks)
        return {"ok": False, "kind": "bad_output", "error": "BadOutput", "message": _text(exc)}
    except BaseException as exc:
        return {"ok": False, "kind": "error", "phase": phase, "error": type(exc).__name__,
                "message": _text(exc), "traceback": user_traceback(exc)}
    try:
        return {"ok": True, "value": to_jsonable(returned)}
    except Exception as exc:
        return {"ok": False, "kind": "bad_output", "error": type(exc).__name__, "message": _text(exc)}


def _exit_like(status: int) -> None:
    """End this process the way a child with wait ``status`` ended: same code, or same signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig != signal.SIGKILL:  # SIGKILL's action cannot be set (nor changed from the default)
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        _exit(128 + sig)
    _exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def enter_pid_namespace(private: tuple[int, ...] = ()) -> None:
    """Where the sandbox unshared a PID namespace for our children, run the program inside it.

    This process stays outside; its child is the namespace's init (PID 1) and only reaps; the
    program runs as PID 2, with ordinary signal semantics (init ignores its own namespace's
    signals). Inside, no pid names a process outside, so the program cannot signal the trainer,
    and when it ends, init exits and the kernel kills whatever it left behind. The program's
    exact wait status travels back over a pipe, so the sandbox sees the same exit code or signal.
    ``private``: descriptors only the program uses (the driver's channel); the two processes that
    stay behind close them, so the driver reads end-of-file as soon as the program is gone.
    """
    try:
        if os.readlink("/proc/self/ns/pid_for_children") == os.readlink("/proc/self/ns/pid"):
            return  # not unshared (no root): run right here
    except FileNotFoundError:
        pass  # what an unshared namespace with no process in it yet reads as
    except OSError:
        return
    read_end, write_end = os.pipe()
    init = os.fork()
    if init:  # outside: wait for init, then mirror the program's status
        os.close(write_end)
        _close(private)
        _, init_status = os.waitpid(init, 0)
        data = os.read(read_end, 32)
        _exit_like(int(data) if data.strip().isdigit() else init_status)
    os.close(read_end)
    try:  # init dies with the runner (itself killed when its evaluator dies), and takes the program with it
        import ctypes

        ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass
    program = os.fork()
    if program == 0:  # PID 2: carry on as the runner
        os.close(write_end)
        return
    _close(private)
    while True:  # init: reap every orphan until the program itself ends
        pid, status = os.waitpid(-1, 0)
        if pid == program:
            break
    os.write(write_end, str(status).encode())
    _exit(0)


def _close(fds: tuple[int, ...]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def main(argv: list[str] | None = None) -> None:
    """``argv``: PROGRAM ENTRY RESULT_FD MAX_BYTES CHANNEL SEARCH [HARNESS] (default: this process's own)."""
    argv = sys.argv[1:] if argv is None else argv
    program, entry, result_fd, max_bytes, channel, search_fds = argv[:6]
    channel = None if channel == "-" else tuple(int(fd) for fd in channel.split(","))
    search_fds = None if search_fds == "-" else tuple(int(fd) for fd in search_fds.split(","))
    enter_pid_namespace(channel or search_fds or ())
    result_fd = int(result_fd)
    for fd in (result_fd, *(channel or ()), *(search_fds or ())):
        os.set_inheritable(fd, False)  # the program's own subprocesses do not get them
    search = report = None
    if search_fds is not None:  # read now, before any of the program's code: it never sees the descriptor
        search = read_search_input(search_fds[0])
        report = reporter(search_fds[1], int(search["max_report_bytes"]))
    harness = argv[6] if len(argv) > 6 else None
    sys.argv = [program]  # the program sees a plain argv
    if sys.path and sys.path[0] == __file__.rsplit("/", 1)[0]:
        del sys.path[0]  # the rewards/ folder is not the program's business
    # Its own folder instead: "spawn" multiprocessing workers unpickle its functions as program.<name>.
    sys.path.insert(0, os.path.dirname(os.path.abspath(program)))
    out = run(program, entry, harness, channel, search, report)
    try:
        text = _dumps(out, allow_nan=True)
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. an int with more than 4300 digits
        text = _dumps({"ok": False, "kind": "bad_output", "error": type(exc).__name__, "message": _text(exc)})
    if len(text) > int(max_bytes):
        size = len(text) / 2**20
        text = _dumps({"ok": False, "kind": "bad_output", "error": "ResultTooLarge",
                       "message": f"the returned value is {size:.1f} MB as JSON, over the {int(max_bytes) / 2**20:g} MB limit"})
    data = text.encode("utf-8", "surrogatepass")
    _ftruncate(result_fd, 0)  # whatever the program wrote there first is gone
    done = 0
    while done < len(data):
        done += _pwrite(result_fd, data[done:], done)


if __name__ == "__main__" and sys.argv[1:2] == ["--zygote"]:  # the template process (rewards.zygote)
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, _here)
    import zygote_server

    sys.path[:] = [p for p in sys.path if p != _here]  # as in a runner started with -P
    zygote_server.serve(int(sys.argv[2]), main)
    _exit(0)
if __name__ == "__main__":
    main()
    try:
        sys.stdout.flush()
    except BaseException:
        pass
    # Skip interpreter teardown: atexit hooks, __del__ methods and threads the program left behind
    # would otherwise run after the result is written (and could hang until the time limit).
    _exit(0)
