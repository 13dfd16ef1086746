"""Task registry, strict task.yaml validation, and the circle-packing verifier against hand-built packings."""

import math
import re
import runpy
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tasks.base
from rewards import Evaluator
from rollout.prompts import PromptBuilder
from tasks import Verdict, available_tasks, load_task, shipped_tasks
from tests.helpers.hostile_cases import brute_force_certified_sum
from tests.helpers.task_copies import load_error

TASK = load_task("circle_packing_26")
GAP = 0.1 * math.sqrt(2) - 0.1  # the hole between four touching r = 0.1 circles
GRID_SUM = 25 * 0.1 + GAP


def grid_packing():
    """A 5x5 grid of r = 0.1 circles plus circle 25 in the hole at (0.2, 0.2) between four of them."""
    centers = [[0.1 + 0.2 * i, 0.1 + 0.2 * j] for i in range(5) for j in range(5)] + [[0.2, 0.2]]
    return centers, [0.1] * 25 + [GAP]


def brute_force_valid(centers, radii, tol=1e-9):
    """Eq. 18 written out, one constraint at a time."""
    for i, ((x, y), r) in enumerate(zip(centers, radii)):
        if r < 0 or x - r < -tol or y - r < -tol or x + r > 1 + tol or y + r > 1 + tol:
            return False
        for (x2, y2), r2 in zip(centers[i + 1:], radii[i + 1:]):
            if math.hypot(x - x2, y - y2) < r + r2 - tol:
                return False
    return True


def test_registry_lists_and_loads_every_task():
    names = shipped_tasks()
    assert "circle_packing_26" in names and set(names) <= set(available_tasks())
    for name in names:
        assert load_task(name).name == name


@pytest.mark.parametrize("name", ["circle_packing26", "circle-packing-26", "Circle_Packing_26", "circle_packing_2"])
def test_unknown_task_names_the_nearest_valid_one(name):
    with pytest.raises(ValueError, match=r"Did you mean [^?]*'circle_packing_26'") as info:
        load_task(name)
    assert repr(name) in str(info.value)


@pytest.mark.parametrize("name", ["../rewards", "", "circle_packing_26/", "/etc"])
def test_odd_task_names_are_rejected_not_resolved_as_paths(name):
    with pytest.raises(ValueError, match="Available tasks: .*circle_packing_26"):
        load_task(name)


def test_task_fields():
    assert TASK.entry_function == "run_packing" and TASK.timeout_s == 60.0 and TASK.memory_mb == 2048
    assert TASK.best_known == 2.6359830849 and "HELIX" in TASK.best_known_source
    assert "26 circles in a unit square" in TASK.description and "within the time limit" in TASK.description
    assert TASK.prompt_template is None  # no prompt.md: the default template
    assert "SEARCH" not in TASK.description and "REPLACE" not in TASK.description
    lines = TASK.initial_program.splitlines()
    assert 25 <= len(lines) <= 45 and "# EVOLVE-BLOCK-START" in lines and "# EVOLVE-BLOCK-END" in lines
    assert "def run_packing():" in TASK.initial_program and "import scipy" not in TASK.initial_program


@pytest.fixture()
def tasks_dir(tmp_path, monkeypatch):
    """A private tasks/ folder holding a copy of circle_packing_26 named `copy`."""
    shutil.copytree(TASK.folder, tmp_path / "copy", ignore=shutil.ignore_patterns("__pycache__"))
    spec = (tmp_path / "copy" / "task.yaml")
    spec.write_text(spec.read_text().replace("name: circle_packing_26", "name: copy"))
    monkeypatch.setattr(tasks.base, "TASKS_DIR", tmp_path)
    return tmp_path / "copy"


def test_adding_a_folder_adds_a_task(tasks_dir):
    assert available_tasks() == ["copy"]
    task = load_task("copy")
    assert task.verify(list(grid_packing())).reward == pytest.approx(GRID_SUM)


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace("timeout_s:", "timeout:"), ["unknown key 'timeout'", "timeout_s", "task.yaml"]),
    (lambda t: t.replace("memory_mb:", "memroy_mb:"), ["unknown key 'memroy_mb'", "'memory_mb'"]),
    (lambda t: "\n".join(ln for ln in t.splitlines() if not ln.startswith("best_known:")), ["missing key 'best_known'", "task.yaml"]),
    (lambda t: t.replace("memory_mb: 2048", "memory_mb: lots"), ["'memory_mb' must be an integer"]),
    (lambda t: t.replace("timeout_s: 60", "timeout_s: -1"), ["'timeout_s' must be a number > 0"]),
    (lambda t: t.replace("cpu_timeout_s: 20", "cpu_timeout_s: 0"), ["'cpu_timeout_s' must be a number > 0 (seconds), got 0"]),
    (lambda t: t.replace("cpu_timeout_s: 20", "cpu_timeout_s: quick"), ["'cpu_timeout_s' must be a number > 0"]),
    (lambda t: t.replace("cpu_timeout_s:", "cpu_timeout:"), ["unknown key 'cpu_timeout'", "'cpu_timeout_s'"]),
    (lambda t: t.replace("name: copy", "name: other"), ["must match the folder name"]),
    (lambda t: t + "\n  : [unclosed", ["not valid YAML"]),
    (lambda t: "- a list", ["must be a mapping"]),
])
def test_task_yaml_is_validated_strictly(tasks_dir, edit, words):
    error = load_error(tasks_dir, edit)
    for word in words:
        assert word in error
    assert str(tasks_dir / "task.yaml") in error


