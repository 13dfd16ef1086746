"""``helix new-task NAME [--form search]``: a new task folder from tasks/new_task_template/, and the commands
that follow.

The template is a working example (12 points spread in the unit square), so the folder passes
``helix check-task`` as written and every later step can be tried before the problem is filled in;
its comments say what goes in each file. ``--form search`` writes the search form of the same example
(task.yaml ``form: search``, docs/search_form.md): task.yaml, description.md, brief.md and the starter come
from tasks/new_task_template/search/, the verifier is the same. The commands printed are README's "Adding your own task"
steps (tests/commands/test_new_task_recipe.py follows them literally): check, warm start, a CPU run on the
quickstart config (a warm-started SmolLM2-135M, no config file of the task's own), paper scale.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

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


def check_name(name: str) -> None:
    if not _NAME.match(name):
        raise ScaffoldError(f"'{name}' is not a task name: use lower-case letters, digits and '_', starting with a "
                            "letter (e.g. spread_points_12)")
    if name in _RESERVED:
        raise ScaffoldError(f"'{name}' is reserved (tasks/{name} is part of the task code); choose another name")
    if (TASKS_DIR / name).exists():
        what = "a task" if name in available_tasks() else "a folder"
        raise ScaffoldError(f"tasks/{name} already exists ({what}); choose another name or remove it first")


def new_task(name: str, form: str = "construct") -> Path:
    """Write tasks/NAME/ from the template (nothing is written if the name or form is refused)."""
    check_name(name)
    if form not in FORMS:
        raise ScaffoldError(f"form {form!r} is not one of {', '.join(FORMS)}")
    folder = TASKS_DIR / name

    def template(file: str) -> Path:
        return TEMPLATE / ("search" if form == "search" and file in SEARCH_FILES else "") / f"{file}.tmpl"

    texts = {f: template(f).read_text(encoding="utf-8").replace("{name}", name) for f in FILES}
    folder.mkdir()
    for file, text in texts.items():
        (folder / file).write_text(text, encoding="utf-8")
    return folder


def main(argv: list[str] | None = None, prog: str = "helix new-task") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="Write tasks/NAME/ from a template: task.yaml, description.md, "
                                     "brief.md, initial_program.py, verifier.py (a working example to replace).")
    parser.add_argument("name", help="the task's name, also its folder under tasks/ (e.g. spread_points_12)")
    parser.add_argument("--form", choices=FORMS, default="construct",
                        help="construct: solve() builds an answer (default); search: solve(construction, budget_s, "
                        "seed) improves the best one so far (docs/search_form.md)")
    args = parser.parse_args(argv)
    try:
        folder = new_task(args.name, args.form)
    except ScaffoldError as err:
        print(f"helix: new-task: {err}", file=sys.stderr)
        return 2
    print(f"wrote {folder.relative_to(TASKS_DIR.parent)}/: {', '.join(FILES)}")
    print(f"It is a working example (12 points spread in the unit square{', in the search form' if args.form == 'search' else ''}): "
          "replace it with your problem; the comments in each file say what goes there. Then:")
    for command, what in next_steps(args.name, form=args.form):
        print(f"  {command}\n      # {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
