"""Trusted check of 32 circles packed in the unit square (paper eq. 17-18); the checks are in
tasks/families/circles/verify.py, shared with the other packing tasks."""

from pathlib import Path

from tasks.base import ExactCheck, Verdict
from tasks.families.circles.exact import check_packing
from tasks.families.circles.verify import TOL, best_known, usage, verify_packing  # noqa: F401 - TOL/USAGE for tests

N = 32
BEST_KNOWN = best_known(Path(__file__).parent)
USAGE = usage(N)


def verify(returned) -> Verdict:
    return verify_packing(returned, N, "square", BEST_KNOWN)


def check_exact(returned) -> ExactCheck:
    return check_packing(returned, N, "square")
