"""Inspect a HELIX archive, read-only: the best solutions, a lineage with its diffs, an epoch's Pareto
front, what the children came to.

    .venv/bin/python scripts/inspect_archive.py runs/latest top -k 10
    .venv/bin/python scripts/inspect_archive.py runs/latest lineage 42

The commands are train/runs/inspect_archive.py (``--help`` for all of them).
"""

import os
import sys

from train.runs.inspect_archive import main

if __name__ == "__main__":
    try:
        code = main()
        sys.stdout.flush()  # a piped stdout is block-buffered: the write that finds the pipe closed is here
    except BrokenPipeError:  # `... | head` stopped reading: end quietly, as other command-line tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit flush cannot fail again
        code = 1
    sys.exit(code)
