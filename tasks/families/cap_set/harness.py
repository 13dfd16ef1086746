"""Cap-set harness: runs INSIDE the sandbox, appended after the candidate program.

The program only defines ``priority(element, n)``. This harness is FunSearch's skeleton (paper 001,
"Cap sets" and its Figure 2a / the released ``solve(n)``): score every vector of Z_3^n, then build
a cap set greedily, always adding the highest-priority vector that completes no line with two
vectors already chosen. Ties go to the vector that comes first in ``itertools.product`` order
(``np.argmax`` in FunSearch's ``solve``); a vector scored ``-inf`` is never added (FunSearch
marks blocked vectors with ``-inf`` and stops when only those remain).

It returns the vectors it chose as a list of lists of ints; the verifier in the trainer re-checks
the whole set, so a program that patches numpy here can only spoil its own artefact. Names are
prefixed ``_helix_`` so they cannot clash with the program's; being executed after the program,
the harness's definitions win.
"""

import itertools as _helix_itertools
import math as _helix_math
import numbers as _helix_numbers

import numpy as _helix_np


def _helix_priority():
    fn = globals().get("priority")
    if not callable(fn):
        raise NameError("the program does not define priority(element, n)")
    return fn


def _helix_score(fn, element, n):
    """priority(element, n) as a float, or a ValueError that says what is wrong with it."""
    value = fn(element, n)
    if isinstance(value, _helix_np.ndarray) and value.size == 1:
        value = value.reshape(-1)[0]
    if not isinstance(value, (_helix_numbers.Real, _helix_np.integer, _helix_np.floating, _helix_np.bool_)):
        raise ValueError(f"priority(element, n) must return a number; for element {element} it returned "
                         f"{type(value).__name__} {repr(value)[:60]}")
    score = float(value)
    if _helix_math.isnan(score):
        raise ValueError(f"priority(element, n) returned NaN for element {element}; return a real number "
                         "(-inf means: never add this vector)")
    return score


def _helix_greedy(n):
    """FunSearch's greedy cap set in Z_3^n with the program's priority; O(3^n + size^2) numpy work."""
    fn = _helix_priority()
    powers = 3 ** _helix_np.arange(n - 1, -1, -1)  # vector i of itertools.product has code vector @ powers = i
    vectors = _helix_np.array(list(_helix_itertools.product((0, 1, 2), repeat=n)), dtype=_helix_np.int64)
    scores = _helix_np.array([_helix_score(fn, tuple(int(x) for x in v), n) for v in vectors], dtype=float)
    order = _helix_np.argsort(-scores, kind="stable")  # descending; ties keep product order, like np.argmax
    blocked = _helix_np.zeros(3**n, dtype=bool)
    chosen = _helix_np.empty((3**n, n), dtype=_helix_np.int64)
    size = 0
    for index in order.tolist():
        if scores[index] == -_helix_np.inf:
            break  # sorted: only -inf scores remain, and FunSearch never adds those
        if blocked[index]:
            continue
        v = vectors[index]
        # the third point of each line through v and a chosen vector u: w = -(u + v) mod 3
        blocked[((-(chosen[:size] + v)) % 3) @ powers] = True
        blocked[index] = True
        chosen[size] = v
        size += 1
    return chosen[:size].tolist()


def helix_cap_set_4():
    return _helix_greedy(4)


def helix_cap_set_5():
    return _helix_greedy(5)


def helix_cap_set_6():
    return _helix_greedy(6)


def helix_cap_set_7():
    return _helix_greedy(7)


def helix_cap_set_8():
    return _helix_greedy(8)
