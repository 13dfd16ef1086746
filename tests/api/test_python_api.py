"""HELIX from Python (train.api, docs/python.md): ``run`` is the command line's run (same folder, same results
seed for seed, the same one-line errors as exceptions, Ctrl-C and resume), ``open_run`` reads a run without
writing to it, ``write_task`` writes and checks a task folder, and docs/python.md's session runs as written."""

import hashlib
import json
import os
import re
import shutil
import sqlite3
import uuid
from pathlib import Path

import numpy as np
import pytest

import train.api as helix
from rollout.engines import ENGINES
from tasks.base import TASKS_DIR
from tasks.scaffold import FILES, ScaffoldError
from tests.helpers.scripted import QUICK, ROOT, TINY, ScriptedEngine
from tests.helpers.small_task import VERIFIER
from train.commands.task_check import TaskCheckError
from train.config.config import ConfigError, load_config
from train.helix import main
from train.loop.epoch_loop import HelixRun
from train.runs.run_data import RunDirError

PAGE = ROOT / "docs" / "python.md"
SCRIPTED = [*TINY, "rollout.engine=scripted", "rollout.group_size=4", "trainer.epochs=3"]  # mixed rewards: GRPO moves
MOVING = {"time", "share_", "tokens_per_s", "evals_per_s", "eval_busy_s"}  # metrics that are timings


@pytest.fixture
def scripted(monkeypatch):
    monkeypatch.setitem(ENGINES, "scripted", ScriptedEngine)


def _archive(run: Path) -> tuple[list, list]:
    db = sqlite3.connect(f"file:{run / 'archive.sqlite'}?mode=ro&immutable=1", uri=True)  # finished: no -wal, -shm made
    solutions = db.execute("SELECT id, parent_id, epoch, code, reward, valid, advantage FROM solutions ORDER BY id").fetchall()
    pops = db.execute("SELECT epoch, position, solution_id, tag, diversity FROM populations ORDER BY epoch, position").fetchall()
    db.close()
    return solutions, pops


def _metrics(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not any(m in k for m in MOVING)} for r in rows]


