"""``helix new-task NAME [--form search]``: a new task folder from tasks/new_task_template/, and the commands
that follow.

The template is a working example (12 points spread in the unit square), so the folder passes
``helix check-task`` as written and every later step can be tried before the problem is filled in;
its comments say what goes in each file. ``--form search`` writes the search form of the same example
(task.yaml ``form: search``, docs/search_form.md): task.yaml, description.md, brief.md and the starter come
from tasks/new_task_template/search/, the verifier is the same. The commands printed are README's "Adding your own task"
steps (tests/commands/test_new_task_recipe.py follows them literally): check, warm start, a CPU run on the
quickstart config (a warm-started SmolLM2-135M, no config file of the task's own), paper scale.

Where: tasks/NAME/ by default (README's recipe; a contributor's new task is committed there). git does not track
it until it is added, so the test suite, which checks the shipped tasks (tasks.paths.shipped_tasks: what git
tracks), never runs a half-written task of a user's. ``--dir DIR`` writes DIR/NAME/ instead, outside the
repository; the commands printed then start with ``export HELIX_TASKS=DIR`` (tasks/paths.py), so every one finds it.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from pathlib import Path

from tasks import paths
from tasks.base import TASKS_DIR, available_tasks

TEMPLATE = TASKS_DIR / "new_task_template"
FILES = ("task.yaml", "description.md", "brief.md", "initial_program.py", "verifier.py")
FORMS = ("construct", "search")  # tasks.base.FORMS
SEARCH_FILES = ("task.yaml", "description.md", "brief.md", "initial_program.py")  # from the template's search/
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_RESERVED = {"families", "new_task_template", "base", "config", "scaffold", "template"}


class ScaffoldError(Exception):
    """One line: why no folder was written."""


def next_steps(name: str, python: str = ".venv/bin/python", form: str = "construct") -> list[tuple[str, str]]:
    """(command, what it does) after the scaffold; README's recipe shows the same commands (a search-form
    task's CPU run: configs/search.yaml, the search-form circle packing run, instead of the quickstart)."""
    if form == "search":
        return [
            (f"{python} train/helix.py check-task {name}", "check the folder: the starter on None, then twice on its "
             "own output (seconds)"),
            (f"{python} train/helix.py --config configs/search.yaml task.name={name}",
             "run it on the CPU as configs/search.yaml runs circle packing's search form (it builds its warm start)"),
            (f"{python} scripts/ablate.py --config configs/search.yaml --set task.name={name} --variants helix iterate "
             "--seeds 0 --wall-s 1200", "compare with the iterate baseline: the starter's own search rerun on its "
             "output, no LLM (docs/search_form.md)"),
        ]
    return [
        (f"{python} train/helix.py check-task {name}", "check the folder (seconds; one line per problem)"),
        (f"{python} -m train.warm_start --config configs/quickstart.yaml task.name={name}",
         "build its warm start once (cached; the CPU run below would build it too)"),
        (f"{python} train/helix.py --config configs/quickstart.yaml task.name={name}",
         "run it on the CPU: the warm-started SmolLM2-135M, 4 epochs (= bash scripts/quickstart.sh task.name=...)"),
        (f".venv/bin/torchrun --nproc_per_node 8 train/helix.py --config configs/base/paper_14b.yaml task.name={name} "
         "model.policy=/models/DeepSeek-R1-Distill-Qwen-14B", "paper scale, on a GPU node (README: Training at scale)"),
    ]


def export_line(dest: Path) -> str:
    """The shell line that adds ``dest`` to HELIX_TASKS (kept: the folders it already names)."""
    quoted = shlex.quote(str(dest))
    return f'export {paths.ENV}={quoted}${{{paths.ENV}:+{os.pathsep}${paths.ENV}}}'


