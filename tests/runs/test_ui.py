"""The run browser without a browser: its data layer (train/runs/browse.py, the top-k and area curves of
train/runs/ablation.py) against hand-computed values, and the server's safety (GET only, no path out of
the browsed folder, escaping headers) through Starlette's test client. The page itself: test_ui_browser.py."""

import json
import math

import numpy as np
import pytest
from starlette.testclient import TestClient

from population.archive import Archive, ReadOnlyArchive
from tests.helpers.ui_runs import HOSTILE, build_ui_run
from train.runs import ablation, browse
from train.runs import run_data as rd
from train.runs.ui.server import create_app


@pytest.fixture()
def folder(tmp_path):
    ids = build_ui_run(tmp_path / "runs" / "uirun")
    return tmp_path / "runs", ids


# ---- curves: best, top-k mean, valid fraction, area ------------------------------------------
def test_curves_top_k_valid_and_area_by_hand(folder):
    root, _ = folder
    c = ablation.run_curves(root / "uirun" / "archive.sqlite", k=2)
    # children in id order: a 1.85, hostile x, c 1.80, d 1.9, e x, lost x, cross 1.7; starter 1.8365
    assert c["best"].tolist() == [1.85, 1.85, 1.85, 1.9, 1.9, 1.9, 1.9]
    assert np.allclose(c["topk"], [1.84325, 1.84325, 1.84325, 1.875, 1.875, 1.875, 1.875])
    assert np.allclose(c["valid"], [1, 1 / 2, 2 / 3, 3 / 4, 3 / 5, 3 / 6, 4 / 7])
    assert ablation.area(c["best"], 4) == pytest.approx((3 * 1.85 + 1.9) / 4)
    with pytest.raises(ValueError, match="area over 8 children"):
        ablation.area(c["best"], 8)
    assert ablation.best_so_far(root / "uirun" / "archive.sqlite").tolist() == c["best"].tolist()


def test_curves_top_k_before_k_valid_and_invalid_starter():
    rows = [(1, None, 0, 5.0, False), (2, 1, 1, 1.0, True), (3, 1, 1, 3.0, True), (4, 1, 1, 2.0, True)]
    c = ablation.curves_of(rows, k=2)
    assert c["best"].tolist() == [1.0, 3.0, 3.0]  # an invalid starter is no floor
    assert c["topk"].tolist() == [1.0, 2.0, 2.5]  # mean of those there are while fewer than k
    assert ablation.curves_of([(1, None, 0, 1.0, False), (2, 1, 1, 0.0, False)], k=3)["topk"].tolist() == [0.0]


def test_budget_rows_mean_and_std_over_seeds():
    curves = {"v": [dict(best=np.array([1.0, 2.0]), topk=np.array([1.0, 1.5]), valid=np.array([1.0, 0.5])),
                    dict(best=np.array([3.0, 4.0]), topk=np.array([3.0, 3.5]), valid=np.array([0.0, 0.5]))]}
    head, row = ablation.budget_rows(curves, 2, k=2)
    assert head[2:4] == ["best @2", "top-2 mean @2"]
    # best @2: 2 and 4 -> 3 ± 1.4142; area best: 1.5 and 3.5 -> 2.5 ± 1.4142
    assert row == ["v", "2", "3.0000 ± 1.4142", "2.5000 ± 1.4142", "0.5000 ± 0.0000", "2.5000 ± 1.4142", "2.2500 ± 1.4142"]


# ---- the browse data layer -------------------------------------------------------------------
def test_resolve_run_stays_inside_the_folder(folder, tmp_path):
    root, _ = folder
    assert browse.resolve_run(root, "uirun") == (root / "uirun").resolve()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "metrics.jsonl").write_text("")
    (root / "link").symlink_to(tmp_path / "outside")
    for bad in ("../outside", "uirun/../../outside", "/etc", "link", "uirun/..", "", "nope", "..\\outside"):
        with pytest.raises(rd.RunDirError):
            browse.resolve_run(root, bad)


def test_discover_and_run_row(folder):
    root, _ = folder
    (root / "uirun" / "checkpoints" / "x").mkdir(parents=True)  # a run's own subfolders are not runs
    (root / "uirun" / "checkpoints" / "x" / "metrics.jsonl").write_text("")
    assert browse.discover(root) == [root / "uirun"]
    row = browse.run_row(root, root / "uirun")
    assert (row["run"], row["task"], row["status"], row["epochs"], row["solutions"]) == ("uirun", "circle_packing_26", "finished", 2, 8)
    assert row["best"] == 1.9 and row["ratio"] == pytest.approx(1.9 / 2.6359830849)


def test_status_running_and_stopped(tmp_path):
    build_ui_run(tmp_path / "r", epochs_logged=1)  # trainer.epochs is 2: not finished
    run = rd.load_run(tmp_path / "r")
    assert browse.status(run) == "running"  # just written
    assert browse.status(run, now=run.path.joinpath("metrics.jsonl").stat().st_mtime + 3600) == "stopped"


