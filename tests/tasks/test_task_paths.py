"""A user's own tasks (tasks/paths.py, issue 56 item 7): found by name in tasks/ and then in the folders HELIX_TASKS
and task.paths name, never shadowing a shipped task, and never part of what the suite checks (the shipped set:
what git tracks under tasks/)."""

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from rewards.sandbox import hidden_paths
from tasks import available_tasks, load_task, shipped_tasks
from tasks.base import TASKS_DIR, task_folder
from tasks.paths import CONFIG_ENV, ENV
from tasks.scaffold import ScaffoldError, new_task
from tasks.scaffold import main as scaffold_main
from train.commands.task_check import TaskCheckError, check_task
from train.config.config import load_config
from train.config.schema import ConfigError

SHIPPED = shipped_tasks()


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_the_shipped_set_is_what_git_tracks_not_what_lies_in_tasks(tmp_path):
    """A tmp checkout: tracked task folders are shipped; an untracked one beside them (a user's new-task) is not,
    nor a tracked folder deleted from the work tree; outside git every folder counts (a source tarball)."""
    tasks = tmp_path / "repo" / "tasks"
    for name in ("alpha", "beta", "gone"):
        (tasks / name).mkdir(parents=True)
        (tasks / name / "task.yaml").write_text(f"name: {name}\n")
    (tasks / "families" / "fam").mkdir(parents=True)
    (tasks / "families" / "fam" / "task.yaml").write_text("name: fam\n")  # not a task folder: one level too deep
    assert shipped_tasks(tasks) == ["alpha", "beta", "gone"]  # no git here: the folders
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    subprocess.run(["git", "-C", str(tmp_path / "repo"), "add", "tasks"], check=True)
    (tasks / "mine").mkdir()
    (tasks / "mine" / "task.yaml").write_text("name: mine\n")
    shutil.rmtree(tasks / "gone")
    assert shipped_tasks(tasks) == ["alpha", "beta"]


def test_this_checkouts_shipped_set_is_its_tracked_task_folders():
    tracked = subprocess.run(["git", "ls-files", "--", "*/task.yaml"], cwd=TASKS_DIR, capture_output=True, text=True,
                             check=True).stdout.split()
    assert SHIPPED == sorted(Path(p).parent.name for p in tracked if p.count("/") == 1)
    assert len(SHIPPED) >= 33 and "circle_packing_26" in SHIPPED and "new_task_template" not in SHIPPED


