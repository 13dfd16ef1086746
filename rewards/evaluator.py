"""Evaluate candidate programs in parallel sandboxes and turn what they return into trusted rewards.

The reward comes only from ``task.verify`` applied, here in the parent, to the JSON artefact the
program returned; nothing the program prints or claims is used. Feedback is short, bounded text
meant for the next prompt: what went wrong, where in the program, and what the limits are.

A task with a harness and data files (tasks/base.py) runs the harness's entry in the sandbox with
the data copied in; a driven task (task.yaml ``driver``) keeps its data here, in the trusted driver
that the runner advances one request at a time (rewards/channel.py), and its artefact is what the
driver returns; a task with a cascade first runs its cheap stage-1 check under the short limit
and skips the full run when that fails (see ``Evaluator.evaluate``). A search-form task (task.yaml
``form: search``) hands each program its parent's construction, a budget and a seed
(rewards/search_channel.py); what it returns, or at the time limit what it last reported, is checked
as a construction (strict JSON, bounded) and then verified like any artefact.

A valid artefact whose reward reaches ``Evaluator.exact_from`` (the loop sets it to the lowest reward
that could be a record: the task's best known, the run's best so far, a stop target) is also re-checked
by the task at zero tolerance (``task.check_exact``, tasks/base.py), here, on the artefact the sandbox
returned: ``Evaluation.exact``. Below it no check runs, so its cost falls on record candidates only.
"""

from __future__ import annotations

import json
import os
import signal
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from rewards.ray_eval import ClusterLost
from rewards.sandbox import InfraError, RunResult, run_program
from rewards.search_channel import construction_text, same_construction, search_budget

FEEDBACK_LIMIT = 2000
# A valid program's artefact (JSON) is kept for drawing when the evaluator is asked to (a task with a
# render.py): at most this many bytes, so the archive stays small; a larger one is not kept.
ARTEFACT_LIMIT = 64 * 1024
MAX_THREADS = 1024  # an elastic runner's (Ray's) batch: one waiting thread per program, at most this many
# "infra": the evaluation infrastructure lost the program twice (rewards.ray_eval); no result exists,
# so the child is not scored: it is left out of its GRPO group and of selection.
STATUSES = ("ok", "invalid", "error", "timeout", "crash", "bad_output", "infra")
FORMS = ("construct", "search")  # tasks.base.FORMS: how the entry function is called (tasks/ is not imported here)
SAME = "It returned the construction it was given: its search found nothing better this time."


@dataclass(frozen=True)
class Evaluation:
    """What the evaluator reports for one program: the trusted reward and feedback, how long it ran,
    and how the run ended (``status``). Not ``tasks.base.Verdict`` plus two fields, for two reasons.
    It is a different thing: a Verdict is what a task's verifier returns about an artefact, as the
    task author wrote it; most Evaluations (timeouts, crashes, bad output, infra failures, stage-1
    rejections) have no verdict at all, and where there is one it is normalised here (reward 0 unless
    valid, float metrics, bounded feedback with the timing note). And rewards/ imports no other
    HELIX package: a Ray worker gets only this package (rewards/ray_eval.py ships it by value), and
    importing ``rewards`` there runs this module, so a ``tasks`` import here would fail on every worker."""

    reward: float
    valid: bool
    feedback: str
    metrics: dict[str, float] = field(default_factory=dict)
    eval_time_s: float = 0.0
    status: str = "ok"  # one of STATUSES
    artefact: str | None = None  # what a valid program returned, as JSON (``Evaluator(keep_artefacts=True)``)
    exact: dict | None = None  # the task's exact check {status, detail, value} of a record candidate; None: not run
    # Search form: the verified construction of a valid program, as compact JSON text (at most
    # search_channel.MAX_CONSTRUCTION_BYTES), which its children are handed; and whether it is the last
    # report of a program the time limit stopped rather than a return value.
    construction: str | None = None
    from_report: bool = False


