"""Runs inside the sandboxed child: import the candidate, call its entry function, write JSON.

Invoked by ``rewards.sandbox`` as ``python child_runner.py PROGRAM ENTRY RESULT_PATH MAX_BYTES``.
Only JSON leaves this process (never pickle), and only as an artefact: the parent recomputes
the reward from it, so whatever the program prints, patches or forges here cannot raise it.
"""

import builtins
import importlib.util
import json
import os
import sys
import traceback

# Taken before the program runs, so a program that patches builtins.open or json.dumps for its
# own purposes does not also break the reporting of its result.
_open, _dumps, _isinstance = builtins.open, json.dumps, builtins.isinstance
MAX_DEPTH = 32


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


def user_traceback(exc: BaseException, program: str) -> str:
    """Only the frames in the candidate program, shown as program.py: the runner is noise to the LLM."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == program]
    lines = [f'  File "program.py", line {f.lineno}, in {f.name}\n' + (f"    {f.line.strip()}\n" if f.line else "")
             for f in frames[-6:]]
    return "".join(lines)[-1500:]


def run(program: str, entry: str) -> dict:
    try:
        spec = importlib.util.spec_from_file_location("program", program)
        module = importlib.util.module_from_spec(spec)
        sys.modules["program"] = module  # so the program's own classes/functions resolve as a module
        spec.loader.exec_module(module)
        fn = getattr(module, entry, None)
        if not callable(fn):
            names = sorted(n for n in vars(module) if not n.startswith("_") and callable(vars(module)[n]))
            raise NameError(f"the program does not define the required function {entry}() "
                            f"(it defines: {', '.join(names[:12]) or 'no functions'})")
        returned = fn()
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are program errors too
        return {"ok": False, "kind": "error", "error": type(exc).__name__, "message": str(exc)[:800],
                "traceback": user_traceback(exc, program)}
    try:
        return {"ok": True, "value": to_jsonable(returned)}
    except (BadOutput, RecursionError, ValueError, TypeError) as exc:
        return {"ok": False, "kind": "bad_output", "error": type(exc).__name__, "message": str(exc)[:800]}


def main() -> None:
    program, entry, result_path, max_bytes = sys.argv[1:5]
    sys.argv = [program]  # the program sees a plain argv
    if sys.path and sys.path[0] == __file__.rsplit("/", 1)[0]:
        del sys.path[0]  # the rewards/ folder is not the program's business
    out = run(program, entry)
    try:
        text = _dumps(out, allow_nan=True)
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. an int with more than 4300 digits
        text = _dumps({"ok": False, "kind": "bad_output", "error": type(exc).__name__, "message": str(exc)[:800]})
    if len(text) > int(max_bytes):
        size = len(text) / 2**20
        text = _dumps({"ok": False, "kind": "bad_output", "error": "ResultTooLarge",
                       "message": f"the returned value is {size:.1f} MB as JSON, over the {int(max_bytes) / 2**20:g} MB limit"})
    with _open(result_path, "w", encoding="utf-8") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001 - the program may have replaced or closed stdout
        pass
    # Skip interpreter teardown: atexit hooks, __del__ methods and threads the program left behind
    # would otherwise run after the result is written (and could hang until the time limit).
    os._exit(0)
