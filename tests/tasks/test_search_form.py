"""task.yaml ``form`` (tasks/base.py): checked strictly at load, the starter's entry function takes the search
call's three arguments, and the task check runs a search-form starter on None and then twice on its own output
(train/commands/task_check.py); helix new-task --form search and write_task(form="search") write folders that pass."""

import os
import shutil

import pytest

from tasks import load_task, task_form
from tasks.scaffold import FILES, new_task
from tests.helpers import search_task
from train.commands.task_check import TaskCheckError, check_task


def load_error(tmp_path, monkeypatch, **files) -> str:
    search_task.install(tmp_path, monkeypatch, **files)
    with pytest.raises(ValueError) as info:
        load_task(search_task.NAME)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_the_form_is_read_and_defaults_to_construct(tmp_path, monkeypatch):
    assert load_task("circle_packing_26").form == "construct" and task_form("circle_packing_26") == "construct"
    search_task.install(tmp_path, monkeypatch)
    assert load_task(search_task.NAME).form == "search" and task_form(search_task.NAME) == "search"


@pytest.mark.parametrize("yaml_edit, message", [
    (("form: search", "form: searh"), "'form' must be 'construct' (entry() builds an answer, the default) or 'search'"),
    (("form: search", "from: search"), "unknown key 'from'. Did you mean 'form'?"),
    (("form: search", "form: search\nharness: families/symreg/harness.py\nharness_entry: run"),
     "form: search calls the program's improve(construction, budget_s, seed) itself; it cannot be combined with 'harness'"),
])
def test_a_wrong_form_is_one_line_naming_the_key(tmp_path, monkeypatch, yaml_edit, message):
    line = load_error(tmp_path, monkeypatch, **{"task.yaml": search_task.TASK_YAML.replace(*yaml_edit)})
    assert line.startswith(str(tmp_path / "tasks" / search_task.NAME / "task.yaml")) and message in line


@pytest.mark.parametrize("signature, ok", [
    ("construction, budget_s, seed", True),
    ("construction, budget_s=1.0, seed=0", True),
    ("construction, budget_s, seed, extra=None", True),
    ("*args", True),
    ("construction, budget_s", False),
    ("", False),
    ("construction, budget_s, seed, extra", False),
    ("construction, budget_s, seed, *, verbose", False),
])
def test_the_starters_entry_must_take_the_three_search_arguments(tmp_path, monkeypatch, signature, ok):
    starter = search_task.STARTER.replace("def improve(construction, budget_s, seed):", f"def improve({signature}):")
    if ok:
        search_task.install(tmp_path, monkeypatch, **{"initial_program.py": starter})
        assert load_task(search_task.NAME).form == "search"
        return
    line = load_error(tmp_path, monkeypatch, **{"initial_program.py": starter})
    assert line.endswith("initial_program.py: form: search calls improve(construction, budget_s, seed); define it "
                         "as def improve(construction, budget_s, seed): three positional parameters")


def test_the_check_runs_the_starter_on_none_then_twice_on_its_own_output(tmp_path, monkeypatch):
    """The three calls' rewards are the ones the starter gives in this process on the same inputs and seeds."""
    search_task.install(tmp_path, monkeypatch)
    result = check_task(search_task.NAME, timeout_s=10.0)
    c0 = search_task.replay(None, 0)
    c1 = search_task.replay(c0, 1)
    c2 = search_task.replay(c1, 2)
    assert (result.reward, result.again) == (search_task.score(c0["x"]), (search_task.score(c1["x"]), search_task.score(c2["x"])))
    assert search_task.START < result.reward < result.again[0] < result.again[1] < 1.0 and result.budget_s == 1.0
    assert result.line().startswith(
        f"task {search_task.NAME}: ok (search form: task.yaml, verifier, improve(construction, budget_s, seed); the "
        f"starter scores {result.reward:.6g} from None, then {result.again[0]:.6g} and {result.again[1]:.6g} on its own "
        "output, each valid, with a 1 s budget; best_known 1;")


def test_a_starter_that_cannot_take_its_own_output_fails_the_check_at_that_call(tmp_path, monkeypatch):
    starter = search_task.STARTER.replace('x = np.full(N, 0.1) if construction is None else np.array(construction["x"], float)',
                                          'x = np.full(N, 0.1) if construction is None else np.array(construction, float)')
    search_task.install(tmp_path, monkeypatch, **{"initial_program.py": starter})
    with pytest.raises(TaskCheckError) as info:
        check_task(search_task.NAME, timeout_s=10.0)
    assert str(info.value).endswith("initial_program.py: the starter on its own output (call 2 of 3) does not run in "
                                    "the sandbox: error: error: improve() raised TypeError: float() argument must be a "
                                    "string or a real number, not 'dict'")


def test_the_scaffolds_search_form_passes_the_check_as_written():
    name = f"tmp_search_{os.getpid()}"
    folder = new_task(name, form="search")
    try:
        assert sorted(p.name for p in folder.iterdir()) == sorted(FILES)
        result = check_task(name)
        assert result.task.form == "search" and result.task.entry_function == "solve"
        assert 1 / 3 < result.reward <= result.again[0] <= result.again[1] < result.task.best_known  # it keeps what improves
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_write_task_writes_a_search_form_task_that_passes_the_check():
    from train.api import write_task
    from train.api.task_writer import TaskArgumentError

    name = f"tmp_search_api_{os.getpid()}"
    try:
        task = write_task(name, description=search_task.DESCRIPTION, starter=search_task.STARTER,
                          verifier=search_task.VERIFIER, best_known=1.0,
                          entry_function="improve", time_limit_s=5.0, form="search")
        assert task.form == "search" and "form: search" in (task.folder / "task.yaml").read_text()
        with pytest.raises(TaskArgumentError, match="form must be one of construct, search, got 'serach'"):
            write_task(name + "_x", description="d", starter="s", verifier=search_task.VERIFIER, best_known=1.0,
                       form="serach")
    finally:
        from tasks.base import TASKS_DIR

        shutil.rmtree(TASKS_DIR / name, ignore_errors=True)
