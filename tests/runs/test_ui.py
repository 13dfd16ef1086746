"""The run browser without a browser: its data layer (train/runs/browse.py, the top-k and area curves of
train/runs/ablation.py) against hand-computed values, and the server's safety (GET only, no path out of
the browsed folder, escaping headers) through Starlette's test client. The page itself: test_ui_browser.py."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient

from population.archive import Archive, ReadOnlyArchive
from tests.helpers.ui_runs import HOSTILE, LOOSE, build_ui_run
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
    g = d["group"]
    group = {m["id"]: m for m in g["members"]}
    assert list(group) == [ids["d"], ids["e"], ids["lost"]] and g["prompt"] == "e2-p0" and g["recorded"] is True
    # as recorded (tests/ui_runs.py): GRPO over the scored rewards [1.9, 0.0], (r - mean) / (sample std + 1e-6)
    std = np.std([1.9, 0.0], ddof=1)
    assert group[ids["d"]]["advantage"] == pytest.approx(0.95 / (std + 1e-6), abs=1e-6)
    assert group[ids["e"]]["advantage"] == pytest.approx(-0.95 / (std + 1e-6), abs=1e-6)
    assert group[ids["lost"]]["advantage"] is None and group[ids["lost"]]["scored"] is False
    assert g["estimator"] == {"name": "grpo", "norm_by_std": True} and g["note"] is None
    assert browse.solution(root / "uirun", ids["root"])["group"]["members"] == []
    assert d["picture"] == {"available": True, "note": None}
    h = browse.solution(root / "uirun", ids["hostile"])
    assert h["code"] == HOSTILE and h["picture"]["available"] is False  # invalid: nothing to draw


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
BASE = "http://127.0.0.1:8765"  # the default HostCheck: the loopback names on the default port


@pytest.fixture()
def client(folder):
    return TestClient(create_app(folder[0]), base_url=BASE)


def test_no_endpoint_writes(client, folder):
    root, _ = folder
    before = (root / "uirun" / "archive.sqlite").read_bytes()
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for path in ("/api/runs", "/api/solution?run=uirun&id=1", "/", "/static/js/main.js", "/api/nothing"):
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
        assert r.status_code == 200 and "/static/js/main.js" in r.text
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


# ---- the browser answers only to its own name ---------------------------------------------------
@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:8765", "127.0.0.1:9999", "127.0.0.1.evil.com:8765",
                                  "localhost:80", "[::1]:9999", "[::2]:8765", "[::1", "localhost:8765@evil.com", "",
                                  "127.0.0.1:8765:8765", "0.0.0.0:8765"])
def test_a_foreign_host_gets_403(client, host):
    """DNS rebinding: a page on evil.example.com whose name resolves to 127.0.0.1 names its own Host."""
    for path in ("/", "/api/runs", "/api/solution?run=uirun&id=1", "/static/js/main.js"):
        r = client.get(path, headers={"host": host})
        assert r.status_code == 403, (host, path)
        assert "Host" in r.json()["error"] and "--allowed-hosts" in r.json()["error"]


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:8765", "LOCALHOST:8765", "[::1]:8765", "[0:0:0:0:0:0:0:1]:8765"])
def test_the_loopback_names_with_the_port_are_served(client, host):
    assert client.get("/api/runs", headers={"host": host}).status_code == 200


@pytest.mark.parametrize("origin, ok", [("http://evil.example.com", False), ("null", False), ("http://127.0.0.1:9999", False),
                                        ("https://127.0.0.1:8765", True), ("http://127.0.0.1:8765", True),
                                        ("http://localhost:8765", True), ("http://[::1]:8765", True), ("file://", False),
                                        ("http://127.0.0.1:8765/x", False)])
def test_a_foreign_origin_gets_403(client, origin, ok):
    r = client.get("/api/runs", headers={"origin": origin})
    assert r.status_code == (200 if ok else 403), origin
    if not ok:
        assert "Origin" in r.json()["error"]


def test_a_cross_site_api_request_gets_403_but_a_shared_link_opens(client):
    """A cross-site <img src=http://127.0.0.1:8765/api/render?...> is marked Sec-Fetch-Site: cross-site by the
    browser; a link to a view followed from another site (a navigation) still opens the page."""
    for site in ("cross-site", "same-site"):
        assert client.get("/api/render?run=uirun&id=5", headers={"sec-fetch-site": site}).status_code == 403
    assert client.get("/api/runs", headers={"sec-fetch-site": "same-origin"}).status_code == 200
    assert client.get("/solution?run=uirun&id=5", headers={"sec-fetch-site": "cross-site"}).status_code == 200


def test_allowed_hosts_for_a_proxy_ipv6_included(folder):
    from train.runs.ui.hosts import HostCheck

    check = HostCheck("10.1.2.3", 8765, ["runs.example.com", "[2001:db8::1]:8443", "2001:DB8::2", "gpu-box:8765"])
    for host in ("runs.example.com", "runs.example.com:443", "[2001:db8::1]:8443", "[2001:db8::2]:1", "[2001:db8::2]",
                 "gpu-box:8765", "10.1.2.3:8765", "127.0.0.1:8765", "[::1]:8765"):
        assert check.allows(host), host
    for host in ("[2001:db8::1]:8765", "gpu-box:8766", "10.1.2.3:80", "evil.runs.example.com", "[2001:db8::3]:8443", None):
        assert not check.allows(host), host
    assert check.allows_origin("https://runs.example.com") and not check.allows_origin("https://evil.example.com")
    assert not HostCheck("::", 8765).allows("[::]:8765") and HostCheck("::1", 8765).allows("[::1]:8765")
    for bad in ("evil.com/x", "[::1", "a b", "host:0", "host:99999", "*"):
        with pytest.raises(ValueError, match="--allowed-hosts"):
            HostCheck("127.0.0.1", 8765, [bad])
    app = create_app(folder[0], check)
    assert TestClient(app, base_url="http://runs.example.com").get("/api/runs").status_code == 200
    assert TestClient(app, base_url="http://127.0.0.1:8765").get("/api/runs").status_code == 200
    assert TestClient(app, base_url="http://evil.example.com").get("/api/runs").status_code == 403


def test_cli_refuses_a_bad_allowed_hosts_entry(folder, capsys):
    from train.runs.ui.server import main

    assert main([str(folder[0]), "--port", "0", "--allowed-hosts", "ok.example.com,evil.com/path"]) == 2
    assert "--allowed-hosts: 'evil.com/path'" in capsys.readouterr().err


# ---- one broken run, bad values -----------------------------------------------------------------
def test_an_unreadable_run_is_an_error_row_and_the_others_list(client, folder):
    root, _ = folder
    build_ui_run(root / "truncated")
    data = (root / "truncated" / "archive.sqlite").read_bytes()
    (root / "truncated" / "archive.sqlite").write_bytes(data[:3000])  # cut mid-page, as a full disk or a bad copy would
    (root / "garbage").mkdir()
    (root / "garbage" / "archive.sqlite").write_bytes(b"not sqlite at all" * 100)
    r = client.get("/api/runs")
    assert r.status_code == 200
    rows = {row["run"]: row for row in r.json()["runs"]}
    assert set(rows) == {"garbage", "truncated", "uirun"}
    assert "error" not in rows["uirun"] and rows["uirun"]["solutions"] == 8
    for name in ("garbage", "truncated"):
        assert rows[name]["error"], name
    r = client.get("/api/overview", params={"run": "truncated"})
    assert 400 <= r.status_code < 500 and r.json()["error"]
    compared = client.get("/api/compare", params={"runs": "uirun,garbage"}).json()
    assert [x["run"] for x in compared["runs"]] == ["uirun"] and [e["run"] for e in compared["errors"]] == ["garbage"]


BAD_VALUES = [("/api/solution", {"run": "uirun", "id": "1" * 40}), ("/api/solution", {"run": "uirun", "id": "-1"}),
              ("/api/solution", {"run": "uirun", "id": "abc"}), ("/api/solution", {"run": "uirun"}),
              ("/api/solution", {"run": "r" * 5000, "id": "1"}), ("/api/overview", {"run": "a/" * 3000}),
              ("/api/overview", {"run": "x" * 300}), ("/api/overview", {"run": "uirun\x00"}),
              ("/api/solutions", {"run": "uirun", "offset": str(2**64)}), ("/api/solutions", {"run": "uirun", "limit": "0"}),
              ("/api/solutions", {"run": "uirun", "valid": "maybe"}), ("/api/solutions", {"run": "uirun", "order": "x"}),
              ("/api/lineage", {"run": "uirun", "best": "9" * 30}), ("/api/expand", {"run": "uirun", "id": "9" * 40}),
              ("/api/render", {"run": "uirun", "id": "1" * 40}), ("/api/render", {"run": "uirun", "id": "999"}),
              ("/api/population", {"run": "uirun", "epoch": "9" * 40}), ("/api/population", {"run": "uirun", "epoch": "x"}),
              ("/api/compare", {"runs": "r" * 5000}), ("/api/compare", {"runs": "uirun", "k": "0"}),
              ("/api/compare", {"runs": "uirun", "k": "1" * 40}), ("/api/expand", {"run": "uirun", "id": "2", "limit": "1e3"})]


@pytest.mark.parametrize("path, params", BAD_VALUES)
def test_every_bad_query_value_gets_a_4xx_with_a_json_message(client, path, params):
    r = client.get(path, params=params)
    assert 400 <= r.status_code < 500, (path, params, r.status_code, r.text[:200])
    assert r.headers["content-type"] == "application/json" and r.json()["error"]


# ---- the reading room only reads ----------------------------------------------------------------
def test_pictures_come_from_the_recorded_artefact_and_no_get_runs_a_program(client, folder, monkeypatch):
    """Every route, the picture included, with process creation refused: nothing is re-run."""
    import _posixsubprocess
    import os
    import subprocess

    def refuse(*args, **kwargs):
        raise AssertionError("a GET started a process")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(_posixsubprocess, "fork_exec", refuse)  # multiprocessing's spawn
    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(os, "posix_spawn", refuse)
    _, ids = folder
    png = client.get("/api/render", params={"run": "uirun", "id": ids["d"]})
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG") and len(png.content) > 5000
    for path in ("/api/runs", "/api/overview?run=uirun", "/api/lineage?run=uirun", f"/api/solution?run=uirun&id={ids['d']}",
                 "/api/population?run=uirun", "/api/compare", f"/api/expand?run=uirun&id={ids['a']}"):
        assert client.get(path).status_code == 200, path
    r = client.get("/api/render", params={"run": "uirun", "id": ids["hostile"]})  # invalid: no artefact recorded
    assert r.status_code == 404 and "recorded no artefact" in r.json()["error"]


def test_an_older_run_without_records_opens_and_says_what_is_missing(tmp_path):
    build_ui_run(tmp_path / "old", recorded=False)
    with ReadOnlyArchive(tmp_path / "old" / "archive.sqlite") as arch:
        assert "advantage" not in arch.columns and "artefact" not in arch.columns
        assert arch.get(5).advantage is None and arch.artefact(5) is None
    c = TestClient(create_app(tmp_path / "old"), base_url=BASE)
    s = c.get("/api/solution", params={"id": 5}).json()  # d: valid, in group e2-p0
    assert s["group"]["recorded"] is False and s["group"]["note"] == browse.ADVANTAGES_MISSING
    assert [m["advantage"] for m in s["group"]["members"]] == [None, None, None]
    assert [m["reward"] for m in s["group"]["members"]] == [1.9, 0.0, 0.0]
    assert s["picture"]["available"] is False and "predates recorded artefacts" in s["picture"]["note"]
    r = c.get("/api/render", params={"id": 5})
    assert r.status_code == 404 and "predates recorded artefacts" in r.json()["error"]
    for path in ("/api/runs", "/api/overview", "/api/lineage", "/api/population", "/api/compare"):
        assert c.get(path).status_code == 200, path


def test_exact_checks_and_the_held_out_figure_reach_every_reader(folder):
    """The best (1.9) holds only within the tolerance, the earlier best (1.85) exactly: the overview, a solution,
    the runs view, open_run and the report say so, and name the best that may be called a record. A held-out
    figure stored at the end of a run appears beside the best's."""
    from train.api import open_run
    from train.runs.report import build_report

    root, ids = folder
    run = root / "uirun"
    ov = browse.overview(run)
    assert ov["best"] == dict(id=ids["d"], reward=1.9, epoch=2, exact=f"within tolerance only: {LOOSE}")
    assert ov["best_exact"] == dict(id=ids["a"], reward=1.85, epoch=1) and ov["heldout"] is None
    labels = {k: browse.solution(run, ids[k])["exact_label"] for k in ("root", "a", "c", "d")}
    assert labels == {"root": f"within tolerance only: {LOOSE}", "a": "exact", "c": "not checked",
                      "d": f"within tolerance only: {LOOSE}"}
    assert browse.run_row(root, run)["best_exact"] == f"within tolerance only: {LOOSE}"
    view = open_run(run)
    assert view.best().exact == {"status": "tolerance_only", "detail": LOOSE, "value": None}
    assert view.best_exact().id == ids["a"] and view.solution(ids["a"]).exact_label == "exact" and view.heldout() is None
    header = build_report(run, draw=False).read_text()
    assert f"within tolerance only: {LOOSE}" in header and "held-out reward" not in header
    held = dict(solution_id=ids["d"], epoch=2, run_reward=1.9, reward=1.7, valid=True, status="ok", feedback="ok",
                metrics={}, about="five fresh packings nobody saw")
    with Archive(run / "archive.sqlite") as arch:
        arch.set_meta("heldout", json.dumps(held))
    assert browse.overview(run)["heldout"] == held and open_run(run).heldout() == held
    assert "1.7 on five fresh packings nobody saw (the run&#x27;s own instances: 1.9)" in build_report(run, draw=False).read_text()


