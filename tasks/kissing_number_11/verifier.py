"""Trusted check of a kissing configuration in dimension 11 (AlphaEvolve B.11, EinsteinArena's kissing-number
problem); the exact checks are in tasks/families/kissing/verify.py."""

from pathlib import Path

from tasks.base import ExactCheck, Verdict
from tasks.families.circles.verify import best_known
from tasks.families.kissing.verify import MAX_VECTORS, check_kissing, usage, verify_kissing  # noqa: F401 - for tests

D = 11
BEST_KNOWN = best_known(Path(__file__).parent)
USAGE = usage(D)


def verify(returned) -> Verdict:
    return verify_kissing(returned, D, BEST_KNOWN)


def check_exact(returned) -> ExactCheck:
    return check_kissing(returned, D)
