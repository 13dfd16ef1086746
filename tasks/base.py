"""The task contract: a folder under tasks/ (or a user's, elsewhere: tasks/paths.py) with task.yaml,
description.md, initial_program.py, verifier.py, and optionally prompt.md and brief.md.

Adding a task means adding a folder; nothing else changes. A task never trusts the program:
``verify`` gets only the JSON-decoded value the sandbox returned and recomputes the reward from
it. Folders are validated strictly at load time, so a typo in task.yaml or a starter program
without its entry function fails loudly at start-up, not as zero rewards later.

``description.md`` must not state a time limit: the prompt states the one the evaluator enforces
(task.timeout_s in the config, else the task's own: timeout_s here, or cpu_timeout_s under
task.timeout_scale: cpu), which a hard-coded one would contradict.

``brief.md`` (optional) is a short description, for small models on small machines: the prompt
shows it instead of description.md under ``rollout.description: brief`` (the CPU quickstart).

``prompt.md`` (optional) replaces rollout.prompts.DEFAULT_TEMPLATE, the user message of every
prompt for this task. Its placeholders are tasks.template.PLACEHOLDERS ({description},
{entry_function}, {timeout}, {ancestors}, {parent}, {contract}); {parent} and {contract} are
required and a literal brace is written {{ or }}. It is checked here, so an unknown or missing
placeholder fails at start-up; a file named like it (prompt.txt, prompts.md) fails too, rather
than being silently ignored.

The task.yaml keys, required and optional, and how each is checked: tasks/spec.py.

verifier.py may also define ``check_exact(returned) -> ExactCheck``: the artefact of a valid child
that reaches the task's best known (or beats the run's best) re-checked at zero tolerance in exact
arithmetic (``Task.check_exact``; docs/tasks.md lists each family's check). Without it a task's
claims are "unchecked".
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
import math
import numbers
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tasks import paths
from tasks.spec import (  # the names the contract had here before, importable from tasks.base still
    FILES,
    FORMS,
    MAX_DATA_BYTES,
    SEARCH_ARGUMENTS,
    TASKS_DIR,
    WARM_START_MUTATIONS,
    Objective,
    check_initial_program,
    read_data_files,
    read_harness,
    read_objectives,
    read_prompt_template,
    read_spec,
)

__all__ = ["FORMS", "MAX_DATA_BYTES", "SEARCH_ARGUMENTS", "TASKS_DIR", "WARM_START_MUTATIONS", "ExactCheck", "HeldOut",
           "Objective", "Task", "Verdict", "available_tasks", "exact_label", "invalid", "load_task", "one_line",
           "own_timeout_s", "task_folder", "task_form", "task_objectives"]

TIMEOUT_SCALES = ("paper", "cpu")  # task.timeout_scale: which of task.yaml's limits a run defaults to
IMPROVEMENT_TOLERANCE = 1e-9  # default relative margin of a new best (task.yaml improvement_tolerance)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    """A verifier's judgement of one artefact (the task contract above). The evaluator turns it into a
    ``rewards.evaluator.Evaluation``, which also covers programs that never produced an artefact; see
    there why the two types stay apart."""

    reward: float
    valid: bool
    feedback: str
    metrics: dict[str, float] = field(default_factory=dict)


EXACT_STATUSES = ("exact", "tolerance_only", "unchecked")


@dataclass(frozen=True)
class ExactCheck:
    """A record claim re-checked at zero tolerance in exact arithmetic: what verifier.py's optional
    ``check_exact(returned) -> ExactCheck`` says of an artefact ``verify`` accepted. Verifiers
    tolerate 1e-9, so a packing with a 9e-10 overlap passes them; a reward at or above best_known
    is called a record only when its artefact's check says "exact"."""

    status: str  # one of EXACT_STATUSES: "exact" (every constraint holds with zero tolerance, in exact rational
    # arithmetic of the returned floats), "tolerance_only" (one fails), "unchecked" (no exact check for the family)
    detail: str  # one line: what was checked, the first violation found, or why it cannot be checked exactly
    value: float | None = None  # the objective recomputed exactly from the returned numbers, rounded to a float

    def __post_init__(self):
        if self.status not in EXACT_STATUSES:
            raise ValueError(f"ExactCheck status must be one of {', '.join(EXACT_STATUSES)}, got {self.status!r}")


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (whitespace runs become one space), at most ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