def test_solutions_pages_and_orders(folder):
    root, ids = folder
    page = browse.solutions(root / "uirun", 0, 3, "-reward")
    assert page["total"] == 8 and [r["id"] for r in page["rows"]] == [ids["d"], ids["a"], ids["root"]]
    assert [r["id"] for r in browse.solutions(root / "uirun", 3, 2, "-reward")["rows"]] == [ids["c"], ids["cross"]]
    assert [r["id"] for r in browse.solutions(root / "uirun", 0, 2, "-id")["rows"]] == [ids["cross"], ids["lost"]]
    assert "code" not in page["rows"][0]
    best_valid = browse.solutions(root / "uirun", 0, 3, "-reward", valid_only=True)["rows"]
    assert [r["id"] for r in best_valid] == [ids["d"], ids["a"], ids["root"]]
    assert [r["id"] for r in browse.solutions(root / "uirun", 0, 2, "reward")["rows"]] == [ids["lost"], ids["e"]]  # ties: newest first
    with Archive(root / "uirun" / "archive.sqlite") as arch:  # the sorted order is cached until the archive grows
        (top,) = arch.add_many([dict(parent_id=ids["d"], epoch=3, code="t\n", reward=3.0, valid=True, feedback="ok")])
    assert browse.solutions(root / "uirun", 0, 1, "-reward")["rows"][0]["id"] == top
    with pytest.raises(ValueError, match="order"):
        browse.solutions(root / "uirun", 0, 2, "code; DROP TABLE solutions")


def test_lineage_best_chains_second_parent_and_expand(folder):
    root, ids = folder
    tree = browse.lineage(root / "uirun", n_best=2)
    assert tree["best"] == [ids["d"], ids["a"]]
    assert {n["id"] for n in tree["nodes"]} == {ids["root"], ids["a"], ids["d"]}
    by_id = {n["id"]: n for n in tree["nodes"]}
    assert by_id[ids["root"]]["n_children"] == 3 and by_id[ids["a"]]["n_children"] == 4  # 3 children + crossover
    tree = browse.lineage(root / "uirun", n_best=5)  # cross is 5th best: drawn with both parents
    cross = next(n for n in tree["nodes"] if n["id"] == ids["cross"])
    assert (cross["parent_id"], cross["second_parent_id"], cross["operator"]) == (ids["c"], ids["a"], "crossover")
    with Archive(root / "uirun" / "archive.sqlite") as arch:  # the best is a crossover whose mate is off every chain
        (top,) = arch.add_many([dict(parent_id=ids["d"], second_parent_id=ids["e"], operator="crossover", epoch=3, code="t\n",
                                     reward=2.0, valid=True, feedback="ok", prompt_id="e3-p0-g0")])
    tree = browse.lineage(root / "uirun", n_best=1)
    assert tree["best"] == [top] and {n["id"] for n in tree["nodes"]} == {ids["root"], ids["a"], ids["d"], top, ids["e"]}
    kids = browse.expand(root / "uirun", ids["a"], limit=2)
    assert kids["total"] == 4 and [n["id"] for n in kids["nodes"]] == [ids["d"], ids["cross"]]  # valid first, by reward


def test_solution_diffs_prompt_and_grpo_group(folder):
    root, ids = folder
    s = browse.solution(root / "uirun", ids["cross"])
    assert [(d["label"], d["id"]) for d in s["diffs"]] == [("parent", ids["c"]), ("second parent", ids["a"])]
    assert "-    for i in range(17):" not in s["diffs"][0]["diff"] and "0.43 *" in s["diffs"][0]["diff"]
    assert s["prompt"]["dropped"] == [] and [a["id"] for a in s["prompt"]["ancestors"]] == [ids["root"]]
    d = browse.solution(root / "uirun", ids["d"])
    assert d["prompt"]["dropped"] == ["oldest ancestor"]
    g = browse.solution_group(root / "uirun", ids["d"])
    group = {m["id"]: m for m in g["members"]}
    assert list(group) == [ids["d"], ids["e"], ids["lost"]] and g["prompt"] == "e2-p0"
    # GRPO by hand over the scored rewards [1.9, 0.0]: (r - mean) / (sample std + 1e-6); the lost one has none
    std = np.std([1.9, 0.0], ddof=1)
    assert group[ids["d"]]["advantage"] == pytest.approx(0.95 / (std + 1e-6), abs=1e-6)
    assert group[ids["e"]]["advantage"] == pytest.approx(-0.95 / (std + 1e-6), abs=1e-6)
    assert group[ids["lost"]]["advantage"] is None and group[ids["lost"]]["scored"] is False
    assert browse.solution_group(root / "uirun", ids["root"])["members"] == []
    h = browse.solution(root / "uirun", ids["hostile"])
    assert h["code"] == HOSTILE and h["renderable"] is False  # invalid: nothing to draw


