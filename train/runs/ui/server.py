"""The run browser: a read-only web UI over one run, a folder of runs or an ablation folder.

    helix ui runs/                      # or: .venv/bin/python scripts/ui.py runs/
    helix ui runs/latest --port 8800
    ssh -L 8765:127.0.0.1:8765 gpu-box  # from a laptop, then open http://127.0.0.1:8765/

FastAPI (Starlette + uvicorn): JSON endpoints over ``train.runs.browse`` and one static page
(static/: Cytoscape.js for the lineage tree, uPlot for curves, highlight.js for code). It only reads:
every route is GET (any other method gets 405), advantages and pictures come from what the run
recorded (nothing is recomputed with the trainer, no program is re-run), and archives are opened per
request through the read-only reader, so a run that is still going shows its newest rows. It answers
only to its own name (``hosts.HostCheck``: DNS rebinding and cross-site requests get 403).
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sqlite3
import sys
import threading
from collections import OrderedDict
from pathlib import Path

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from population.archive import ArchiveError
from train.runs import browse
from train.runs import run_data as rd
from train.runs.ui.hosts import HostCheck

STATIC = Path(__file__).resolve().parent / "static"
VIEWS = ("/", "/run", "/lineage", "/solution", "/population", "/compare")
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
DEFAULT_PORT = 8765
MAX_INT = 2**63 - 1  # SQLite's integer: a larger id or offset is a bad value (400), not an overflow (500)
SECURITY_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


class _Pictures:
    """PNG drawings of solutions from their recorded artefacts (``train.runs.drawing``), the newest 64 kept."""

    def __init__(self):
        self.lock, self.cache = threading.Lock(), OrderedDict()

    def get(self, path: Path, sid: int) -> tuple[bytes | None, list[str]]:
        from train.runs.drawing import rendering
        from train.runs.page import png_bytes

        key = (str(path), sid)
        with self.lock:  # matplotlib draws one figure at a time here; a second request waits for the cache
            if key not in self.cache:
                run = rd.load_run(path)
                with browse._archive(path) as arch:
                    fig, notes = rendering(run, arch, arch.get(sid), "solution")
                self.cache[key] = (png_bytes(fig, dpi=90) if fig is not None else None, notes)
                while len(self.cache) > 64:
                    self.cache.popitem(last=False)
            return self.cache[key]


def _error(status: int, message: str, **headers) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers={**SECURITY_HEADERS, **headers})


def _validation_message(exc: RequestValidationError) -> str:
    """FastAPI's list of errors as one line: ``id: Input should be a valid integer``."""
    parts = [f"{'.'.join(str(x) for x in e.get('loc', ())[1:]) or 'query'}: {e.get('msg', 'invalid')}" for e in exc.errors()]
    return "; ".join(parts) or "bad query"


def _guard(app: FastAPI, hosts: HostCheck) -> None:
    """Refuse what the browser must not answer (another method, a foreign Host or Origin), map errors to
    JSON 4xx, and add the security headers to every answer."""

    @app.middleware("http")
    async def guard(request: Request, call_next):
        if request.method not in ("GET", "HEAD"):
            return _error(405, f"{request.method} is not allowed: the run browser is read-only", Allow="GET, HEAD")
        refusal = hosts.refusal(request.headers, request.url.path)
        if refusal is not None:
            return _error(403, refusal)
        response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        if request.url.path.startswith("/api/"):
            response.headers["Cache-Control"] = "no-store"
        return response

    def handle(status: int, message):
        async def handler(_request, exc):
            return _error(status, message(exc))
        return handler

    first_arg = lambda exc: str(exc.args[0]) if exc.args else "not found"  # noqa: E731
    for kind in (rd.RunDirError, ArchiveError, sqlite3.DatabaseError):  # no such run, or it cannot be read
        app.add_exception_handler(kind, handle(404, lambda exc: f"{exc}"))
    app.add_exception_handler(KeyError, handle(404, first_arg))
    app.add_exception_handler(ValueError, handle(400, str))
    app.add_exception_handler(RequestValidationError, handle(400, _validation_message))


