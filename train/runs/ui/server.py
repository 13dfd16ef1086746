"""The run browser: a read-only web UI over one run, a folder of runs or an ablation folder.

    helix ui runs/                      # or: .venv/bin/python scripts/ui.py runs/
    helix ui runs/latest --port 8800
    ssh -L 8765:127.0.0.1:8765 gpu-box  # from a laptop, then open http://127.0.0.1:8765/

FastAPI (Starlette + uvicorn): JSON endpoints over ``train.runs.browse`` and one static page
(static/: Cytoscape.js for the lineage tree, uPlot for curves, highlight.js for code). Every route
is GET; any other method gets 405 from a middleware, so no endpoint can write. Archives are opened
per request through the read-only reader, so a run that is still going shows its newest rows.
"""

from __future__ import annotations

import argparse
import ipaddress
import multiprocessing
import socket
import sys
import threading
from collections import OrderedDict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from fastapi import FastAPI, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from population.archive import ArchiveError
from train.runs import browse
from train.runs import run_data as rd

STATIC = Path(__file__).resolve().parent / "static"
VIEWS = ("/", "/run", "/lineage", "/solution", "/population", "/compare")
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
DEFAULT_PORT = 8765


class _Renders:
    """PNG drawings of solutions (the task's render.py on a sandbox re-run), the newest 64 kept."""

    def __init__(self):
        self.lock, self.cache = threading.Lock(), OrderedDict()

    def get(self, path: Path, sid: int) -> tuple[bytes | None, list[str]]:
        key = (str(path), sid)
        with self.lock:  # one sandbox run at a time; a second request for the same picture waits for the first
            if key not in self.cache:
                from train.runs.page import png_bytes
                from train.runs.report import best_rendering

                run = rd.load_run(path)
                with browse._archive(path) as arch:
                    sol = arch.get(sid)
                fig, notes = best_rendering(run, sol, execute=True)
                for ax in fig.axes if fig is not None else []:  # report.py titles its one drawing "best solution"
                    ax.set_title(ax.get_title().replace("best solution", "solution"), fontsize=9)
                self.cache[key] = (png_bytes(fig, dpi=90) if fig is not None else None, notes)
                while len(self.cache) > 64:
                    self.cache.popitem(last=False)
            return self.cache[key]