EXACT_LABELS = {"exact": "exact", "tolerance_only": "within tolerance only", "unchecked": "unchecked"}


def exact_label(exact: dict | None) -> str:
    """How HELIX states a recorded exact check ({"status", "detail", "value"} as the archive keeps it):
    "exact", "within tolerance only: circles 3 and 7 overlap by 9e-10", "unchecked: ...", or "not checked"
    for a solution no check ran on (below the threshold, or an archive from before the checks)."""
    if not exact:
        return "not checked"
    status = EXACT_LABELS.get(exact.get("status"), str(exact.get("status")))
    return status if status == "exact" else f"{status}: {exact.get('detail', '')}"


@dataclass(frozen=True)
class HeldOut:
    """task.yaml ``heldout``, loaded: what the run's best program is also scored on at the end of a run."""

    verify: Callable[[Any], Verdict]  # verifier.py's scorer of the held-out artefact
    driver: Callable[[], Any]  # verifier.py's driver over the held-out instances
    about: str  # what the held-out set is, in a sentence (how it was generated, which seeds)


def invalid(feedback: str, **metrics: float) -> Verdict:
    """A rejected artefact: reward 0, and feedback that says why."""
    return Verdict(0.0, False, feedback, dict(metrics))


@dataclass(frozen=True)
class Task:
    name: str
    description: str
    initial_program: str
    entry_function: str
    timeout_s: float
    memory_mb: int
    best_known: float
    best_known_source: str
    folder: Path
    _verify: Callable[[Any], Verdict] = field(repr=False, compare=False)
    harness: str | None = None  # source appended after the program in the sandbox
    harness_entry: str | None = None
    driver: Callable[[], Any] | None = field(default=None, repr=False, compare=False)  # verifier.py's step driver
    data_files: tuple[Path, ...] = ()  # copied into the sandbox's working directory
    cascade_entry: str | None = None  # stage-1 function of the harness
    cascade_timeout_s: float | None = None
    prompt_template: str | None = None  # prompt.md; None: rollout.prompts.DEFAULT_TEMPLATE
    brief: str | None = None  # brief.md: a short description for small models (rollout.description: brief)
    warm_start_mutations: tuple[str, ...] = ()  # extra warm-start edit kinds (train.warm_start.data.EXTRA)
    starter_reaches_best_known: str | None = None  # why the starter may score best_known (task.yaml)
    improvement_tolerance: float = IMPROVEMENT_TOLERANCE  # relative margin of a new best (task.yaml)
    objectives: tuple[Objective, ...] = ()  # declared objectives beside reward and Div (task.yaml)
    _check_exact: Callable[[Any], ExactCheck] | None = field(default=None, repr=False, compare=False)  # verifier.py's
    heldout: HeldOut | None = field(default=None, repr=False, compare=False)  # task.yaml heldout, loaded
    form: str = "construct"  # FORMS: how the entry function is called (task.yaml form)

    def improves(self, reward: float, best: float | None) -> bool:
        """Whether ``reward`` beats ``best`` by more than the task's relative tolerance (None: anything does)."""
        return best is None or reward > best + self.improvement_tolerance * abs(best)

    def reaches(self, reward: float, target: float) -> bool:
        """Whether ``reward`` reaches ``target`` up to the task's relative tolerance: a best_known rounded to
        ten digits is reached by the value it rounds."""
        return reward >= target - self.improvement_tolerance * abs(target)

    def check_exact(self, returned: Any) -> ExactCheck:
        """verifier.py's ``check_exact`` on an artefact ``verify`` accepted: "exact", "tolerance_only" or
        "unchecked", with a one-line detail. It never raises: a task without the function, a check that
        raises (logged) or returns something else is "unchecked" with the reason, so a record claim is
        never made on a check that did not run."""
        if self._check_exact is None:
            return ExactCheck("unchecked", f"task {self.name} has no exact check (its verifier.py defines no check_exact)")
        try:
            with np.errstate(all="ignore"):
                check = self._check_exact(returned)
        except Exception as exc:
            log.warning("task %s: check_exact raised %s: %s", self.name, type(exc).__name__, exc)
            return ExactCheck("unchecked", one_line(f"the exact check could not run: {type(exc).__name__}: {exc}"))
        if not isinstance(check, ExactCheck):
            log.warning("task %s: check_exact returned %s, not an ExactCheck", self.name, type(check).__name__)
            return ExactCheck("unchecked", f"the exact check returned {type(check).__name__}, not tasks.base.ExactCheck")
        value = check.value
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            value = None
        return ExactCheck(check.status, one_line(check.detail), None if value is None else float(value))

    def held_out(self) -> Task:
        """The task as its held-out evaluation sees it: the held-out driver and verifier in place of the run's
        (task.yaml ``heldout``), so the evaluator scores a program on it as on any run of the task."""
        if self.heldout is None:
            raise ValueError(f"task {self.name} has no held-out evaluation (task.yaml 'heldout')")
        return replace(self, _verify=self.heldout.verify, driver=self.heldout.driver, heldout=None, _check_exact=None)

    def prompt_description(self, style: str = "full") -> str:
        """The description a prompt shows: ``brief`` takes brief.md where the task has one."""
        if style not in ("full", "brief"):
            raise ValueError(f"description style must be 'full' or 'brief', got {style!r}")
        return self.brief if style == "brief" and self.brief else self.description

    @property
    def run_entry(self) -> str:
        """The function the sandbox calls for the full evaluation."""
        return self.harness_entry or self.entry_function

    def verify(self, returned: Any) -> Verdict:
        """Trusted reward for a returned artefact. A verifier exception becomes an invalid verdict
        with the reason (the batch goes on); returning a non-Verdict is a task bug and raises.

        Whatever the artefact holds (1e308, NaN, True, deep nesting), nothing reaches the console
        and nothing non-finite leaves: numpy's floating-point warnings are off while the verifier
        runs (``np.errstate`` is per thread and per context in numpy >= 2, and per thread before,
        so the evaluator's other threads keep their own settings; ``warnings.catch_warnings``
        would not be safe here, being process-wide), a valid verdict needs a finite real reward,
        and a metric that is not a finite real number is dropped, so the archive stores finite
        numbers only. Other warnings (e.g. numpy's "Mean of empty slice") are the verifier's to
        avoid: tests/redteam/test_hostile_values.py runs every task's verifier over hostile values."""
        try:
            with np.errstate(all="ignore"):
                verdict = self._verify(returned)
        except Exception as exc:
            log.warning("task %s: verifier raised %s: %s", self.name, type(exc).__name__, exc)
            return invalid(f"the verifier could not check the result: {type(exc).__name__}: {exc}"[:500])
        if not isinstance(verdict, Verdict):
            raise TypeError(f"{self.folder / 'verifier.py'}: verify() must return tasks.base.Verdict, "
                            f"got {type(verdict).__name__}")

        def finite(value, flags_too: bool) -> bool:  # a real number that a float holds, and not inf or NaN
            if isinstance(value, (bool, np.bool_)):
                return flags_too
            try:
                return isinstance(value, numbers.Real) and math.isfinite(value)
            except OverflowError:  # an int beyond a float's range
                return False

        metrics = {str(k): float(v) for k, v in dict(verdict.metrics).items() if finite(v, flags_too=True)}
        if len(metrics) < len(verdict.metrics):
            log.debug("task %s: dropped metrics that are not finite numbers: %s", self.name,
                      sorted(set(map(str, verdict.metrics)) - set(metrics)))
        if verdict.valid and not finite(verdict.reward, flags_too=False):
            shown = repr(verdict.reward)[:80]
            return Verdict(0.0, False, f"the verifier produced a reward that is not a finite number ({shown}); "
                                       "treated as invalid", metrics)
        return Verdict(float(verdict.reward) if verdict.valid else 0.0, bool(verdict.valid), str(verdict.feedback), metrics)


