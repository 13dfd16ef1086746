"""The task check (train/commands/task_check.py) and the scaffold (tasks/scaffold.py): a broken task folder is one
line naming the file and the problem, exit code 2, before anything heavy loads."""

import itertools
import os
import shutil
from pathlib import Path

import pytest

from tasks.base import TASKS_DIR
from tasks.scaffold import FILES, new_task
from tasks.scaffold import main as scaffold_main
from train.commands.task_check import TaskCheckError, check_task
from train.commands.task_check import main as check_main

ROOT = Path(__file__).resolve().parents[2]
_count = itertools.count()


@pytest.fixture()
def scaffolded():
    """A fresh task folder from the template under tasks/ (where load_task looks), removed afterwards."""
    name = f"tmp_check_{os.getpid()}_{next(_count)}"
    folder = new_task(name)
    yield name, folder
    shutil.rmtree(folder, ignore_errors=True)


def edit(folder: Path, file: str, old: str, new: str) -> None:
    text = (folder / file).read_text()
    assert old in text, (file, old)
    (folder / file).write_text(text.replace(old, new))


def failure(name: str) -> str:
    with pytest.raises(TaskCheckError) as info:
        check_task(name)
    line = str(info.value)
    assert "\n" not in line and "Traceback" not in line
    return line


def test_the_template_passes_as_written(scaffolded):
    name, folder = scaffolded
    assert sorted(p.name for p in folder.iterdir()) == sorted(FILES)
    result = check_task(name)
    assert result.reward == pytest.approx(1 / 3)  # a 4 x 3 grid: columns 1/3 apart, rows 1/2
    assert result.task.entry_function == "solve" and result.reward < result.task.best_known


def test_the_templates_exact_check_refuses_what_only_the_tolerance_lets_in(scaffolded):
    from tasks import load_task

    name, _ = scaffolded
    task = load_task(name)
    grid = [[(i + 0.5) / 4, j / 2] for i in range(4) for j in range(3)]  # the starter's 4 x 3 grid, rows at 0 and 1
    assert task.verify(grid).valid and task.check_exact(grid).status == "exact"
    grid[11][1] = 1 + 5e-10  # within the verifier's TOL
    check = task.check_exact(grid)
    assert task.verify(grid).valid and check.status == "tolerance_only"
    assert check.detail == "point 11 = (0.875, 1.0000000005) is outside the unit square (within 1e-09)"


@pytest.mark.parametrize("body, words", [
    ("    return 1 / 0\n", "check_exact() on the starter's result raised ZeroDivisionError: division by zero"),
    ("    return 'exact'\n", "check_exact() on the starter's result: the exact check returned str, not tasks.base.ExactCheck"),
])
def test_a_broken_exact_check_fails_the_task_check_naming_its_file(scaffolded, body, words):
    """In a run a check that raises is only "unchecked" (never a crash); the task check makes it a line."""
    name, folder = scaffolded
    text = (folder / "verifier.py").read_text()
    start = text.index("    for i, (x, y) in enumerate(returned):")
    (folder / "verifier.py").write_text(text[:start] + body)
    line = failure(name)
    assert words in line and line.startswith(f"tasks/{name}/verifier.py")


def test_a_verifier_with_a_syntax_error_names_its_file_and_line(scaffolded):
    name, folder = scaffolded
    edit(folder, "verifier.py", "def verify(returned):", "def verify(returned)")
    line = failure(name)
    number = (folder / "verifier.py").read_text().splitlines().index("def verify(returned)") + 1
    assert f"tasks/{name}/verifier.py:{number}: syntax error" in line


def test_task_yaml_without_entry_function(scaffolded):
    name, folder = scaffolded
    edit(folder, "task.yaml", "entry_function: solve", "")
    line = failure(name)
    assert f"tasks/{name}/task.yaml" in line and "missing key 'entry_function'" in line


def test_an_entry_function_the_starter_does_not_define(scaffolded):
    name, folder = scaffolded
    edit(folder, "task.yaml", "entry_function: solve", "entry_function: place_points")
    line = failure(name)
    assert f"tasks/{name}/initial_program.py" in line and "does not define the entry function place_points()" in line


