"""Score one program file with HELIX's own task verifier inside HELIX's sandbox: what a peer's evaluator
wrapper calls (as a subprocess of HELIX's Python), so no peer ever runs a generated program itself and no
peer's number is taken on trust.

    .venv/bin/python -m benchlib.peers.score TASK PROGRAM_FILE --log EVALS.jsonl [--timeout-s 20]

Prints one JSON object: reward, valid, status, feedback, eval_time_s. The same record (without the
feedback, with the program's hash and the time) is appended to ``--log``, the bench's own account of
every evaluation a system made: the table is computed from it, not from anything the peer reports.
Each program's text is kept once under ``<log folder>/programs/<hash>.py`` for inspection.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path


def program_hash(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8")).hexdigest()[:16]


def append_record(log: Path, record: dict) -> None:
    """One line, one write, O_APPEND: evaluations running at once (a peer's worker pool) never interleave."""
    line = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def score(task_name: str, code: str, timeout_s: float | None) -> dict:
    from rewards import Evaluator
    from tasks import load_task, own_timeout_s

    task = load_task(task_name)
    limit = timeout_s if timeout_s is not None else own_timeout_s(task_name, "cpu")
    evaluator = Evaluator(task, workers=1, timeout_s=limit)
    try:
        result = evaluator.evaluate(code)
    finally:
        evaluator.close()
    return {"reward": float(result.reward), "valid": bool(result.valid), "status": result.status,
            "feedback": result.feedback, "eval_time_s": float(result.eval_time_s),
            "starter": code == task.initial_program}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchlib.peers.score", description=__doc__.split("\n\n")[0])
    parser.add_argument("task")
    parser.add_argument("program", type=Path)
    parser.add_argument("--log", type=Path, help="append the record here (JSON lines)")
    parser.add_argument("--timeout-s", type=float, default=None, help="default: the task's CPU-scale limit")
    args = parser.parse_args(argv)
    try:
        code = args.program.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        print(f"score: cannot read {args.program}: {err}", file=sys.stderr)
        return 2
    out = score(args.task, code, args.timeout_s)
    if args.log is not None:
        digest = program_hash(code)
        keep = args.log.parent / "programs" / f"{digest}.py"
        keep.parent.mkdir(parents=True, exist_ok=True)
        if not keep.exists():
            keep.write_text(code, encoding="utf-8")
        append_record(args.log, {k: v for k, v in out.items() if k != "feedback"} | {"hash": digest, "t": time.time()})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
