"""The openai engine against a stub OpenAI-compatible server on loopback, started by the test:
request contents, grouping, truncation, retries with backoff, streamed answers and what times
out, clear errors, the endpoint check before a run (no server: one line, no run directory), and an
EvoOnly run of the whole loop whose children come from the server, with no policy weights loaded."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from rollout.config import OpenAIConfig, RolloutConfig
from rollout.engine_api import SamplingParams
from rollout.openai_engine import EndpointError, OpenAIEngine


class Stub:
    """What the server does: fail the first ``fail`` requests with ``fail_status``, sleep, then
    answer every prompt with ``texts`` (cycled) and ``finish`` reasons: streamed when the request
    asks (``stream``), each text in ``pieces`` chunks ``chunk_sleep_s`` apart, the first
    ``cut_streams`` streams dropped halfway. ``GET /v1/models`` lists ``models`` (None: 404)."""

    def __init__(self):
        self.requests, self.headers, self.gets = [], [], []
        self.fail, self.fail_status, self.sleep_s = 0, 503, 0.0
        self.texts, self.finish = ["hello"], ["stop"]
        self.token_ids = None  # per choice, cycled, when the server returns token ids
        self.stream, self.pieces, self.chunk_sleep_s, self.cut_streams = True, 1, 0.0, 0
        self.models, self.models_status = ["my-model"], 200


@pytest.fixture()
def server():
    stub = Stub()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            stub.gets.append(self.path)
            if self.path != "/v1/models" or stub.models is None:
                self._send(404, {"error": {"message": "not found"}})
            elif stub.models_status != 200:
                self._send(stub.models_status, {"error": {"message": "invalid api key"}})
            else:
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in stub.models]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            stub.requests.append((self.path, body))
            stub.headers.append(dict(self.headers))
            if stub.fail > 0:
                stub.fail -= 1
                self._send(stub.fail_status, {"error": {"message": "busy, try again"}})
                return
            time.sleep(stub.sleep_s)
            choices = [{"index": i, "text": stub.texts[i % len(stub.texts)], "finish_reason": stub.finish[i % len(stub.finish)]}
                       for i in range(body["n"])]
            if stub.token_ids:
                for i, choice in enumerate(choices):
                    choice["token_ids"] = stub.token_ids[i % len(stub.token_ids)]
            if body.get("stream") and stub.stream:
                self._stream(choices)
            else:
                self._send(200, {"id": "cmpl-1", "object": "text_completion", "choices": choices[::-1]})

        def _stream(self, choices):
            """Server-sent events as vLLM sends them: one chunk per piece of a choice's text, the
            choices interleaved, the finish reason on a choice's last chunk, then [DONE]."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.end_headers()
            events = []
            for k in range(stub.pieces):
                for choice in choices:
                    text, n = choice["text"], len(choice["text"])
                    part = text[n * k // stub.pieces: n * (k + 1) // stub.pieces]
                    event = {"index": choice["index"], "text": part, "finish_reason": None}
                    if k == stub.pieces - 1:
                        event["finish_reason"] = choice["finish_reason"]
                    if "token_ids" in choice:
                        event["token_ids"] = choice["token_ids"] if k == stub.pieces - 1 else []
                    events.append(event)
            cut = stub.cut_streams > 0
            stub.cut_streams -= cut
            try:
                for i, event in enumerate(events):
                    if cut and i == len(events) // 2:
                        return  # the connection drops mid-answer
                    self.wfile.write(f"data: {json.dumps({'id': 'cmpl-1', 'choices': [event]})}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(stub.chunk_sleep_s)
                self.wfile.write(b"data: [DONE]\n\n")
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _send(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    stub.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield stub
    httpd.shutdown()
    httpd.server_close()


def engine(stub, tokenizer, **kw):
    kw = {"timeout_s": 5.0, "max_retries": 2, "backoff_s": 0.01, **kw}
    return OpenAIEngine(tokenizer, stub.url, "my-model", **kw)


def test_requests_carry_the_sampling_settings_and_choices_are_grouped(server, tokenizer):
    server.texts, server.finish = ["short answer", "a longer answer cut"], ["stop", "length"]
    prompts = [tokenizer("first prompt")["input_ids"], tokenizer("second prompt")["input_ids"]]
    params = SamplingParams(n=3, temperature=0.7, top_p=0.9, max_new_tokens=20, seed=5, stop=("</answer>",))
    seen = []
    out = engine(server, tokenizer, api_key="sk-test").generate(prompts, params, on_batch=lambda i, g: seen.append((i, g)))
    assert [len(g) for g in out] == [3, 3]
    assert seen == [(0, [out[0]]), (1, [out[1]])]  # each prompt handed over in order as it lands
    # Choices come back reversed from the stub and are put in index order.
    assert [c.text for c in out[0]] == ["short answer", "a longer answer cut", "short answer"]
    assert [c.truncated for c in out[0]] == [False, True, False]
    assert out[0][0].token_ids == tokenizer("short answer", add_special_tokens=False)["input_ids"]
    bodies = sorted((b for _, b in server.requests), key=lambda b: b["seed"])
    assert [p for p, _ in server.requests] == ["/v1/completions"] * 2
    for i, body in enumerate(bodies):
        assert body == {"model": "my-model", "prompt": tokenizer.decode(prompts[i]), "n": 3, "temperature": 0.7,
                        "top_p": 0.9, "max_tokens": 20, "stop": ["</answer>"], "seed": 5 + i * 3,  # seed + i*n: choice j takes + j
                        "stream": True}
    assert all(h["Authorization"] == "Bearer sk-test" for h in server.headers)


def test_a_503_is_retried_then_succeeds(server, tokenizer):
    server.fail = 1
    out = engine(server, tokenizer).generate([[1, 2, 3]], SamplingParams(n=2, max_new_tokens=4))
    assert [c.text for c in out[0]] == ["hello", "hello"] and len(server.requests) == 2


def test_persistent_failure_names_the_url_and_the_last_status(server, tokenizer):
    server.fail = 10
    with pytest.raises(EndpointError, match=r"POST http://127\.0\.0\.1:\d+/v1/completions failed after 3 attempt\(s\); "
                                            r"last: HTTP 503: .*busy, try again"):
        engine(server, tokenizer).generate([[1, 2, 3]], SamplingParams(n=1, max_new_tokens=4))
    assert len(server.requests) == 3  # 1 + max_retries


def test_a_client_error_is_not_retried(server, tokenizer):
    server.fail, server.fail_status = 1, 400
    with pytest.raises(EndpointError, match="HTTP 400"):
        engine(server, tokenizer).generate([[1, 2, 3]], SamplingParams(n=1, max_new_tokens=4))
    assert len(server.requests) == 1


def test_a_slow_server_times_out_with_a_clear_error(server, tokenizer):
    server.sleep_s = 1.5
    start = time.perf_counter()
    with pytest.raises(EndpointError, match=r"failed after 2 attempt\(s\); last: timed out after 0\.3 s"):
        engine(server, tokenizer, timeout_s=0.3, max_retries=1).generate([[1, 2]], SamplingParams(n=1, max_new_tokens=4))
    assert time.perf_counter() - start < 1.5  # the client gave up; it did not wait for the server


def test_nothing_listening_is_a_connection_error(tokenizer):
    import socket

    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    eng = OpenAIEngine(tokenizer, f"http://127.0.0.1:{port}/v1", "m", timeout_s=1.0, max_retries=1, backoff_s=0.01)
    with pytest.raises(EndpointError, match="connection failed"):
        eng.generate([[1, 2]], SamplingParams(n=1, max_new_tokens=4))


def test_the_engine_holds_no_weights(server, tokenizer):
    eng = engine(server, tokenizer)
    assert eng.needs_sync is False
    with pytest.raises(RuntimeError, match="frozen policy"):
        eng.sync_weights({})


def test_training_with_the_openai_engine_is_a_config_error():
    from train.config.config import ConfigError, HelixConfig, validate

    cfg = HelixConfig()
    cfg.rollout.engine = "openai"
    with pytest.raises(ConfigError, match="trainer.enabled=false"):
        validate(cfg)
    cfg.trainer.enabled = False
    validate(cfg)


@pytest.mark.slow
def test_an_evo_only_run_evaluates_the_servers_edits(server, tmp_path, monkeypatch):
    """The loop end to end with the server as the policy: its SEARCH/REPLACE answers, streamed in
    pieces, become evaluated children with lineage. The run loads no policy weights (only the
    tokenizer) and exports nothing; config.yaml names the model the server serves."""
    import train.loop.epoch_loop
    from population.archive import Archive
    from tasks import load_task
    from tests.helpers.scripted import run_helix

    def no_weights(*args, **kwargs):
        raise AssertionError("an EvoOnly run over rollout.engine=openai loaded the policy weights")

    monkeypatch.setattr(train.loop.epoch_loop, "load_policy", no_weights)
    monkeypatch.setattr(train.loop.epoch_loop, "export_hf", no_weights)
    first = next(line for line in load_task("circle_packing_26").initial_program.splitlines() if line.strip())
    server.texts = [f"<answer>\n<<<<<<< SEARCH\n{first}\n=======\n{first}\nimport math\n>>>>>>> REPLACE\n</answer>",
                    "no edit here"]
    server.pieces = 3
    run = run_helix(tmp_path, "rollout.engine=openai", f"rollout.openai.base_url={server.url}", "trainer.enabled=false",
                    "trainer.epochs=1")
    assert not (run / "export").exists()
    assert yaml.safe_load((run / "config.yaml").read_text())["rollout"]["openai"]["model"] == "my-model"  # the served one
    assert server.gets == ["/v1/models"] and all(body["stream"] for _, body in server.requests)
    with Archive(run / "archive.sqlite") as arch:
        ids = [s[0] for s in arch.scores()]
        root, children = arch.get(ids[0]), [arch.get(i) for i in ids[1:]]
    assert len(children) == 4 and len(server.requests) == 2  # B = 2 prompts, n = G = 2 each
    assert sorted(c.valid for c in children) == [False, False, True, True]
    for child in children:
        assert child.parent_id == root.id
        if child.valid:
            assert "import math" in child.code and child.reward == pytest.approx(root.reward)


def test_token_ids_from_the_server_are_used_when_it_sends_them(server, tokenizer):
    """Otherwise the text is re-tokenised (the first test); ids the server sends are taken as they are."""
    server.token_ids = [[7, 8, 9]]
    out = engine(server, tokenizer).generate([[1, 2]], SamplingParams(n=2, max_new_tokens=4))
    assert [c.token_ids for c in out[0]] == [[7, 8, 9], [7, 8, 9]]
    assert [c.text for c in out[0]] == ["hello", "hello"]


def test_a_slow_stream_does_not_time_out(server, tokenizer):
    """The timeout bounds a silence, not an answer: 2 choices x 6 pieces 0.15 s apart take 1.8 s,
    six times the 0.3 s timeout, and arrive whole from one request (nothing is resent)."""
    server.texts, server.finish = ["a long answer, slowly streamed", "another one"], ["length", "stop"]
    server.pieces, server.chunk_sleep_s = 6, 0.15
    start = time.perf_counter()
    out = engine(server, tokenizer, timeout_s=0.3, max_retries=0).generate([[1, 2]], SamplingParams(n=2, max_new_tokens=64))
    assert time.perf_counter() - start > 1.5
    assert [c.text for c in out[0]] == ["a long answer, slowly streamed", "another one"]
    assert [c.truncated for c in out[0]] == [True, False] and len(server.requests) == 1


def test_streamed_token_ids_are_joined(server, tokenizer):
    server.token_ids, server.pieces = [[7, 8, 9]], 3
    out = engine(server, tokenizer).generate([[1, 2]], SamplingParams(n=2, max_new_tokens=4))
    assert [c.token_ids for c in out[0]] == [[7, 8, 9], [7, 8, 9]] and [c.text for c in out[0]] == ["hello", "hello"]


def test_a_server_that_does_not_stream_is_read_as_one_answer(server, tokenizer):
    server.stream, server.texts = False, ["whole"]
    out = engine(server, tokenizer).generate([[1, 2]], SamplingParams(n=2, max_new_tokens=4))
    assert [c.text for c in out[0]] == ["whole", "whole"] and server.requests[0][1]["stream"] is True


def test_a_stream_cut_short_is_retried(server, tokenizer):
    server.cut_streams, server.pieces, server.texts = 1, 4, ["complete answer"]
    out = engine(server, tokenizer).generate([[1, 2]], SamplingParams(n=2, max_new_tokens=4))
    assert [c.text for c in out[0]] == ["complete answer"] * 2 and len(server.requests) == 2


def _preflight(url, model="", policy="tiny-random"):
    rollout = RolloutConfig(engine="openai", openai=OpenAIConfig(base_url=url, model=model))
    OpenAIEngine.preflight(rollout, model_name=policy)
    return rollout.openai.model


def test_the_endpoint_check_resolves_the_served_model(server):
    assert _preflight(server.url) == "my-model"  # empty openai.model, one served: that one
    assert _preflight(server.url, "my-model") == "my-model"
    with pytest.raises(EndpointError, match=r"/v1/models does not serve rollout.openai.model = 'other'; it serves 'my-model'"):
        _preflight(server.url, "other")
    server.models = ["a", "b"]
    assert _preflight(server.url, policy="b") == "b"  # several: model.policy when it is one of them
    with pytest.raises(EndpointError, match=r"serves 'a', 'b': set rollout.openai.model"):
        _preflight(server.url)
    server.models = None  # no /models route: nothing to check the name against
    assert _preflight(server.url) == "tiny-random" and _preflight(server.url, "x") == "x"
    with pytest.raises(EndpointError, match=r"rollout.openai.base_url = '127.0.0.1:8000/v1' is not an http\(s\) URL"):
        _preflight("127.0.0.1:8000/v1")
    server.models, server.models_status = ["a"], 401
    with pytest.raises(EndpointError, match=r"GET http://127\.0\.0\.1:\d+/v1/models answered HTTP 401 \(check the API key"):
        _preflight(server.url)


def _free_port() -> int:
    import socket

    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _failing_run(tmp_path, capsys, monkeypatch, *overrides):
    """A helix run that must stop at the endpoint check: before any model, task data or run
    directory, with one line on stderr and runs/latest where it was."""
    import train.loop.epoch_loop
    import train.warm_start.build
    from train.helix import main

    def must_not_load(*args, **kwargs):
        raise AssertionError("the run loaded something before checking the endpoint")

    for name in ("load_policy", "load_tokenizer", "load_task"):
        monkeypatch.setattr(train.loop.epoch_loop, name, must_not_load)
    monkeypatch.setattr(train.warm_start.build, "policy_source", must_not_load)  # the warm start, resolved before the run
    (tmp_path / "old").mkdir()
    (tmp_path / "latest").symlink_to("old")
    start = time.perf_counter()
    rc = main(["--config", "configs/quickstart.yaml", "model.policy=tiny-random", "trainer.enabled=false",
               "rollout.engine=openai", "run.progress=false", f"run.output_dir={tmp_path}", "run.name=r", *overrides])
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert rc == 1 and elapsed < 10
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "old"]  # no run directory
    assert (tmp_path / "latest").readlink() == Path("old")  # not repointed
    return err.strip()


def test_no_server_stops_the_run_before_anything_with_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    url = f"http://127.0.0.1:{_free_port()}/v1"
    line = _failing_run(tmp_path, capsys, monkeypatch, f"rollout.openai.base_url={url}")
    assert line.startswith(f"helix: error: no server at {url} (GET {url}/models: ")
    assert "scripts/serve.py" in line


def test_a_model_the_server_does_not_serve_stops_the_run(server, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    line = _failing_run(tmp_path, capsys, monkeypatch, f"rollout.openai.base_url={server.url}", "rollout.openai.model=gpt-x")
    assert line == f"helix: error: {server.url}/models does not serve rollout.openai.model = 'gpt-x'; it serves 'my-model'"
    assert server.requests == []  # nothing was generated