def test_a_verifier_that_raises_names_the_verifier_line(scaffolded):
    name, folder = scaffolded
    edit(folder, "verifier.py", "    smallest = min(", "    len(5)\n    smallest = min(")
    number = (folder / "verifier.py").read_text().splitlines().index("    len(5)") + 1
    line = failure(name)
    assert line.startswith(f"tasks/{name}/verifier.py:{number}: verify() on the starter's result raised TypeError")
    assert "has no len()" in line


def test_a_starter_that_fails_its_own_verifier(scaffolded):
    name, folder = scaffolded
    edit(folder, "initial_program.py", "    return np.clip(np.array(points), 0.0, 1.0).tolist()",
         "    return np.clip(np.array(points), 0.0, 1.0).tolist()[:11]")
    line = failure(name)
    assert f"tasks/{name}/initial_program.py: the starter fails its own verifier: expected a list of 12 points" in line


def test_a_starter_that_scores_zero(scaffolded):
    name, folder = scaffolded
    edit(folder, "verifier.py", "return Verdict(smallest,", "return Verdict(max(smallest - 0.4, 0.0),")
    line = failure(name)
    assert f"tasks/{name}/initial_program.py: the starter scores 0: a starter must score above 0" in line


def test_a_starter_that_crashes_in_the_sandbox(scaffolded):
    name, folder = scaffolded
    edit(folder, "initial_program.py", "    cols, rows = 4, 3", "    cols, rows = 4, undefined_name")
    line = failure(name)
    assert f"tasks/{name}/initial_program.py: the starter does not run in the sandbox: error" in line
    assert "NameError: name 'undefined_name' is not defined" in line


def test_a_starter_above_best_known(scaffolded):
    name, folder = scaffolded
    edit(folder, "task.yaml", "best_known: 0.388730126323", "best_known: 0.3")
    line = failure(name)
    assert f"tasks/{name}/task.yaml: the starter scores 0.3333333333, above best_known 0.3" in line


def test_the_command_exits_2_with_one_line_and_verbose_shows_the_traceback(scaffolded, capsys):
    name, folder = scaffolded
    edit(folder, "verifier.py", "    smallest = min(", "    len(5)\n    smallest = min(")
    assert check_main([name]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("helix: task check failed: ") and "--verbose" in err[0]
    assert check_main([name, "--verbose"]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "len(5)" in err


def test_every_run_starts_with_the_check_before_anything_loads(scaffolded, tmp_path, capsys):
    from train.helix import main

    name, folder = scaffolded
    edit(folder, "task.yaml", "entry_function: solve", "")
    rc = main(["--config", str(ROOT / "configs" / "quickstart.yaml"), f"task.name={name}",
               f"run.output_dir={tmp_path}", "run.wandb=disabled"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "missing key 'entry_function'" in err[0]
    assert list(tmp_path.iterdir()) == []  # no run directory, no runs/latest


def test_scaffold_refuses_an_existing_folder_and_bad_names(scaffolded, capsys):
    name, folder = scaffolded
    before = (folder / "verifier.py").read_text()
    for bad, says in ((name, "already exists"), ("9lives", "not a task name"), ("My-Task", "not a task name"),
                      ("families", "reserved"), ("../x", "not a task name")):
        assert scaffold_main([bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], (bad, err)
    assert (folder / "verifier.py").read_text() == before
    assert not (TASKS_DIR / "9lives").exists()


def test_scaffold_prints_the_next_commands(capsys):
    name = f"tmp_check_{os.getpid()}_{next(_count)}"
    try:
        assert scaffold_main([name]) == 0
        out = capsys.readouterr().out
        for command in (f"check-task {name}", f"-m train.warm_start --config configs/quickstart.yaml task.name={name}",
                        f"--config configs/quickstart.yaml task.name={name}", f"configs/base/paper_14b.yaml task.name={name}"):
            assert command in out, command
    finally:
        shutil.rmtree(TASKS_DIR / name, ignore_errors=True)
