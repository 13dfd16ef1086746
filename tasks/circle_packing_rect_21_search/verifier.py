"""Trusted check of the search form of circle_packing_rect_21: the returned packing of 21 circles in
a rectangle of perimeter 4 is scored from scratch, exactly as circle_packing_rect_21's
(tasks/families/rect_packing/verify.py); only the usage line of a rejection names this task's entry."""

from pathlib import Path

from tasks.base import ExactCheck, Verdict
from tasks.families.rect_packing.exact import check_rect_packing
from tasks.families.rect_packing.verify import TOL, best_known, verify_rect_packing  # noqa: F401 - TOL for tests

N = 21
BEST_KNOWN = best_known(Path(__file__).parent)
USAGE = (f'search_packing(construction, budget_s, seed) must return a dict {{"width": w, "height": h, '
         f'"centers": array of shape ({N}, 2), "radii": array of shape ({N},)}} with w + h <= 2')


def verify(returned) -> Verdict:
    return verify_rect_packing(returned, N, BEST_KNOWN, USAGE)


def check_exact(returned) -> ExactCheck:
    return check_rect_packing(returned, N)