def create_app(root: str | Path) -> FastAPI:
    """The app over ``root`` (a run directory or a folder of them); RunDirError when it holds no run."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise rd.RunDirError(f"{root} is not a directory")
    if not browse.discover(root):
        raise rd.RunDirError(f"{root} holds no run directory (metrics.jsonl or archive.sqlite), 3 levels down at most")
    app = FastAPI(title="HELIX run browser", docs_url=None, redoc_url=None, openapi_url=None)
    renders, advantages = _Renders(), _Advantages()
    app.state.advantages = advantages

    @app.middleware("http")
    async def read_only(request: Request, call_next):
        if request.method not in ("GET", "HEAD"):
            return JSONResponse({"error": f"{request.method} is not allowed: the run browser is read-only"},
                                status_code=405, headers={"Allow": "GET, HEAD"})
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        if request.url.path.startswith("/api/"):
            response.headers["Cache-Control"] = "no-store"
        return response

    @app.exception_handler(rd.RunDirError)
    @app.exception_handler(ArchiveError)
    async def not_found(_request, exc):
        return JSONResponse({"error": str(exc)}, status_code=404)

    @app.exception_handler(KeyError)
    async def no_solution(_request, exc):
        return JSONResponse({"error": str(exc.args[0]) if exc.args else "not found"}, status_code=404)

    @app.exception_handler(ValueError)
    async def bad_request(_request, exc):
        return JSONResponse({"error": str(exc)}, status_code=400)

    def run_path(run: str) -> Path:
        return browse.resolve_run(root, run)

    for view in VIEWS:
        app.add_api_route(view, lambda: FileResponse(STATIC / "index.html"), methods=["GET"], include_in_schema=False)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/api/runs")
    def runs():
        return dict(root=str(root), runs=[browse.run_row(root, p) for p in browse.discover(root)])

    @app.get("/api/overview")
    def overview(run: str = ""):
        return browse.overview(run_path(run))

    @app.get("/api/solutions")
    def solutions(run: str = "", offset: int = Query(0, ge=0), limit: int = Query(50, ge=1, le=500),
                  order: str = "-id", valid: bool = False):
        return browse.solutions(run_path(run), offset, limit, order, valid)

    @app.get("/api/lineage")
    def lineage(run: str = "", best: int = Query(5, ge=1, le=50)):
        return browse.lineage(run_path(run), best)

    @app.get("/api/expand")
    def expand(run: str = "", id: int = Query(..., ge=0), limit: int = Query(30, ge=1, le=200)):
        return browse.expand(run_path(run), id, limit)

    @app.get("/api/solution")
    def solution(run: str = "", id: int = Query(..., ge=0)):
        return browse.solution(run_path(run), id)

    @app.get("/api/group")
    def group(run: str = "", id: int = Query(..., ge=0)):
        return browse.solution_group(run_path(run), id, advantages.compute)

    @app.get("/api/render")
    def render(run: str = "", id: int = Query(..., ge=0)):
        png, notes = renders.get(run_path(run), id)
        if png is None:
            return JSONResponse({"error": "; ".join(notes)}, status_code=404)
        return Response(png, media_type="image/png")

    @app.get("/api/population")
    def population(run: str = "", epoch: int | None = None):
        return browse.population(run_path(run), epoch)

    @app.get("/api/compare")
    def compare(runs: str = "", k: int = Query(10, ge=1, le=1000)):
        rels = [r for r in runs.split(",") if r] or [browse.rel_name(root, p) for p in browse.discover(root)]
        return browse.compare(root, rels, k)

    return app


def _import_grpo() -> None:
    import train.learner.grpo  # noqa: F401


class _Advantages:
    """browse.grpo_advantages in one worker process: train.learner.grpo imports torch and verl (20-50 s on a
    busy 2-core box), which in the server would hold its GIL and stall every page while it loads. The
    worker starts importing when the server starts; a group asked for before it is ready waits for it."""

    def __init__(self):
        self.pool = None
        self.lock = threading.Lock()

    def start(self) -> None:
        with self.lock:
            if self.pool is None:
                self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=_import_grpo)
                self.pool.submit(int)  # start the worker (and its import) now

    def compute(self, rewards: list[float], estimator: str, norm_by_std: bool) -> list[float]:
        self.start()
        return self.pool.submit(browse.grpo_advantages, rewards, estimator, norm_by_std).result(timeout=600)

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="helix ui", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path, help="a run directory, a folder of runs or an ablation folder")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0 picks a free one")
    args = parser.parse_args(argv)
    try:
        app = create_app(args.path)
    except rd.RunDirError as exc:
        print(f"helix ui: {exc}", file=sys.stderr)
        return 2
    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = args.host == "localhost"
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        print(f"helix ui: cannot bind {args.host}:{args.port} ({exc}); try --port 0 for a free port", file=sys.stderr)
        return 2
    port = sock.getsockname()[1]
    if not loopback:
        print(f"helix ui: WARNING: binding {args.host}: anyone who can reach this machine on port {port} can read "
              "these runs (programs, prompts, completions); there is no login. Prefer the default 127.0.0.1 and "
              "ssh -L.", file=sys.stderr)
    shown = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    print(f"HELIX run browser on {args.path.resolve()}: http://{shown}:{port}/", flush=True)
    print(f"  from a laptop: ssh -L {port}:127.0.0.1:{port} <this machine>, then open http://127.0.0.1:{port}/", flush=True)
    import uvicorn

    app.state.advantages.start()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    try:
        server.run(sockets=[sock])
    finally:
        app.state.advantages.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