def test_an_older_run_reads_as_not_checked(tmp_path):
    build_ui_run(tmp_path / "old", recorded=False)
    ov = browse.overview(tmp_path / "old")
    assert ov["best"]["exact"] == "not checked" and ov["best_exact"] is None and ov["heldout"] is None
    assert browse.solution(tmp_path / "old", 5)["exact"] is None


IMPORTS = """
import sys, time
t0 = time.perf_counter()
from starlette.testclient import TestClient
from train.runs.ui.server import create_app
import train.runs.report, train.runs.drawing, train.runs.browse, train.runs.inspect_archive, train.runs.plot_ablation
c = TestClient(create_app(sys.argv[1]), base_url="http://127.0.0.1:8765")
for path in ("/api/runs", "/api/solution?run=uirun&id=5", "/api/render?run=uirun&id=5", "/api/compare", "/api/population?run=uirun"):
    assert c.get(path).status_code == 200, path
train.runs.report.build_report(sys.argv[1] + "/uirun")
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "verl", "vllm", "transformers", "deepspeed")
               or m in ("rewards.sandbox", "rewards.evaluator", "train.learner.grpo", "multiprocessing.pool"))
print("HEAVY", heavy)
"""


def test_the_reading_room_imports_no_trainer_and_no_sandbox(folder):
    """In a fresh interpreter: the server, every page's data, a picture and the report load neither torch nor
    verl nor the sandbox (the browser used to import torch and verl in a worker for every group)."""
    import subprocess
    import sys

    from tests.helpers.env import child_env

    out = subprocess.run([sys.executable, "-c", IMPORTS, str(folder[0])], capture_output=True, text=True, env=child_env(),
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "HEAVY []" in out.stdout, out.stdout


def _get(port: int, path: str, host: str | None = None) -> tuple[int, bytes]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.putrequest("GET", path, skip_host=True)
    conn.putheader("Host", host or f"127.0.0.1:{port}")
    conn.endheaders()
    response = conn.getresponse()
    out = response.status, response.read()
    conn.close()
    return out


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_stopping_the_server_leaves_no_process_behind(folder, signum):
    """scripts/ui.py started, every kind of page served (a picture too), then SIGTERM or Ctrl-C (SIGINT): it
    exits 0, and no process it started is left (it used to leave an advantage worker and a multiprocessing
    resource tracker, ~0.5 GB each time). Also end to end: a foreign Host gets 403 from the real server."""
    import re
    import signal
    import subprocess
    import sys

    import psutil
    from tests.helpers.env import ROOT, child_env

    _, ids = folder
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "ui.py"), str(folder[0]), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env())
    try:
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())[1])
        for path in ("/", "/api/runs", f"/api/solution?run=uirun&id={ids['d']}", f"/api/render?run=uirun&id={ids['d']}",
                     "/api/compare", "/static/js/main.js"):
            assert _get(port, path)[0] == 200, path
        assert _get(port, "/api/runs", host="evil.example.com")[0] == 403
        assert _get(port, "/api/runs", host=f"[::1]:{port}")[0] == 200
        assert psutil.Process(proc.pid).children(recursive=True) == []
        proc.send_signal(getattr(signal, signum))
        assert proc.wait(timeout=60) in (0, -getattr(signal, signum)), proc.stdout.read()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    left = [p.pid for p in psutil.process_iter(["ppid"]) if p.info["ppid"] == proc.pid]
    assert left == [] and not psutil.pid_exists(proc.pid)


