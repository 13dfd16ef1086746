"""The comparison's numbers: one row's outcome from its evaluation records, seeds summarised as mean and range,
and the markdown table. Pure: no process, no file but the row's cached JSON.

Every system's records are HELIX's own verdicts (scripts/bench/benchlib/peers/score.py, HELIX's archive, or the optimiser's
``task.verify``); nothing a peer reports is used. A row's children are its LLM completions (the gate's count)
or, for HELIX, its archived children; a child whose answer never became a program (an edit that did not
apply, a reply without code) counts as a child and is not valid.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

TOP_K = 10  # as train/runs/ablation.py's top-k mean


@dataclass(frozen=True)
class RowResult:
    system: str
    task: str
    setting: str
    seed: int
    status: str  # "ok", "capped" (stopped at the wall cap), or "failed"
    error: str = ""  # one line, when failed
    children: int = 0  # LLM completions (HELIX: archived children; the optimiser: restarts)
    evaluated: int = 0  # programs scored, the starter not counted
    valid: int = 0  # valid programs among them
    best: float = 0.0  # best valid reward, the starter's included (it is the floor)
    top_mean: float = 0.0  # mean of the TOP_K best valid rewards, the starter's included
    wall_s: float = 0.0
    peak_rss_mb: float = 0.0  # the system's own process tree
    server_peak_rss_mb: float = 0.0  # the shared vLLM server's tree during this row (0: not used)
    tokens: float = 0.0  # tokens the server generated for this row (aborted requests included)
    notes: list[str] = field(default_factory=list)  # workarounds applied, anything a reader must know

    @property
    def valid_frac(self) -> float:
        return self.valid / self.children if self.children else 0.0

    @property
    def children_per_min(self) -> float:
        return 60.0 * self.children / self.wall_s if self.wall_s > 0 else 0.0


def outcome(records: list[dict], k: int = TOP_K) -> dict:
    """From evaluation records (``reward``, ``valid``, ``starter``): programs evaluated (starter excluded),
    how many were valid, the best valid reward and the top-k mean (the starter's reward included in both,
    as in train/runs/ablation.py; 0 when nothing is valid)."""
    records = [r for r in records if "reward" in r]  # a scorer's failure is counted apart (scorer_errors)
    rewards = [float(r["reward"]) for r in records if r.get("valid")]
    children = [r for r in records if not r.get("starter")]
    top = heapq.nlargest(k, rewards)
    return {"evaluated": len(children), "valid": sum(1 for r in children if r.get("valid")),
            "best": max(rewards) if rewards else 0.0, "top_mean": sum(top) / len(top) if top else 0.0}


def scorer_errors(records: list[dict]) -> list[str]:
    """What a peer's evaluator wrapper logged when HELIX's scorer failed (an infrastructure failure: the row
    cannot be trusted, so it fails)."""
    return [r["scorer_error"] for r in records if "scorer_error" in r]


def read_records(log: Path) -> list[dict]:
    """A score log's records; a torn last line (a process stopped mid-write) is skipped."""
    if not log.is_file():
        return []
    out = []
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def archive_records(archive: Path) -> list[dict]:
    """HELIX's archive as records: its first row is the starter (no parent)."""
    from population.archive import ReadOnlyArchive

    with ReadOnlyArchive(archive) as arch:
        rows = arch.scores()
    return [{"reward": float(reward), "valid": bool(ok), "starter": parent is None} for _, parent, _, reward, ok in rows]


def save(result: RowResult, path: Path, key: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": key, "result": asdict(result)}, indent=1))
    tmp.replace(path)


def cached(path: Path, key: dict) -> RowResult | None:
    """The row's saved result when it finished (ok or capped) with exactly this key (as JSON reads it back: a
    tuple in the key is a list there); else None (run it)."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if saved.get("key") != json.loads(json.dumps(key)) or saved.get("result", {}).get("status") not in ("ok", "capped"):
        return None
    return RowResult(**saved["result"])


def _mean_range(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    mean = sum(values) / len(values)
    if len(values) == 1:
        return format(mean, fmt)
    return f"{format(mean, fmt)} [{format(min(values), fmt)}, {format(max(values), fmt)}]"


def summary_rows(results: list[RowResult], systems: list[str]) -> list[list[str]]:
    """One table row per system (in ``systems`` order): the mean over its finished seeds and, with more than
    one, the range [min, max]; a system whose every seed failed shows its first error."""
    rows = []
    for system in systems:
        mine = [r for r in results if r.system == system]
        done = [r for r in mine if r.status in ("ok", "capped")]
        failed = [r for r in mine if r.status == "failed"]
        if not done:
            rows.append([system, f"0 of {len(mine)}"] + ["-"] * 7 + [f"failed: {failed[0].error}" if failed else ""])
            continue
        capped = sum(r.status == "capped" for r in done)
        note = "; ".join(filter(None, [f"{capped} capped at the wall time" if capped else "",
                                       f"{len(failed)} failed: {failed[0].error}" if failed else ""]))
        rows.append([system, f"{len(done)}" if not failed else f"{len(done)} of {len(mine)}",
                     _mean_range([r.best for r in done], ".5f"), _mean_range([r.top_mean for r in done], ".5f"),
                     _mean_range([r.valid_frac for r in done], ".2f"),
                     _mean_range([float(r.children) for r in done], ".0f"),
                     _mean_range([r.children_per_min for r in done], ".2f"),
                     _mean_range([r.peak_rss_mb for r in done], ".0f"), _mean_range([r.wall_s for r in done], ".0f"), note])
    return rows


HEAD = ["system", "seeds", "best", f"top-{TOP_K} mean", "valid", "children", "children / min", "peak MB", "wall s", "notes"]


def markdown(title: str, results: list[RowResult], systems: list[str]) -> str:
    lines = [f"### {title}", "", "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(row) + " |" for row in summary_rows(results, systems)]
    servers = [r.server_peak_rss_mb for r in results if r.server_peak_rss_mb > 0]
    if servers:
        lines += ["", f"The shared vLLM server's own peak, not in the column above: {max(servers):.0f} MB."]
    return "\n".join(lines) + "\n"
