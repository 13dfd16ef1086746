"""The task check: is a task folder usable, before anything heavy loads? (In train/: it runs the sandbox,
which tasks/ may not import.)

    helix check-task NAME [--verbose]        (also: python train/helix.py check-task NAME)

It runs at the start of every HELIX run too (train/helix.py), before the model, vLLM, wandb or a
run directory, so a broken folder costs seconds and one line instead of a traceback after the
model has loaded (or, worse, a run that trains on rewards that are all zero). In order:

1. ``task.yaml`` against its schema, the files, the starter's entry function (``load_task``);
2. ``verifier.py`` imports (a syntax error or a failing import names its file and line);
3. the starter runs once in the sandbox and its own verifier scores it valid, with a reward above
   0 and not above ``best_known`` (reaching it only with ``starter_reaches_best_known``); the
   verifier's ``check_exact``, where it has one, runs on the starter's result without raising and
   returns an ``ExactCheck`` (in a run a broken check is only "unchecked", so it would go unseen). A
   search-form starter (task.yaml ``form: search``) runs three times, None -> c0 -> c1 -> c2, each
   call on the construction the one before returned and with a short budget (1 s), and each result
   must pass the same checks (only c0 is held to the best_known rule for starters); the line says
   what the three scored, and whether a later call made the construction worse.

Every failure is one line naming the file and the problem (exit code 2); where the verifier raised,
the line names the verifier's own file and line, and ``--verbose`` adds the traceback. Nothing is
cached: the check is one sandbox run, and a cached answer could be stale after an edit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from tasks import paths
from tasks.base import TASKS_DIR, Task, invalid, load_task, task_folder


class TaskCheckError(Exception):
    """One line (``str``): the file and the problem. ``detail``: the traceback, shown with --verbose."""

    def __init__(self, line: str, detail: str = ""):
        super().__init__(line)
        self.detail = detail


@dataclass(frozen=True)
class CheckResult:
    task: Task
    reward: float  # the starter's (a search-form starter's first call, from None)
    seconds: float
    again: tuple[float, ...] = ()  # search form: the rewards of the starter's calls on its own output
    budget_s: float | None = None  # search form: the budget each call was given

    def line(self) -> str:
        t = self.task
        if t.form != "search":
            return (f"task {t.name}: ok (task.yaml, verifier, {t.entry_function}(); the starter scores {self.reward:.6g}, "
                    f"valid, best_known {t.best_known:.6g}; {self.seconds:.1f} s)")
        steps = [self.reward, *self.again]
        worse = any(b < a for a, b in zip(steps, steps[1:]))
        return (f"task {t.name}: ok (search form: task.yaml, verifier, {t.entry_function}(construction, budget_s, seed); "
                f"the starter scores {self.reward:.6g} from None, then {' and '.join(f'{r:.6g}' for r in self.again)} "
                f"on its own output, each valid, with a {self.budget_s:g} s budget"
                + ("; it made its construction worse, where a search keeps what improves" if worse else "")
                + f"; best_known {t.best_known:.6g}; {self.seconds:.1f} s)")


def _shown(path: str | Path) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    path = os.path.abspath(path)
    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else path


def _task_frame(tb) -> traceback.FrameSummary | None:
    """The innermost frame in a task's own code (its folder or tasks/families, or a user's task folder elsewhere),
    not tasks/base.py's or this file's."""
    try:
        roots = [Path(r).resolve() for r in paths.roots(TASKS_DIR)]
    except ValueError:
        roots = [TASKS_DIR.resolve()]
    frames = [f for f in traceback.extract_tb(tb)
              if any(Path(f.filename).resolve().is_relative_to(r) and Path(f.filename).resolve().parent != r
                     for r in roots)]
    return frames[-1] if frames else None


def _verifier_path(name: str) -> Path:
    """Where the task's verifier.py is (for a line about its import), wherever the task lives."""
    try:
        return task_folder(name) / "verifier.py"
    except ValueError:
        return TASKS_DIR / name / "verifier.py"


