"""The openai engine against a stub OpenAI-compatible server on loopback, started by the test:
request contents, grouping, truncation, retries with backoff, timeouts, clear errors, and an
EvoOnly run of the whole loop whose children come from the server."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rollout.engine_api import SamplingParams
from rollout.openai_engine import EndpointError, OpenAIEngine


class Stub:
    """What the server does: fail the first ``fail`` requests with ``fail_status``, sleep, then
    answer every prompt with ``texts`` (cycled) and ``finish`` reasons."""

    def __init__(self):
        self.requests, self.headers = [], []
        self.fail, self.fail_status, self.sleep_s = 0, 503, 0.0
        self.texts, self.finish = ["hello"], ["stop"]
        self.token_ids = None  # per choice, cycled, when the server returns token ids


@pytest.fixture()
def server():
    stub = Stub()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

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
            self._send(200, {"id": "cmpl-1", "object": "text_completion", "choices": choices[::-1]})

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
                        "top_p": 0.9, "max_tokens": 20, "stop": ["</answer>"], "seed": 5 + i * 3}  # seed + i*n: choice j takes + j
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
    from train.config import ConfigError, HelixConfig, validate

    cfg = HelixConfig()
    cfg.rollout.engine = "openai"
    with pytest.raises(ConfigError, match="trainer.enabled=false"):
        validate(cfg)
    cfg.trainer.enabled = False
    validate(cfg)


@pytest.mark.slow
def test_an_evo_only_run_evaluates_the_servers_edits(server, tmp_path):
    """The loop end to end with the server as the policy: its SEARCH/REPLACE answers become
    evaluated children with lineage."""
    from test_e2e import run_helix  # tests/ is on sys.path (pytest rootdir conftest)

    from population.archive import Archive
    from tasks import load_task

    first = next(line for line in load_task("circle_packing_26").initial_program.splitlines() if line.strip())
    server.texts = [f"<answer>\n<<<<<<< SEARCH\n{first}\n=======\n{first}\nimport math\n>>>>>>> REPLACE\n</answer>",
                    "no edit here"]
    run = run_helix(tmp_path, "rollout.engine=openai", f"rollout.openai_base_url={server.url}", "trainer.enabled=false",
                    "trainer.epochs=1")
    with Archive(run / "archive.sqlite") as arch:
        ids = [int(i) for i in arch.all_ids()]
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
