"""Dyck-path bijection harness: runs INSIDE the sandbox, appended after the candidate program.

The program defines ``dyck_to_perm(path)``. This harness enumerates every Dyck path of semilength
1..7 itself (the same order as tasks/families/dyck/verify.py's ``dyck_paths``, which it cannot import: tasks/ is
hidden from the sandbox), calls the function on every path in that order and then once more on
every path in the reverse order, and returns only the outputs of both passes, one per path in
the forward order: a list of integers, or None where the call raised or returned something that
is not a list of integers. The second pass lets the verifier see a map that is not a function of
the path (a counter of calls, randomness): such a map is not a bijection however its outputs
happen to fall. It reports no paths and no scores: the verifier, in the parent,
regenerates the paths, pairs them with the outputs by position and computes the reward, so a
program that patches anything here can only spoil its own outputs. Names are prefixed ``_helix_``
so they cannot clash with the program's; being executed after the program, its definitions win.
"""

import operator as _helix_operator

_HELIX_N_MAX = 7
_HELIX_MAX_LEN = 64  # tasks/families/dyck/verify.py MAX_LEN
_HELIX_MAX_ABS = 10**9  # tasks/families/dyck/verify.py MAX_ABS


def _helix_dyck_paths(n):
    """Dyck paths of semilength n as 'U'/'D' strings, lexicographic with U before D."""
    out = []

    def walk(prefix, ups, downs):
        if ups == downs == n:
            out.append(prefix)
            return
        if ups < n:
            walk(prefix + "U", ups + 1, downs)
        if downs < ups:
            walk(prefix + "D", ups, downs + 1)

    walk("", 0, 0)
    return out


def _helix_text(exc):
    try:
        return f"raised {type(exc).__name__}: {exc}"
    except Exception:
        return f"raised {type(exc).__name__}"


def _helix_as_ints(value):
    """(list of ints, None) or (None, why not)."""
    if not isinstance(value, (list, tuple)) and callable(getattr(value, "tolist", None)):
        value = value.tolist()  # numpy arrays
    if not isinstance(value, (list, tuple)):
        return None, f"returned {type(value).__name__}, not a list of integers"
    if len(value) > _HELIX_MAX_LEN:
        return None, f"returned a list of {len(value)} entries"
    ints = []
    for x in value:
        if isinstance(x, bool):
            return None, f"returned a list containing the boolean {x}"
        try:
            x = _helix_operator.index(x)  # int and numpy integers; not floats such as 2.0
        except TypeError:
            return None, f"returned a list containing {repr(x)[:30]} ({type(x).__name__}), not an integer"
        if abs(x) > _HELIX_MAX_ABS:
            return None, "returned a list containing a huge integer"
        ints.append(int(x))
    return ints, None


def helix_map_all_paths():
    """{"outputs": [[output of path i of semilength n, ...] for n = 1..7], "again": the same from
    the second, reversed pass, "first_problem": text}."""
    fn = globals().get("dyck_to_perm")
    if not callable(fn):
        raise NameError("the program does not define dyck_to_perm(path)")
    paths = [_helix_dyck_paths(n) for n in range(1, _HELIX_N_MAX + 1)]
    outputs = [[None] * len(block) for block in paths]
    again = [[None] * len(block) for block in paths]
    first_problem = None
    order = [(n, i) for n, block in enumerate(paths) for i in range(len(block))]
    for into, sequence in ((outputs, order), (again, order[::-1])):
        for n, i in sequence:
            path = paths[n][i]
            try:
                ints, why = _helix_as_ints(fn(path))
            except Exception as exc:
                ints, why = None, _helix_text(exc)
            if ints is None and first_problem is None:
                first_problem = f"dyck_to_perm({path!r}) {why}"[:300]
            into[n][i] = ints
    return {"outputs": outputs, "again": again, "first_problem": first_problem}
