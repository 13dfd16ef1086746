"""Trusted check of the search form of circle_packing_32: the returned packing of 32 circles in the unit
square is scored from scratch, exactly as circle_packing_32's (tasks/families/circles/verify.py); only the
usage line of a rejection names this task's entry function."""

from pathlib import Path

from tasks.base import ExactCheck, Verdict
from tasks.families.circles.exact import check_packing
from tasks.families.circles.verify import TOL, best_known, verify_packing  # noqa: F401 - TOL for tests

N = 32
BEST_KNOWN = best_known(Path(__file__).parent)
USAGE = (f"search_packing(construction, budget_s, seed) must return the packing, (centers, radii) with centers "
         f"of shape ({N}, 2) and radii of shape ({N},)")


def verify(returned) -> Verdict:
    return verify_packing(returned, N, "square", BEST_KNOWN, USAGE)


def check_exact(returned) -> ExactCheck:
    return check_packing(returned, N, "square")