def _weights(run: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    out = {}
    for shard in sorted((run / "export").glob("*.safetensors")):
        out.update(load_file(shard))
    return out


# ---- run -----------------------------------------------------------------------------------------
@pytest.mark.slow  # whole runs, two and three of them
def test_a_run_from_python_is_the_command_line_run_seed_for_seed(tmp_path, scripted):
    assert main(["--config", QUICK, *SCRIPTED, f"run.output_dir={tmp_path}", "run.name=cli"]) == 0
    result = helix.run(QUICK, [*SCRIPTED, f"run.output_dir={tmp_path}", "run.name=py"], progress=False)
    cli, py = tmp_path / "cli", tmp_path / "py"
    assert result.path == py and sorted(p.name for p in py.iterdir()) == sorted(p.name for p in cli.iterdir())
    assert _archive(py) == _archive(cli)
    assert _metrics(py) == _metrics(cli) and len(result.metrics) == 3
    assert (py / "best_program.py").read_text() == (cli / "best_program.py").read_text()
    a, b = _weights(py), _weights(cli)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    best = max((s for s in _archive(cli)[0] if s[5]), key=lambda s: (s[4], -s[0]))
    assert (result.best.id, result.best.code, result.best.reward) == (best[0], best[3], best[4])
    assert result.best.parents == (() if best[1] is None else (best[1],))
    assert result.metrics[-1]["best_reward"] == best[4]


def test_a_mapping_of_overrides_is_what_the_strings_say(tmp_path):
    assert helix.launch.override_strings({"trainer.lr": 2e-6, "run.name": "x y", "evolution.operators": {"edit": 0.9},
                                          "trainer.epochs": 2, "run.wandb": "disabled", "task.timeout_s": None}) == [
        "trainer.lr=2.0e-06", "run.name=x y", "evolution.operators={edit: 0.9}", "trainer.epochs=2",
        "run.wandb=disabled", "task.timeout_s=null"]
    cfg = load_config(QUICK, helix.launch.override_strings({"trainer.lr": 2e-6, "evolution.operators": {"edit": 0.9,
                                                                                                       "rewrite": 0.1}}))
    assert cfg.trainer.lr == 2e-6 and cfg.evolution.operators == {"edit": 0.9, "rewrite": 0.1}
    with pytest.raises(TypeError, match="mapping of dotted keys"):
        helix.run(QUICK, "trainer.epochs=2")


def test_errors_are_exceptions_with_the_command_lines_lines(tmp_path, capsys):
    bad = ["trainer.epoch=2", f"run.output_dir={tmp_path}"]
    assert main(["--config", QUICK, *bad]) == 2
    line = capsys.readouterr().err.strip()
    with pytest.raises(ConfigError) as err:
        helix.run(QUICK, bad)
    assert line == f"helix: config error: {err.value}" and "Did you mean 'epochs'?" in line  # the nearest key, named
    with pytest.raises(ConfigError, match="not registered"):
        helix.run(QUICK, {"task.name": "no_such_task"})
    with pytest.raises(ValueError, match="exactly one of config"):
        helix.run()
    with pytest.raises(ConfigError, match="not a run directory"):
        helix.run(resume=tmp_path)
    assert not any(tmp_path.iterdir())  # no run directory was made by any of them


@pytest.mark.slow  # whole runs, two and three of them
def test_a_ctrl_c_from_python_raises_and_the_run_resumes_to_the_uninterrupted_state(tmp_path, scripted, monkeypatch, capfd):
    ref = helix.run(QUICK, [*SCRIPTED, f"run.output_dir={tmp_path}", "run.name=ref"], progress=False)
    real = HelixRun.archive_and_select

    def interrupted(self, epoch):
        if epoch.number == 2:
            raise KeyboardInterrupt
        real(self, epoch)

    monkeypatch.setattr(HelixRun, "archive_and_select", interrupted)
    with pytest.raises(KeyboardInterrupt):
        helix.run(QUICK, [*SCRIPTED, f"run.output_dir={tmp_path}", "run.name=cut"], progress=False)
    assert "--resume" in capfd.readouterr().err  # the stop line: how to continue
    monkeypatch.setattr(HelixRun, "archive_and_select", real)
    resumed = helix.run(resume=tmp_path / "cut", progress=False)
    assert resumed.path == tmp_path / "cut"
    assert _archive(resumed.path) == _archive(ref.path)
    assert [r["epoch"] for r in resumed.metrics] == [1, 2, 3]


# ---- open_run ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    ENGINES["scripted"] = ScriptedEngine
    try:
        assert main(["--config", QUICK, *SCRIPTED, f"run.output_dir={out}", "run.name=r", "run.export=false"]) == 0
    finally:
        del ENGINES["scripted"]
    return out / "r"


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_open_run_reads_everything_and_writes_nothing(finished):
    before = _digest(finished)
    run = helix.open_run(finished)
    assert [r["epoch"] for r in run.metrics()] == [1, 2, 3] and run.config["run"]["name"] == "r"
    assert "finished" in repr(run)
    solutions, pops = _archive(finished)
    assert run.count() == len(solutions)
    page = run.solutions(offset=0, limit=4, order="-reward")
    by_reward = sorted(solutions, key=lambda s: (-s[4], s[0]))
    assert [r["id"] for r in page] == [s[0] for s in by_reward[:4]]
    assert [r["id"] for r in run.solutions(offset=4, limit=4, order="-reward")] == [s[0] for s in by_reward[4:8]]
    assert [r["id"] for r in run.solutions(limit=500, order="id", valid_only=True)] == [s[0] for s in solutions if s[5]]
    child = next(s for s in solutions if s[1] is not None)
    view = run.solution(child[0])
    assert (view.code, view.reward, view.parents, view.epoch) == (child[3], child[4], (child[1],), child[2])
    assert view.completion and view.group["members"] and view.prompt
    assert child[0] in run.solution(child[1]).children
    assert run.lineage(child[0])[0] == child[1] and view.lineage == run.lineage(child[0]) and view.lineage[-1] == 1
    best = run.best()
    assert best.id == by_reward[0][0] if by_reward[0][5] else best.valid
    population = run.population(2)
    assert population["epoch"] == 2 and [m["id"] for m in population["members"]] == [p[2] for p in pops if p[0] == 2]
    frame = run.to_pandas("metrics")
    assert list(frame["epoch"]) == [1, 2, 3]
    assert len(run.to_pandas("solutions")) == len(solutions)
    assert _digest(finished) == before  # nothing was written, no -wal or -shm file appeared
    with pytest.raises(sqlite3.OperationalError):  # and the archive it opens is read-only
        from population.archive import ReadOnlyArchive

        with ReadOnlyArchive(finished / "archive.sqlite") as arch:
            arch.db.execute("DELETE FROM solutions")


def test_open_run_errors_are_one_line(finished, tmp_path):
    with pytest.raises(RunDirError, match="not a directory"):
        helix.open_run(tmp_path / "missing")
    with pytest.raises(RunDirError, match="neither metrics.jsonl nor archive.sqlite"):
        helix.open_run(tmp_path)
    run = helix.open_run(finished)
    with pytest.raises(ValueError, match="order must be one of"):
        run.solutions(order="best")
    with pytest.raises(ValueError, match="offset must be"):
        run.solutions(offset=-1)
    with pytest.raises(ValueError, match="metrics' or 'solutions'"):
        run.to_pandas("children")
    with pytest.raises(KeyError, match="solution 999 is not in the archive"):
        run.solution(999)
    with pytest.raises(KeyError, match="solution 999 is not in the archive"):
        run.lineage(999)
    with pytest.raises(KeyError, match="epoch 77 has no population"):
        run.population(77)


# ---- write_task ----------------------------------------------------------------------------------
STARTER = "def solve():\n    return [0.3]\n"


@pytest.fixture
def task_name():
    name = f"api_task_{uuid.uuid4().hex[:8]}"
    yield name
    shutil.rmtree(TASKS_DIR / name, ignore_errors=True)


def test_write_task_writes_what_new_task_writes_filled_in_and_checks_it(task_name, tmp_path):
    task = helix.write_task(task_name, description="Return [x] in [0, 1] maximising x (1 - x).\n\nMore detail.",
                            starter=STARTER, verifier=VERIFIER, best_known=0.25, time_limit_s=5, cpu_time_limit_s=3)
    folder = TASKS_DIR / task_name
    # less __pycache__: Python's bytecode of the verifier the check imported (absent under PYTHONDONTWRITEBYTECODE)
    assert sorted(p.name for p in folder.iterdir() if p.name != "__pycache__") == sorted(FILES)
    assert (task.name, task.best_known, task.entry_function) == (task_name, 0.25, "solve")
    assert (folder / "brief.md").read_text() == "Return [x] in [0, 1] maximising x (1 - x).\n"  # the first paragraph
    from tasks.base import own_timeout_s

    assert (own_timeout_s(task_name, "paper"), own_timeout_s(task_name, "cpu")) == (5, 3)


def test_a_verifier_comes_as_text_a_file_or_a_module(task_name, tmp_path, monkeypatch):
    path = tmp_path / "my_verifier.py"
    path.write_text(VERIFIER)
    helix.write_task(task_name, description="d", starter=STARTER, verifier=path, best_known=0.25)
    assert (TASKS_DIR / task_name / "verifier.py").read_text() == VERIFIER
    shutil.rmtree(TASKS_DIR / task_name)
    monkeypatch.syspath_prepend(str(tmp_path))
    helix.write_task(task_name, description="d", starter=STARTER, verifier="my_verifier", best_known=0.25)
    assert (TASKS_DIR / task_name / "verifier.py").read_text() == VERIFIER


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(best_known=float("nan")), helix.TaskArgumentError, "best_known must be a finite number"),
    (dict(memory_mb=32), helix.TaskArgumentError, "memory_mb must be an integer >= 64"),
    (dict(starter=""), helix.TaskArgumentError, "starter must be non-empty text"),
    (dict(verifier="/no/such/verifier.py"), helix.TaskArgumentError, "is not a file"),
    (dict(verifier="no_such_module_here"), helix.TaskArgumentError, "no Python module named"),
    (dict(entry_function="solve it"), helix.TaskArgumentError, "entry_function must be a Python identifier"),
    (dict(best_known=0.2), TaskCheckError, "best_known"),  # the starter (0.21) above best_known: the check's line
    (dict(verifier=VERIFIER.replace("def verify(returned):", "def verify(returned)")), TaskCheckError, "syntax error"),
    (dict(starter="def solve():\n    return [0.3, 0.4]\n"), TaskCheckError, "the starter fails its own verifier"),
])
def test_bad_arguments_are_one_line_and_leave_no_folder(task_name, kwargs, error, message):
    args = dict(description="d", starter=STARTER, verifier=VERIFIER, best_known=0.25) | kwargs
    with pytest.raises(error, match=re.escape(message)) as err:
        helix.write_task(task_name, **args)
    assert "\n" not in str(err.value)
    assert not (TASKS_DIR / task_name).exists()


