"""The environment of the processes tests start."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a Python process a test starts (a worker, a throwaway evaluator): this
    checkout first on its PYTHONPATH, so it imports the code under test rather than another install's,
    and the test helpers (tests.helpers), with no sys.path edit of its own."""
    path = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(path)), **extra}
