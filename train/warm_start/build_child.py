"""The warm start's build process (started by train.warm_start.isolated.build_in_child): reads its inputs
on stdin, builds, and writes back on the pipe it was given either nothing or the exception it raised."""

from __future__ import annotations

import os
import pickle
import signal
import sys
import traceback
from pathlib import Path


def main(result_fd: int) -> int:
    import ctypes

    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: a killed run takes its build along
    except (OSError, AttributeError):  # not Linux: the child may outlive a parent killed with -9
        pass
    inputs, out, progress = pickle.load(sys.stdin.buffer)
    from train.learner.memory import releasing_free_memory
    from train.warm_start.build import build

    with os.fdopen(result_fd, "wb") as result:
        try:
            with releasing_free_memory(inputs.release_memory_every_s):  # as the run's own process does
                build(inputs, Path(out), progress)
        except BaseException as e:  # noqa: BLE001 - everything goes back to the parent, Ctrl-C included
            text = "".join(traceback.format_exception(e))
            try:
                reply = pickle.dumps((e, text))
            except Exception:  # an exception that does not pickle: its type and message as a RuntimeError
                reply = pickle.dumps((RuntimeError(f"{type(e).__name__}: {e}"), text))
            result.write(reply)
            return 1
        result.write(pickle.dumps(None))
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
