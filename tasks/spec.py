"""A task folder's files read and checked: task.yaml key by key (each problem one line naming the file and
the key), the harness, the data files, prompt.md and the starter's entry function. tasks/base.py builds the
Task from what this returns; nothing here imports the verifier, so a config can ask a task's form or limit
(``task_form``, ``own_timeout_s``) without running any of the task's code.

Required task.yaml keys: ``name`` (the folder's), ``entry_function``, ``timeout_s``, ``memory_mb``,
``best_known``, ``best_known_source``.

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
"""

from __future__ import annotations

import ast
import difflib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from tasks.template import check_template

TASKS_DIR = Path(__file__).resolve().parent
FORMS = ("construct", "search")  # task.yaml form: entry() builds an answer, or entry(construction, budget_s, seed) improves one
SEARCH_ARGUMENTS = ("construction", "budget_s", "seed")  # what a search-form entry function is called with, in order


@dataclass(frozen=True)
class Objective:
    """An objective the task declares (task.yaml ``objectives``): selection maximises or minimises
    this metric of every child beside reward and Div (population/objectives.py reads its values)."""

    metric: str  # a key of the verifier's metrics, or eval_time_s (the evaluation's wall time)
    goal: str  # "max" or "min"



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
    # each entry is checked by read_objectives, which names the entry and the problem
    "objectives": ((list,), lambda v: True, "a list of {metric: NAME, goal: max|min} mappings"),
    # its keys are checked by check_heldout, which names the key and the problem
    "heldout": ((dict,), lambda v: True, "a mapping {driver: NAME, verify: NAME, about: \"...\"}"),
}
HELDOUT_KEYS = ("driver", "verify", "about")
OBJECTIVE_GOALS = ("max", "min")  # population.objectives.GOALS (tasks/ imports no population module)
OBJECTIVE_KEYS = ("metric", "goal")
RESERVED_METRICS = ("reward", "diversity")  # selected on always, so never declared
_TOGETHER = (("harness", "harness_entry"), ("cascade_entry", "cascade_timeout_s"))
FILES = ("description.md", "initial_program.py", "verifier.py")
MAX_DATA_BYTES = 16 << 20  # per data file: they are copied for every evaluation


def read_spec(folder: Path) -> dict:
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
    read_objectives(path, spec.get("objectives", []))
    if "heldout" in spec:
        check_heldout(path, spec)
    if spec["name"] != folder.name:
        raise ValueError(f"{path}: name '{spec['name']}' must match the folder name '{folder.name}'")
    return spec


def read_objectives(path: Path, entries: list) -> tuple[Objective, ...]:
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


def check_heldout(path: Path, spec: dict) -> None:
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


def read_harness(folder: Path, spec: dict) -> str:
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


def read_data_files(folder: Path, names: list[str]) -> tuple[Path, ...]:
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


def read_prompt_template(folder: Path) -> str | None:
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


def check_initial_program(path: Path, source: str, entry: str, form: str = "construct") -> None:
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