def _routes(app: FastAPI, root: Path) -> None:
    """The JSON API: each route reads through ``train.runs.browse``; ``run`` names a run under ``root``."""
    run_path = lambda run: browse.resolve_run(root, run)  # noqa: E731
    SID = Query(..., ge=0, le=MAX_INT)
    pictures = _Pictures()

    @app.get("/api/runs")
    def runs():
        return dict(root=str(root), runs=browse.run_rows(root))

    @app.get("/api/overview")
    def overview(run: str = ""):
        return browse.overview(run_path(run))

    @app.get("/api/solutions")
    def solutions(run: str = "", offset: int = Query(0, ge=0, le=MAX_INT), limit: int = Query(50, ge=1, le=500),
                  order: str = "-id", valid: bool = False):
        return browse.solutions(run_path(run), offset, limit, order, valid)

    @app.get("/api/lineage")
    def lineage(run: str = "", best: int = Query(5, ge=1, le=50)):
        return browse.lineage(run_path(run), best)

    @app.get("/api/expand")
    def expand(run: str = "", id: int = SID, limit: int = Query(30, ge=1, le=200)):
        return browse.expand(run_path(run), id, limit)

    @app.get("/api/solution")
    def solution(run: str = "", id: int = SID):
        return browse.solution(run_path(run), id)

    @app.get("/api/render")
    def render(run: str = "", id: int = SID):
        png, notes = pictures.get(run_path(run), id)
        return Response(png, media_type="image/png") if png is not None else _error(404, "; ".join(notes))

    @app.get("/api/population")
    def population(run: str = "", epoch: int | None = Query(None, ge=-MAX_INT, le=MAX_INT)):
        return browse.population(run_path(run), epoch)

    @app.get("/api/compare")
    def compare(runs: str = Query("", max_length=100_000), k: int = Query(10, ge=1, le=1000)):
        rels = [r for r in runs.split(",") if r] or [browse.rel_name(root, p) for p in browse.discover(root)]
        return browse.compare(root, rels, k)


def create_app(root: str | Path, hosts: HostCheck | None = None) -> FastAPI:
    """The app over ``root`` (a run directory or a folder of them); RunDirError when it holds no run.
    ``hosts``: the names it answers to (default: the loopback names on DEFAULT_PORT)."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise rd.RunDirError(f"{root} is not a directory")
    if not browse.discover(root):
        raise rd.RunDirError(f"{root} holds no run directory (metrics.jsonl or archive.sqlite), 3 levels down at most")
    app = FastAPI(title="HELIX run browser", docs_url=None, redoc_url=None, openapi_url=None)
    _guard(app, hosts or HostCheck("127.0.0.1", DEFAULT_PORT))
    page = lambda: FileResponse(STATIC / "index.html")  # noqa: E731
    for view in VIEWS:
        app.add_api_route(view, page, methods=["GET"], include_in_schema=False)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _routes(app, root)
    return app


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="helix ui", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path, help="a run directory, a folder of runs or an ablation folder")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0 picks a free one")
    parser.add_argument("--allowed-hosts", default="", metavar="HOST[,HOST...]",
                        help="other names the browser answers to, e.g. a proxy's: runs.example.com (any port), "
                             "gpu-box:8765, [2001:db8::1]:8765. By default only 127.0.0.1, localhost, [::1] and "
                             "--host, with the port; any other Host header gets 403 (DNS rebinding)")
    return parser.parse_args(argv)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)  # connections made as soon as the URL is printed wait for uvicorn instead of being refused
    except OSError:
        sock.close()
        raise
    return sock


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    try:
        sock = _bind(args.host, args.port)
    except OSError as exc:
        print(f"helix ui: cannot bind {args.host}:{args.port} ({exc}); try --port 0 for a free port", file=sys.stderr)
        return 2
    port = sock.getsockname()[1]
    try:
        hosts = HostCheck(args.host, port, [h for h in args.allowed_hosts.split(",") if h.strip()])
        app = create_app(args.path, hosts)
    except ValueError as exc:  # RunDirError, or a bad --allowed-hosts entry
        sock.close()
        print(f"helix ui: {exc}", file=sys.stderr)
        return 2
    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = args.host == "localhost"
    if not loopback:
        print(f"helix ui: WARNING: binding {args.host}: anyone who can reach this machine on port {port} can read "
              "these runs (programs, prompts, completions); there is no login. Prefer the default 127.0.0.1 and "
              "ssh -L.", file=sys.stderr)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"HELIX run browser on {args.path.resolve()}: http://{shown}:{port}/", flush=True)
    print(f"  from a laptop: ssh -L {port}:127.0.0.1:{port} <this machine>, then open http://127.0.0.1:{port}/", flush=True)
    import uvicorn

    # uvicorn stops on Ctrl-C and SIGTERM; the browser starts no process of its own, so none is left behind.
    uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
