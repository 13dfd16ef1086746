"""Trusted check of 26 circles packed in the unit disk |c| <= 1 (paper eq. 17 and 19); the checks
are in tasks/families/circles/verify.py, shared with the other packing tasks."""

from pathlib import Path

from tasks.base import ExactCheck, Verdict
from tasks.families.circles.exact import check_packing
from tasks.families.circles.verify import best_known, verify_packing

N = 26
BEST_KNOWN = best_known(Path(__file__).parent)


def verify(returned) -> Verdict:
    return verify_packing(returned, N, "disk", BEST_KNOWN)


def check_exact(returned) -> ExactCheck:
    return check_packing(returned, N, "disk")
