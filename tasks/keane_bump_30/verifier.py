"""Trusted check of the returned point: feasibility and eq. 20 reward (see tasks/functions.py)."""

from tasks.functions import PROBLEMS, verify_point


def verify(returned):
    return verify_point(PROBLEMS["keane_bump_30"], returned)
