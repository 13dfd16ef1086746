"""Trusted check of the search form of spherical_code_30: the returned 30 points on S^2 are scored
from scratch, exactly as spherical_code_30's (tasks/families/spherical_code/verify.py); only the
usage line of a rejection names this task's entry function."""

from pathlib import Path

from tasks.base import ExactCheck, Verdict
from tasks.families.spherical_code.exact import check_code
from tasks.families.spherical_code.verify import best_known, verify_code

N = 30
BEST_KNOWN = best_known(Path(__file__).parent)
USAGE = f"search_code(construction, budget_s, seed) must return the points as an array of shape ({N}, 3), one point per row"


def verify(returned) -> Verdict:
    return verify_code(returned, N, BEST_KNOWN, USAGE)


def check_exact(returned) -> ExactCheck:
    return check_code(returned, N)