def test_write_task_with_dest_writes_outside_the_repository_and_finds_it(task_name, tmp_path):
    """dest: the folder is written there (made if missing), never under tasks/; it joins this process's HELIX_TASKS,
    so the check and a config naming the task find it. A failed check removes it there too."""
    from tasks.base import task_folder

    dest = tmp_path / "mine"
    with pytest.raises(TaskCheckError, match="best_known"):
        helix.write_task(task_name, description="d", starter=STARTER, verifier=VERIFIER, best_known=0.2, dest=dest)
    assert not (dest / task_name).exists()
    task = helix.write_task(task_name, description="d", starter=STARTER, verifier=VERIFIER, best_known=0.25, dest=dest)
    assert task.folder == dest / task_name and (dest / task_name / "verifier.py").read_text() == VERIFIER
    assert not (TASKS_DIR / task_name).exists() and str(dest) in os.environ["HELIX_TASKS"].split(os.pathsep)
    assert task_folder(task_name) == dest / task_name
    assert load_config(None, [f"task.name={task_name}"]).task.timeout_s == 30.0  # write_task's default limit


def test_a_taken_or_reserved_name_is_refused():
    with pytest.raises(ScaffoldError, match="already exists"):
        helix.write_task("circle_packing_26", description="d", starter=STARTER, verifier=VERIFIER, best_known=1.0)
    with pytest.raises(ScaffoldError, match="not a task name"):
        helix.write_task("Bad Name", description="d", starter=STARTER, verifier=VERIFIER, best_known=1.0)
    assert (TASKS_DIR / "circle_packing_26" / "task.yaml").is_file()  # untouched