# ---- the compare view's top-k curve ----------------------------------------------------------------
def test_the_top_k_curve_starts_where_k_valid_solutions_exist(folder):
    root, _ = folder
    out = browse.compare(root, ["uirun"], k=3)
    run = out["runs"][0]
    # valid so far (starter 1.8365 counts): a 1.85 -> 2, c 1.80 -> 3: the top-3 mean exists from child 3 (c) on
    assert run["topk_from"] == 3 and run["topk"][:2] == [None, None]
    assert run["topk"][2] == pytest.approx((1.8365 + 1.85 + 1.80) / 3) and run["topk"][3] == pytest.approx((1.8365 + 1.85 + 1.9) / 3)
    drawn = [v for v in run["topk"] if v is not None]
    assert drawn == sorted(drawn)  # it never falls
    assert browse.compare(root, ["uirun"], k=10)["runs"][0]["topk_from"] is None  # 5 valid in all: never
    c = ablation.curves_of([(1, None, 0, 5.0, True), (2, 1, 1, 1.0, True), (3, 1, 1, 3.0, False), (4, 1, 1, 2.0, True)], k=2)
    assert c["ranked"].tolist() == [2, 2, 2] and c["topk"].tolist() == [3.0, 3.0, 3.5]


# ---- size rules -----------------------------------------------------------------------------------
def test_the_page_script_and_route_table_follow_the_size_rules():
    """Modules of at most 6 KB, lines of at most 140 columns, top-level functions of at most 30 lines; the
    Python side's create_app and route table of at most 50."""
    import ast
    import re

    static = Path(create_app.__code__.co_filename).parent / "static" / "js"
    scripts = sorted(static.glob("*.js"))
    assert len(scripts) >= 6 and not (static.parent / "app.js").exists()
    for path in scripts:
        text = path.read_text(encoding="utf-8")
        assert len(text.encode()) <= 6000, path.name
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= 140, path.name
        starts = [i for i, line in enumerate(lines) if re.match(r"(export )?(async )?function ", line)]
        for i in starts:
            end = next(j for j in range(i, len(lines)) if lines[j] == "}")
            assert end - i + 1 <= 30, f"{path.name}:{i + 1} is {end - i + 1} lines"
    tree = ast.parse(Path(create_app.__code__.co_filename).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.col_offset == 0:
            assert node.end_lineno - node.lineno + 1 <= 50, node.name


def test_the_documented_entry_point_starts_the_browser_without_the_trainer(folder):
    """``python train/helix.py ui`` (the README's command) used to import torch, transformers and the loop
    before dispatching: 5-7 s before the first page. It now hands over before those imports."""
    import subprocess
    import sys

    from tests.helpers.env import ROOT, child_env

    out = subprocess.run([sys.executable, "-X", "importtime", str(ROOT / "train" / "helix.py"), "ui", "--help"],
                         capture_output=True, text=True, env=child_env(), timeout=120)
    assert out.returncode == 0 and "--allowed-hosts" in out.stdout, out.stderr[-2000:]
    imported = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "fastapi" in imported  # the control: the browser's own imports are seen
    assert not imported & {"torch", "transformers", "verl", "vllm", "deepspeed"}, sorted(imported)
