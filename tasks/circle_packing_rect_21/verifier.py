"""Trusted check of 21 circles packed in a rectangle of perimeter 4 (AlphaEvolve B.13, BES G.2);
the checks are in tasks/families/rect_packing/verify.py."""

from pathlib import Path

from tasks.base import ExactCheck, Verdict
from tasks.families.rect_packing.exact import check_rect_packing
from tasks.families.rect_packing.verify import TOL, best_known, usage, verify_rect_packing  # noqa: F401 - TOL/USAGE for tests

N = 21
BEST_KNOWN = best_known(Path(__file__).parent)
USAGE = usage(N)


def verify(returned) -> Verdict:
    return verify_rect_packing(returned, N, BEST_KNOWN)


def check_exact(returned) -> ExactCheck:
    return check_rect_packing(returned, N)
