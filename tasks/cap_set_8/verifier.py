"""Trusted check of a cap set in Z_3^8 (FunSearch, paper 001); the checks are in tasks/families/cap_set/verify.py."""

from tasks.base import Verdict
from tasks.families.cap_set.verify import BEST_KNOWN, usage, verify_cap_set

N = 8
BEST = BEST_KNOWN[N]
USAGE = usage(N)


def verify(returned) -> Verdict:
    return verify_cap_set(returned, N)