# ---- the docs page -------------------------------------------------------------------------------
def page_code() -> str:
    text = PAGE.read_text()
    section = text[text.index("## A session"):text.index("## Reference")]
    return "\n".join(re.findall(r"```python\n(.*?)```", section, flags=re.S))


@pytest.mark.slow
def test_the_docs_session_runs_as_written(tmp_path, monkeypatch, capsys):
    """docs/python.md's code blocks in order, with only the model made tiny and the task name unique."""
    name = f"spread_points_{uuid.uuid4().hex[:6]}"
    code = page_code().replace('"spread_points_5"', repr(name))
    assert code.count(repr(name)) == 2  # write_task and run: the rename reached both
    real = helix.run
    tiny = {"model.policy": "tiny-random", "warm_start.parents": 2, "warm_start.answers_per_parent": 2,
            "warm_start.epochs": 1, "warm_start.dtype": "float32", "rollout.engine": "hf", "rollout.max_new_tokens": 12,
            "rollout.group_size": 2, "trainer.prompts_per_epoch": 2, "population.size": 4, "run.export": False,
            "run.output_dir": str(tmp_path), "task.eval_workers": 2, "model.cache_dir": str(tmp_path / "cache")}

    def small(config=None, overrides=None, **kwargs):
        return real(config, {**dict(overrides or {}), **tiny}, **kwargs)

    monkeypatch.setattr(helix, "run", small)
    try:
        exec(compile(code, str(PAGE), "exec"), {"__name__": "docs_python"})
    finally:
        shutil.rmtree(TASKS_DIR / name, ignore_errors=True)
    out = capsys.readouterr().out
    assert f"{name} 0.7071067811865476" in out and "RunResult(" in out and "finished, 2 epochs" in out