def _raised(exc: BaseException, doing: str, fallback: Path) -> TaskCheckError:
    """One line for an exception from a task's code, at its innermost frame in the task's code."""
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if isinstance(exc, SyntaxError) and exc.filename:
        return TaskCheckError(f"{_shown(exc.filename)}:{exc.lineno}: syntax error while {doing}: {exc.msg}", detail)
    frame = _task_frame(exc.__traceback__)
    where = f"{_shown(frame.filename)}:{frame.lineno}" if frame else _shown(fallback)
    message = str(exc).splitlines()[0] if str(exc) else ""
    return TaskCheckError(f"{where}: {doing} raised {type(exc).__name__}" + (f": {message}" if message else ""), detail)


def _load(name: str) -> Task:
    try:
        return load_task(name)
    except ValueError as exc:  # load_task's own messages already name the file and the problem
        if exc.__traceback__ and _task_frame(exc.__traceback__):  # ...unless the verifier's import raised it
            raise _raised(exc, "importing the verifier", _verifier_path(name)) from None
        raise TaskCheckError(str(exc).replace(str(TASKS_DIR) + os.sep, _shown(TASKS_DIR) + os.sep)) from None
    except Exception as exc:  # the verifier module raised on import (SyntaxError, ImportError, NameError, ...)
        raise _raised(exc, "importing the verifier", _verifier_path(name)) from None