def check_name(name: str, dest: Path | None = None) -> None:
    """``name`` is a task name no task has yet (wherever tasks are found) and ``dest/name`` (tasks/ by default)
    does not exist: one line otherwise."""
    if not _NAME.match(name):
        raise ScaffoldError(f"'{name}' is not a task name: use lower-case letters, digits and '_', starting with a "
                            "letter (e.g. spread_points_12)")
    if name in _RESERVED:
        raise ScaffoldError(f"'{name}' is reserved (tasks/{name} is part of the task code); choose another name")
    if dest is not None and dest.exists() and not dest.is_dir():
        raise ScaffoldError(f"{dest} is not a directory: --dir names the folder the task folder goes in")
    shown = f"tasks/{name}" if dest is None else str(dest / name)
    if ((TASKS_DIR if dest is None else dest) / name).exists():
        what = "a task" if name in available_tasks() else "a folder"
        raise ScaffoldError(f"{shown} already exists ({what}); choose another name or remove it first")
    try:
        where = paths.index(TASKS_DIR).get(name)
    except ValueError as exc:  # a folder of HELIX_TASKS that is not one, or a shadowing task: said as it is
        raise ScaffoldError(str(exc)) from None
    if where is not None:
        raise ScaffoldError(f"a task named {name!r} already exists ({where}); a task may not shadow another, "
                            "choose another name")


def destination(dest: str | Path | None) -> Path | None:
    """The folder a new task folder goes in: None for the repository's tasks/ (also when ``dest`` is it)."""
    if dest is None:
        return None
    path = Path(dest).expanduser().resolve()
    return None if path == TASKS_DIR.resolve() else path


def new_task(name: str, form: str = "construct", dest: str | Path | None = None) -> Path:
    """Write tasks/NAME/ (or DEST/NAME/, DEST made if missing) from the template (nothing is written if the name,
    the form or the folder is refused)."""
    dest = destination(dest)
    check_name(name, dest)
    if form not in FORMS:
        raise ScaffoldError(f"form {form!r} is not one of {', '.join(FORMS)}")
    folder = (TASKS_DIR if dest is None else dest) / name

    def template(file: str) -> Path:
        return TEMPLATE / ("search" if form == "search" and file in SEARCH_FILES else "") / f"{file}.tmpl"

    texts = {f: template(f).read_text(encoding="utf-8").replace("{name}", name) for f in FILES}
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.mkdir()
    for file, text in texts.items():
        (folder / file).write_text(text, encoding="utf-8")
    return folder


def main(argv: list[str] | None = None, prog: str = "helix new-task") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="Write tasks/NAME/ (or DIR/NAME/) from a template: task.yaml, "
                                     "description.md, brief.md, initial_program.py, verifier.py (a working example to replace).")
    parser.add_argument("name", help="the task's name, also its folder's (e.g. spread_points_12)")
    parser.add_argument("--dir", metavar="DIR", help="write DIR/NAME/, outside the repository (DIR is made if missing; "
                        f"the commands printed export {paths.ENV}=DIR so that they find it); default: tasks/NAME/")
    parser.add_argument("--form", choices=FORMS, default="construct",
                        help="construct: solve() builds an answer (default); search: solve(construction, budget_s, "
                        "seed) improves the best one so far (docs/search_form.md)")
    args = parser.parse_args(argv)
    try:
        folder = new_task(args.name, args.form, args.dir)
    except ScaffoldError as err:
        print(f"helix: new-task: {err}", file=sys.stderr)
        return 2
    inside = folder.parent == TASKS_DIR
    print(f"wrote {folder.relative_to(TASKS_DIR.parent) if inside else folder}/: {', '.join(FILES)}")
    if inside:
        print(f"(tasks/{args.name}/ is yours until git tracks it: the test suite checks only the tasks git tracks; "
              f"--dir DIR writes a task outside the repository)")
    print(f"It is a working example (12 points spread in the unit square{', in the search form' if args.form == 'search' else ''}): "
          "replace it with your problem; the comments in each file say what goes there. Then:")
    if not inside and folder.parent not in paths.roots(TASKS_DIR):
        print(f"  {export_line(folder.parent)}\n      # where HELIX looks for your tasks (or task.paths: [DIR] in a config)")
    for command, what in next_steps(args.name, form=args.form):
        print(f"  {command}\n      # {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
