"""Where tasks are found: the repository's tasks/ first, then the folders a user names for their own.

A user's tasks need not live in the repository (where a ``git pull`` or the test suite would meet
them): ``HELIX_TASKS`` (folders separated by ``os.pathsep``, for commands that take no config:
check-task, new-task's next steps) and the config's ``task.paths`` (recorded in a run's config.yaml,
so a resumed run finds its task) each name folders that hold task folders. Every one must be an
existing directory: a typo fails at once with the name of the setting, not later as "unknown task".

A user task whose name is also a shipped task's (or another user folder's) is an error naming both
folders: a silent override would run a different verifier under a known name.

``shipped_tasks`` is the set the project ships, which the test suite checks: what git tracks under
tasks/ (a user's untracked folder there is not part of it), or, outside a git checkout (a source
tarball), every task folder there.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ENV = "HELIX_TASKS"  # folders of user task folders, os.pathsep-separated
CONFIG_KEY = "task.paths"
# task.paths of the config this process loaded last, set by use_config_paths: kept in the environment, not in a
# global, so that the sandbox (rewards/ imports nothing of tasks/) hides them too and child processes find them
CONFIG_ENV = "HELIX_TASK_PATHS"


def _folders(values, where: str) -> tuple[Path, ...]:
    """Each value an existing directory, made absolute; one line naming ``where`` otherwise."""
    out = []
    for value in values:
        path = Path(str(value)).expanduser()
        if not str(value).strip() or not path.is_dir():
            what = "does not exist" if not path.exists() else "is not a directory"
            raise ValueError(f"{where}: {str(value)!r} {what} (it must be a folder that holds task folders, "
                             "each with a task.yaml)")
        out.append(path.resolve())
    return tuple(out)


def check_paths(values, where: str = CONFIG_KEY) -> tuple[Path, ...]:
    """``task.paths`` checked: every entry an existing directory (absolute paths returned)."""
    return _folders(values, where)


def use_config_paths(values) -> None:
    """Make the loaded config's ``task.paths`` part of the search path of this process and the ones it starts
    (the config loader calls it, so every later ``load_task`` of the run sees them); they replace the last
    config's."""
    folders = check_paths(values)
    if folders:
        os.environ[CONFIG_ENV] = os.pathsep.join(map(str, folders))
    else:
        os.environ.pop(CONFIG_ENV, None)


def env_paths(name: str = ENV, where: str = ENV) -> tuple[Path, ...]:
    raw = os.environ.get(name, "")
    return _folders([part for part in raw.split(os.pathsep) if part], where) if raw.strip() else ()


def roots(repo_tasks: Path) -> tuple[Path, ...]:
    """The folders searched, in order: the repository's tasks/, HELIX_TASKS's, task.paths'."""
    out, seen = [repo_tasks], {repo_tasks.resolve()}
    for path in (*env_paths(), *env_paths(CONFIG_ENV, CONFIG_KEY)):
        if path not in seen:
            out.append(path)
            seen.add(path)
    return tuple(out)


def index(repo_tasks: Path) -> dict[str, Path]:
    """Task name -> its folder, over every root; a name found twice is an error naming both folders."""
    found: dict[str, Path] = {}
    for root in roots(repo_tasks):
        for spec in sorted(root.glob("*/task.yaml")):
            folder = spec.parent
            if folder.name.startswith((".", "_")):
                continue
            if folder.name in found:
                raise ValueError(f"task {folder.name!r} is in {found[folder.name]} and again in {folder}: a user task "
                                 "may not shadow a shipped task or another user task; rename one folder (and the name "
                                 "in its task.yaml)")
            found[folder.name] = folder
    return found


def searched(repo_tasks: Path) -> str:
    """Where a task was looked for, for an "unknown task" line: the extra folders and what named them."""
    extra = [str(p) for p in roots(repo_tasks)[1:]]
    if not extra:
        return f" (looked in {repo_tasks}; a folder of your own tasks elsewhere is named by {ENV} or {CONFIG_KEY})"
    return f" (looked in {repo_tasks} and {', '.join(extra)}, from {ENV} and {CONFIG_KEY})"


def shipped_tasks(repo_tasks: Path | None = None) -> list[str]:
    """The tasks the project ships: the task.yaml files git tracks under tasks/ (none of a user's untracked
    folders), or every task folder there outside a git checkout."""
    repo_tasks = repo_tasks or Path(__file__).resolve().parent
    try:
        proc = subprocess.run(["git", "ls-files", "-z", "--", "*/task.yaml"], cwd=repo_tasks, capture_output=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        proc = None
    names = set()
    if proc is not None and proc.returncode == 0:  # (none: a tarball unpacked inside some other git repository)
        names = {Path(os.fsdecode(p)).parent.name for p in proc.stdout.split(b"\0") if p.count(b"/") == 1}
    if names:  # a tracked folder deleted in the work tree is not shipped by this checkout
        return sorted(n for n in names if (repo_tasks / n / "task.yaml").is_file() and not n.startswith((".", "_")))
    return sorted(p.parent.name for p in repo_tasks.glob("*/task.yaml") if not p.parent.name.startswith((".", "_")))