def available_tasks() -> list[str]:
    """Every task folder (one holding a task.yaml) under tasks/ and the user's task folders (tasks.paths:
    HELIX_TASKS, task.paths); a name found twice is an error."""
    return sorted(paths.index(TASKS_DIR))


def task_folder(name: str) -> Path:
    """The folder of the task ``name``: under tasks/, else in a folder of HELIX_TASKS or task.paths."""
    found = paths.index(TASKS_DIR)
    if name not in found:
        names = sorted(found)
        near = difflib.get_close_matches(str(name), names, n=3, cutoff=0.6)  # no match: no unrelated suggestion
        hint = f" Did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
        raise ValueError(f"unknown task {name!r}{paths.searched(TASKS_DIR)}.{hint} Available tasks: "
                         f"{', '.join(names) or 'none'}")
    return found[name]



def own_timeout_s(name: str, scale: str = "paper") -> float:
    """The task's own time limit (task.yaml alone: no verifier is imported), which task.timeout_s
    defaults to: ``timeout_s`` at paper scale, ``cpu_timeout_s`` (else ``timeout_s``) at CPU scale."""
    if scale not in TIMEOUT_SCALES:
        raise ValueError(f"timeout scale {scale!r} is not one of {', '.join(TIMEOUT_SCALES)}")
    spec = read_spec(task_folder(name))
    return float(spec["cpu_timeout_s"] if scale == "cpu" and "cpu_timeout_s" in spec else spec["timeout_s"])


