"""What a run's children came to, read from its archive (read-only).

How many were valid, ran and failed, did not apply, changed nothing or repeated an archived
program unrun; how many *distinct* valid programs they were; and which programs the policy wrote
most often. A collapse onto one safe edit shows here and nowhere else: the valid fraction rises
while the distinct programs stay few (BENCHMARKS.md's "distinct valid children" and "most copies").

    .venv/bin/python scripts/inspect_archive.py runs/latest children -k 5
    .venv/bin/python scripts/report.py runs/quality-circle_packing_26-256   # the per-run table
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass

from population.archive import Archive

# (key, label), in the order a child is classified: the loop's own markers first (train/loop/children.py).
OUTCOMES = (("edit_failed", "edit did not apply"), ("unchanged", "unchanged"), ("repeat", "repeat, not run"),
            ("valid", "valid"), ("ran_failed", "ran and failed"))


@dataclass(frozen=True)
class Copies:
    """One valid program and how often the run's children wrote it."""
    count: int
    first_id: int  # the first child that wrote it
    epoch: int
    reward: float
    change: str  # that child's changed lines against its parent, shortened


@dataclass(frozen=True)
class ChildOutcomes:
    children: int
    counts: dict[str, int]  # OUTCOMES key -> children
    distinct_valid: int  # valid children, counted once per program
    most_written: list[Copies]  # the k most written valid programs, most first
    best: float | None  # the best valid reward, the starter's included
    best_epoch: int | None  # the epoch of the first solution that reached it (0: the starter)

    def frac(self, key: str) -> float:
        return self.counts[key] / self.children if self.children else 0.0


def outcome(metrics: dict, valid: bool) -> str:
    """A child's OUTCOMES key. Every program that ran has ``status_ok`` in its metrics
    (train/loop/children.py), so a repeat that ran (evolution.repeats: score) is classified by its run;
    a near repeat the novelty gate held back (train/loop/novelty.py) never ran: a repeat, not run."""
    for key in ("edit_failed", "unchanged"):
        if metrics.get(key):
            return key
    if (metrics.get("repeat") or metrics.get("near_repeat")) and "status_ok" not in metrics:
        return "repeat"
    return "valid" if valid else "ran_failed"


def change(parent: str, child: str, width: int = 70) -> str:
    """The child's removed (-) and added (+) lines against its parent, on one line."""
    lines = [f"{d[0]} {' '.join(d[2:].split())}" for d in difflib.ndiff(parent.splitlines(), child.splitlines())
             if d[:1] in "+-" and d[2:].strip()]
    text = " | ".join(lines) or "(layout only)"
    return text if len(text) <= width else text[: width - 3] + "..."


def child_outcomes(arch: Archive, k: int = 3) -> ChildOutcomes:
    """Every solution with a parent is a child. Programs are the same when their stored code hash
    is (equal up to layout and comments, as the loop's embedding cache and repeat check key them),
    or, for a row without one, when their code is."""
    counts, programs, first = Counter({key: 0 for key, _ in OUTCOMES}), Counter(), {}
    best, best_epoch = None, None
    for s, code_hash in arch.solutions_with_hash():
        if s.valid and (best is None or s.reward > best):
            best, best_epoch = float(s.reward), int(s.epoch)
        if s.parent_id is None:
            continue
        counts[outcome(s.metrics, s.valid)] += 1
        if s.valid:
            key = code_hash or s.code
            programs[key] += 1
            first.setdefault(key, s)
    most = []
    for key, n in programs.most_common(k):
        s = first[key]
        most.append(Copies(n, s.id, int(s.epoch), float(s.reward), change(arch.get(s.parent_id).code, s.code)))
    return ChildOutcomes(sum(counts.values()), dict(counts), len(programs), most, best, best_epoch)
