"""Trusted check of a cap set in Z_3^7 (FunSearch, paper 001); the checks are in tasks/families/cap_set/verify.py."""

from tasks.base import ExactCheck, Verdict
from tasks.families.cap_set.verify import BEST_KNOWN, exact_cap_set, usage, verify_cap_set

N = 7
BEST = BEST_KNOWN[N]
USAGE = usage(N)


def verify(returned) -> Verdict:
    return verify_cap_set(returned, N)


def check_exact(returned) -> ExactCheck:
    return exact_cap_set(returned, N)