def artefact_json(value, limit: int = ARTEFACT_LIMIT) -> str | None:
    """``value`` as JSON text when it is at most ``limit`` bytes; None when larger or not JSON."""
    try:
        text = json.dumps(value, allow_nan=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    return text if len(text.encode("utf-8")) <= limit else None


EVAL_BACKENDS = ("local", "ray")


def make_runner(backend: str, task, address: str = "", workers: int = 0, **ray_options):
    """What runs one program for ``task.eval_backend``: the local sandbox, or a Ray cluster's workers
    (connected here, so an unreachable cluster fails before the run starts). ``workers`` (0: the
    cluster's CPUs as they change) caps Ray's programs at once; ``ray_options``: RayRunner's
    ``library_log`` and ``say``."""
    if backend == "local":
        return run_program
    if backend == "ray":
        from rewards.ray_eval import RayRunner

        return RayRunner(address, task.data_files, num_cpus=workers or None, limit=workers or None, **ray_options)
    raise ValueError(f"unknown eval backend {backend!r}; choose one of {', '.join(EVAL_BACKENDS)}")


def _bounded(text: str, limit: int = FEEDBACK_LIMIT) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 16].rstrip() + "\n...(truncated)"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def timing_note(elapsed_s: float, limit_s: float) -> str:
    """Timing for the prompt: exact only when it matters (over a quarter of the limit). Fast
    programs get a fixed phrase, so the same program always yields the same prompt text and a
    seeded run (or a resumed one) is reproducible; the exact time is kept in ``eval_time_s``."""
    if elapsed_s <= 0.25 * limit_s:
        return f"(ran well within the {limit_s:g} s time limit)"
    return f"(ran in {elapsed_s:.1f} s of the {limit_s:g} s time limit)"


