"""Trusted check of Heilbronn's problem for 11 points in a triangle (AlphaEvolve B.9, EinsteinArena's
heilbronn-triangles); the checks are in tasks/families/heilbronn/verify.py."""

from pathlib import Path

from tasks.base import ExactCheck, Verdict
from tasks.families.circles.verify import best_known
from tasks.families.heilbronn.verify import TOL, check_points, usage, verify_points  # noqa: F401 - TOL for tests

N = 11
BEST_KNOWN = best_known(Path(__file__).parent)
USAGE = usage(N)


def verify(returned) -> Verdict:
    return verify_points(returned, N, BEST_KNOWN)


def check_exact(returned) -> ExactCheck:
    return check_points(returned, N)
