"""The five search-form task folders (issue 54, item 3): each starter, our own trusted code, is called
in-process as the search form calls it, entry(construction, budget_s, seed): with None (it must start
from the constructor task's starting construction and improve on it), then with its own output twice;
every result and every report(construction) it makes is accepted by the task's verifier and never
worse than what it was given. A search whose every candidate is worse must hand back what it got, and
a construction of the wrong shape is refused with a ValueError naming the shape.

Until the search form lands in tasks/base.py, load_task refuses these folders ("unknown key 'form'"),
so the folders' files are read directly here; once it lands, load_task(name) gives the same verifier."""

from __future__ import annotations

import ast
import importlib.util
import json
import re

import numpy as np
import pytest
import yaml

from tasks.base import TASKS_DIR

BUDGET_S = 0.1
TIME_LIMIT = re.compile(r"\b\d+(?:\.\d+)?\s*(?:s|secs?|seconds?|mins?|minutes?|h|hours?)\b"
                        r"|\b(?:one|two|three|a|an)\s+(?:second|minute|hour)s?\b", re.I)  # as tests/tasks/test_tasks.py


def _halved(centers, radii):
    return centers, radii / 2


def _halved_rect(width, centers, radii):
    return width, centers, radii / 2


def _collapsed(points):
    """Point 1 moved next to point 0: a code with a tiny smallest angle."""
    points = points.copy()
    points[1] = points[0] + 1e-3
    return points


# A local optimisation that always makes things worse, in each starter's own polish signature.
WORSE = {"circle_packing_26_search": _halved, "circle_packing_32_search": _halved,
         "circle_packing_rect_21_search": _halved_rect, "spherical_code_30_search": _collapsed,
         "autocorrelation_third_search": lambda heights: np.ones_like(heights)}  # C = 2, the constant function's

# Constructions of the wrong shape, and the words the starter's ValueError must contain.
WRONG = {
    "circle_packing_26_search": [({"centers": [[0.5, 0.5]] * 25, "radii": [0.1] * 25}, r"shape \(26, 2\)"),
                                 ([[[0.5, 0.5, 0.5]] * 26, [0.1] * 26], r"shape \(26, 2\)"), (7, "int")],
    "circle_packing_32_search": [({"centers": [[0.5, 0.5]] * 26, "radii": [0.1] * 26}, r"shape \(32, 2\)"),
                                 ("packing", "str")],
    "circle_packing_rect_21_search": [({"width": 1.0, "height": 1.0, "centers": [[0.5, 0.5]] * 20, "radii": [0.1] * 20},
                                       r"shape \(21, 2\)"),
                                      ({"centers": [[0.5, 0.5]] * 21, "radii": [0.1] * 21}, "width"),
                                      ({"width": 2.5, "height": 1.0, "centers": [[0.5, 0.5]] * 21,
                                        "radii": [0.1] * 21}, "width")],
    "spherical_code_30_search": [([[1.0, 0.0, 0.0]] * 29, r"shape \(30, 3\)"), ([[1.0, 0.0]] * 30, r"shape \(30, 3\)"),
                                 ([[0.0, 0.0, 0.0]] + [[1.0, 0.0, 0.0]] * 29, "nonzero length")],
    "autocorrelation_third_search": [([[1.0, 2.0], [3.0, 4.0]], "1 to 1000 heights"), ([], "1 to 1000 heights"),
                                     ([1.0, -1.0], "nonzero sum"), ([1.0] * 1001, "1 to 1000 heights"),
                                     ({"heights": [1.0]}, "got dict")],
}
NAMES = sorted(WORSE)


def test_every_search_folder_is_covered():
    assert sorted(p.parent.name for p in TASKS_DIR.glob("*_search/task.yaml")) == NAMES


def spec_of(name: str) -> dict:
    return yaml.safe_load((TASKS_DIR / name / "task.yaml").read_text(encoding="utf-8"))


