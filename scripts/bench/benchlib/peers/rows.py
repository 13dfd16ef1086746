"""One row of the comparison: one system on one task, model setting and seed, launched under the budget and
read back, as a RowResult. Whatever goes wrong (an install, a crash, a config the system refuses) becomes a
failed row with one line saying why; it never stops the other rows, and nothing it started outlives it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path

from benchlib.peers.gate import Gate
from benchlib.peers.procs import run_capped, tail_error
from benchlib.peers.results import RowResult, archive_records, outcome, read_records, scorer_errors
from benchlib.peers.server import Server
from benchlib.peers.systems import ROOT, Row, System

SYSTEM_LOG = "system.log"


def last_record_time(log: Path) -> float:
    records = read_records(log)
    return max((float(r.get("t", 0.0)) for r in records), default=0.0)


def settle_s(row: Row) -> float:
    """How long a peer may stay quiet after its last granted answer before the bench stops it: time for the
    last child's evaluation (HELIX's scorer starting, the program at its limit) with room to spare."""
    return 2 * row.timeout_s + 30.0


def budget_spent(gate: Gate, row: Row):
    """stop_when for a peer: every granted completion has come back, and neither an answer nor an evaluation
    has happened for ``settle_s``. A peer whose own loop counts something else than completions (Shinka's
    resampled patches) is stopped here, once its last children are scored."""
    def check() -> bool:
        counts = gate.counts.snapshot()
        if gate.budget <= 0 or counts["granted"] < gate.budget or counts["in_flight"]:
            return False
        return time.time() - max(counts["last_answer"], last_record_time(row.log)) >= settle_s(row)
    return check


def usage(server: Server | None) -> dict | None:
    """The server's counters, or None (no server, or one that stopped answering: the row says so)."""
    if server is None:
        return None
    try:
        return server.usage()
    except (OSError, ValueError):
        return None


def failed(row: Row, error: str, notes: list[str] | None = None) -> RowResult:
    return RowResult(row.system, row.task, row.setting, row.seed, "failed", error=" ".join(error.split())[:400],
                     notes=list(notes or []))


def run_row(row: Row, system: System, server: Server | None, install_log: Path) -> RowResult:
    """Launch ``system`` for ``row`` (from a clean folder), stop it at the wall cap or when its budget is spent
    and scored, and read its records."""
    if row.out.exists():
        shutil.rmtree(row.out)
    row.out.mkdir(parents=True)
    if system.gate is not None and server is None:
        return failed(row, "no vLLM server for this row (see the server line above)")
    notes: list[str] = []
    with contextlib.ExitStack() as stack:
        gate = None
        if system.gate is not None:
            gate = stack.enter_context(Gate(server.url, row.children if system.gate == "budget" else 0))
        try:
            launch = system.launch(row, gate.url if gate else "", server.model if server else "", install_log)
        except Exception as err:  # an install that failed, a file that could not be written: this row only
            return failed(row, f"{type(err).__name__}: {err}")
        notes = list(launch.notes)
        (row.out / "command.json").write_text(json.dumps({"cmd": launch.cmd, "env": launch.env}, indent=1))
        before = usage(server)
        if server:
            server.reset_peak()
        start = time.time()
        stop_when = budget_spent(gate, row) if gate is not None and gate.budget > 0 else None
        env = {k: v for k, v in dict(os.environ, **launch.env).items() if v is not None}
        finished = run_capped(launch.cmd, row.wall_s, row.out / SYSTEM_LOG, env=env, cwd=ROOT, stop_when=stop_when)
        after = usage(server)
        tokens = after["generated"] - before["generated"] if before and after else 0.0
        if server and not (before and after):
            notes.append("the server's counters could not be read: tokens not counted")
        server_peak = server.peak_rss_kb() / 1024 if server else 0.0
        counts = gate.counts.snapshot() if gate else None

    if launch.records == "archive":
        archive = row.out / "run" / "archive.sqlite"
        records = archive_records(archive) if archive.is_file() else []
    else:
        records = read_records(row.log)
    got = outcome(records)
    broken = scorer_errors(records)
    spent = counts is not None and gate.budget > 0 and counts["granted"] >= gate.budget
    if system.gate == "budget":  # a peer: its children are the completions it drew (with or without a budget)
        children = counts["returned"] + counts["failed"]
        if counts["failed"]:
            notes.append(f"{counts['failed']} completion(s) broke off before the peer read them")
    else:
        children = got["evaluated"]
        if counts is not None and counts["returned"] != children:
            notes.append(f"the server returned {counts['returned']} completions for {children} archived children")
    wall = finished.wall_s
    if finished.stopped:  # stopped by the budget: the row ended with its last answer or evaluation
        wall = max(counts["last_answer"], last_record_time(row.log)) - start
    status, error = ("capped" if finished.capped else "ok"), ""
    if broken:
        status, error = "failed", f"HELIX's scorer failed {len(broken)} time(s): {broken[0]}"
    elif finished.returncode not in (0, None) and spent:  # it gave up on the gate's refusals: the budget ended it
        notes.append(f"exited with code {finished.returncode} after its budget was spent")
    elif finished.returncode not in (0, None):
        status, error = "failed", f"exit {finished.returncode}: {tail_error(row.out / SYSTEM_LOG)}"
    elif not any(r.get("starter") for r in records):
        status, error = "failed", f"it ran but not even its starter was scored: {tail_error(row.out / SYSTEM_LOG)}"
    return RowResult(row.system, row.task, row.setting, row.seed, status, error=error, children=children, wall_s=wall,
                     peak_rss_mb=finished.peak_rss_kb / 1024, server_peak_rss_mb=server_peak, tokens=tokens, notes=notes,
                     **got)
