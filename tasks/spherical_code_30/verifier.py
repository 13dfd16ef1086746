"""Trusted check of a spherical code: 30 points on the unit sphere S^2, maximising the minimum
pairwise angle (AlphaResearch, appendix D.1); the checks are in tasks/families/spherical_code/verify.py."""

from pathlib import Path

from tasks.base import ExactCheck, Verdict
from tasks.families.spherical_code.exact import check_code
from tasks.families.spherical_code.verify import DUPLICATE_TOL, MIN_NORM, best_known, usage, verify_code  # noqa: F401 - for tests

N = 30
BEST_KNOWN = best_known(Path(__file__).parent)
USAGE = usage(N)


def verify(returned) -> Verdict:
    return verify_code(returned, N, BEST_KNOWN)


def check_exact(returned) -> ExactCheck:
    return check_code(returned, N)