def verifier(name: str):
    """verify() of a task folder, loaded from its file (load_task refuses 'form' until the search form lands)."""
    spec = importlib.util.spec_from_file_location(f"test_search_{name}_verifier", TASKS_DIR / name / "verifier.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.verify


def program(name: str, reports: list | None = None) -> dict:
    """The namespace of a task's initial_program.py, run as the sandbox runs it, with report() injected
    when ``reports`` is given (it collects each reported construction as JSON data)."""
    namespace = {"__name__": f"test_search_{name}_program"}
    if reports is not None:
        namespace["report"] = lambda construction: reports.append(as_json(construction))
    path = TASKS_DIR / name / "initial_program.py"
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
    return namespace


def as_json(value):
    """What the verifier and the next call receive: the construction as plain JSON data."""
    return json.loads(json.dumps(value, default=lambda o: o.tolist()))


def constructor_start(name: str) -> float:
    """The score of the constructor task's starter, as the constructor's verifier gives it."""
    base = name.removesuffix("_search")
    returned = program(base)[spec_of(base)["entry_function"]]()
    verdict = verifier(base)(as_json(returned))
    assert verdict.valid, verdict.feedback
    return verdict.reward


@pytest.mark.parametrize("name", NAMES)
def test_the_folder_is_its_constructor_task_in_search_form(name):
    spec, base = spec_of(name), spec_of(name.removesuffix("_search"))
    assert spec["name"] == name and spec["form"] == "search"
    assert (spec["best_known"], spec["best_known_source"]) == (base["best_known"], base["best_known_source"])
    assert spec["cpu_timeout_s"] <= base["cpu_timeout_s"] and spec["timeout_s"] == base["timeout_s"]
    source = (TASKS_DIR / name / "initial_program.py").read_text(encoding="utf-8")
    entry = next(f for f in ast.parse(source).body if isinstance(f, ast.FunctionDef) and f.name == spec["entry_function"])
    assert [a.arg for a in entry.args.args] == ["construction", "budget_s", "seed"] and not entry.args.defaults
    assert source.index("# EVOLVE-BLOCK-START") < source.index("# EVOLVE-BLOCK-END")
    assert "except NameError:" in source.split("# EVOLVE-BLOCK-START")[0]  # report() works outside the sandbox too
    for doc in ("description.md", "brief.md"):
        text = (TASKS_DIR / name / doc).read_text(encoding="utf-8")
        assert f"{spec['entry_function']}(construction, budget_s, seed)" in text and "report(" in text, doc
        assert TIME_LIMIT.findall(text) == [], doc  # the prompt states the limit the evaluator enforces


# The third autocorrelation call doubles the steps to 160, where one SLSQP hop from a barely optimised
# function costs seconds (up to its 100 iterations), so that chain is in the slow tier.
CHAINS = [pytest.param(n, marks=pytest.mark.slow) if n == "autocorrelation_third_search" else n for n in NAMES]


@pytest.mark.parametrize("name", CHAINS)
def test_the_starter_improves_on_its_own_output_and_reports_each_best(name):
    """None -> c0 -> c1 -> c2: each valid, never worse than its input; c0 better than the constructor's
    start, which is what the None call reports first. Every report is valid, no worse than the one
    before, and the last one is what the call returned (so a kill at the limit loses nothing)."""
    verify, entry = verifier(name), spec_of(name)["entry_function"]
    reports: list = []
    search = program(name, reports)[entry]
    start = constructor_start(name)
    construction, previous = None, None
    for seed in range(3):
        reports.clear()
        returned = as_json(search(construction, BUDGET_S, seed))
        verdict = verify(returned)
        assert verdict.valid, verdict.feedback
        scores = [verify(r) for r in reports]
        assert all(s.valid for s in scores), [s.feedback for s in scores if not s.valid]
        rewards = [s.reward for s in scores]
        assert all(b >= a - 1e-12 for a, b in zip(rewards, rewards[1:])) and reports[-1] == returned
        if previous is None:
            assert rewards[0] == pytest.approx(start, abs=1e-12)  # the run starts where the constructor's does
            assert verdict.reward > start
        else:
            assert verdict.reward >= previous - 1e-12
        construction, previous = returned, verdict.reward


@pytest.mark.parametrize("name", NAMES)
def test_a_search_whose_every_candidate_is_worse_returns_what_it_was_given(name):
    """The keep-what-improves rule on a real construction (one call's result): with a local optimiser
    that only makes things worse, the search must hand back its input, not its last candidate."""
    verify, entry = verifier(name), spec_of(name)["entry_function"]
    reports: list = []
    namespace = program(name, reports)
    given = as_json(namespace[entry](None, BUDGET_S, 0))
    namespace["polish"] = WORSE[name]
    reports.clear()
    returned = as_json(namespace[entry](given, BUDGET_S, 1))
    assert verify(returned).reward == pytest.approx(verify(given).reward, abs=1e-12)
    assert [verify(r).reward for r in reports] == pytest.approx([verify(given).reward] * len(reports), abs=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_a_construction_of_the_wrong_shape_is_refused_with_the_reason(name):
    search = program(name)[spec_of(name)["entry_function"]]
    for construction, words in WRONG[name]:
        with pytest.raises(ValueError, match=words):
            search(construction, BUDGET_S, 0)


@pytest.mark.parametrize("name", NAMES)
def test_the_verifier_scores_as_the_constructor_tasks_and_names_the_search_entry(name):
    base = name.removesuffix("_search")
    verify, constructor_verify = verifier(name), verifier(base)
    start = as_json(program(base)[spec_of(base)["entry_function"]]())
    assert verify(start).reward == constructor_verify(start).reward > 0
    rejected = verify("a string")
    assert not rejected.valid and f"{spec_of(name)['entry_function']}(construction, budget_s, seed)" in rejected.feedback
    assert spec_of(base)["entry_function"] not in rejected.feedback