def task_form(name: str) -> str:
    """The task's form (task.yaml alone: no verifier is imported), for checks made before a run loads anything."""
    return read_spec(task_folder(name)).get("form", "construct")


def task_objectives(name: str) -> tuple[Objective, ...]:
    """The task's declared objectives (task.yaml alone: no verifier is imported), for readers of a run."""
    folder = task_folder(name)
    return read_objectives(folder / "task.yaml", read_spec(folder).get("objectives", []))


def load_task(name: str) -> Task:
    folder = task_folder(name)
    spec = read_spec(folder)
    for file in FILES:
        if not (folder / file).is_file():
            raise ValueError(f"{folder}: missing {file} (a task folder needs task.yaml, {', '.join(FILES)})")
    initial = (folder / "initial_program.py").read_text(encoding="utf-8")
    check_initial_program(folder / "initial_program.py", initial, spec["entry_function"], spec.get("form", "construct"))
    module_spec = importlib.util.spec_from_file_location(f"helix_task_{name}_verifier", folder / "verifier.py")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    if not callable(getattr(module, "verify", None)):
        raise ValueError(f"{folder / 'verifier.py'}: must define verify(returned) -> Verdict")
    driver = getattr(module, spec["driver"], None) if "driver" in spec else None
    if "driver" in spec and not callable(driver):
        raise ValueError(f"{folder / 'verifier.py'}: does not define the callable {spec['driver']} named as 'driver' in "
                         "task.yaml (it returns the generator that drives the harness)")
    check_exact = getattr(module, "check_exact", None)
    if check_exact is not None and not callable(check_exact):
        raise ValueError(f"{folder / 'verifier.py'}: check_exact must be a function check_exact(returned) -> ExactCheck, "
                         f"got {type(check_exact).__name__}")
    return Task(
        name=spec["name"], description=(folder / "description.md").read_text(encoding="utf-8").strip() + "\n",
        initial_program=initial, entry_function=spec["entry_function"], timeout_s=float(spec["timeout_s"]),
        memory_mb=spec["memory_mb"], best_known=float(spec["best_known"]),
        best_known_source=spec["best_known_source"], folder=folder, _verify=module.verify,
        harness=read_harness(folder, spec) if "harness" in spec else None, harness_entry=spec.get("harness_entry"),
        driver=driver, data_files=read_data_files(folder, spec.get("data_files", [])), cascade_entry=spec.get("cascade_entry"),
        cascade_timeout_s=float(spec["cascade_timeout_s"]) if "cascade_timeout_s" in spec else None,
        prompt_template=read_prompt_template(folder),
        brief=(folder / "brief.md").read_text(encoding="utf-8").strip() + "\n" if (folder / "brief.md").is_file() else None,
        warm_start_mutations=tuple(spec.get("warm_start_mutations", ())),
        starter_reaches_best_known=spec.get("starter_reaches_best_known"),
        improvement_tolerance=float(spec.get("improvement_tolerance", IMPROVEMENT_TOLERANCE)),
        objectives=read_objectives(folder / "task.yaml", spec.get("objectives", [])),
        _check_exact=check_exact, heldout=_load_heldout(folder, module, spec),
        form=spec.get("form", "construct"),
    )


def _load_heldout(folder: Path, module, spec: dict) -> HeldOut | None:
    """task.yaml ``heldout`` (checked by ``check_heldout``) with its callables taken from verifier.py."""
    if "heldout" not in spec:
        return None
    entry = spec["heldout"]
    found = {key: getattr(module, entry[key], None) for key in ("driver", "verify")}
    for key, value in found.items():
        if not callable(value):
            raise ValueError(f"{folder / 'verifier.py'}: does not define the callable {entry[key]} named as heldout "
                             f"'{key}' in task.yaml")
    return HeldOut(verify=found["verify"], driver=found["driver"], about=" ".join(entry["about"].split()))
