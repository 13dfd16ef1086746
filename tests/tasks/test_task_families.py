"""The shelf for task-family code (tasks/families/<family>/, issue 32 item 2): the contract alone stays
at tasks/ top level, the contract imports no family, a harness imports no HELIX module (it runs in
the sandbox, where tasks/ is hidden), a driver only numpy and the standard library (Ray pickles it by
value), and every family on the shelf serves a task folder."""

import ast
import sys
from pathlib import Path

import pytest
import yaml

from tasks import load_task, shipped_tasks
from tasks.base import TASKS_DIR

FAMILIES = TASKS_DIR / "families"
HELIX = {"train", "rollout", "population", "rewards", "tasks", "scripts", "tests"}


def imported(path: Path) -> set[str]:
    """Top-level names of every module the file imports, anywhere in it (relative imports as '.')."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add("." if node.level else node.module.split(".")[0])
    return names


def test_only_the_contract_stays_at_the_top_of_tasks():
    # the contract: the task and loading it (base), reading and checking a folder's files (spec), its config
    # section, where task folders are found (paths: a user's own folders, the shipped set), the prompt template's
    # placeholders, and writing a new folder that meets it (scaffold: helix new-task)
    assert sorted(p.name for p in TASKS_DIR.glob("*.py")) == ["__init__.py", "base.py", "config.py", "paths.py",
                                                              "scaffold.py", "spec.py", "template.py"]
    for name in ("base.py", "config.py", "paths.py", "scaffold.py", "spec.py", "template.py", "__init__.py"):
        assert not any("families" in line for line in (TASKS_DIR / name).read_text().splitlines()
                       if line.startswith(("import ", "from "))), name


def test_every_family_is_a_package_that_serves_a_task_folder():
    families = sorted(p.name for p in FAMILIES.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert {"bin_packing", "boston", "cap_set", "circles", "dyck", "functions", "rect_packing", "spherical_code",
            "symreg"} <= set(families)
    users = {}
    for name in shipped_tasks():
        folder = TASKS_DIR / name
        text = "".join(p.read_text() for p in (folder / "verifier.py", folder / "task.yaml", *folder.glob("render.py")))
        for family in families:
            if f"tasks.families.{family}." in text or f"families/{family}/" in text:
                users.setdefault(family, []).append(name)
    for family in families:
        assert (FAMILIES / family / "__init__.py").is_file(), family
        assert users.get(family), f"tasks/families/{family} serves no task folder"


@pytest.mark.parametrize("path", sorted(FAMILIES.glob("*/harness.py")), ids=lambda p: p.parent.name)
def test_a_harness_imports_no_helix_module(path):
    assert not imported(path) & (HELIX | {"."}), imported(path)


@pytest.mark.parametrize("path", sorted(FAMILIES.glob("*/driver.py")), ids=lambda p: p.parent.name)
def test_a_driver_imports_only_numpy_and_the_standard_library(path):
    outside = {name for name in imported(path) if name not in sys.stdlib_module_names} - {"numpy"}
    assert not outside, outside


def test_every_shipped_harness_is_a_family_file_named_from_tasks():
    """task.yaml names a harness relative to tasks/; every shipped one is its family's harness.py."""
    named = {}
    for name in shipped_tasks():
        spec = yaml.safe_load((TASKS_DIR / name / "task.yaml").read_text())
        if "harness" in spec:
            named[name] = spec["harness"]
            family = Path(spec["harness"]).parent.name
            assert spec["harness"] == f"families/{family}/harness.py", (name, spec["harness"])
            assert load_task(name).harness == (FAMILIES / family / "harness.py").read_text(), name
    assert len(named) == 12 and set(named.values()) == {f"families/{f}/harness.py" for f in
                                                        ("bin_packing", "boston", "cap_set", "dyck", "symreg")}
    assert {p.parent.name for p in FAMILIES.glob("*/harness.py")} == {Path(v).parent.name for v in named.values()}
