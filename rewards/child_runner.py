"""Runs inside the sandboxed child: import the candidate, call its entry function, write JSON.

Invoked as ``python -I child_runner.py PROGRAM ENTRY RESULT_PATH``. Only JSON leaves this
process; the parent decides the reward from the returned value alone.
"""

import json
import math
import sys
import traceback


def to_jsonable(value, depth=0):
    if depth > 20:
        raise ValueError("result nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # "nan"/"inf" arrive as strings: verifier rejects them
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return to_jsonable(value.tolist(), depth + 1)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, depth + 1) for v in value]
    raise TypeError(f"cannot return a value of type {type(value).__name__}")


def main() -> None:
    program, entry, result_path = sys.argv[1:4]
    out = {}
    try:
        namespace = {"__name__": "candidate", "__file__": program}
        with open(program) as fh:
            code = compile(fh.read(), "program.py", "exec")
        exec(code, namespace)  # noqa: S102 - this process is the sandbox
        fn = namespace.get(entry)
        if not callable(fn):
            raise NameError(f"the program does not define the required function {entry}()")
        out = {"ok": True, "value": to_jsonable(fn())}
    except BaseException as exc:  # noqa: BLE001 - report everything, SystemExit included
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "program.py"]
        tb = "".join(traceback.format_list(frames[-5:]))
        out = {"ok": False, "error": type(exc).__name__, "message": str(exc)[:1000], "traceback": tb[-2000:]}
    with open(result_path, "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()
