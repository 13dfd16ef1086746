"""Fine-tune the warm start in a child process, so the run that asked for it starts from a clean heap.

Why: a fine-tune leaves ~0.6 GB in the process that ran it, which neither ``gc.collect()`` nor
``malloc_trim`` returns (oneDNN's cache of per-shape bf16 kernels and the heap's fragments). In the run's
own process it sat under every later phase, and the first quickstart on a machine peaked at 4.4 GB in
its GRPO step where a run with the warm start cached peaks at 3.8 GB (BENCHMARKS.md "Memory"). A child
returns all of it when it exits. It costs the child's imports, a few seconds in a build of minutes.

The data is made in the caller's process with the run's evaluator and prompt builder (train.warm_start.build);
the child gets it with the inputs and does the rest: load the base model, the learner's supervised step
(train.learner.supervised), save. It is a fresh interpreter (``python -m train.warm_start.build_child``), not a multiprocessing spawn:
spawn re-imports the caller's main script, and a script that calls ``helix.run()`` without an
``if __name__ == "__main__"`` guard would build again inside the child and wait forever on the build's
own lock. The child reads its inputs (pickled) on stdin, inherits the terminal (its progress bar and
lines print as before), dies with its parent, and writes back on a pipe either nothing or the exception
it raised, which is raised again here with the child's traceback as a note: a failed build reads as it
did in-process (the same exception type and message: ``helix: ...`` on one line)."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

from train.warm_start.config import WarmStartInputs

ROOT = Path(__file__).resolve().parents[2]  # the repository: where the child imports train from


class WarmStartFailed(RuntimeError):
    """The build's process died without saying why (a signal: the OOM killer's, or a crash in C)."""


def build_in_child(inputs: WarmStartInputs, examples: list, stats: dict, out: Path, progress: bool = True) -> Path:
    """``train.warm_start.build_child.fine_tune_and_save`` on ``examples`` (build.Example) in a child interpreter;
    returns ``out``, or raises what the child raised."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    # oneDNN keeps a compiled kernel for every matmul shape it meets (1,024 by default), and each answer length
    # is a new shape: ~0.35 GB by the fine-tune's end on the quickstart. 64 holds a step's, and the weights are
    # bitwise the same. Only the build's process gets it; the run's own keeps the default.
    env.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")
    read_fd, write_fd = os.pipe()
    child = subprocess.Popen([sys.executable, "-m", "train.warm_start.build_child", str(write_fd)],
                             stdin=subprocess.PIPE, pass_fds=(write_fd,), env=env)
    os.close(write_fd)
    try:
        try:
            child.stdin.write(pickle.dumps((inputs, examples, stats, str(out), progress)))
            child.stdin.close()
        except BrokenPipeError:  # it died before reading: the exit code below says so
            pass
        with os.fdopen(read_fd, "rb") as pipe:
            reply = pipe.read()
        code = child.wait()
    finally:
        if child.poll() is None:  # we were interrupted: take the child down with us
            child.terminate()
            child.wait()
    if not reply:  # it died without a word: a signal (the OOM killer's -9) or a crash in C
        why = " (SIGKILL: out of memory?)" if code == -signal.SIGKILL else ""
        raise WarmStartFailed(f"warm start: the build process ended with exit code {code}{why}; nothing was "
                              "cached, run again to rebuild")
    result = pickle.loads(reply)
    if result is not None:
        error, text = result
        error.add_note(f"(raised in the warm start's build process)\n{text.rstrip()}")
        raise error
    return out
