"""A counting gate between one system and the shared vLLM server: every system gets the same number of LLM
completions (children), however its own loop counts them.

A peer's own budget knob counts something else than completions: ShinkaEvolve resamples a patch that
does not apply (up to 3 more calls in one generation) and runs 6 proposals at once; OpenEvolve retries a
call that fails. The gate, a loopback HTTP proxy started per row, forwards ``/v1/models`` and the two
completion routes to the server byte for byte (streamed answers included), grants completion requests
while ``granted + n <= budget`` and refuses the rest with HTTP 429 and a one-line reason, so no system
ever draws more than its budget from the model. It records when the last granted answer went back, which
the bench uses to stop a peer once its budget is spent and its last children have been evaluated.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

COMPLETION_ROUTES = ("/v1/chat/completions", "/v1/completions")
UPSTREAM_TIMEOUT_S = 3600.0  # one completion of 8k tokens on a busy CPU takes minutes; never hours


@dataclass
class GateCounts:
    granted: int = 0  # completions (n per request) let through
    returned: int = 0  # granted completions whose answer came back whole (HTTP 200)
    failed: int = 0  # granted completions the server refused or that broke off
    refused: int = 0  # completion requests turned away: the budget was spent
    last_answer: float = 0.0  # time.time() of the last granted answer sent back
    in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def snapshot(self) -> dict:
        with self.lock:
            return {"granted": self.granted, "returned": self.returned, "failed": self.failed, "refused": self.refused,
                    "last_answer": self.last_answer, "in_flight": self.in_flight}


def requested_n(body: bytes) -> int:
    """How many completions a request asks for (its ``n``, default 1); 1 when the body is not JSON."""
    try:
        n = json.loads(body or b"{}").get("n", 1)
    except (ValueError, AttributeError):
        return 1
    return n if isinstance(n, int) and n >= 1 else 1


class Gate:
    """``with Gate(upstream_url, budget) as gate:`` ... ``gate.url`` is the base URL (.../v1) to give the system.
    ``budget`` 0: count only."""

    def __init__(self, upstream: str, budget: int = 0):
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname, parts.port
        self.budget = budget
        self.counts = GateCounts()
        self._open: set[http.client.HTTPConnection] = set()  # upstream requests under way, closed at the end
        gate = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection; a body runs to the close (streams too)

            def log_message(self, *args):  # the server's own log says it all; keep the bench's console quiet
                pass

            def do_GET(self):
                gate._forward(self, b"", count=False)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = urlsplit(self.path).path
                if path not in COMPLETION_ROUTES:
                    gate._forward(self, body, count=False)
                    return
                n = requested_n(body)
                with gate.counts.lock:
                    ok = gate.budget <= 0 or gate.counts.granted + n <= gate.budget
                    if ok:
                        gate.counts.granted += n
                        gate.counts.in_flight += n
                    else:
                        gate.counts.refused += 1
                if not ok:
                    gate._refuse(self)
                    return
                gate._forward(self, body, count=True, n=n)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, name="gate", daemon=True)

    def _refuse(self, handler: BaseHTTPRequestHandler) -> None:
        text = json.dumps({"error": {"message": f"the benchmark's budget of {self.budget} completions is spent",
                                     "type": "budget_spent", "code": 429}}).encode()
        handler.send_response(429)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(text)))
        handler.end_headers()
        handler.wfile.write(text)

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes, count: bool, n: int = 0) -> None:
        status, whole, conn = 502, False, None
        try:
            conn = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=UPSTREAM_TIMEOUT_S)
            with self.counts.lock:
                self._open.add(conn)
            headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("host", "connection")}
            conn.request(handler.command, handler.path, body=body or None, headers=headers)
            reply = conn.getresponse()
            status = reply.status
            handler.send_response(reply.status)
            for key, value in reply.getheaders():
                if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                    handler.send_header(key, value)
            handler.end_headers()
            while chunk := reply.read1(65536):
                handler.wfile.write(chunk)
                handler.wfile.flush()
            whole = True
        except (OSError, http.client.HTTPException):
            if status == 502 and not whole:
                try:
                    handler.send_error(502, "the vLLM server did not answer")
                except OSError:
                    pass
        finally:
            if conn is not None:
                conn.close()  # a client that gave up: the server sees the request dropped and aborts it
                with self.counts.lock:
                    self._open.discard(conn)
            if count:
                with self.counts.lock:
                    self.counts.in_flight -= n
                    if whole and status == 200:
                        self.counts.returned += n
                        self.counts.last_answer = time.time()
                    else:
                        self.counts.failed += n

    def __enter__(self) -> "Gate":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        """Close every upstream request still under way (a system stopped mid-answer): vLLM aborts a request
        whose client has gone, instead of generating it for nobody during the next row."""
        with self.counts.lock:
            still = list(self._open)
        for conn in still:
            try:
                if conn.sock is not None:
                    conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
