"""One model behind vLLM's OpenAI-compatible server on loopback, shared by every system of one model setting.

The server is HELIX's own (rollout/serve.py, run as scripts/serve.py with HELIX's Python): a free loopback
port, the model under one served name, up when ``GET /v1/models`` lists it. It runs in a session of its own
and is stopped with its whole tree whatever happens (``served`` is a context manager; its ``finally`` stops
it), so nothing is left listening. Its Prometheus counters say how many completions each system drew
and how many tokens they cost (``usage``): the peers' own counts are not trusted for that.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchlib.peers.procs import PeakSampler, stop_tree, tail_error

ROOT = Path(__file__).resolve().parents[4]
SERVE = ROOT / "scripts" / "serve.py"
STARTUP_S = 900.0  # vLLM on a busy 2-core box: ~100 s; a cold one compiles nothing (eager), so 15 min means broken
# Completions that came back, whatever stopped them; an aborted request (the client gave up) is not one.
FINISHED = ("stop", "length", "repetition", "error")


class ServerError(RuntimeError):
    """The server did not come up; the message is one line naming the log."""


def free_port() -> int:
    """A loopback port nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def parse_metrics(text: str) -> dict[str, float]:
    """From vLLM's /metrics: ``finished`` (completions returned, summed over FINISHED reasons) and
    ``generated`` (every token the server generated, those of aborted requests included)."""
    finished = generated = 0.0
    for line in text.splitlines():
        if line.startswith("vllm:request_success_total{"):
            labels, _, value = line.rpartition(" ")
            reason = labels.split('finished_reason="', 1)[1].split('"', 1)[0] if 'finished_reason="' in labels else ""
            if reason in FINISHED:
                finished += float(value)
        elif line.startswith("vllm:generation_tokens_total{"):
            generated += float(line.rpartition(" ")[2])
    return {"finished": finished, "generated": generated}


@dataclass
class Server:
    url: str  # the OpenAI base URL, .../v1
    model: str  # the served name clients request
    port: int
    popen: subprocess.Popen
    log: Path
    sampler: PeakSampler | None = None

    def usage(self) -> dict[str, float]:
        """The server's counters now (see parse_metrics); subtract two readings for one system's share."""
        with urllib.request.urlopen(self.url[: -len("/v1")] + "/metrics", timeout=10) as r:
            return parse_metrics(r.read().decode("utf-8", errors="replace"))

    def peak_rss_kb(self) -> int:
        """The server tree's peak RSS since the last ``reset_peak``."""
        if self.sampler is None:
            return 0
        self.sampler.sample()
        return self.sampler.peak_kb

    def reset_peak(self) -> None:
        if self.sampler is not None:
            self.sampler.peak_kb = 0


def wait_ready(url: str, model: str, popen: subprocess.Popen, log: Path, timeout_s: float) -> None:
    """Until ``GET url/models`` lists ``model``; ServerError if the process ends or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise ServerError(f"the vLLM server exited with code {popen.returncode} before it served {model!r}: "
                              f"{tail_error(log)} (log: {log})")
        try:
            with urllib.request.urlopen(url + "/models", timeout=5) as r:
                if any(m.get("id") == model for m in json.loads(r.read()).get("data", [])):
                    return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.5)
    raise ServerError(f"the vLLM server did not serve {model!r} within {timeout_s:.0f} s (log: {log})")


def serve_command(model_dir: Path, name: str, port: int, python: str = sys.executable) -> list[str]:
    return [python, str(SERVE), str(model_dir), "--port", str(port), "--served-model-name", name]


@contextlib.contextmanager
def served(model_dir: Path, name: str, log: Path, startup_s: float = STARTUP_S,
           command: list[str] | None = None, port: int | None = None) -> Iterator[Server]:
    """Start the server (``command``: a stand-in for tests), wait until it serves ``name``, yield it, and
    stop it and everything it started on the way out, however the block ends."""
    port = port or free_port()
    cmd = command or serve_command(model_dir, name, port)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        popen = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 cwd=ROOT, start_new_session=True)
    server = Server(f"http://127.0.0.1:{port}/v1", name, port, popen, log, PeakSampler(popen.pid))
    try:
        with server.sampler:
            wait_ready(server.url, name, popen, log, startup_s)
            yield server
    finally:
        stop_tree(popen, server.sampler.seen, grace_s=15.0)
