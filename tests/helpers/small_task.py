"""A task small enough to write from a test: return [x] in [0, 1] maximising x (1 - x) (best 0.25, at 1/2).
Its verifier is shared by the README recipe's test and the Python API's."""

VERIFIER = '''import math

from tasks.base import Verdict, invalid


def verify(returned):
    if not isinstance(returned, list) or len(returned) != 1:
        return invalid("expected [x]")
    x = returned[0]
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or not 0 <= x <= 1:
        return invalid("x must be a finite number in [0, 1]")
    return Verdict(x * (1 - x), True, f"x (1 - x) = {x * (1 - x):.6f}", {"x": float(x)})
'''
