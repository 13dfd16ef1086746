"""Trusted check of the returned point: feasibility and eq. 20 reward (see tasks/families/functions/verify.py)."""

from tasks.families.functions.exact import check_point
from tasks.families.functions.verify import PROBLEMS, verify_point


def verify(returned):
    return verify_point(PROBLEMS["keane_bump_10"], returned)


def check_exact(returned):
    return check_point("keane_bump_10", returned)