def test_prompt_ancestors_less_what_the_budget_dropped(folder):
    root, ids = folder
    run = root / "uirun"
    with Archive(run / "archive.sqlite") as arch:  # a grandchild: ancestors of its parent d are a, root
        (g,) = arch.add_many([dict(parent_id=ids["d"], epoch=3, code="g = 1\n", reward=0.5, valid=True, feedback="ok",
                                   prompt_id="e3-p1-g0")])
        (g2,) = arch.add_many([dict(parent_id=ids["d"], epoch=3, code="g = 2\n", reward=0.5, valid=True, feedback="ok",
                                    prompt_id="e3-p0-g0")])
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps({"epoch": 3, "prompt_dropped": [{"prompt": 1, "parent_id": ids["d"], "dropped": ["oldest ancestor"]}]}) + "\n")
    assert [a["id"] for a in browse.solution(run, g)["prompt"]["ancestors"]] == [ids["a"]]
    assert [a["id"] for a in browse.solution(run, g2)["prompt"]["ancestors"]] == [ids["a"], ids["root"]]
    assert browse.solution(run, g)["prompt"]["source"] == "reconstructed"
    (run / "prompts").mkdir()
    (run / "prompts" / "epoch-3.jsonl").write_text(json.dumps(
        {"epoch": 3, "prompt": 1, "text": "PROMPT <b>", "dropped": ["x"], "ancestors": [ids["root"]], "others": [ids["c"]]}) + "\n")
    p = browse.solution(run, g)["prompt"]
    assert (p["text"], p["dropped"], p["source"]) == ("PROMPT <b>", ["x"], "recorded")
    assert [a["id"] for a in p["ancestors"]] == [ids["root"]] and [o["id"] for o in p["others"]] == [ids["c"]]


def test_population_front_and_next_epochs_parents(folder):
    root, ids = folder
    p = browse.population(root / "uirun", 1)
    assert p["epochs"] == [0, 1, 2] and p["source"] == "stored"
    members = {m["id"]: m for m in p["members"]}
    # (reward, Div): root (1.8365, .1), a (1.85, .5), c (1.80, .3): a dominates both
    assert [members[i]["front"] for i in (ids["root"], ids["a"], ids["c"])] == [False, True, False]
    # epoch 2's prompts showed a (group e2-p0) and c with a as second parent (crossover)
    assert [members[i]["parent"] for i in (ids["root"], ids["a"], ids["c"])] == [False, True, True]
    assert browse.population(root / "uirun", None)["epoch"] == 2


def test_compare_two_runs_tables(folder):
    root, _ = folder
    build_ui_run(root / "other-s0")
    out = browse.compare(root, ["uirun", "other-s0"], k=2)
    assert [r["run"] for r in out["runs"]] == ["uirun", "other-s0"] and out["budget"] == 7
    assert out["runs"][0]["x"] == list(range(1, 8)) and out["runs"][0]["topk"][3] == pytest.approx(1.875)
    head, *rows = out["tables"]["area"]
    assert head[0] == "variant" and [r[0] for r in rows] == ["uirun", "other"]
    assert rows[0][2] == "1.9000 ± 0.0000"
    with pytest.raises(rd.RunDirError):
        browse.compare(root, ["../x"])


# ---- the server ------------------------------------------------------------------------------
@pytest.fixture()
def client(folder):
    return TestClient(create_app(folder[0]))


def test_no_endpoint_writes(client, folder):
    root, _ = folder
    before = (root / "uirun" / "archive.sqlite").read_bytes()
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for path in ("/api/runs", "/api/solution?run=uirun&id=1", "/", "/static/app.js", "/api/nothing"):
            r = client.request(method, path)
            assert r.status_code == 405, (method, path)
            assert "read-only" in r.json()["error"]
    assert (root / "uirun" / "archive.sqlite").read_bytes() == before
    with ReadOnlyArchive(root / "uirun" / "archive.sqlite") as arch:
        assert arch.count() == 8


def test_paths_cannot_leave_the_folder(client):
    for run in ("../", "..", "../../etc", "uirun/../..", "/etc", "%2e%2e"):
        r = client.get("/api/overview", params={"run": run})
        assert r.status_code == 404 and "error" in r.json(), run
    assert client.get("/static/../server.py").status_code == 404
    assert client.get("/static/%2e%2e/server.py").status_code == 404
    assert client.get("/api/solution", params={"run": "uirun", "id": 999}).status_code == 404


def test_pages_and_api(client, folder):
    _, ids = folder
    for view in ("/", "/run?run=uirun", "/lineage?run=uirun", "/solution?run=uirun&id=1", "/population?run=uirun", "/compare"):
        r = client.get(view)
        assert r.status_code == 200 and "/static/app.js" in r.text
        assert "script-src 'self'" in r.headers["content-security-policy"]  # an injected inline script cannot run
    runs = client.get("/api/runs").json()["runs"]
    assert [r["run"] for r in runs] == ["uirun"]
    s = client.get("/api/solution", params={"run": "uirun", "id": ids["hostile"]})
    assert s.headers["content-type"] == "application/json" and s.json()["completion"] == "<answer>" + HOSTILE + "</answer>"
    assert math.isclose(client.get("/api/overview", params={"run": "uirun"}).json()["series"]["best_reward"][1], 1.9)


def test_cli_refuses_a_folder_without_runs(tmp_path, capsys):
    from train.runs.ui.server import main

    assert main([str(tmp_path)]) == 2
    assert "holds no run directory" in capsys.readouterr().err
