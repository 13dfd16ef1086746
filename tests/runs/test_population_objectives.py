"""The run browser's population view with objectives the task declares (task.yaml ``objectives``): the
endpoint lists what may be plotted and each member's value of it, and marks the front of all objectives,
checked against a front computed in plain Python."""

import json
import math
import shutil
import sqlite3

import pytest
import yaml
from starlette.testclient import TestClient

import tasks.base
from tests.helpers.ui_runs import build_ui_run
from train.runs import browse
from train.runs.ui.server import create_app

BASE = "http://127.0.0.1:8765"


@pytest.fixture()
def run_with_objectives(tmp_path, monkeypatch):
    """uirun, its task's task.yaml declaring eval_time_s (min) and overlap (min); epoch 1's members root, a, c
    timed 0.1, 0.5, 0.3 s, and only a reporting overlap."""
    ids = build_ui_run(tmp_path / "runs" / "uirun")
    source = tasks.base.TASKS_DIR / "circle_packing_26"
    shutil.copytree(source, tmp_path / "tasks" / "circle_packing_26", ignore=shutil.ignore_patterns("__pycache__"))
    spec_path = tmp_path / "tasks" / "circle_packing_26" / "task.yaml"
    spec = yaml.safe_load(spec_path.read_text())
    spec["objectives"] = [{"metric": "eval_time_s", "goal": "min"}, {"metric": "overlap", "goal": "min"}]
    spec_path.write_text(yaml.safe_dump(spec))
    monkeypatch.setattr(tasks.base, "TASKS_DIR", tmp_path / "tasks")
    db = sqlite3.connect(tmp_path / "runs" / "uirun" / "archive.sqlite")
    for name, seconds in (("root", 0.1), ("a", 0.5), ("c", 0.3)):
        db.execute("UPDATE solutions SET eval_time_s = ? WHERE id = ?", (seconds, ids[name]))
    db.execute("UPDATE solutions SET metrics = ? WHERE id = ?", (json.dumps({"overlap": 0.0}), ids["a"]))
    db.commit()
    db.close()
    return tmp_path / "runs", ids


def brute_front(points: dict[int, tuple]) -> set[int]:
    def dominates(p, q):
        return all(x >= y for x, y in zip(p, q)) and any(x > y for x, y in zip(p, q))

    return {i for i, p in points.items() if not any(dominates(q, p) for j, q in points.items() if j != i)}


def test_population_lists_declared_objectives_and_each_members_values(run_with_objectives):
    root, ids = run_with_objectives
    p = browse.population(root / "uirun", 1)
    assert [(o["name"], o["goal"]) for o in p["objectives"]] == [("reward", "max"), ("diversity", "max"),
                                                                ("eval_time_s", "min"), ("overlap", "min")]
    members = {m["id"]: m for m in p["members"]}
    assert members[ids["a"]]["values"] == {"reward": 1.85, "diversity": 0.5, "eval_time_s": 0.5, "overlap": 0.0}
    assert members[ids["root"]]["values"] == {"reward": 1.8365, "diversity": 0.1, "eval_time_s": 0.1, "overlap": None}
    assert members[ids["c"]]["values"]["eval_time_s"] == 0.3 and members[ids["c"]]["values"]["overlap"] is None
    # the front of all four, minimised ones negated, a missing value the worst (-inf): by hand, nobody is beaten
    # now (root is fastest, c is faster than a and more diverse than root); on (reward, Div) alone a beat both
    oriented = {m["id"]: (m["values"]["reward"], m["values"]["diversity"], -m["values"]["eval_time_s"],
                          -math.inf if m["values"]["overlap"] is None else -m["values"]["overlap"]) for m in p["members"]}
    assert {i for i, m in members.items() if m["front"]} == brute_front(oriented) == {ids["root"], ids["a"], ids["c"]}
    assert brute_front({i: v[:2] for i, v in oriented.items()}) == {ids["a"]}


def test_the_endpoint_returns_the_same(run_with_objectives):
    root, ids = run_with_objectives
    body = TestClient(create_app(root), base_url=BASE).get("/api/population", params={"run": "uirun", "epoch": 1}).json()
    assert [o["name"] for o in body["objectives"]] == ["reward", "diversity", "eval_time_s", "overlap"]
    assert {m["id"]: m["values"]["eval_time_s"] for m in body["members"]} == {ids["root"]: 0.1, ids["a"]: 0.5, ids["c"]: 0.3}


def test_a_task_without_objectives_offers_reward_and_div(tmp_path):
    build_ui_run(tmp_path / "runs" / "uirun")
    p = browse.population(tmp_path / "runs" / "uirun", 1)
    assert [o["name"] for o in p["objectives"]] == ["reward", "diversity"]
    assert all(set(m["values"]) == {"reward", "diversity"} for m in p["members"])
    assert [m["front"] for m in p["members"]] == [False, True, False]  # (reward, Div): a beats root and c
    assert browse.declared_objectives("no_such_task") == [] and browse.declared_objectives(None) == []


def test_the_page_offers_two_axis_selects():
    page = (tasks.base.TASKS_DIR.parent / "train" / "runs" / "ui" / "static" / "js" / "population.js").read_text()
    assert 'axisSelect(d, "x"' in page and 'axisSelect(d, "y"' in page and "d.objectives" in page
