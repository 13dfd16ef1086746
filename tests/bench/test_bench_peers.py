"""scripts/bench/bench_peers.py (scripts/bench/benchlib/peers/) without the peers or a model: the numbers a row reports (from
records summed by hand), the table, the row cache, the gate's budget, a crashed row being one line while the
others run, the wall cap, and that nothing a row or a server started is left running or listening."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from benchlib.peers import campaign, procs, results, rows, server
from benchlib.peers.gate import Gate
from benchlib.peers.results import RowResult, cached, markdown, outcome, save, summary_rows
from benchlib.peers.systems import SYSTEMS, Launch, System, helix_pythonpath

ROOT = Path(__file__).resolve().parents[2]
PEER_SIDE = ROOT / "scripts" / "bench" / "benchlib" / "peers" / "peer_side"


def runpy_module(path: Path) -> dict:
    """A peer-side file's namespace (it is a script the peer's Python runs, not a module of this package)."""
    namespace = {"__name__": "peer_side", "__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


def records(rewards, valid, starter=1.8365):
    out = [{"reward": starter, "valid": True, "starter": True}]
    return out + [{"reward": r, "valid": v, "starter": False} for r, v in zip(rewards, valid)]


def test_outcome_counts_children_and_ranks_valid_rewards_with_the_starter():
    rewards = [1.9, 0.0, 1.7, 2.1, 1.85, 1.2, 0.0, 1.95, 1.5, 1.6, 1.4, 1.3]
    valid = [True, False, True, True, True, True, False, True, True, True, True, True]
    got = outcome(records(rewards, valid))
    ok = sorted([1.8365] + [r for r, v in zip(rewards, valid) if v], reverse=True)
    assert got["evaluated"] == 12 and got["valid"] == 10
    assert got["best"] == 2.1
    assert got["top_mean"] == pytest.approx(sum(ok[:10]) / 10)  # 11 valid rewards: the lowest (1.2) is left out
    assert 1.2 not in ok[:10]
    # an invalid child's reward never counts, even a large one (an invalid program's number is not trusted)
    assert outcome(records([5.0], [False]))["best"] == 1.8365
    assert outcome([])["best"] == 0.0 and outcome([])["top_mean"] == 0.0


def result(system, seed, best, status="ok", children=8, valid=4, wall=120.0, error="", peak=900.0):
    return RowResult(system, "circle_packing_26", "smollm2", seed, status, error=error, children=children, evaluated=children,
                     valid=valid, best=best, top_mean=best - 0.01, wall_s=wall, peak_rss_mb=peak)


def test_table_gives_mean_and_range_over_seeds_and_a_failed_row_in_one_line():
    results = [result("helix", 0, 1.84), result("helix", 1, 1.86, valid=6, wall=60.0), result("helix", 2, 1.85, wall=90.0),
               result("openevolve", 0, 1.8365, status="capped", children=3, valid=0, wall=600.0),
               result("shinka", 0, 0.0, status="failed", error="exit 1: ValueError: no key")]
    rows_ = {r[0]: r for r in summary_rows(results, ["helix", "openevolve", "shinka"])}
    assert rows_["helix"][1] == "3"
    assert rows_["helix"][2] == "1.85000 [1.84000, 1.86000]"
    assert rows_["helix"][4] == f"{(0.5 + 0.75 + 0.5) / 3:.2f} [0.50, 0.75]"  # valid / children per seed
    assert rows_["helix"][6] == f"{(4 + 8 + 60 * 8 / 90) / 3:.2f} [4.00, 8.00]"  # children a minute
    assert rows_["openevolve"][2] == "1.83650" and rows_["openevolve"][9] == "1 capped at the wall time"
    assert rows_["openevolve"][6] == "0.30"  # 3 children in 10 minutes
    assert rows_["shinka"][1] == "0 of 1" and rows_["shinka"][9] == "failed: exit 1: ValueError: no key"
    table = markdown("circle_packing_26", results, ["helix", "openevolve", "shinka"])
    assert table.count("\n| ") == 4 and "| shinka | 0 of 1 | - |" in table


def test_a_row_is_kept_only_when_it_finished_with_the_same_key(tmp_path):
    path = tmp_path / "result.json"
    key = {"system": "shinka", "children": 8, "wall_s": 600.0, "workarounds": [("evo.embedding_model=null", "why")]}
    save(result("helix", 0, 1.85), path, key)
    assert cached(path, key) == result("helix", 0, 1.85)
    assert cached(path, dict(key, children=64)) is None  # another budget: run it again
    save(result("helix", 0, 0.0, status="failed", error="boom"), path, key)
    assert cached(path, key) is None  # a failed row is run again
    assert cached(tmp_path / "missing.json", key) is None


class FakeOpenAI(BaseHTTPRequestHandler):
    """A stand-in for vLLM's server: /v1/models, and completions of n choices (streamed when asked)."""

    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def _send(self, status, payload, content_type="application/json"):
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "fake"}]})
        elif self.path == "/metrics":
            self._send(200, b'vllm:request_success_total{finished_reason="stop"} 3.0\n'
                            b'vllm:request_success_total{finished_reason="abort"} 7.0\n'
                            b'vllm:generation_tokens_total{engine="0"} 1234.0\n', "text/plain")
        else:
            self._send(404, {"error": "no route"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n = body.get("n", 1)
        if body.get("stream"):
            chunks = b"".join(b"data: " + json.dumps({"choices": [{"index": i, "text": "x", "finish_reason": "stop"}]}).encode()
                              + b"\n\n" for i in range(n)) + b"data: [DONE]\n\n"
            self._send(200, chunks, "text/event-stream")
        else:
            self._send(200, {"choices": [{"index": i, "text": "def f(): pass", "finish_reason": "stop"} for i in range(n)]})


@pytest.fixture
def upstream():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_gate_grants_the_budget_in_completions_and_refuses_the_rest(upstream):
    with Gate(upstream, budget=5) as gate:
        with urllib.request.urlopen(gate.url + "/models", timeout=10) as r:
            assert json.loads(r.read())["data"][0]["id"] == "fake"
        assert post(gate.url + "/chat/completions", {"model": "fake", "messages": []})[0] == 200
        status, body = post(gate.url + "/completions", {"model": "fake", "prompt": "x", "n": 3})
        assert status == 200 and len(json.loads(body)["choices"]) == 3
        status, body = post(gate.url + "/completions", {"model": "fake", "prompt": "x", "n": 2})  # 1 + 3 + 2 > 5
        assert status == 429 and "budget of 5 completions is spent" in json.loads(body)["error"]["message"]
        status, body = post(gate.url + "/completions", {"model": "fake", "prompt": "x", "stream": True})  # the 5th
        assert status == 200 and body.endswith(b"data: [DONE]\n\n") and body.count(b"data: {") == 1
        counts = gate.counts.snapshot()
    assert (counts["granted"], counts["returned"], counts["failed"], counts["refused"], counts["in_flight"]) == (5, 5, 0, 1, 0)
    with Gate(upstream, budget=0) as gate:  # counting only
        for _ in range(3):
            assert post(gate.url + "/completions", {"model": "fake", "prompt": "x", "n": 4})[0] == 200
        assert gate.counts.snapshot()["returned"] == 12


def test_a_gate_closed_mid_answer_drops_the_request_so_the_server_can_abort_it():
    arrived, dropped = threading.Event(), threading.Event()

    class Slow(BaseHTTPRequestHandler):  # answers nothing until its client goes away, as vLLM generating a long answer
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            arrived.set()
            if self.connection.recv(1) == b"":  # EOF: the client (the gate) hung up
                dropped.set()

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with Gate(f"http://127.0.0.1:{srv.server_address[1]}/v1", budget=2) as gate:
            client = threading.Thread(target=post, args=(gate.url + "/completions", {"prompt": "x"}), daemon=True)
            client.start()
            assert arrived.wait(10)
            assert gate.counts.snapshot()["in_flight"] == 1
        assert dropped.wait(10)
    finally:
        srv.shutdown()
        srv.server_close()


def test_server_metrics_count_returned_completions_not_aborted_ones(upstream):
    text = urllib.request.urlopen(upstream[: -len("/v1")] + "/metrics").read().decode()
    assert server.parse_metrics(text) == {"finished": 3.0, "generated": 1234.0}


def pid_alive(pid: int) -> bool:
    return procs.alive(pid)


def test_a_stop_ends_the_whole_tree_and_its_memory_is_the_trees(tmp_path):
    # a parent holding 40 MB, a child holding 120 MB, and a grandchild that left the session: all are stopped
    ready, pids = tmp_path / "ready", tmp_path / "pids"
    script = textwrap.dedent(f"""
        import os, pathlib, subprocess, sys, time
        keep = b"x" * (40 << 20)
        child = subprocess.Popen([sys.executable, "-c", "import pathlib, time; b = b'x' * (120 << 20); "
                                  "pathlib.Path({str(ready)!r}).touch(); time.sleep(120)"])
        loner = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(120)"])
        while not os.path.exists({str(ready)!r}):
            time.sleep(0.05)
        pathlib.Path({str(pids)!r}).write_text(f"{{child.pid}} {{loner.pid}}")
        time.sleep(120)
    """)
    seen = []

    def after_two_samples():  # the sampler's period is 0.5 s: stop once the whole tree has been seen twice
        seen.append(pids.exists())
        return sum(seen) >= 3

    done = procs.run_capped([sys.executable, "-c", script], 60.0, tmp_path / "log", grace_s=2.0,
                            stop_when=after_two_samples, poll_s=0.5)
    assert done.stopped and not done.capped and done.returncode is None
    assert done.peak_rss_kb > (40 + 120) * 1024  # the tree, not the parent alone
    for pid in map(int, pids.read_text().split()):
        assert not pid_alive(pid)


def test_the_wall_cap_stops_a_run_and_an_exit_code_is_reported(tmp_path):
    done = procs.run_capped([sys.executable, "-c", "import time; time.sleep(120)"], 0.5, tmp_path / "log", grace_s=2.0)
    assert done.capped and done.returncode is None and done.wall_s < 10
    done = procs.run_capped([sys.executable, "-c", "raise SystemExit(3)"], 60.0, tmp_path / "log")
    assert done.returncode == 3 and not done.capped and not done.stopped


FAKE_SERVER = textwrap.dedent("""
    import json, subprocess, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # a worker, like vLLM's engine core
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def do_GET(self):
            body = json.dumps({"data": [{"id": sys.argv[2]}]}).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
    HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
""")


def test_served_stops_the_server_and_its_children_and_nothing_listens_after(tmp_path):
    port = server.free_port()
    cmd = [sys.executable, "-c", FAKE_SERVER, str(port), "tiny"]
    with server.served(Path("unused"), "tiny", tmp_path / "server.log", startup_s=60, command=cmd, port=port) as srv:
        assert server.listening(port)
        family = [srv.popen.pid] + procs.descendants(srv.popen.pid, procs.parent_map())
        assert len(family) >= 2
    assert not server.listening(port)
    assert not any(pid_alive(p) for p in family)


def test_a_server_that_dies_at_start_is_one_line_naming_its_log(tmp_path):
    cmd = [sys.executable, "-c", "import sys; print('ValueError: no model here'); sys.exit(4)"]
    with pytest.raises(server.ServerError) as err:
        with server.served(Path("unused"), "tiny", tmp_path / "server.log", startup_s=30, command=cmd):
            pass
    text = str(err.value)
    assert "\n" not in text and "exited with code 4" in text and "ValueError: no model here" in text
    assert str(tmp_path / "server.log") in text


# A fake system: it writes one record per child into the row's score log, as scripts/bench/benchlib/peers/score.py does.
WRITER = textwrap.dedent("""
    import json, sys, time
    log, n, crash, counter = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "crash", sys.argv[4]
    open(counter, "a").write("x")
    with open(log, "a") as f:
        f.write(json.dumps({"reward": 1.8365, "valid": True, "starter": True, "t": time.time()}) + "\\n")
        for i in range(n):
            f.write(json.dumps({"reward": 1.8 + 0.01 * i, "valid": i % 2 == 0, "starter": False, "t": time.time()}) + "\\n")
    if crash:
        print("Traceback (most recent call last):")
        print("RuntimeError: the peer fell over")
        sys.exit(1)
""")


def fake_system(name, crash, counter):
    def launch(row, url, model, install_log):
        return Launch([sys.executable, "-c", WRITER, str(row.log), str(row.children), "crash" if crash else "ok", str(counter)])
    return System(name, None, launch)


def test_a_crashed_row_is_one_line_the_others_run_and_finished_rows_are_kept(tmp_path, monkeypatch, capsys):
    counters = {name: tmp_path / f"{name}.count" for name in ("good", "bad", "also")}
    fakes = {"good": fake_system("good", False, counters["good"]), "bad": fake_system("bad", True, counters["bad"]),
             "broken": System("broken", None, lambda row, url, model, log: Launch(None)),  # the bench's own bug
             "also": fake_system("also", False, counters["also"])}
    monkeypatch.setattr(campaign, "SYSTEMS", fakes)
    monkeypatch.setattr(campaign, "model_dir", lambda setting, task, logs: tmp_path / "model")
    plan = campaign.Plan(tmp_path / "out", ["smollm2"], ["circle_packing_26"], [0, 1], list(fakes), 6, 60.0, 60.0)
    results = campaign.run(plan)
    by = {(r.system, r.seed): r for r in results}
    assert by[("bad", 0)].status == "failed" and by[("bad", 0)].error == "exit 1: RuntimeError: the peer fell over"
    assert by[("broken", 1)].status == "failed" and by[("broken", 1)].error.startswith("the bench failed on this row (TypeError")
    assert "Traceback" in (tmp_path / "out" / "smollm2" / "circle_packing_26" / "broken-s1" / "bench_error.txt").read_text()
    good = by[("good", 1)]
    assert good.status == "ok" and (good.children, good.evaluated, good.valid) == (6, 6, 3)
    assert good.best == pytest.approx(1.84) and good.top_mean == pytest.approx(np.mean([1.8365, 1.8, 1.82, 1.84]))
    assert by[("also", 0)].status == "ok"  # after the crash, the next system ran
    out = capsys.readouterr().out
    assert "[peers] bad smollm2/circle_packing_26 seed 0: FAILED: exit 1: RuntimeError: the peer fell over" in out
    table = (tmp_path / "out" / "peers.md").read_text()
    assert "| bad | 0 of 2 |" in table and "| good | 2 |" in table
    assert len(json.loads((tmp_path / "out" / "results.json").read_text())["rows"]) == 8

    campaign.run(plan)  # again: the finished rows are kept, the failed ones run again
    assert counters["good"].read_text() == "xx" and counters["also"].read_text() == "xx"
    assert counters["bad"].read_text() == "xxxx"


GREEDY = textwrap.dedent("""
    import json, sys, time, urllib.request, urllib.error
    url, log = sys.argv[1], sys.argv[2]
    open(log, "a").write(json.dumps({"reward": 1.0, "valid": True, "starter": True, "t": time.time()}) + "\\n")
    while True:  # like a peer whose own count is not completions: it asks until it is refused, then keeps waiting
        req = urllib.request.Request(url + "/chat/completions", data=b'{"model": "fake", "messages": []}',
                                     headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=10).read()
            open(log, "a").write(json.dumps({"reward": 2.0, "valid": True, "starter": False, "t": time.time()}) + "\\n")
        except urllib.error.HTTPError:
            time.sleep(0.2)
""")


def test_a_peer_that_asks_for_more_is_stopped_once_its_budget_is_spent_and_scored(tmp_path, upstream, monkeypatch):
    srv = server.Server(upstream, "fake", 0, None, tmp_path / "log")
    srv.usage = lambda: {"finished": 0.0, "generated": 0.0}
    system = System("greedy", "budget", lambda row, url, model, log: Launch([sys.executable, "-c", GREEDY, url, str(row.log)]))
    monkeypatch.setattr(rows, "settle_s", lambda row: 1.0)
    row = campaign.make_row(campaign.Plan(tmp_path, ["smollm2"], ["circle_packing_26"], [0], ["greedy"], 4, 60.0, 60.0),
                            "greedy", "smollm2", "circle_packing_26", 0, tmp_path / "model")
    got = rows.run_row(row, system, srv, tmp_path / "install.log")
    assert got.status == "ok" and got.children == 4 and got.evaluated == 4 and got.best == 2.0
    assert got.wall_s < 15


def test_score_cli_scores_in_the_sandbox_and_logs_the_record(tmp_path):
    program = tmp_path / "p.py"
    program.write_text((ROOT / "tasks" / "circle_packing_26" / "initial_program.py").read_text())
    log = tmp_path / "evals.jsonl"
    proc = subprocess.run([sys.executable, "-m", "benchlib.peers.score", "circle_packing_26", str(program), "--log", str(log)],
                          env=dict(os.environ, PYTHONPATH=helix_pythonpath()), capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["valid"] and out["starter"] and out["reward"] == pytest.approx(1.8365015544609251, abs=1e-12)
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["reward"] == out["reward"] and "feedback" not in record
    assert (tmp_path / "programs" / f"{record['hash']}.py").read_text() == program.read_text()


def test_shinka_wrapper_writes_helix_verdict_in_shinka_files(tmp_path):
    program = tmp_path / "main.py"
    program.write_text("def run_packing():\n    return 1\n")  # runs, but is no packing
    spec = {"python": sys.executable, "root": str(ROOT), "pythonpath": helix_pythonpath(), "task": "circle_packing_26",
            "log": str(tmp_path / "e.jsonl"), "timeout_s": 20}
    proc = subprocess.run([sys.executable, str(PEER_SIDE / "shinka_evaluate.py"),
                           "--program_path", str(program), "--results_dir", str(tmp_path / "res")],
                          env=dict(os.environ, HELIX_PEER_SCORE=json.dumps(spec)), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = json.loads((tmp_path / "res" / "metrics.json").read_text())
    correct = json.loads((tmp_path / "res" / "correct.json").read_text())
    assert metrics["combined_score"] == 0.0 and correct["correct"] is False
    assert correct["error"] == metrics["text_feedback"] and metrics["public"]["helix_status"] == "invalid"


def test_a_scorer_that_fails_is_logged_and_fails_the_row(tmp_path):
    spec = {"python": sys.executable, "root": str(tmp_path), "pythonpath": str(tmp_path), "task": "circle_packing_26",
            "log": str(tmp_path / "e.jsonl"), "timeout_s": 20}  # no benchlib on its path: the scorer cannot start
    program = tmp_path / "main.py"
    program.write_text("def run_packing():\n    return 1\n")
    proc = subprocess.run([sys.executable, str(PEER_SIDE / "shinka_evaluate.py"), "--program_path", str(program),
                           "--results_dir", str(tmp_path / "res")],
                          env=dict(os.environ, HELIX_PEER_SCORE=json.dumps(spec), PYTHONPATH=""), capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode != 0 and not (tmp_path / "res" / "metrics.json").exists()
    logged = results.read_records(tmp_path / "e.jsonl")
    assert len(results.scorer_errors(logged)) == 1 and "No module named" in results.scorer_errors(logged)[0]
    assert results.outcome(logged)["evaluated"] == 0


def test_openevolve_wrapper_returns_helix_reward_as_combined_score(tmp_path, monkeypatch):
    fake = tmp_path / "fake" / "openevolve"  # OpenEvolve's EvaluationResult, as its contract defines it
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "evaluation_result.py").write_text(
        "from dataclasses import dataclass, field\n@dataclass\nclass EvaluationResult:\n"
        "    metrics: dict\n    artifacts: dict = field(default_factory=dict)\n")
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))
    spec = {"python": sys.executable, "root": str(ROOT), "pythonpath": helix_pythonpath(), "task": "circle_packing_26",
            "log": str(tmp_path / "e.jsonl"), "timeout_s": 20}
    monkeypatch.setenv("HELIX_PEER_SCORE", json.dumps(spec))
    module = runpy_module(PEER_SIDE / "openevolve_evaluator.py")
    starter = tmp_path / "p.py"
    starter.write_text((ROOT / "tasks" / "circle_packing_26" / "initial_program.py").read_text())
    got = module["evaluate"](str(starter))
    assert got.metrics == {"combined_score": pytest.approx(1.8365015544609251, abs=1e-12)}
    assert got.artifacts["feedback"].startswith("valid packing: sum of radii 1.836502")
    assert results.read_records(tmp_path / "e.jsonl")[0]["starter"] is True


def test_the_optimiser_row_starts_from_its_own_launch_with_the_bench_on_its_path(tmp_path):
    row = campaign.make_row(campaign.Plan(tmp_path, ["smollm2"], ["keane_bump_10"], [0], ["slsqp"], 8, 60.0, 0.5),
                            "slsqp", "smollm2", "keane_bump_10", 0, tmp_path / "model")
    row.out.mkdir(parents=True)
    launch = SYSTEMS["slsqp"].launch(row, "", "", tmp_path / "install.log")
    env = {k: v for k, v in dict(os.environ, **launch.env).items() if v is not None}  # as rows.run_row does
    proc = subprocess.run(launch.cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    logged = results.read_records(row.log)
    assert logged[0]["starter"] is True and logged[0]["valid"] and json.loads(proc.stdout)["restarts"] == len(logged) - 1


def test_the_optimiser_ends_within_its_seconds_from_its_start(tmp_path):
    from benchlib.peers import optimiser

    started = time.monotonic()  # as if the process had started now: the starter's evaluation counts against it
    got = optimiser.run("keane_bump_10", optimiser.EXIT_S + 2.0, 0, tmp_path / "e.jsonl", started=started)
    assert time.monotonic() - started <= 2.0 + 0.5  # its last restart ended before the time left for its exit
    logged = results.read_records(tmp_path / "e.jsonl")
    assert got["restarts"] == len(logged) - 1 and got["best"] == max(r["reward"] for r in logged if r["valid"])


def test_optimiser_gradients_match_finite_differences():
    from benchlib.peers.optimiser import circle_problem, keane_problem
    from scipy.optimize import approx_fprime, check_grad

    rng = np.random.default_rng(3)
    keane = keane_problem(10)
    for _ in range(3):
        x = rng.uniform(0.5, 4.0, 10)
        grad = keane.objective(x)[1]
        assert check_grad(lambda v: keane.objective(v)[0], lambda v: keane.objective(v)[1], x) < 1e-5 * np.linalg.norm(grad)
    circles = circle_problem(5)
    v = rng.uniform(0.1, 0.9, 15)
    for con in circles.constraints:
        numeric = np.array([approx_fprime(v, lambda w, k=k: con["fun"](w)[k], 1e-7) for k in range(len(con["fun"](v)))])
        assert np.abs(numeric - con["jac"](v)).max() < 1e-5


def test_one_slsqp_restart_from_the_starters_layout_is_a_valid_better_packing():
    from benchlib.peers.optimiser import circle_problem
    from scipy.optimize import minimize

    from tasks import load_task

    task = load_task("circle_packing_26")
    centres = [[0.5, 0.5]] + [[0.5 + 0.3 * np.cos(2 * np.pi * i / 8), 0.5 + 0.3 * np.sin(2 * np.pi * i / 8)] for i in range(8)]
    centres += [[0.5 + 0.45 * np.cos(2 * np.pi * i / 17), 0.5 + 0.45 * np.sin(2 * np.pi * i / 17)] for i in range(17)]
    problem = circle_problem(26)
    v0 = problem.start([centres, [0.05] * 26, 1.3])
    found = minimize(lambda v: problem.objective(v)[0], v0, jac=lambda v: problem.objective(v)[1], method="SLSQP",
                     bounds=problem.bounds, constraints=problem.constraints, options={"maxiter": 500, "ftol": 1e-12})
    verdict = task.verify(problem.artefact(found.x))
    assert verdict.valid, verdict.feedback
    assert verdict.reward == pytest.approx(-found.fun, abs=1e-6)  # the verifier agrees with the optimiser's own sum
    assert verdict.reward > 1.8365015544609251 + 0.3  # far past the starter's greedy radii


def dummy_wheel(folder: Path, version: str) -> Path:
    """A minimal pure-Python wheel, so the install is tested offline with the real uv."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"helixpeerdummy-{version}-py3-none-any.whl"
    info = f"helixpeerdummy-{version}.dist-info"
    files = {"helixpeerdummy/__init__.py": f"VERSION = {version!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: helixpeerdummy\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(path, "w") as whl:
        for name, text in files.items():
            whl.writestr(name, text)
        whl.writestr(f"{info}/RECORD", "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n")
    return path


def test_a_peer_installs_once_into_its_own_venv_and_a_failed_install_is_one_line(tmp_path, monkeypatch):
    from benchlib.peers import install

    wheels = tmp_path / "wheels"
    dummy_wheel(wheels, "0.1")
    monkeypatch.setattr(install, "uv_environment", lambda: (["--no-index", "--find-links", str(wheels)], dict(os.environ)))
    package = install.PeerPackage("helixpeerdummy", "0.1", "helixpeerdummy")
    python = install.ensure_installed(package, tmp_path / "install.log", root=tmp_path / "cache")
    assert python == tmp_path / "cache" / "peers" / "helixpeerdummy-0.1" / "bin" / "python"
    out = subprocess.run([str(python), "-c", "import helixpeerdummy, sys; print(helixpeerdummy.VERSION, sys.prefix)"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0.1", str(python.parent.parent)]  # its own venv, not HELIX's
    assert subprocess.run([sys.executable, "-c", "import helixpeerdummy"], capture_output=True).returncode != 0

    def no_uv():
        raise AssertionError("installed again")

    monkeypatch.setattr(install, "uv_environment", no_uv)
    assert install.ensure_installed(package, tmp_path / "install.log", root=tmp_path / "cache") == python

    monkeypatch.setattr(install, "uv_environment", lambda: (["--no-index", "--find-links", str(wheels)], dict(os.environ)))
    missing = install.PeerPackage("helixpeerdummy", "0.2", "helixpeerdummy")
    with pytest.raises(install.PeerInstallError) as err:
        install.ensure_installed(missing, tmp_path / "install2.log", root=tmp_path / "cache")
    text = str(err.value)
    assert "\n" not in text and "there is no version of helixpeerdummy==0.2" in text and str(tmp_path / "install2.log") in text
    assert not (tmp_path / "cache" / "peers" / "helixpeerdummy-0.2").exists()
