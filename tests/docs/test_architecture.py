"""The package graph points one way (docs/layout.md): train/ uses rollout/, population/, rewards/
and tasks/; none of them imports train/, rollout/ uses only tasks/, and no two modules import each
other, directly or around a longer loop. Imports inside functions count too.

Inside train/ the rooms have walls, and the arrows between them point down (ROOM_IMPORTS):
the learner (train/learner/) imports no other HELIX package and no other room, so the GRPO update
can be read, tested and reused alone; the warm start (train/warm_start/) is built from its explicit
inputs with the learner's model loading; the config (train/config/) composes the sections that live
with the code reading them (the learner's, the warm start's); the reading room (train/runs/) reads
what runs wrote and imports no part of the run (tests/docs/test_import_paths.py says what else it may use);
the run (train/loop/) stands on its config and the learner and imports neither the commands nor the
reading room; the commands (train/commands/) stand on everything, and the Python API (train/api/: the
start routine every run takes, ``run``, ``open_run``, ``write_task``) on them. The command line
(train/helix.py) is a thin door over the API. Only the entry points (train/helix.py, ``python -m
train.warm_start``), the commands, the API and scripts/ import the run."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("train", "rollout", "population", "rewards", "tasks")
# Which other packages each package may import.
ALLOWED = {"train": {"rollout", "population", "rewards", "tasks"}, "rollout": {"tasks"},
           "population": set(), "rewards": set(), "tasks": set()}


ROOMS = ("train.learner", "train.warm_start", "train.config", "train.runs", "train.loop", "train.commands", "train.api")
# The command lines: they may import any room (``python -m train.warm_start`` is the warm-start command's).
ENTRY_POINTS = {"train.helix", "train.warm_start.__main__"}
# Which other rooms each room may import: every arrow points down this table.
ROOM_IMPORTS = {
    "train.learner": set(),
    "train.warm_start": {"train.learner"},
    "train.config": {"train.learner", "train.warm_start"},  # their sections (learner.config, warm_start.config)
    "train.runs": {"train.learner"},
    "train.loop": {"train.learner", "train.config"},  # a model path in, no warm start, no command, no report
    "train.commands": {"train.learner", "train.warm_start", "train.config", "train.runs", "train.loop"},
    # HELIX from Python: the start routine (the command line's too), the task check and the reading room
    "train.api": {"train.learner", "train.warm_start", "train.config", "train.runs", "train.loop", "train.commands"},
}


def modules() -> dict[str, Path]:
    """Every module of the packages, subpackages included (a package's ``__init__`` is the package)."""
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def room(module: str) -> str | None:
    """The room a module lives in; None for an entry point, which stands outside every room."""
    if module in ENTRY_POINTS:
        return None
    return next((r for r in ROOMS if module == r or module.startswith(r + ".")), None)


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports anywhere in its file (``from pkg import mod`` is
    an import of ``pkg.mod``, not of the package's ``__init__``)."""
    mods = modules()
    graph = {}
    for name, path in mods.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = {f"{node.module}.{a.name}" for a in node.names}
                targets |= subs if subs <= set(mods) else {node.module} | (subs & set(mods))
        graph[name] = {t for t in targets if t in mods and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_the_imports_it_should():
    graph = import_graph()
    assert len(graph) > 50
    assert {"rollout.engine_api", "population.archive", "rewards.evaluator", "tasks.base"} <= graph["train.loop.epoch_loop"] | {
        t for m in graph["train.loop.epoch_loop"] for t in graph[m]}
    assert "rewards.fs_jail" in graph["rewards.sandbox"] and "rewards" not in graph["rewards.sandbox"]


def test_no_package_imports_one_it_may_not():
    wrong = sorted((m, t) for m, targets in import_graph().items() for t in targets
                   if t.split(".")[0] != m.split(".")[0] and t.split(".")[0] not in ALLOWED[m.split(".")[0]])
    assert wrong == []


def test_the_learner_room_imports_nothing_outside_itself():
    wrong = sorted((m, t) for m, targets in import_graph().items() if room(m) == "train.learner"
                   for t in targets if room(t) != "train.learner")
    assert wrong == []


def test_only_the_entry_points_the_commands_and_the_api_import_the_run_room():
    wrong = sorted((m, t) for m, targets in import_graph().items() for t in targets
                   if room(t) == "train.loop" and room(m) not in ("train.loop", "train.commands", "train.api")
                   and m not in ENTRY_POINTS)
    assert wrong == []


def test_the_command_line_stands_on_the_api_and_nothing_stands_on_it():
    """train/helix.py starts a run through train.api.start, as ``train.api.run`` does; no module imports it."""
    graph = import_graph()
    assert "train.api.start" in graph["train.helix"] and not {"train.loop.epoch_loop", "train.api.launch"} & graph["train.helix"]
    assert [m for m, targets in graph.items() if "train.helix" in targets] == []


def crossings(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, import) pairs where a room imports a room ROOM_IMPORTS does not give it."""
    return sorted((m, t) for m, targets in graph.items() for t in targets
                  if room(m) and room(t) and room(t) != room(m) and room(t) not in ROOM_IMPORTS[room(m)])


def test_every_room_imports_only_the_rooms_below_it():
    """The run imports neither the commands nor the reading room; the learner, warm start, config and
    reading rooms import neither the run nor the commands; nothing climbs back up."""
    assert set(ROOM_IMPORTS) == set(ROOMS)
    assert crossings(import_graph()) == []


def test_the_room_check_sees_a_climb():
    graph = {"train.config.run_name": {"train.commands.ablate"}, "train.loop.epoch_loop": {"train.warm_start.build"},
             "train.warm_start.build": {"train.learner.models"}, "train.helix": {"train.loop.epoch_loop"},
             "train.warm_start.__main__": {"train.commands.warm_start"}}
    assert crossings(graph) == [("train.config.run_name", "train.commands.ablate"),
                                ("train.loop.epoch_loop", "train.warm_start.build")]


def test_every_train_module_lives_in_a_room_or_is_an_entry_point():
    loose = sorted(m for m in modules() if m.startswith("train.") and room(m) is None and m not in ENTRY_POINTS)
    assert loose == []


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_three_module_loop():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
