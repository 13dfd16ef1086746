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

Optional task.yaml keys (all checked at load time):

* ``form``: ``construct`` (the default) or ``search``. A construct-form program's ``entry_function()``
  builds its answer from nothing. A search-form program's is called ``entry_function(construction,
  budget_s, seed)``: ``construction`` is its parent's construction as the verifier received it (JSON
  data; ``None`` on the run's first call, when the starter builds its own), ``budget_s`` the seconds it
  should spend (less than the time limit, which still holds), ``seed`` an int fresh per child; it returns
  an improved construction in the verifier's format, and may call ``report(construction)`` (a global the
  sandbox provides) so that, stopped by the time limit, its last report is scored. The verifier is the
  same either way: it scores what comes back from scratch. The starter's entry function must take those
  three arguments (checked here); a search cannot have a harness, a driver or a cascade. See
  docs/search_form.md.

* ``harness`` + ``harness_entry``: a trusted Python file that the sandbox executes right after the
  candidate program, in the same module, and whose ``harness_entry()`` it calls instead of the
  program's ``entry_function``. Its definitions come last, so they win over any redefinition by the
  program; only the program's frames appear in tracebacks. Use it when the program supplies a piece
  (e.g. ``func(x, params)``) that must be driven (fitted, simulated) inside the sandbox, because
  untrusted code never runs in the trainer. Whatever the harness returns is still only an artefact:
  the verifier, in the parent, scores it against data the child never sees. The path is relative to
  tasks/ and stays inside it (no ``..``, no absolute path, no symlink out): a family's shared
  harness is ``families/<family>/harness.py`` (tasks/families/ holds the code a family of task
  folders shares), a task's own ``<task>/harness.py``. A user's task outside the repository
  (tasks/paths.py) names it relative to the folder that holds its folder, or to tasks/ for a family's.
* ``driver`` (needs a harness; no cascade): the harness's entry is driven step by step by trusted
  code in the evaluating process (rewards/channel.py), for tasks whose data the program must not
  see at once (online bin packing: the items still to come). The value names a callable defined by
  verifier.py (trusted, loaded here) that returns a fresh generator per run: ``reply = yield
  request``, its return value the artefact ``verify`` gets. The sandbox calls
  ``harness_entry(request)`` once per request and sends back what it returns (JSON both ways); the
  driver must treat each reply as hostile (check its type and range, raise ValueError with one
  line on what is wrong: the run ends as bad_output) and enforce every rule itself. Data the driver
  needs stay out of ``data_files``: nothing of them enters the sandbox but what it sends. Under
  ``task.eval_backend: ray`` the callable is pickled to the workers (its module by value, so it
  may import only numpy and the standard library).
* ``data_files``: plain file names in the task folder, copied into the child's temporary working
  directory (read them with ``np.load(name, allow_pickle=False)``). Anything the verifier needs
  to keep secret (held-out targets) must NOT be listed.
* ``cpu_timeout_s``: the task's limit at CPU scale (configs/base/cpu.yaml sets task.timeout_scale: cpu),
  where the embedded 135M model's programs are the starter plus small edits: a hung one then costs
  this instead of the paper's ``timeout_s``. Without it, CPU runs get ``timeout_s`` as well.
* ``cascade_entry`` + ``cascade_timeout_s`` (need a harness): cascade evaluation. Stage 1 runs the
  harness's cheap ``cascade_entry()`` under the short limit; only if it returns normally does stage
  2, the full run, happen. A stage-1 failure (error, timeout, crash) is rejected with reward 0 and
  feedback saying the full evaluation was skipped, saving its cost. Stage 1's result is
  discarded, so a passing program gets exactly the reward it would get without the cascade; the
  check must only reject programs the full run would fail too (e.g. the first call the full run
  makes, with the same checks), and its limit must leave room for loading the program. The cost:
  one more sandbox start (~0.4 s) per program that passes; the gain: a program that hangs costs
  cascade_timeout_s instead of timeout_s.
* ``starter_reaches_best_known``: a sentence saying why the shipped starter already scores
  ``best_known`` (for example, a benchmark that starts from the record to improve on it). Without
  it a starter must score strictly below ``best_known`` (tests/tasks/test_tasks.py), since a starter at
  the record means the value or its unit is wrong; with it, the starter must reach it.