def test_task_folder_files_are_checked(tasks_dir):
    program = tasks_dir / "initial_program.py"
    program.write_text(program.read_text().replace("def run_packing", "def run"))
    with pytest.raises(ValueError, match=r"does not define the entry function run_packing\(\)"):
        load_task("copy")
    program.unlink()
    with pytest.raises(ValueError, match="missing initial_program.py"):
        load_task("copy")


class Sol:  # a parent for the prompt (rollout.prompts.Candidate)
    def __init__(self, code, reward, valid, feedback):
        self.code, self.reward, self.valid, self.feedback = code, reward, valid, feedback


# "20 s", "60 seconds", "1 minute", "two minutes", ...
TIME_LIMIT = re.compile(r"\b\d+(?:\.\d+)?\s*(?:s|secs?|seconds?|mins?|minutes?|h|hours?)\b"
                        r"|\b(?:one|two|three|a|an)\s+(?:second|minute|hour)s?\b", re.I)


@pytest.mark.parametrize("name", shipped_tasks())
@pytest.mark.parametrize("override", [None, 20])
def test_the_prompt_states_only_the_enforced_time_limit(tokenizer, name, override):
    """train/helix.py gives the evaluator task.timeout_s and the prompt the same limit: the
    description must not state another one (it said "1 minute" while configs enforced 20 s)."""
    task = load_task(name)
    enforced = Evaluator(task, workers=1, timeout_s=override).timeout_s
    assert enforced == (override or task.timeout_s)
    builder = PromptBuilder(tokenizer, task.description, task.entry_function, override or task.timeout_s, 8192, 2,
                            template=task.prompt_template)
    text = builder.build(Sol(task.initial_program, 0.5, True, "ok")).text
    assert TIME_LIMIT.findall(text) == [f"{enforced:g} seconds"]


PROMPT_MD = """Improve {entry_function}() (limit {timeout} s).

{parent}

{contract}
"""


def test_prompt_md_in_the_folder_is_the_tasks_template(tasks_dir, tokenizer):
    (tasks_dir / "prompt.md").write_text(PROMPT_MD)
    task = load_task("copy")
    assert task.prompt_template == PROMPT_MD.strip()
    builder = PromptBuilder(tokenizer, task.description, task.entry_function, 20, 4096, 2, template=task.prompt_template)
    text = builder.build(Sol(task.initial_program, 0.5, True, "ok")).text
    user = text.split("<|im_start|>user\n")[1]
    assert user.startswith("Improve run_packing() (limit 20 s).\n\n## Current Program\nStatus: reward 0.5 (valid)")
    assert user.index("# EVOLVE-BLOCK-START") < user.index("## Task\n") and "Problem Description" not in user
    assert user.endswith("If your program runs longer than 20 seconds it receives 0 reward.<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.parametrize("template, words", [
    (PROMPT_MD.replace("{timeout}", "{time_limit}"), ["unknown placeholder {time_limit}", "{timeout}"]),
    (PROMPT_MD.replace("{parent}", ""), ["missing the required placeholder {parent}"]),
    (PROMPT_MD.replace("{contract}", "Answer with SEARCH/REPLACE blocks."), ["missing the required placeholder {contract}"]),
])
def test_a_bad_prompt_md_fails_at_load_naming_file_and_placeholder(tasks_dir, template, words):
    (tasks_dir / "prompt.md").write_text(template)
    with pytest.raises(ValueError) as info:
        load_task("copy")
    assert str(info.value).startswith(f"{tasks_dir / 'prompt.md'}: ")
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("misnamed", ["prompt.txt", "prompts.md", "Prompt.md"])
def test_a_misnamed_prompt_template_is_not_silently_ignored(tasks_dir, misnamed):
    (tasks_dir / misnamed).write_text(PROMPT_MD)
    with pytest.raises(ValueError, match=f"{misnamed}: a prompt template must be named prompt.md"):
        load_task("copy")


