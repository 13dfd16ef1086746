"""Code is imported by name, never by path: no project file edits ``sys.path`` or loads a file with
``spec_from_file_location`` (scripts/ holds commands over package code; tests import that code; a
child process a test starts gets its path from PYTHONPATH, tests.helpers.env.child_env), the commands in
scripts/ define nothing of their own, and the run-reading room imports none of the run's modules.
Read from each file's syntax tree, so program text inside strings (the sandbox tests' hostile
programs edit sys.path on purpose) does not count."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SKIP = {".git", ".venv", "runs", "shared", "node_modules", "__pycache__"}
# Where editing sys.path is the point, and why. Each must still do it (a stale entry fails).
ALLOWED = {
    "rewards/launcher.py": "runs as `python -I -S launcher.py`, before any package can be imported: it finds its "
                           "sibling fs_jail.py by path",
    "rewards/child_runner.py": "sets up the sandboxed program's own path (its folder first), as python does for a script",
    "rewards/ray_worker.py": "runs on a Ray worker, shipped by value: it puts the folder of the rewards package whose "
                             "hash the trainer sent ahead of any other copy (a decoy earlier on the worker's path)",
    "train/helix.py": "`torchrun train/helix.py` from a checkout must import that checkout's packages, not an "
                      "installed copy's (train/ itself, first on the path, holds only the rooms: nothing it shadows)",
}
LOADERS = {"spec_from_file_location", "SourceFileLoader", "run_path"}  # a task folder's files are loaded so: data
COMMANDS = {p.name for p in (REPO / "scripts").rglob("*.py")}


def _is_sys_path(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys"


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.Delete)):
        return [node.target] if not isinstance(node, ast.Delete) else node.targets
    return []


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def findings(source: str) -> list[tuple[int, str]]:
    """(line, "sys.path" | "script by path") for each edit of sys.path, and each load of a file under
    scripts/ (a path naming "scripts" or one of its files) by spec_from_file_location, a loader or runpy."""
    found, tree = [], ast.parse(source)
    loaders = LOADERS | {a.asname for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names
                         if a.name in LOADERS and a.asname}
    for node in ast.walk(tree):
        for target in _targets(node):
            if _is_sys_path(target) or (isinstance(target, ast.Subscript) and _is_sys_path(target.value)):
                found.append((node.lineno, "sys.path"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_sys_path(node.func.value):
            if node.func.attr not in ("index", "count", "copy"):  # the reads
                found.append((node.lineno, "sys.path"))
        if isinstance(node, ast.ImportFrom) and node.module == "sys" and any(a.name == "path" for a in node.names):
            found.append((node.lineno, "sys.path"))  # `from sys import path` then path.insert(...): no name to see
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "addsitedir":
            found.append((node.lineno, "sys.path"))
        func = node.func if isinstance(node, ast.Call) else None
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name in loaders and any("scripts" in t or t.rsplit("/", 1)[-1] in COMMANDS for t in _strings(node)):
            found.append((node.lineno, "script by path"))
    return sorted(set(found))


def project_files() -> list[Path]:
    return sorted(p for p in REPO.rglob("*.py") if not SKIP & set(p.relative_to(REPO).parts))


def test_no_file_edits_sys_path_or_loads_a_script_by_path():
    seen, wrong = set(), []
    for path in project_files():
        rel = path.relative_to(REPO).as_posix()
        for line, kind in findings(path.read_text(encoding="utf-8")):
            if kind == "sys.path" and rel in ALLOWED:
                seen.add(rel)
            else:
                wrong.append(f"{rel}:{line}: {kind}")
    assert wrong == [], "import by name (package code), or give a child process PYTHONPATH (tests.helpers.env.child_env)"
    assert seen == set(ALLOWED), f"no longer needed, take it out of ALLOWED: {sorted(set(ALLOWED) - seen)}"


@pytest.mark.parametrize("source", [
    "import sys\nsys.path.insert(0, 'x')", "import sys\nsys.path.append('x')", "import sys\nsys.path[:0] = ['a', 'b']",
    "import sys\nsys.path = [p for p in sys.path if p]", "import sys\ndel sys.path[0]", "import sys\nsys.path += ['x']",
    "from sys import path", "import site\nsite.addsitedir('scripts')",
    "import importlib.util\nspec = importlib.util.spec_from_file_location('m', ROOT / 'scripts' / f'{name}.py')",
    "from importlib.util import spec_from_file_location as load\nload('report', 'report.py')",
    "import runpy\nrunpy.run_path(str(HERE / 'plan_scale.py'))",
    "from importlib.machinery import SourceFileLoader\nSourceFileLoader('b', 'scripts/bench/bench_sandbox.py')",
])
def test_the_scan_sees_each_way_of_loading_by_path(source):
    assert findings(source), source


def test_the_scan_passes_reads_strings_and_task_files():
    source = ("import os, sys, runpy\nhere = list(sys.path)\nenv = os.pathsep.join(sys.path)\nfirst = sys.path.index('x')\n"
              "PROGRAM = 'import sys\\nsys.path.insert(0, \"/repo\")\\n'\nrun_path = resume_dir / 'config.yaml'\n"
              "starter = runpy.run_path(str(task.folder / 'initial_program.py'))\n")
    assert findings(source) == []


# Run by scripts/setup.sh with the system python before .venv exists, so it can import no package of the project.
BEFORE_THE_VENV = {"setup_stages.py": "setup.sh's stage runner: one line per stage, pip's output only on failure",
                   "uv_flags.py": "setup.sh's translation of pip's configuration into uv's flags, before anything is installed"}


def test_every_command_in_scripts_is_an_entry_point_over_package_code():
    """scripts/*.py: a docstring, imports and the ``if __name__ == "__main__"`` call; no function, class
    or constant of its own (benchmarks in scripts/bench/ keep theirs; what a test needs is in a package)."""
    commands = sorted(p for p in (REPO / "scripts").glob("*.py") if p.name not in BEFORE_THE_VENV)
    assert len(commands) >= 7
    for path in commands:
        body = ast.parse(path.read_text(encoding="utf-8")).body
        extra = [type(node).__name__ for node in body if not (
            isinstance(node, (ast.Import, ast.ImportFrom)) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
            or (isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"))]
        assert extra == [], f"{path.relative_to(REPO)} defines {extra}: move it into a package"
        imported = {node.module.split(".")[0] for node in body if isinstance(node, ast.ImportFrom) and node.module}
        assert imported & {"train", "rollout", "population", "rewards", "tasks"}, f"{path.name} runs no package code"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_the_run_reading_room_imports_nothing_of_the_run():
    """train/runs reads what runs wrote; it needs none of the run's own modules (the epoch loop, its
    config, the engines, the learner), so a report or the run browser never pulls in the trainer. It
    reads with population/ and tasks/ only: advantages and pictures come from what the run recorded,
    so it imports neither torch nor verl (the learner) nor rewards/ (the sandbox); tests/runs/test_ui.py
    checks the same in a fresh interpreter (sys.modules)."""
    room = sorted((REPO / "train" / "runs").rglob("*.py"))
    assert len(room) >= 10
    wrong = {}
    for path in room:
        outside = {m for m in _imports(path) if m.split(".")[0] in ("train", "rollout", "rewards", "torch", "verl")
                   and not m.startswith("train.runs")}
        if outside:
            wrong[path.name] = sorted(outside)
    assert wrong == {}
    assert "population.archive.ReadOnlyArchive" in _imports(REPO / "train" / "runs" / "report.py")  # the one reader