* ``improvement_tolerance`` (default 1e-9): the relative margin by which a reward must beat the best
  so far to count as a new best (``Task.improves``: the epoch metrics' ``new_best_frac``, the report).
  A child that differs from the best only in the last floating-point digits is no improvement; a
  task whose reward is noisy or rounded (a fitted model's score) states a larger one.
* ``objectives``: extra objectives selection ranks on besides reward and Div, a list of
  ``{metric: NAME, goal: max|min}``: NAME is a metric the verifier returns with every verdict, or
  ``eval_time_s`` (the evaluation's wall time, which every evaluated program has); at most once each,
  neither ``reward`` nor ``diversity``. Only ``selection.strategy: nsga2`` uses them; a child missing
  the metric, or with a non-finite value, is the worst on it (population/objectives.py, docs/population.md).
* ``warm_start_mutations``: extra kinds of synthetic edit for the warm start (train.warm_start.data),
  besides its numeric and line changes. ``terms``: a sum of fitted terms (``x[:, 0] * params[0] + ...``)
  gains one, for tasks whose program is a model with coefficients the harness fits.
* ``heldout`` (needs a driver): the run's best program is also scored, once at the end of the run, on
  instances the run never saw: ``{driver: NAME, verify: NAME, about: "..."}``, a second driver and
  verifier defined by verifier.py (the held-out data stay in the evaluating process, as the
  driver's do) and a sentence saying what the held-out set is (shown beside its figure).
  ``Task.held_out()`` is the task with them in place of ``driver`` and ``verify``.

verifier.py may also define ``check_exact(returned) -> ExactCheck``: the artefact of a valid child
that reaches the task's best known (or beats the run's best) re-checked at zero tolerance in exact
arithmetic (``Task.check_exact``; docs/tasks.md lists each family's check). Without it a task's
claims are "unchecked".
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import logging
import math
import numbers
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

from tasks import paths
from tasks.template import check_template

TASKS_DIR = Path(__file__).resolve().parent
TIMEOUT_SCALES = ("paper", "cpu")  # task.timeout_scale: which of task.yaml's limits a run defaults to
FORMS = ("construct", "search")  # task.yaml form: entry() builds an answer, or entry(construction, budget_s, seed) improves one
SEARCH_ARGUMENTS = ("construction", "budget_s", "seed")  # what a search-form entry function is called with, in order
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
class Objective:
    """An objective the task declares (task.yaml ``objectives``): selection maximises or minimises
    this metric of every child beside reward and Div (population/objectives.py reads its values)."""

    metric: str  # a key of the verifier's metrics, or eval_time_s (the evaluation's wall time)
    goal: str  # "max" or "min"


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


# Mutation kinds a task may add to the warm start's numeric and line edits (train.warm_start.data.EXTRA)
WARM_START_MUTATIONS = ("terms",)


def _is_tasks_path(value: str) -> bool:
    """A relative POSIX path that cannot climb: checked before it is joined to tasks/, so a path
    that leaves tasks/ is refused by its form, not only by where it happens to resolve."""
    return "\\" not in value and all(part not in ("", ".", "..") for part in value.split("/"))


# key -> (accepted types, check, what the check means)
_SPEC: dict[str, tuple[tuple[type, ...], Callable[[Any], bool], str]] = {
    "name": ((str,), bool, "a non-empty string"),
    "entry_function": ((str,), str.isidentifier, "a Python identifier"),
    "timeout_s": ((int, float), lambda v: v > 0, "a number > 0 (seconds)"),
    "memory_mb": ((int,), lambda v: v >= 64, "an integer >= 64 (MB)"),
    "best_known": ((int, float), math.isfinite, "a finite number"),
    "best_known_source": ((str,), bool, "a non-empty string"),
}
_OPTIONAL: dict[str, tuple[tuple[type, ...], Callable[[Any], bool], str]] = {
    "form": ((str,), lambda v: v in FORMS, "'construct' (entry() builds an answer, the default) or 'search' "
             "(entry(construction, budget_s, seed) improves the construction it is given)"),
    "harness": ((str,), lambda v: _is_tasks_path(v) and v.endswith(".py"),
                "a .py file path relative to tasks/ (e.g. families/symreg/harness.py): '/' between parts, "
                "none of them '..', '.' or empty, so not absolute"),
    "harness_entry": ((str,), str.isidentifier, "a Python identifier (a function of the harness)"),
    "driver": ((str,), str.isidentifier, "a Python identifier (a callable defined by verifier.py)"),
    "data_files": ((list,), lambda v: all(isinstance(n, str) and n and "/" not in n and "\\" not in n
                                          and not n.startswith(".") for n in v),
                   "a list of plain file names in the task folder"),
    "cascade_entry": ((str,), str.isidentifier, "a Python identifier (a function of the harness)"),
    "cpu_timeout_s": ((int, float), lambda v: v > 0, "a number > 0 (seconds)"),
    "cascade_timeout_s": ((int, float), lambda v: v > 0, "a number > 0 (seconds)"),
    "warm_start_mutations": ((list,), lambda v: len(set(v)) == len(v) and all(n in WARM_START_MUTATIONS for n in v),
                             "a list of distinct names from: " + ", ".join(WARM_START_MUTATIONS)),
    "starter_reaches_best_known": ((str,), lambda v: len(v.split()) >= 5,
                                   "a sentence (5 words or more) saying why the starter scores best_known"),
    "improvement_tolerance": ((int, float), lambda v: 0 <= v < 1,
                              "a relative margin >= 0 and < 1 (e.g. 1e-9): what a reward must beat the best by to count"),
    # each entry is checked by _objectives, which names the entry and the problem
    "objectives": ((list,), lambda v: True, "a list of {metric: NAME, goal: max|min} mappings"),
    # its keys are checked by _heldout, which names the key and the problem
    "heldout": ((dict,), lambda v: True, "a mapping {driver: NAME, verify: NAME, about: \"...\"}"),
}
HELDOUT_KEYS = ("driver", "verify", "about")
OBJECTIVE_GOALS = ("max", "min")  # population.objectives.GOALS (tasks/ imports no population module)
OBJECTIVE_KEYS = ("metric", "goal")
RESERVED_METRICS = ("reward", "diversity")  # selected on always, so never declared
_TOGETHER = (("harness", "harness_entry"), ("cascade_entry", "cascade_timeout_s"))
_FILES = ("description.md", "initial_program.py", "verifier.py")
MAX_DATA_BYTES = 16 << 20  # per data file: they are copied for every evaluation


def _read_spec(folder: Path) -> dict:
    path = folder / "task.yaml"
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: must be a mapping with keys {', '.join(_SPEC)}")
    known = [*_SPEC, *_OPTIONAL]
    for key in spec:
        if key not in known:
            near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            hint = f" Did you mean '{near[0]}'?" if near else ""
            raise ValueError(f"{path}: unknown key '{key}'.{hint} Valid keys: {', '.join(known)}")
    for key, (types, check, meaning) in _SPEC.items():
        if key not in spec:
            raise ValueError(f"{path}: missing key '{key}' ({meaning})")
        value = spec[key]
        if isinstance(value, bool) or not isinstance(value, types) or not check(value):
            raise ValueError(f"{path}: '{key}' must be {meaning}, got {value!r}")
    for key, (types, check, meaning) in _OPTIONAL.items():
        value = spec.get(key)
        if key in spec and (isinstance(value, bool) or not isinstance(value, types) or not check(value)):
            raise ValueError(f"{path}: '{key}' must be {meaning}, got {value!r}")
    for first, second in _TOGETHER:
        if (first in spec) != (second in spec):
            have, lack = (first, second) if first in spec else (second, first)
            raise ValueError(f"{path}: '{have}' needs '{lack}' as well")
    if "driver" in spec and "harness" not in spec:
        raise ValueError(f"{path}: 'driver' drives the harness's entry step by step: add 'harness' and 'harness_entry'")
    if "driver" in spec and "cascade_entry" in spec:
        raise ValueError(f"{path}: 'driver' and 'cascade_entry' cannot be combined (a cascade's stage 1 would run undriven)")
    if spec.get("form") == "search":
        extra = [key for key in ("harness", "driver", "cascade_entry") if key in spec]
        if extra:
            raise ValueError(f"{path}: form: search calls the program's {spec['entry_function']}(construction, budget_s, "
                             f"seed) itself; it cannot be combined with '{extra[0]}'")
    if "cascade_entry" in spec and "harness" not in spec:
        raise ValueError(f"{path}: 'cascade_entry' names a function of the harness: add 'harness' and 'harness_entry'")
    for limit in ("timeout_s", "cpu_timeout_s"):
        if "cascade_timeout_s" in spec and limit in spec and spec["cascade_timeout_s"] >= spec[limit]:
            raise ValueError(f"{path}: 'cascade_timeout_s' ({spec['cascade_timeout_s']}) must be below '{limit}' "
                             f"({spec[limit]}): stage 1 is the cheap check")
    _objectives(path, spec.get("objectives", []))
    if "heldout" in spec:
        _heldout(path, spec)
    if spec["name"] != folder.name:
        raise ValueError(f"{path}: name '{spec['name']}' must match the folder name '{folder.name}'")
    return spec


def _objectives(path: Path, entries: list) -> tuple[Objective, ...]:
    """task.yaml ``objectives`` checked entry by entry, each problem one line naming the entry."""
    out: list[Objective] = []
    for k, entry in enumerate(entries):
        at = f"{path}: objectives[{k}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{at} must be a mapping {{metric: NAME, goal: max|min}}, got {entry!r}")
        for key in entry:
            if key not in OBJECTIVE_KEYS:
                near = difflib.get_close_matches(str(key), OBJECTIVE_KEYS, n=1, cutoff=0.6)
                hint = f" Did you mean '{near[0]}'?" if near else ""
                raise ValueError(f"{at}: unknown key '{key}'.{hint} An objective has only 'metric' and 'goal'")
        for key in OBJECTIVE_KEYS:
            if key not in entry:
                raise ValueError(f"{at}: missing key '{key}' (an objective is {{metric: NAME, goal: max|min}})")
        metric, goal = entry["metric"], entry["goal"]
        if not isinstance(metric, str) or not metric.strip() or metric != metric.strip():
            raise ValueError(f"{at}: 'metric' must be a non-empty string without surrounding spaces (a key of the "
                             f"verifier's metrics, or eval_time_s), got {metric!r}")
        if metric in RESERVED_METRICS:
            raise ValueError(f"{at}: '{metric}' is always an objective (reward and diversity are); declare only "
                             "other metrics")
        if not isinstance(goal, str) or goal not in OBJECTIVE_GOALS:
            raise ValueError(f"{at}: 'goal' must be 'max' or 'min', got {goal!r}")
        if any(o.metric == metric for o in out):
            raise ValueError(f"{path}: objectives: metric '{metric}' is declared twice")
        out.append(Objective(metric, goal))
    return tuple(out)


def _heldout(path: Path, spec: dict) -> None:
    """task.yaml ``heldout`` checked key by key, each problem one line naming the key."""
    entry, at = spec["heldout"], f"{path}: heldout"
    for key in entry:
        if key not in HELDOUT_KEYS:
            near = difflib.get_close_matches(str(key), HELDOUT_KEYS, n=1, cutoff=0.6)
            hint = f" Did you mean '{near[0]}'?" if near else ""
            raise ValueError(f"{at}: unknown key '{key}'.{hint} Valid keys: {', '.join(HELDOUT_KEYS)}")
    for key in HELDOUT_KEYS:
        if key not in entry:
            raise ValueError(f"{at}: missing key '{key}' (heldout is {{driver: NAME, verify: NAME, about: \"...\"}})")
    for key in ("driver", "verify"):
        if not isinstance(entry[key], str) or not entry[key].isidentifier():
            raise ValueError(f"{at}: '{key}' must be a Python identifier (a callable defined by verifier.py), "
                             f"got {entry[key]!r}")
    if not isinstance(entry["about"], str) or len(entry["about"].split()) < 5:
        raise ValueError(f"{at}: 'about' must be a sentence (5 words or more) saying what the held-out set is and "
                         f"how it was made, got {entry['about']!r}")
    if "driver" not in spec:
        raise ValueError(f"{at}: a held-out evaluation drives the harness over held-out instances, so the task needs "
                         "'driver' (and 'harness', 'harness_entry') as well")


def _defined_functions(path: Path, source: str) -> set[str]:
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ValueError(f"{path}: does not parse: {exc}") from None
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _read_harness(folder: Path, spec: dict) -> str:
    """The harness, relative to the folder that holds the task's folder (tasks/ for a shipped task), else, for
    a user's task elsewhere, to the repository's tasks/ (a family's shared harness); never outside either."""
    bases = list(dict.fromkeys([folder.parent.resolve(), TASKS_DIR.resolve()]))
    for base in bases:
        path = (base / spec["harness"]).resolve()
        if path.is_relative_to(base) and path.is_file():
            break
    else:
        raise ValueError(f"{folder / 'task.yaml'}: harness '{spec['harness']}' must be a file inside "
                         f"{' or '.join(map(str, bases))} (the path is relative to tasks/, not to the task folder; "
                         "for a task of yours elsewhere, to the folder holding its folder)")
    source = path.read_text(encoding="utf-8")
    defined = _defined_functions(path, source)
    for key in ("harness_entry", "cascade_entry"):
        if key in spec and spec[key] not in defined:
            raise ValueError(f"{path}: does not define {spec[key]}() named as '{key}' in task.yaml")
    return source


def _data_files(folder: Path, names: list[str]) -> tuple[Path, ...]:
    paths = []
    for name in names:
        path = folder / name
        if not path.is_file():
            raise ValueError(f"{folder / 'task.yaml'}: data file '{name}' is not a file in {folder}")
        if path.stat().st_size > MAX_DATA_BYTES:
            raise ValueError(f"{path}: {path.stat().st_size / 2**20:.1f} MB, over the {MAX_DATA_BYTES >> 20} MB "
                             "limit for files copied into every sandbox")
        paths.append(path)
    if len(set(names)) != len(names):
        raise ValueError(f"{folder / 'task.yaml'}: 'data_files' lists a name twice")
    return tuple(paths)


def _read_prompt_template(folder: Path) -> str | None:
    """prompt.md checked now; a near-miss name (prompt.txt, Prompt.md) is an error, not ignored."""
    for path in folder.iterdir():
        if path.name != "prompt.md" and difflib.get_close_matches(path.name.lower(), ["prompt.md"], cutoff=0.7):
            raise ValueError(f"{path}: a prompt template must be named prompt.md")
    path = folder / "prompt.md"
    if not path.is_file():
        return None
    template = path.read_text(encoding="utf-8").strip()
    check_template(template, str(path))
    return template


def _check_initial_program(path: Path, source: str, entry: str, form: str = "construct") -> None:
    if entry not in _defined_functions(path, source):
        raise ValueError(f"{path}: does not define the entry function {entry}() named in task.yaml")
    if form == "search" and not _takes_search_call(ast.parse(source), entry):
        shown = ", ".join(SEARCH_ARGUMENTS)
        raise ValueError(f"{path}: form: search calls {entry}({shown}); define it as def {entry}({shown}): "
                         "three positional parameters")


def _takes_search_call(tree: ast.Module, entry: str) -> bool:
    """Whether the last top-level ``def entry`` can be called with the three search arguments by position."""
    node = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entry][-1]
    args = node.args
    positional = len(args.posonlyargs) + len(args.args)
    required = positional - len(args.defaults)
    kw_required = sum(default is None for default in args.kw_defaults)
    return required <= 3 and (positional >= 3 or args.vararg is not None) and kw_required == 0 \
        and not isinstance(node, ast.AsyncFunctionDef)


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
    spec = _read_spec(task_folder(name))
    return float(spec["cpu_timeout_s"] if scale == "cpu" and "cpu_timeout_s" in spec else spec["timeout_s"])


def task_form(name: str) -> str:
    """The task's form (task.yaml alone: no verifier is imported), for checks made before a run loads anything."""
    return _read_spec(task_folder(name)).get("form", "construct")


def task_objectives(name: str) -> tuple[Objective, ...]:
    """The task's declared objectives (task.yaml alone: no verifier is imported), for readers of a run."""
    folder = task_folder(name)
    return _objectives(folder / "task.yaml", _read_spec(folder).get("objectives", []))


def load_task(name: str) -> Task:
    folder = task_folder(name)
    spec = _read_spec(folder)
    for file in _FILES:
        if not (folder / file).is_file():
            raise ValueError(f"{folder}: missing {file} (a task folder needs task.yaml, {', '.join(_FILES)})")
    initial = (folder / "initial_program.py").read_text(encoding="utf-8")
    _check_initial_program(folder / "initial_program.py", initial, spec["entry_function"], spec.get("form", "construct"))
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
        harness=_read_harness(folder, spec) if "harness" in spec else None, harness_entry=spec.get("harness_entry"),
        driver=driver, data_files=_data_files(folder, spec.get("data_files", [])), cascade_entry=spec.get("cascade_entry"),
        cascade_timeout_s=float(spec["cascade_timeout_s"]) if "cascade_timeout_s" in spec else None,
        prompt_template=_read_prompt_template(folder),
        brief=(folder / "brief.md").read_text(encoding="utf-8").strip() + "\n" if (folder / "brief.md").is_file() else None,
        warm_start_mutations=tuple(spec.get("warm_start_mutations", ())),
        starter_reaches_best_known=spec.get("starter_reaches_best_known"),
        improvement_tolerance=float(spec.get("improvement_tolerance", IMPROVEMENT_TOLERANCE)),
        objectives=_objectives(folder / "task.yaml", spec.get("objectives", [])),
        _check_exact=check_exact, heldout=_load_heldout(folder, module, spec),
        form=spec.get("form", "construct"),
    )


def _load_heldout(folder: Path, module, spec: dict) -> HeldOut | None:
    """task.yaml ``heldout`` (checked by ``_heldout``) with its callables taken from verifier.py."""
    if "heldout" not in spec:
        return None
    entry = spec["heldout"]
    found = {key: getattr(module, entry[key], None) for key in ("driver", "verify")}
    for key, value in found.items():
        if not callable(value):
            raise ValueError(f"{folder / 'verifier.py'}: does not define the callable {entry[key]} named as heldout "
                             f"'{key}' in task.yaml")
    return HeldOut(verify=found["verify"], driver=found["driver"], about=" ".join(entry["about"].split()))