class Evaluator:
    """A thread pool whose threads each drive one sandboxed subprocess (the GIL is no bottleneck)."""

    def __init__(self, task, workers: int | None = None, timeout_s: float | None = None, memory_mb: int | None = None,
                 cascade: bool | None = None, runner=None, keep_artefacts: bool = False, exact_from: float | None = None,
                 budget_s: float | None = None):
        """``cascade``: None follows the task (on when task.yaml sets cascade_entry); False turns it
        off; True requires the task to have one. ``runner``: what runs one program, called like
        ``run_program`` (default: a sandbox on this machine; ``rewards.ray_eval.RayRunner``: on a Ray
        cluster, and then ``workers`` defaults to the cluster's CPUs; such an ``elastic`` runner admits
        programs as CPUs free up, so a batch is handed to it whole). ``keep_artefacts``: each valid
        program's artefact comes back as JSON (``Evaluation.artefact``, at most ARTEFACT_LIMIT bytes), so
        a reader can draw it without re-running the program. ``exact_from``: a valid program whose reward
        reaches it is re-checked exactly (``Evaluation.exact``); None: never. The loop moves it each epoch.
        ``budget_s``: what a search-form program is told it may spend (default: ``search_channel.search_budget``
        of the time limit); a search task only."""
        self.task = task
        self.keep_artefacts = keep_artefacts
        self.exact_from = exact_from
        self.runner = runner if runner is not None else run_program
        default = self.runner.cpus() if hasattr(self.runner, "cpus") else (os.cpu_count() or 1)
        self.workers = int(workers) if workers is not None else default
        self.timeout_s = float(timeout_s) if timeout_s is not None else float(task.timeout_s)
        self.memory_mb = int(memory_mb) if memory_mb is not None else int(task.memory_mb)
        for name, value in (("workers", self.workers), ("timeout_s", self.timeout_s), ("memory_mb", self.memory_mb)):
            if not value > 0:
                raise ValueError(f"Evaluator {name} must be > 0, got {value!r}")
        has_cascade = task.cascade_entry is not None
        if cascade and not has_cascade:
            raise ValueError(f"task {task.name!r} defines no cascade (task.yaml: cascade_entry, cascade_timeout_s)")
        # A stage-1 limit at or above the (possibly overridden) full limit would only add cost.
        self.cascade = has_cascade and cascade is not False and task.cascade_timeout_s < self.timeout_s
        self.form = getattr(task, "form", "construct")
        if self.form not in FORMS:
            raise ValueError(f"task {task.name!r} has form {self.form!r}, not one of {', '.join(FORMS)}")
        if budget_s is not None and (self.form != "search" or not 0 <= budget_s <= self.timeout_s):
            raise ValueError(f"Evaluator budget_s is for a search-form task, between 0 and the time limit "
                             f"({self.timeout_s:g} s); got {budget_s!r} for a {self.form}-form task")
        self.budget_s = (float(budget_s) if budget_s is not None else search_budget(self.timeout_s)) \
            if self.form == "search" else None

    def close(self) -> None:
        """Release the runner (a Ray session this evaluator started)."""
        if hasattr(self.runner, "close"):
            self.runner.close()

    def _run(self, code: str, entry: str, timeout_s: float, search: tuple | None = None) -> RunResult:
        driver = getattr(self.task, "driver", None)  # a driven task's step driver (rewards.channel)
        extra = {"driver": driver} if driver is not None else {}  # runners of undriven tasks need not know it
        if search is not None:  # likewise: a runner of construct-form tasks never sees the keyword
            extra["search"] = search
        return self.runner(code, entry, timeout_s, self.memory_mb, harness=self.task.harness,
                           files=self.task.data_files, **extra)

    def _call(self, construction, seed) -> tuple | None:
        """The search call's arguments, checked here (a caller's mistake raises ValueError before anything
        runs; on a Ray worker it would be an infrastructure failure); None for a construct-form task."""
        if self.form != "search":
            if construction is not None or seed is not None:
                raise ValueError(f"task {self.task.name!r} is a construct-form task: evaluate(code) takes no "
                                 "construction or seed")
            return None
        seed = 0 if seed is None else seed
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"task {self.task.name!r} is a search-form task: its seed must be an int, got {seed!r}")
        if construction is not None:
            construction_text(construction)  # ValueError, one line
        return construction, self.budget_s, seed

    def evaluate(self, code: str, construction=None, seed: int | None = None) -> Evaluation:
        """Stage 1 (cascade tasks only): the cheap check; its failure is final, its result unused.
        Then the full run, scored by the task's verifier. An infrastructure failure (the runner
        raises InfraError) gives status "infra" and no reward: the program was never judged.
        A search-form task: ``construction`` (JSON data, or None for a run's first call) and ``seed``
        (None: 0) are the program's arguments, so ``evaluate(code)`` is a first call; a construct-form
        task takes neither."""
        call = self._call(construction, seed)
        try:
            if call is not None:
                return self._search(code, call)
            return self._evaluate(code)
        except ClusterLost:
            raise  # no program can be evaluated any more: the run stops (train/helix.py)
        except InfraError as err:
            return Evaluation(0.0, False, f"not evaluated: {err}. This is an infrastructure failure, not the "
                              "program's; it is not scored.", {"infra_error": 1.0}, 0.0, "infra")

    def _evaluate(self, code: str) -> Evaluation:
        spent = 0.0
        if self.cascade:
            limit = self.task.cascade_timeout_s
            first = self._run(code, self.task.cascade_entry, limit)
            spent = first.elapsed_s
            if first.status != "ok":
                text = (f"rejected at stage 1 of the cascade (a quick sanity check, {limit:g} s limit); the full "
                        f"evaluation ({self.timeout_s:g} s limit) was skipped.\n" + self._failure_text(first, limit))
                return Evaluation(0.0, False, _bounded(text + "\n" + timing_note(first.elapsed_s, limit)), {},
                                  spent, first.status)
        run = self._run(code, self.task.run_entry, self.timeout_s)
        took = timing_note(run.elapsed_s, self.timeout_s)
        elapsed = spent + run.elapsed_s
        if run.status != "ok":
            return Evaluation(0.0, False, _bounded(self._failure_text(run) + "\n" + took), {}, elapsed, run.status)
        verdict = self.task.verify(run.value)
        valid = bool(verdict.valid)
        reward = float(verdict.reward) if valid else 0.0
        status = "ok" if valid else "invalid"
        metrics = {str(k): float(v) for k, v in dict(verdict.metrics).items()}
        artefact = artefact_json(run.value) if valid and self.keep_artefacts else None
        exact = self._exact(run.value) if valid and self.exact_from is not None and reward >= self.exact_from else None
        return Evaluation(reward, valid, _bounded(f"{verdict.feedback}\n{took}"), metrics, elapsed, status, artefact, exact)

    def _exact(self, value) -> dict | None:
        """The task's exact check of a valid artefact, as the archive keeps it; None for a task object without
        one (rewards/ imports no tasks module, so the check is whatever ``task.check_exact`` is)."""
        check = getattr(self.task, "check_exact", None)
        if check is None:
            return None
        result = check(value)
        return {"status": result.status, "detail": result.detail, "value": result.value}

    def _search(self, code: str, call: tuple) -> Evaluation:
        """One search-form run: the program's return value, or at the time limit its last report, checked
        as a construction and then verified from scratch; ``same_construction`` when it is the input again."""
        given = call[0]
        run = self._run(code, self.task.run_entry, self.timeout_s, call)
        took = timing_note(run.elapsed_s, self.timeout_s)
        if run.status == "timeout" and run.reported:
            note = (f"Stopped at the {self.timeout_s:g} s time limit: its last report (of {run.reports}) was scored. "
                    f"Return by budget_s ({self.budget_s:g} s) to be scored on what you return.\n")
        elif run.status != "ok":
            text = self._failure_text(run)
            if run.reports:
                text += (f"\nIts {run.reports} report(s) were not used: a report counts only when the time limit "
                         "stops the program.")
            return Evaluation(0.0, False, _bounded(text + "\n" + took), {}, run.elapsed_s, run.status)
        else:
            note = ""
        try:
            text = construction_text(run.value)
        except ValueError as exc:
            what = "its last report" if run.reported else f"{self.task.entry_function}() returned something that"
            return Evaluation(0.0, False, _bounded(f"bad output: {what}: {exc}\n{took}"), {}, run.elapsed_s,
                              "bad_output")
        verdict = self.task.verify(run.value)
        valid = bool(verdict.valid)
        metrics = {str(k): float(v) for k, v in dict(verdict.metrics).items()}
        same = given is not None and same_construction(run.value, given)
        if same:
            metrics["same_construction"] = 1.0
            note += SAME + "\n"
        if run.reported:
            metrics["reported"] = 1.0
        reward = float(verdict.reward) if valid else 0.0
        artefact = artefact_json(run.value) if valid and self.keep_artefacts else None
        exact = self._exact(run.value) if valid and self.exact_from is not None and reward >= self.exact_from else None
        return Evaluation(reward, valid, _bounded(f"{note}{verdict.feedback}\n{took}"), metrics, run.elapsed_s,
                          "ok" if valid else "invalid", artefact, exact=exact, construction=text if valid else None,
                          from_report=run.reported)

    def _failure_text(self, run: RunResult, limit_s: float | None = None) -> str:
        entry = self.task.entry_function
        limit_s = self.timeout_s if limit_s is None else limit_s
        if run.status == "timeout" and self.form == "search":
            text = (f"timeout: {entry}() did not return within the {limit_s:g} s limit, was stopped, and had reported "
                    f"nothing. Return by budget_s ({self.budget_s:g} s here), and call report(construction) with "
                    "each better construction: at the limit the last one reported counts.")
        elif run.status == "timeout":
            text = (f"timeout: {entry}() did not return within the {limit_s:g} s limit and was stopped. "
                    "Make it faster: fewer iterations, vectorised numpy, or stop early and return the best so far.")
        elif run.status == "error":
            text = f"error while loading the program: {run.error}" if run.phase == "load" else \
                f"error: {entry}() raised {run.error}"
            if run.error.startswith("MemoryError"):
                text += f" (memory limit {self.memory_mb} MB)"
            if run.traceback:
                text += f"\nTraceback (program frames only):\n{run.traceback.rstrip()[-900:]}"
        elif run.status == "bad_output":
            text = f"bad output: {run.error}"
        elif run.returncode is None:
            text = f"crash: {run.error}"
        elif run.returncode < 0:
            name = _signal_name(-run.returncode)
            hint = {"SIGKILL": f"killed, most often for exceeding the memory limit of {self.memory_mb} MB",
                    "SIGSEGV": f"a segmentation fault, often from running out of memory ({self.memory_mb} MB limit)",
                    "SIGXCPU": "the CPU-time limit", "SIGABRT": "an abort, e.g. a failed allocation in a C extension",
                    }.get(name)
            text = f"crash: the program died from {name}" + (f" ({hint})" if hint else "") + " before returning a result"
        else:
            text = (f"crash: the program exited with code {run.returncode} before {entry}() returned "
                    f"(sys.exit/os._exit?); {entry}() must return its result")
        if run.output_tail.strip():
            text += f"\nLast output:\n{run.output_tail.strip()[-400:]}"
        return text

    def evaluate_many(self, codes: list[str], progress: bool = False, constructions: list | None = None,
                      seeds: list[int] | None = None) -> list[Evaluation]:
        """Same order as ``codes``; up to ``workers`` sandboxes at once (an elastic runner: as many as
        its cluster's CPUs allow, all submitted at once). A search-form task: each program's
        ``constructions[i]`` (JSON data or None) and ``seeds[i]``."""
        codes = list(codes)
        if not codes:
            return []
        calls = [{}] * len(codes)
        if constructions is not None or seeds is not None:
            if constructions is None or seeds is None or not len(constructions) == len(seeds) == len(codes):
                raise ValueError(f"evaluate_many: {len(codes)} codes need as many constructions and seeds")
            calls = [dict(construction=c, seed=s) for c, s in zip(constructions, seeds)]
        results: list[Evaluation | None] = [None] * len(codes)
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(codes), desc="evaluate", leave=False)
        try:
            threads = min(MAX_THREADS, len(codes)) if getattr(self.runner, "elastic", False) else self.workers
            with ThreadPoolExecutor(max_workers=min(threads, len(codes))) as pool:
                futures = {pool.submit(self.evaluate, code, **calls[i]): i for i, code in enumerate(codes)}
                try:
                    for future in as_completed(futures):
                        results[futures[future]] = future.result()
                        if bar is not None:
                            bar.update(1)
                except BaseException:  # ClusterLost, Ctrl-C: what has not started never will
                    for future in futures:
                        future.cancel()
                    raise
        finally:
            if bar is not None:
                bar.close()
        return results  # type: ignore[return-value]
