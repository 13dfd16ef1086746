"""Trusted scoring of a map from Dyck paths to 321-avoiding permutations (OpenEvolve bijection
paper, Section 3.2; scores as its line 59, defined in tasks/families/dyck/verify.py).

The sandboxed harness (tasks/families/dyck/harness.py) returns {"outputs": [block_1, ..., block_7],
"again": [block_1, ..., block_7], "first_problem": text or None}, block_n holding one output per
Dyck path of semilength n in the order of tasks.families.dyck.verify.dyck_paths(n): a list of integers, or null
where the call failed. "again" holds the outputs of a second pass over the paths, made in the
reverse order. Nothing in it names a path or a score: outputs are paired with the paths enumerated
here, by position. An artefact of any other shape (a wrong number of blocks or outputs, an entry
that is neither null nor a list of at most 64 integers) did not come from the harness and is
rejected, and so is a result in which no path has an output (reward 0 either way).
``first_problem`` is shown in the feedback only (truncated), never scored.

A path whose two outputs differ has no output (it counts as a failed call): the map must be a
function of the path. Without this, a program that hands out the k-th 321-avoiding permutation on
its k-th call (no map at all) would score 1.0 because the calls come in a fixed order. A map that
depends on the path alone is not affected; one that memoises its first answers still passes, and
so does a lookup table (both are bijections; docs/tasks.md: "A lookup table ... also scores 1.0").
"""

from __future__ import annotations

from fractions import Fraction

from tasks.base import ExactCheck, Verdict, invalid
from tasks.families.dyck.verify import MAX_ABS, MAX_LEN, N_MAX, all_paths, catalan, problem, scores

PATHS = all_paths(N_MAX)


def _malformed(blocks, key: str = "outputs") -> str | None:
    if not isinstance(blocks, list) or len(blocks) != N_MAX:
        got = f"{len(blocks)} blocks" if isinstance(blocks, list) else type(blocks).__name__
        return f"'{key}' must hold {N_MAX} blocks (semilengths 1..{N_MAX}), got {got}"
    for n, block in enumerate(blocks, start=1):
        if not isinstance(block, list) or len(block) != catalan(n):
            got = f"{len(block)} outputs" if isinstance(block, list) else type(block).__name__
            return f"'{key}': block {n} must hold {catalan(n)} outputs (one per Dyck path of semilength {n}), got {got}"
        for i, out in enumerate(block):
            if out is None:
                continue
            if not isinstance(out, list) or len(out) > MAX_LEN:
                return f"'{key}': output {i} of block {n} is neither null nor a list of at most {MAX_LEN} integers"
            if any(isinstance(x, bool) or not isinstance(x, int) or abs(x) > MAX_ABS for x in out):
                return f"'{key}': output {i} of block {n} holds an entry that is not an integer in [-{MAX_ABS}, {MAX_ABS}]"
    return None


def consistent(outputs: list, again: list) -> tuple[list, tuple[int, int] | None]:
    """The outputs of the first pass, None where the second pass gave something else, and the
    (semilength, index) of the first such path (None if both passes agree everywhere)."""
    merged, where = [], None
    for n, (block, repeats) in enumerate(zip(outputs, again), start=1):
        row = []
        for i, (out, repeat) in enumerate(zip(block, repeats)):
            if out != repeat:
                out = None
                where = where or (n, i)
            row.append(out)
        merged.append(row)
    return merged, where


def _where(n: int, s, blocks, note, outputs, again) -> str:
    """One line on the first thing wrong at semilength n: an invalid output, else a collision."""
    paths, outs = PATHS[n - 1], blocks[n - 1]
    if s.first_invalid is not None:
        i = s.first_invalid
        if outs[i] is None and outputs[n - 1][i] != again[n - 1][i]:
            return (f"dyck_to_perm({paths[i]!r}) gave {outputs[n - 1][i]}, then {again[n - 1][i]} when called again: "
                    "the output must depend on the path alone (no state kept between calls, no randomness)")
        if outs[i] is None:
            return f"dyck_to_perm({paths[i]!r}) gave no permutation" + (f": {note}" if note else "")
        return f"dyck_to_perm({paths[i]!r}) = {problem(outs[i], n)}"
    i, j = s.first_collision
    return f"dyck_to_perm({paths[i]!r}) and dyck_to_perm({paths[j]!r}) both give {outs[j]}: not injective"


def verify(returned) -> Verdict:
    if not isinstance(returned, dict) or "outputs" not in returned:
        return invalid("the harness's result must be a dict with 'outputs' (did the program replace "
                       "helix_map_all_paths?); define dyck_to_perm(path) and return a list")
    outputs, again = returned["outputs"], returned.get("again")
    bad = _malformed(outputs) or _malformed(again, "again")
    if bad:
        return invalid(f"malformed result: {bad}")
    blocks, changed = consistent(outputs, again)
    note = returned.get("first_problem")
    note = note[:200] if isinstance(note, str) else None
    if all(out is None for block in blocks for out in block):
        if changed is not None:
            n, i = changed
            return invalid(f"no path gave the same list of integers twice; first: dyck_to_perm({PATHS[n - 1][i]!r}) "
                           f"gave {outputs[n - 1][i]}, then {again[n - 1][i]} (the output must depend on the path alone)")
        return invalid("no path gave a list of integers" + (f"; first: {note}" if note else ""))
    per_n = [scores(n, blocks[n - 1]) for n in range(1, N_MAX + 1)]
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    validity = mean([s.validity for s in per_n])
    injectivity = mean([s.injectivity for s in per_n])
    surjectivity = mean([s.surjectivity for s in per_n])
    reward = mean([s.combined for s in per_n])
    n_perfect = sum(s.perfect for s in per_n)
    summary = (f"mean over n=1..{N_MAX}: validity {validity:.4f}, injectivity {injectivity:.4f}, "
               f"surjectivity {surjectivity:.4f}; a bijection for {n_perfect} of {N_MAX} semilengths")
    first = next((s for s in per_n if not s.perfect), None)
    if first is None:
        feedback = summary + f" (every n = 1..{N_MAX}: a bijection onto the 321-avoiding permutations)"
    else:
        feedback = (summary + f"\nn={first.n}: {first.valid}/{first.paths} valid, {first.distinct} distinct, "
                    f"{first.hit}/{catalan(first.n)} hit; {_where(first.n, first, blocks, note, outputs, again)}")
    metrics = {"validity": validity, "injectivity": injectivity, "surjectivity": surjectivity,
               "n_bijective": float(n_perfect), f"surjectivity_n{N_MAX}": per_n[-1].surjectivity}
    return Verdict(reward, True, feedback, metrics)


def check_exact(returned) -> ExactCheck:
    """Counts only: the verifier's scores are ratios of integer counts, so a valid result's reward is exact up
    to its float division; here the mean of the three ratios over n = 1..N_MAX is recomputed as a fraction
    (tasks/base.py ``check_exact``)."""
    outputs, again = returned["outputs"], returned.get("again")
    blocks, _ = consistent(outputs, again)
    per_n = [scores(n, blocks[n - 1]) for n in range(1, N_MAX + 1)]
    total = sum(Fraction(s.valid, s.paths) + Fraction(s.distinct, s.paths) + Fraction(s.hit, catalan(s.n))
                for s in per_n) / (3 * N_MAX)
    return ExactCheck("exact", f"integer counts: the mean of validity, injectivity and surjectivity over n = 1..{N_MAX} "
                               f"is {total.numerator}/{total.denominator} = {float(total):.15g} exactly (the verifier "
                               "has no tolerance)", float(total))