def _last_line(text: str) -> str:
    """The line of a sandbox failure that says what went wrong (an error's last traceback line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return "(no feedback)"
    for line in reversed(lines):
        if ":" in line and line.split(":")[0].replace(".", "").isidentifier() and line[0].isupper():
            return line  # e.g. "NameError: name 'x' is not defined"
    return lines[0]


def check_task(name: str, timeout_s: float | None = None, memory_mb: int | None = None) -> CheckResult:
    """Raise TaskCheckError (one line) for the first problem, or return the starter's score.
    ``timeout_s`` / ``memory_mb``: the run's limits (task.timeout_s, task.memory_mb), else the task's.
    A search-form starter is run three times, each on what the call before returned (None, then its own
    output twice), with a short budget (search_channel.CHECK_BUDGET_S): each must come back verified."""
    from rewards import Evaluator
    from rewards.search_channel import CHECK_BUDGET_S, search_budget

    start = time.perf_counter()
    task = _load(name)
    folder = task.folder
    raised: list[BaseException] = []
    inner = task._verify

    def verify(returned):  # keep what Task.verify would turn into feedback (and log): the check shows file and line
        try:
            return inner(returned)
        except Exception as exc:
            raised.append(exc)
            return invalid("the verifier raised")  # replaced by the one line below

    exact_raised: list[BaseException] = []
    inner_exact = task._check_exact

    def check_exact(returned):  # likewise for the exact check, which Task.check_exact turns into "unchecked"
        try:
            return inner_exact(returned)
        except Exception as exc:
            exact_raised.append(exc)
            raise

    checked = dataclasses.replace(task, _verify=verify, _check_exact=check_exact if inner_exact else None)
    budget = None
    if task.form == "search":
        budget = min(CHECK_BUDGET_S, search_budget(timeout_s if timeout_s is not None else task.timeout_s))
    evaluator = Evaluator(checked, workers=1, timeout_s=timeout_s, memory_mb=memory_mb, exact_from=-math.inf,
                          budget_s=budget)
    rewards, construction = [], None
    try:
        for call in range(3 if task.form == "search" else 1):
            what = "the starter" if call == 0 else f"the starter on its own output (call {call + 1} of 3)"
            of = "the starter's result" if call == 0 else f"the result of {what}"
            try:
                if task.form == "search":
                    result = evaluator.evaluate(task.initial_program, construction, seed=call)
                else:
                    result = evaluator.evaluate(task.initial_program)
            except Exception as exc:  # Task.verify raises for a verifier bug (e.g. not returning a Verdict)
                raise _raised(exc, "verify()", folder / "verifier.py") from None
            if raised:
                raise _raised(raised[0], f"verify() on {of}", folder / "verifier.py")
            if exact_raised:
                raise _raised(exact_raised[0], f"check_exact() on {of}", folder / "verifier.py")
            if result.exact and result.exact["detail"].startswith("the exact check returned"):
                raise TaskCheckError(f"{_shown(folder / 'verifier.py')}: check_exact() on {of}: {result.exact['detail']}")
            _judge(task, result, what, evaluator.timeout_s, first=call == 0)
            rewards.append(result.reward)
            construction = json.loads(result.construction) if result.construction is not None else None
    finally:
        evaluator.close()
    return CheckResult(task, rewards[0], time.perf_counter() - start, tuple(rewards[1:]), budget)


def _judge(task: Task, result, what: str, limit_s: float, first: bool) -> None:
    """TaskCheckError unless ``result`` (of ``what``) is valid, above 0 and not above best_known (the first
    call: below it, or at it with starter_reaches_best_known)."""
    folder, starter = task.folder, _shown(task.folder / "initial_program.py")
    if result.status not in ("ok", "invalid"):
        limit = f" (limit {limit_s:g} s)" if result.status == "timeout" else ""
        raise TaskCheckError(f"{starter}: {what} does not run in the sandbox: {result.status}{limit}: "
                             f"{_last_line(result.feedback)}", result.feedback)
    if not result.valid:
        raise TaskCheckError(f"{starter}: {what} fails its own verifier: {_last_line(result.feedback)}", result.feedback)
    reward, best = result.reward, task.best_known
    if reward <= 0:
        raise TaskCheckError(f"{starter}: {what} scores {reward:.6g}: a starter must score above 0 (with every "
                             "reward 0, GRPO and selection have nothing to tell apart)", result.feedback)
    yaml_path = _shown(folder / "task.yaml")
    if task.improves(reward, best):
        raise TaskCheckError(f"{yaml_path}: {what} scores {reward:.10g}, above best_known {best:.10g}: best_known "
                             "is wrong or its unit differs from the reward's", result.feedback)
    if not first:
        return
    reaches = not reward < best - task.improvement_tolerance * abs(best)
    if reaches and not task.starter_reaches_best_known:
        raise TaskCheckError(f"{yaml_path}: the starter already scores best_known ({best:.10g}); if that is intended, "
                             "say why in starter_reaches_best_known", result.feedback)
    if task.starter_reaches_best_known and not reaches:
        raise TaskCheckError(f"{yaml_path}: starter_reaches_best_known is set, but the starter scores {reward:.10g}, "
                             f"below best_known {best:.10g}", result.feedback)


def main(argv: list[str] | None = None, prog: str = "helix check-task") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="Check a task folder (tasks/NAME/, or NAME/ in a folder of "
                                     f"{paths.ENV}) in seconds: task.yaml, the verifier, the entry function, and the "
                                     "starter scored by its verifier in the sandbox.")
    parser.add_argument("name", help=f"the task's folder name, under tasks/ or in a folder {paths.ENV} names "
                        f"({os.pathsep}-separated)")
    parser.add_argument("--verbose", action="store_true", help="on a failure, show the traceback or the sandbox's feedback")
    args = parser.parse_args(argv)
    try:
        result = check_task(args.name)
    except TaskCheckError as err:
        what = "the traceback" if "Traceback" in err.detail else "the sandbox's feedback"
        hint = f" (--verbose shows {what})" if err.detail and not args.verbose else ""
        if args.verbose and err.detail:
            print(err.detail.rstrip(), file=sys.stderr)
        print(f"helix: task check failed: {err}{hint}", file=sys.stderr)
        return 2
    print(result.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
