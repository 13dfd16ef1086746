"""Dyck paths and 321-avoiding permutations: the trusted side of the ``dyck_bijection`` task.

The task (Brown et al., "Even with AI, Bijection Discovery is Still Hard", OpenEvolve, Section 3.2,
paper 000 line 136) asks for a bijection from Dyck paths of semilength n to 321-avoiding
permutations of [n]. The sandboxed harness (tasks/families/dyck/harness.py, which cannot import this module:
tasks/ is hidden from the sandbox) calls the program's ``dyck_to_perm(path)`` on every path of
semilength 1..N_MAX in the order of ``dyck_paths`` and returns the outputs; the verifier pairs them
with its own enumeration from here and scores them with ``scores`` (paper line 59):

* validity    = #(outputs that are 321-avoiding permutations of [n]) / #paths;
* injectivity = #(distinct outputs) / #paths ("unique elements in f(A(n))" over "total elements
  in f(A(n))"; a path whose call raised or returned no list of integers has no output: it counts
  in the denominator, never as a distinct element);
* surjectivity = #(distinct outputs that are 321-avoiding permutations of [n]) / Catalan(n)
  (|f(A(n))| / |B(n)|, counting only f(A(n)) inside B(n), so it never exceeds 1 and an output
  outside B(n) earns nothing here);
* combined score for n = mean of the three; reward = mean of the combined scores over n = 1..N_MAX.

The paper scores one fixed n (4, then 5; line 138); averaging over n = 1..7 is this task's choice.
"""

from __future__ import annotations

from dataclasses import dataclass

N_MAX = 7  # semilengths 1..7: 1 + 2 + 5 + 14 + 42 + 132 + 429 = 625 paths
MAX_LEN = 64  # the harness turns a longer list into "no output"; the verifier rejects longer ones
MAX_ABS = 10**9  # likewise for an integer entry beyond +-MAX_ABS (keeps the JSON small and plain)
UP, DOWN = "U", "D"


def catalan(n: int) -> int:
    c = 1
    for k in range(n):
        c = c * 2 * (2 * k + 1) // (k + 2)
    return c


def dyck_paths(n: int) -> list[str]:
    """Every Dyck path of semilength n as a string of 'U' (up) and 'D' (down) steps, in
    lexicographic order with U before D (so 'U' * n + 'D' * n comes first)."""
    out: list[str] = []

    def walk(prefix: str, ups: int, downs: int) -> None:
        if ups == downs == n:
            out.append(prefix)
            return
        if ups < n:
            walk(prefix + UP, ups + 1, downs)
        if downs < ups:
            walk(prefix + DOWN, ups, downs + 1)

    walk("", 0, 0)
    return out


def all_paths(n_max: int = N_MAX) -> list[list[str]]:
    """dyck_paths(n) for n = 1..n_max: the harness's order, output i of block n-1 is path i."""
    return [dyck_paths(n) for n in range(1, n_max + 1)]


def pattern_321(perm) -> tuple[int, int, int] | None:
    """The first 321 pattern (a > b > c at positions i < j < k) of a sequence, scanning the middle
    entry b left to right, or None if it avoids 321. O(n^2)."""
    for j, b in enumerate(perm):
        a = next((x for x in perm[:j] if x > b), None)
        if a is None:
            continue
        c = next((x for x in perm[j + 1:] if x < b), None)
        if c is not None:
            return a, b, c
    return None


def is_permutation(seq, n: int) -> bool:
    return len(seq) == n and sorted(seq) == list(range(1, n + 1))


def problem(output, n: int) -> str | None:
    """Why an output for a path of semilength n is not a 321-avoiding permutation of [n], or None.
    ``output`` is a list of ints (or None: the call raised or returned no list of integers)."""
    if output is None:
        return "no permutation (an exception, or not a list of integers)"
    if len(output) != n:
        return f"{output} has {len(output)} entries, not {n}"
    if not is_permutation(output, n):
        repeated = sorted({x for x in output if output.count(x) > 1})
        if repeated:
            return f"{output} repeats {repeated[0]}: not a permutation of 1..{n}"
        return f"{output} is not a permutation of 1..{n} (values must be 1..{n})"
    pattern = pattern_321(output)
    if pattern is not None:
        return f"{output} contains the pattern 321 ({', '.join(map(str, pattern))})"
    return None


@dataclass(frozen=True)
class Scores:
    """The paper's three scores for one n, and what the feedback shows."""
    n: int
    paths: int
    valid: int  # outputs that are 321-avoiding permutations of [n]
    distinct: int  # distinct outputs (None excluded)
    hit: int  # distinct valid outputs
    first_invalid: int | None  # index of the first path with an invalid output
    first_collision: tuple[int, int] | None  # (earlier index, later index) of the first repeated output

    @property
    def validity(self) -> float:
        return self.valid / self.paths

    @property
    def injectivity(self) -> float:
        return self.distinct / self.paths

    @property
    def surjectivity(self) -> float:
        return self.hit / catalan(self.n)

    @property
    def combined(self) -> float:
        return (self.validity + self.injectivity + self.surjectivity) / 3.0

    @property
    def perfect(self) -> bool:
        return self.valid == self.distinct == self.hit == self.paths == catalan(self.n)


def scores(n: int, outputs: list) -> Scores:
    """Scores of the outputs (lists of ints or None) for dyck_paths(n), paired by position."""
    first_seen: dict[tuple, int] = {}
    valid = 0
    hit: set[tuple] = set()
    first_invalid = first_collision = None
    for i, out in enumerate(outputs):
        bad = problem(out, n)
        if bad is None:
            valid += 1
            hit.add(tuple(out))
        elif first_invalid is None:
            first_invalid = i
        if out is not None:
            key = tuple(out)
            if key in first_seen:
                if first_collision is None:
                    first_collision = (first_seen[key], i)
            else:
                first_seen[key] = i
    return Scores(n, len(outputs), valid, len(first_seen), len(hit), first_invalid, first_collision)