def test_a_new_task_in_tasks_is_loaded_but_not_shipped():
    """helix new-task's default folder: load_task finds it, the shipped-task checks never collect it."""
    name = unique("user_in_repo")
    folder = new_task(name)
    try:
        assert folder == TASKS_DIR / name and name in available_tasks()
        assert load_task(name).folder == folder
        assert name not in shipped_tasks() and set(shipped_tasks()) == set(SHIPPED)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_task_outside_the_repository_is_found_through_helix_tasks_and_checked(tmp_path, monkeypatch, capsys):
    """new-task --dir writes it outside; with HELIX_TASKS naming the folder (the line it prints) the task check, run
    in the sandbox, passes; it is never shipped, and the sandbox hides its folder from programs as it hides tasks/."""
    name, mine = unique("user_out"), tmp_path / "my tasks"
    assert scaffold_main([name, "--dir", str(mine)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {mine / name}/" in out and f"export {ENV}='{mine}'" in out
    assert not (TASKS_DIR / name).exists()
    with pytest.raises(ValueError, match=f"unknown task '{name}'.*{ENV}"):
        load_task(name)
    monkeypatch.setenv(ENV, os.pathsep.join([str(tmp_path / "elsewhere"), str(mine)]))
    with pytest.raises(ValueError, match=f"{ENV}: '{tmp_path / 'elsewhere'}' does not exist"):
        load_task(name)
    (tmp_path / "elsewhere").mkdir()
    result = check_task(name)
    assert result.task.folder == mine / name and result.reward == pytest.approx(1 / 3)
    assert name in available_tasks() and name not in shipped_tasks()
    assert str(mine) in hidden_paths() and hidden_paths()[0] == str(TASKS_DIR)


def test_a_user_task_may_not_shadow_a_shipped_one(tmp_path, monkeypatch):
    shutil.copytree(TASKS_DIR / "eggholder", tmp_path / "eggholder", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv(ENV, str(tmp_path))
    for call in (lambda: load_task("eggholder"), available_tasks, lambda: load_config(None, ["task.name=mishra_bird"])):
        with pytest.raises(ValueError, match=f"'eggholder' is in {TASKS_DIR / 'eggholder'} and again in "
                                             f"{tmp_path / 'eggholder'}: a user task may not shadow"):
            call()
    with pytest.raises(TaskCheckError, match="may not shadow"):
        check_task("eggholder")
    monkeypatch.delenv(ENV)
    with pytest.raises(ScaffoldError, match="a task named 'eggholder' already exists"):
        new_task("eggholder", dest=tmp_path / "other")
    assert not (tmp_path / "other" / "eggholder").exists()


def test_task_paths_in_a_config_is_checked_strictly_and_searched(tmp_path, monkeypatch):
    name = unique("user_cfg")
    new_task(name, dest=tmp_path / "mine")
    with pytest.raises(ConfigError, match=f"task.name = '{name}' is not registered: no task under tasks/ or in task.paths"):
        load_config(None, [f"task.name={name}"])
    for value, says in ((f"[{tmp_path / 'nope'}]", "does not exist"), (f"[{tmp_path / 'mine' / name / 'task.yaml'}]",
                                                                        "is not a directory"),
                        (str(tmp_path), "expected a list"), ("[3]", "expected a string")):
        with pytest.raises(ConfigError, match="task.paths") as err:
            load_config(None, [f"task.paths={value}", f"task.name={name}"])
        assert says in str(err.value) and "\n" not in str(err.value)
    monkeypatch.chdir(tmp_path)  # a relative entry: to the working directory, written back absolute
    cfg = load_config(None, ["task.paths=[mine]", f"task.name={name}"])
    assert cfg.task.paths == [str(tmp_path / "mine")] and cfg.task.timeout_s == 30.0  # the template's own limit
    assert task_folder(name) == tmp_path / "mine" / name and os.environ[CONFIG_ENV] == str(tmp_path / "mine")
    assert str(tmp_path / "mine") in hidden_paths()
    load_config(None, [])  # the next config's paths replace the last one's
    assert CONFIG_ENV not in os.environ and name not in available_tasks()


def test_a_user_tasks_harness_is_relative_to_its_own_folder_or_to_tasks(tmp_path, monkeypatch):
    """A copy of symreg_physics outside the repository: its family's harness from tasks/ (families/symreg/...), or a
    copy beside it (lib/fit.py), and never a path that climbs out."""
    root = tmp_path / "mine"
    shutil.copytree(TASKS_DIR / "symreg_physics", root / "phys_copy", ignore=shutil.ignore_patterns("__pycache__"))
    spec = root / "phys_copy" / "task.yaml"
    spec.write_text(spec.read_text().replace("name: symreg_physics", "name: phys_copy"))
    monkeypatch.setenv(ENV, str(root))
    family = (TASKS_DIR / "families" / "symreg" / "harness.py").read_text()
    assert load_task("phys_copy").harness == family
    (root / "lib").mkdir()
    (root / "lib" / "fit.py").write_text(family + "\n# the user's own copy\n")
    spec.write_text(spec.read_text().replace("harness: families/symreg/harness.py", "harness: lib/fit.py"))
    assert load_task("phys_copy").harness.endswith("# the user's own copy\n")
    spec.write_text(spec.read_text().replace("harness: lib/fit.py", "harness: lib/missing.py"))
    with pytest.raises(ValueError, match=f"harness 'lib/missing.py' must be a file inside {root} or {TASKS_DIR}"):
        load_task("phys_copy")


def test_the_sandbox_plans_to_empty_a_user_task_folder_inside_a_visible_one(tmp_path, monkeypatch):
    """The jail shows programs only the system, Python and the runner; a folder of user tasks inside one of them
    (here a visible folder the test adds) is emptied as tasks/ is: held-out data may lie in it."""
    from rewards import sandbox

    shown, mine = tmp_path / "shown", tmp_path / "shown" / "mine"
    mine.mkdir(parents=True)
    visible = sandbox.visible_paths()
    monkeypatch.setattr(sandbox, "visible_paths", lambda: (*visible, str(shown)))
    (tmp_path / "work").mkdir()
    plan = sandbox._launch_plan(512, 5, None, str(tmp_path / "work"), None, str(tmp_path / "root"))["jail"]
    if plan is None:
        pytest.skip("this machine builds no filesystem jail (not root and no user namespaces)")
    assert os.fsencode(str(mine)) not in plan["hide"]
    monkeypatch.setenv(ENV, str(mine))
    plan = sandbox._launch_plan(512, 5, None, str(tmp_path / "work"), None, str(tmp_path / "root"))["jail"]
    assert os.fsencode(str(mine)) in plan["hide"]
