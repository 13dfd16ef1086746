"""The systems of the comparison, a registry: how each one is launched for one row, and where its evaluation
records are read back. Every system gets the same starter (the task's initial_program.py), the same
children budget and the same wall-time cap; the peers and HELIX ``evo_only`` sample from the shared server
through a counting gate (scripts/bench/benchlib/peers/gate.py); HELIX's trained rows hold their policy in-process (a frozen
server cannot be trained), started from the same weights.

A peer runs with its own prompts and defaults; what the bench sets is the model endpoint, the budget, the
seed, the problem statement (where each peer's examples put it), and ``WORKAROUNDS``: the smallest
configuration changes that make it run on this box, each with the exact error it fixes.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from benchlib.peers.install import PeerPackage, ensure_installed

ROOT = Path(__file__).resolve().parents[4]
BENCH = ROOT / "scripts" / "bench"  # where ``benchlib`` is found
PEER_SIDE = Path(__file__).resolve().parent / "peer_side"
QUICKSTART = ROOT / "configs" / "quickstart.yaml"  # HELIX's CPU recipe (warm start off here: the model is given)
EVALS = "evals.jsonl"  # a row's score log (scripts/bench/benchlib/peers/score.py's records)

OPENEVOLVE = PeerPackage("openevolve", "0.4.0", "openevolve")
SHINKA = PeerPackage("shinka-evolve", "0.0.7", "shinka")

# Each: (setting, why: the exact error without it).
WORKAROUNDS = {
    "openevolve": [
        ("llm.api_key: local",
         "without a key it stops at start: 'Error: Missing credentials. Please pass an `api_key`, `workload_identity`, "
         "`admin_api_key`, or set the `OPENAI_API_KEY` or `OPENAI_ADMIN_KEY` environment variable.'; the local server "
         "checks none"),
        ("llm.timeout: 1800",
         "its default 60 s per call is shorter than one 4096-token answer from a CPU server (13-35 tokens/s): "
         "'WARNING - Timeout on attempt 1/4. Retrying...' then 'ERROR - All 4 attempts failed with timeout' and the "
         "iteration fails while the server keeps generating the abandoned answers"),
    ],
    "shinka": [
        ("evo.embedding_model=null",
         "'shinka_run: error: Requested model(s) are unavailable because required environment variables are missing: "
         "embedding model 'text-embedding-3-small' (provider: openai) missing OPENAI_API_KEY' (an API model; nothing "
         "outside this box is reachable). Off, its novelty check by code embedding is skipped"),
        ('evo.llm_kwargs={"temperatures": [0.0, 0.5, 1.0], "max_tokens": 8192}',
         "its default max_tokens 16384 exceeds the model's 8192-token context: every call answers 'Error code: 400 - "
         "max_tokens=16384 cannot be greater than max_model_len=8192' and it backs off and retries without end; "
         "8192 is the most the server accepts (it clamps to what the prompt leaves)"),
    ],
}


@dataclass(frozen=True)
class Row:
    """One system on one task, one model setting and one seed, under one budget."""

    system: str
    task: str
    setting: str
    seed: int
    children: int  # 0: no limit (the wall cap alone)
    wall_s: float
    model_dir: Path
    out: Path  # this row's folder
    problem: str  # the task statement every system is given
    timeout_s: float  # the sandbox's limit for one program (the task's CPU-scale limit)

    @property
    def log(self) -> Path:
        return self.out / EVALS


@dataclass(frozen=True)
class Launch:
    cmd: list[str]
    env: dict[str, str | None] = field(default_factory=dict)  # over the bench's environment (None: removed)
    records: str = "log"  # "log": row.log; "archive": HELIX's archive.sqlite
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class System:
    name: str
    gate: str | None  # "budget": sampled through a gate that grants the row's children and no more; "count": a
    # gate that only counts (the system keeps its own budget); None: no server (a model in-process, or none)
    launch: Callable[[Row, str, str, Path], Launch]  # (row, gate URL, served model name, install log) -> Launch
    key: Callable[[], dict] = dict  # what, besides the row, decides its result (pins, workarounds)


def helix_pythonpath() -> str:
    """PYTHONPATH for a HELIX-side ``python -m benchlib.peers.X`` (the scorer, the optimiser): benchlib is no
    package of the install, so scripts/bench/ goes first, as it does for a benchmark run as a script."""
    return os.pathsep.join([str(BENCH), *filter(None, [os.environ.get("PYTHONPATH")])])


def score_env(row: Row) -> dict[str, str]:
    """Where a peer's evaluator wrapper finds HELIX's scorer (read by peer_side/*evaluat*.py)."""
    spec = {"python": sys.executable, "root": str(ROOT), "pythonpath": helix_pythonpath(), "task": row.task,
            "log": str(row.log), "timeout_s": row.timeout_s}
    # PYTHONPATH is HELIX's business, not the peer's: its Python sees only its own venv; the wrapper hands
    # spec["pythonpath"] to HELIX's Python alone
    return {"HELIX_PEER_SCORE": json.dumps(spec), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": None}


def initial_program(task: str) -> str:
    return (ROOT / "tasks" / task / "initial_program.py").read_text(encoding="utf-8")


def workaround_notes(system: str) -> list[str]:
    return [f"{setting} ({why})" for setting, why in WORKAROUNDS[system]]


def openevolve_launch(row: Row, url: str, model: str, install_log: Path) -> Launch:
    python = ensure_installed(OPENEVOLVE, install_log)
    (row.out / "initial.py").write_text(initial_program(row.task), encoding="utf-8")
    shutil.copy(PEER_SIDE / "openevolve_evaluator.py", row.out / "evaluator.py")
    config = {"llm": {"api_key": "local", "timeout": 1800}}  # WORKAROUNDS["openevolve"], as settings
    spec = {"initial": str(row.out / "initial.py"), "evaluator": str(row.out / "evaluator.py"), "out": str(row.out / "run"),
            "iterations": row.children or 10**6, "seed": row.seed, "api_base": url, "model": model,
            "problem": row.problem, "config": config}
    (row.out / "spec.json").write_text(json.dumps(spec, indent=1))
    return Launch([str(python), str(PEER_SIDE / "openevolve_driver.py"), str(row.out / "spec.json")], score_env(row),
                  notes=workaround_notes("openevolve"))


def shinka_launch(row: Row, url: str, model: str, install_log: Path) -> Launch:
    python = ensure_installed(SHINKA, install_log)
    task_dir = row.out / "task"
    task_dir.mkdir(parents=True, exist_ok=True)
    (task_dir / "initial.py").write_text(initial_program(row.task), encoding="utf-8")
    shutil.copy(PEER_SIDE / "shinka_evaluate.py", task_dir / "evaluate.py")
    spec = {"task_dir": str(task_dir), "out": str(row.out / "run"),
            # generation 0 is the starter's evaluation: N children are N + 1 generations
            "generations": row.children + 1 if row.children else 10**6, "seed": row.seed,
            "model": f"local/{model}@{url}", "problem": row.problem, "set": [s for s, _ in WORKAROUNDS["shinka"]]}
    (row.out / "spec.json").write_text(json.dumps(spec, indent=1))
    return Launch([str(python), str(PEER_SIDE / "shinka_driver.py"), str(row.out / "spec.json")], score_env(row),
                  notes=workaround_notes("shinka"))


def helix_command(row: Row, variant: str) -> list[str]:
    from train.commands.ablate import variant_overrides

    return [sys.executable, str(ROOT / "train" / "helix.py"), "--config", str(QUICKSTART), f"task.name={row.task}",
            f"model.policy={row.model_dir}", "warm_start.enabled=false", f"run.seed={row.seed}",
            f"run.output_dir={row.out}", "run.name=run", "run.export=false", "run.checkpoint_every=0", "run.progress=false",
            f"run.max_evaluations={row.children}", f"run.time_budget_s={row.wall_s}", "trainer.epochs=100000",
            *variant_overrides(variant)]


def helix_launch(variant: str) -> Callable[[Row, str, str, Path], Launch]:
    def launch(row: Row, url: str, model: str, install_log: Path) -> Launch:
        cmd = helix_command(row, variant)
        if variant == "evo_only":  # frozen: it samples from the shared server, like the peers
            cmd += ["rollout.engine=openai", f"rollout.openai.base_url={url}", f"rollout.openai.model={model}"]
        return Launch(cmd, {"HF_HUB_OFFLINE": "1"}, records="archive")
    return launch


def optimiser_launch(row: Row, url: str, model: str, install_log: Path) -> Launch:
    return Launch([sys.executable, "-m", "benchlib.peers.optimiser", row.task, "--seconds", str(row.wall_s),
                   "--seed", str(row.seed), "--log", str(row.log)], {"PYTHONPATH": helix_pythonpath()},
                  notes=["no LLM: SLSQP restarts for the whole wall time, each restart one child"])


SYSTEMS: dict[str, System] = {
    "openevolve": System("openevolve", "budget", openevolve_launch,
                         lambda: {"pin": OPENEVOLVE.pin, "workarounds": WORKAROUNDS["openevolve"]}),
    "shinka": System("shinka", "budget", shinka_launch, lambda: {"pin": SHINKA.pin, "workarounds": WORKAROUNDS["shinka"]}),
    "evo_only": System("evo_only", "count", helix_launch("evo_only")),
    "helix": System("helix", None, helix_launch("helix")),
    "entropic": System("entropic", None, helix_launch("entropic")),
    "slsqp": System("slsqp", None, optimiser_launch),
}