def test_starter_program_is_valid_and_scores_its_sum_of_radii():
    centers, radii, _ = runpy.run_path(str(TASK.folder / "initial_program.py"))["run_packing"]()
    assert brute_force_valid(centers.tolist(), radii.tolist())
    verdict = TASK.verify([centers.tolist(), radii.tolist(), 99.0])
    assert verdict.valid and verdict.reward == pytest.approx(float(np.sum(radii)), abs=1e-12)
    assert 0.9 < verdict.reward < 2.0


def test_hand_built_packing_gets_its_exact_sum_and_reported_sums_are_ignored():
    centers, radii = grid_packing()
    verdict = TASK.verify([centers, radii, 1000.0])
    assert isinstance(verdict, Verdict) and verdict.valid and verdict.reward == pytest.approx(GRID_SUM, abs=1e-12)
    assert verdict.metrics == pytest.approx({"sum_radii": GRID_SUM, "n_circles": 26, "min_radius": GAP, "max_radius": 0.1,
                                             "tolerance_charge": 0.0})
    assert "valid packing: sum of radii 2.541421" in verdict.feedback and "best known 2.635983" in verdict.feedback
    assert "ratio 0.964" in verdict.feedback
    for form in ((centers, radii), {"centers": centers, "radii": radii, "sum_radii": 99},
                 (np.array(centers), np.array(radii), np.float64(5.0))):
        assert TASK.verify(form).reward == pytest.approx(GRID_SUM, abs=1e-12)


KEEP = object()


def with_circle(k, center=KEEP, radius=KEEP):
    """The grid packing with circle k moved and/or resized."""
    centers, radii = grid_packing()
    if center is not KEEP:
        centers[k] = list(center)
    if radius is not KEEP:
        radii[k] = radius
    return [centers, radii]


@pytest.mark.parametrize("returned, words", [
    (with_circle(25, radius=0.2), ["overlap", "4 pair(s)", "circles 0 and 25", "by 0.159", "4 violation(s)"]),
    (with_circle(0, center=(0.05, 0.1)), ["out of bounds", "1 circle(s)", "circle 0", "left edge", "by 0.05"]),
    (with_circle(24, center=(0.93, 0.9)), ["right edge", "circle 24", "by 0.03"]),
    (with_circle(12, radius=-0.1), ["negative radius", "circle 12", "-0.1"]),
    (with_circle(3, radius=float("nan")), ["NaN", "circle 3"]),
    (with_circle(3, center=(float("inf"), 0.5)), ["NaN or infinity", "centers"]),
    (with_circle(3, radius="0.1"), ["radii must contain only numbers"]),
    (with_circle(3, radius=None), ["only numbers"]),
    (with_circle(3, radius=True), ["only numbers"]),
    (with_circle(3, center=(0.5,)), ["centers must be a rectangular array"]),
    ([grid_packing()[0][:25], grid_packing()[1][:25]], ["shape (26, 2)", "got shape (25, 2)"]),
    ([grid_packing()[0], grid_packing()[1] + [0.0]], ["shape (26,)", "got shape (27,)"]),
    ([grid_packing()[0], [[0.1]] * 26], ["got shape (26, 1)"]),
    (["centres", grid_packing()[1]], ["centers must contain only numbers"]),
    ([grid_packing()[0], [{"r": 1}] * 26], ["only numbers"]),
    ({"centers": grid_packing()[0]}, ["lacks radii"]),
    ("a string", ["must return (centers, radii, sum_radii)", "got str"]),
    (None, ["got NoneType"]),
    (2.5, ["got float"]),
    ([1], ["sequence of length 1"]),
    ([0.0] * 100_000, ["sequence of length 100000"]),
])
def test_invalid_artefacts_score_zero_with_the_reason(returned, words):
    verdict = TASK.verify(returned)
    assert not verdict.valid and verdict.reward == 0.0
    for word in words:
        assert word in verdict.feedback, verdict.feedback


def test_tolerance_is_1e_9_absolute():
    assert TASK.verify(with_circle(25, radius=GAP + 5e-10)).valid
    assert not TASK.verify(with_circle(25, radius=GAP + 2e-9)).valid
    assert TASK.verify(with_circle(0, center=(0.1 - 5e-10, 0.1))).valid
    assert not TASK.verify(with_circle(0, center=(0.1 - 2e-9, 0.1), radius=0.1 - 1e-12)).valid


def test_zero_radii_are_allowed():
    centers, radii = grid_packing()
    verdict = TASK.verify([centers, [0.0] * 26])
    assert verdict.valid and verdict.reward == 0.0


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.floats(-0.1, 1.1), st.floats(-0.1, 1.1), st.floats(-0.02, 0.3)), min_size=26, max_size=26),
       st.floats(0.0, 1.0))
