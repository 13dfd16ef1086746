"""Record claims, the stop at a target and the held-out figure: what the loop (train/loop/epoch_loop.py) asks
of the exact checks and how it says what they found.

Verifiers tolerate 1e-9, so a child can reach a task's best known only within the tolerance (circles that
overlap by 9e-10). The evaluator re-checks every record candidate exactly (``check_from``: the lowest
reward that could be a record), and nothing is called a record unless its check says "exact"; a child
that holds only within the tolerance is said to be so. ``run.stop_at_reward`` ends a run after the epoch
in which a child reaches the target and its check says "exact", or "unchecked" (a family that cannot be
checked exactly, docs/tasks.md: its reward is all there is), never "within tolerance only".
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from rewards import Evaluator
from tasks.base import Task, exact_label, one_line

STOPS_ON = ("exact", "unchecked")  # what may end a run at its target (tolerance_only never does)
MAX_CLAIM_LINES = 3  # record lines printed per epoch; the rest are counted


def stop_target(task: Task, setting: float | str | None) -> float | None:
    """run.stop_at_reward as a number: the task's best known for "best_known"; None: no target."""
    if setting is None:
        return None
    return task.best_known if setting == "best_known" else float(setting)


def check_from(task: Task, best_reward: float | None, target: float | None) -> float:
    """The evaluator's ``exact_from`` for the next epoch: the lowest reward that reaches the task's best known,
    beats the run's best so far (so the best at the end of the run has been checked) or reaches the target."""
    if best_reward is None:
        return -math.inf  # no valid solution yet: the first one is the run's best
    bound = min(task.best_known - task.improvement_tolerance * abs(task.best_known), best_reward)
    if target is not None:
        bound = min(bound, target - task.improvement_tolerance * abs(target))
    return bound


def status(child) -> str | None:
    """The exact check's status of a child or archived solution; None when no check ran."""
    return child.exact.get("status") if child.exact else None


def claims(task: Task, epoch: int, ids: list[int], children: list) -> list[str]:
    """One line per valid child of the epoch that reaches the task's best known, saying whether it holds
    exactly (a record), only within the tolerance, or cannot be checked; at most MAX_CLAIM_LINES, best first."""
    found = sorted(((c.reward, sid, c) for sid, c in zip(ids, children) if c.valid and task.reaches(c.reward, task.best_known)),
                   key=lambda t: (-t[0], t[1]))
    lines = []
    for reward, sid, child in found[:MAX_CLAIM_LINES]:
        verb = "beats" if task.improves(reward, task.best_known) else "reaches"
        head = f"[helix] epoch {epoch}: solution {sid} {verb} best_known {task.best_known:.10g} with {reward:.10g}"
        if status(child) == "exact":
            lines.append(f"{head} (exact): " + ("a new record" if verb == "beats" else "it matches the record"))
        else:
            lines.append(f"{head} ({exact_label(child.exact)}): not called a record")
    if len(found) > MAX_CLAIM_LINES:
        lines.append(f"[helix] epoch {epoch}: {len(found) - MAX_CLAIM_LINES} more children reach best_known (see the archive)")
    return lines


def target_hit(task: Task, target: float, ids: list[int], children: list) -> tuple[int, object] | None:
    """(archive id, child) of the epoch's best child that reaches ``target`` with a check in STOPS_ON, or None."""
    hits = [(c.reward, -sid, sid, c) for sid, c in zip(ids, children)
            if c.valid and status(c) in STOPS_ON and task.reaches(c.reward, target)]
    if not hits:
        return None
    _, _, sid, child = max(hits, key=lambda h: h[:3])
    return sid, child


def stop_line(epoch: int, hit: tuple[int, object], target: float, setting, resume: str) -> str:
    """Why the run stops, and how to go on."""
    sid, child = hit
    named = f"best_known {target:.10g}" if setting == "best_known" else f"{target:.10g}"
    return (f"[helix] stop_at_reward: solution {sid} reached {named} with {child.reward:.10g} "
            f"({exact_label(child.exact)}) in epoch {epoch}; stopping after the checkpoint and the export. "
            f"To search on: {resume} run.stop_at_reward=null")


def score_heldout(task: Task, evaluator: Evaluator, best) -> dict:
    """The run's best program scored on the task's held-out instances (task.yaml ``heldout``), in the sandbox
    with the same runner and limits as the run, by the held-out driver and verifier: what the archive's meta
    keeps (``heldout``) for the report, the run browser and open_run."""
    held = Evaluator(task.held_out(), workers=1, timeout_s=evaluator.timeout_s, memory_mb=evaluator.memory_mb,
                     runner=evaluator.runner).evaluate(best.code)  # not closed: the runner is the run's
    return dict(solution_id=best.id, epoch=best.epoch, run_reward=best.reward, reward=held.reward, valid=held.valid,
                status=held.status, feedback=one_line(held.feedback, 500), metrics=held.metrics, about=task.heldout.about)


def end_of_run(task: Task, archive, evaluator: Evaluator, program: Path) -> list[str]:
    """The run's last lines (none before a valid solution): the best with its exact check and, for a task with
    held-out instances, its score on them (stored in the archive's meta ``heldout``), then the best that holds
    exactly when the best reward does not."""
    best = archive.best()
    if best is None:
        return []
    heldout = None
    if task.heldout is not None:
        heldout = score_heldout(task, evaluator, best)
        archive.set_meta("heldout", json.dumps(heldout))
    lines = [best_line(best, heldout, str(program))]
    exact = archive.best_exact()
    if status(best) != "exact" and exact is not None:
        lines.append(f"[helix] best that holds exactly: reward {exact.reward:.10g}, solution {exact.id}, epoch {exact.epoch}")
    return lines


def best_line(best, heldout: dict | None, program: str) -> str:
    """The run's last line: the best reward and its exact check, the held-out figure beside it when the
    task has one, and where the program is."""
    figures = f"best reward {best.reward:.10g} ({exact_label(best.exact)})"
    if heldout is not None:
        held = f"{heldout['reward']:.10g}" if heldout["valid"] else f"0 ({heldout['status']})"
        figures += f" on the run's instances, {held} held out ({heldout['about']})"
    return f"[helix] {figures}; solution {best.id}, epoch {best.epoch}; program: {program}"