def test_verifier_agrees_with_a_brute_force_check(circles, shrink):
    centers = [[x, y] for x, y, _ in circles]
    radii = [r * shrink for _, _, r in circles]
    verdict = TASK.verify({"centers": centers, "radii": radii})
    assert verdict.valid == brute_force_valid(centers, radii)
    certified = brute_force_certified_sum(1.0, 1.0, centers, radii)  # violations within the tolerance are charged
    assert verdict.reward == (pytest.approx(certified, abs=1e-12) if verdict.valid else 0.0)


COMPUTE_MAX_RADII = runpy.run_path(str(TASK.folder / "initial_program.py"))["compute_max_radii"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)), min_size=26, max_size=26))
def test_starter_radius_rule_always_gives_valid_packings(points):
    centers = np.array(points)
    radii = COMPUTE_MAX_RADII(centers.copy())
    verdict = TASK.verify([centers, radii])
    assert verdict.valid and verdict.reward == pytest.approx(radii.sum())


def test_brief_description_is_shown_only_when_asked_for_and_present():
    from tasks import load_task

    circles, keane = load_task("circle_packing_26"), load_task("keane_bump_10")
    assert circles.brief and len(circles.brief) < len(circles.description) / 3
    assert circles.prompt_description("brief") == circles.brief
    assert circles.prompt_description("full") == circles.description
    assert keane.brief is None and keane.prompt_description("brief") == keane.description  # no brief.md: the full one
    with pytest.raises(ValueError, match="full' or 'brief"):
        circles.prompt_description("short")


def below_best_known(reward: float, task) -> bool:
    """Strictly below, by more than float noise: a starter within 1e-9 (relative) counts as reaching it."""
    return reward < task.best_known - 1e-9 * abs(task.best_known)


@pytest.mark.parametrize("name", shipped_tasks())
def test_every_starter_is_valid_through_the_sandbox_and_stays_below_the_record(name):
    """Issue 13's contract for every task folder: the starter runs in the real sandbox (harness,
    data files and all), the trainer's verifier accepts it with a reward above 0, and (issue 31)
    it stays strictly below the task's best known: a starter at the record means ``best_known``
    is wrong (mstd_30's was its own starter). A task may say why its starter reaches it
    (``starter_reaches_best_known``); then the starter must really reach it. A search-form starter is
    judged on the construction it starts from (a budget of 0: its first call, no search), since a
    search that reaches the record in its budget is working, not a wrong ``best_known``."""
    task = load_task(name)
    search = {"budget_s": 0.0} if task.form == "search" else {}
    result = Evaluator(task, workers=1, timeout_s=max(task.timeout_s, 60), **search).evaluate(task.initial_program)
    assert result.valid, result.feedback
    assert result.reward > 0
    if task.starter_reaches_best_known:
        assert not below_best_known(result.reward, task), (result.reward, task.best_known)
    else:
        assert below_best_known(result.reward, task), (result.reward, task.best_known)


def test_below_best_known_treats_float_noise_as_reaching_it():
    task = load_task("mstd_30")
    assert below_best_known(1.04, task) and not below_best_known(51 / 47, task)
    assert not below_best_known(51 / 47 * (1 - 1e-12), task) and below_best_known(51 / 47 * (1 - 1e-8), task)


REASON = "the benchmark starts from the published record, to be improved on"


def test_a_task_may_say_why_its_starter_reaches_best_known(tasks_dir):
    spec = tasks_dir / "task.yaml"
    assert load_task("copy").starter_reaches_best_known is None
    spec.write_text(spec.read_text() + f'starter_reaches_best_known: "{REASON}"\n')
    assert load_task("copy").starter_reaches_best_known == REASON


@pytest.mark.parametrize("value, words", [
    ('""', "a sentence (5 words or more)"),
    ('"record"', "a sentence (5 words or more)"),
    ("true", "got True"),
    ("[the, reason]", "got ['the', 'reason']"),
    ("12", "got 12"),
])
def test_starter_reaches_best_known_is_validated_strictly(tasks_dir, value, words):
    spec = tasks_dir / "task.yaml"
    spec.write_text(spec.read_text() + f"starter_reaches_best_known: {value}\n")
    with pytest.raises(ValueError) as info:
        load_task("copy")
    assert "'starter_reaches_best_known' must be" in str(info.value) and words in str(info.value)


def test_a_misspelt_starter_key_names_the_right_one(tasks_dir):
    spec = tasks_dir / "task.yaml"
    spec.write_text(spec.read_text() + f'starter_reaches_best: "{REASON}"\n')
    with pytest.raises(ValueError, match="unknown key 'starter_reaches_best'. Did you mean 'starter_reaches_best_known'"):
        load_task("copy")
