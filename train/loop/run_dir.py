"""The run directory: resolved config, per-epoch metrics, samples, best program, and which of its
checkpoints are complete (writing and reading one: train.loop.checkpoint, which needs torch; finding
one, as ``--resume`` and a stop line do, needs none).

Every file is written so that a kill at any instant leaves either the old or the new
version: JSONL lines are appended and flushed, whole files are replaced atomically.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from train.config.config import HelixConfig, dump_config, to_dict
from train.loop import run_lock

# Columns of the console table, in order: (metric key, header, format).
TABLE = [
    ("epoch", "epoch", "{:>5d}"),
    ("reward_mean", "R mean", "{:>8.4f}"),
    ("reward_max", "R max", "{:>8.4f}"),
    ("best_reward", "best", "{:>8.4f}"),
    ("valid_frac", "valid", "{:>6.2f}"),
    ("edit_fail_frac", " nofit", "{:>6.2f}"),
    ("unchanged_frac", "  same", "{:>6.2f}"),
    ("repeat_frac", "   rep", "{:>6.2f}"),
    ("zero_std_frac", " 0-std", "{:>6.2f}"),
    ("diversity_mean", "div", "{:>6.3f}"),
    ("kl", "KL", "{:>9.2e}"),
    ("loss", "loss", "{:>9.2e}"),
    ("gen_tokens_per_s", "tok/s", "{:>7.1f}"),
    ("epoch_time_s", "sec", "{:>6.0f}"),
]


def atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _truncate_jsonl(path: Path, epoch: int) -> None:
    """Keep the lines of epochs <= ``epoch`` (those after it are redone by the resumed run)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a line torn by the kill
            continue
        if row.get("epoch", 0) <= epoch:
            kept.append(line)
    atomic_write(path, "".join(k + "\n" for k in kept))


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def clean_row(row: dict) -> dict:
    """NaN and inf become None (null in JSON: strict JSON readers reject NaN)."""
    return {k: _clean(v) for k, v in row.items()}


def json_line(row: dict) -> str:
    return json.dumps(clean_row(row)) + "\n"


def last_epoch(path: Path) -> int:
    epochs = [0]
    if path.exists():
        for line in path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                epochs.append(int(json.loads(line).get("epoch", 0)))
    return max(epochs)


class RunDir:
    def __init__(self, cfg: HelixConfig, config_stem: str, resume_epoch: int | None = None,
                 resume_logs: dict | None = None):
        """``resume_epoch``: continue an existing run; its logs are cut back to that epoch.
        ``resume_logs``: the checkpoint's own copy of that epoch's rows ({"metrics": row,
        "samples": [rows]}), appended when the kill came before the run logged them."""
        name = cfg.run.name or f"{config_stem}-{time.strftime('%Y%m%d-%H%M%S')}"  # HelixRun names it first
        self.path = Path(cfg.run.output_dir) / name
        self.path.mkdir(parents=True, exist_ok=True)
        run_lock.hold(self.path)  # before any file changes: a live run here refuses this one (RunDirInUse)
        if resume_epoch is not None:
            for log in ("metrics.jsonl", "samples.jsonl"):
                _truncate_jsonl(self.path / log, resume_epoch)
            for redone in (self.path / "prompts").glob("epoch-*.jsonl"):  # log_prompts: the resumed run rewrites these
                if int(redone.stem[len("epoch-"):]) > resume_epoch:
                    redone.unlink()
            if resume_logs and resume_logs.get("metrics") and last_epoch(self.path / "metrics.jsonl") < resume_epoch:
                for log, rows in (("metrics.jsonl", [resume_logs["metrics"]]), ("samples.jsonl", resume_logs["samples"])):
                    with open(self.path / log, "a") as fh:
                        fh.writelines(json_line(row) for row in rows)
        self.archive_path = self.path / "archive.sqlite"
        self.export_path = self.path / "export"
        dump_config(cfg, self.path / "config.yaml")
        self._wandb = None
        if cfg.run.wandb != "disabled":
            import wandb

            self._wandb = wandb.init(project="helix", name=name, dir=str(self.path), mode=cfg.run.wandb, config=to_dict(cfg))

    def point_latest(self) -> None:
        """``runs/latest`` -> this run; called once the run passed its checks and starts training, so a run
        that failed at start-up never takes the pointer (a real directory named latest is left alone)."""
        latest = self.path.parent / "latest"
        if latest.is_symlink() or not latest.exists():
            tmp = self.path.parent / f".latest-{os.getpid()}"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(self.path.name)
            os.replace(tmp, latest)

    def log_metrics(self, metrics: dict) -> None:
        with open(self.path / "metrics.jsonl", "a") as fh:
            fh.write(json_line(metrics))
        if self._wandb is not None:  # scalars only; lists (prompt_dropped) stay in metrics.jsonl
            self._wandb.log({k: v for k, v in metrics.items() if not isinstance(v, (list, dict))}, step=metrics.get("epoch"))

    def log_samples(self, rows: list[dict]) -> None:
        with open(self.path / "samples.jsonl", "a") as fh:
            fh.writelines(json_line(row) for row in rows)
        if self._wandb is not None and rows:
            import wandb

            columns = list(rows[0])
            table = wandb.Table(columns=columns, data=[[row.get(c) for c in columns] for row in rows])
            self._wandb.log({"samples": table}, step=rows[0].get("epoch"))

    def log_prompts(self, epoch: int, rows: list[dict]) -> None:
        """An epoch's prompts as the policy saw them, one file per epoch (prompts/epoch-N.jsonl), so the
        run browser reads one epoch's, not the whole run's."""
        (self.path / "prompts").mkdir(exist_ok=True)
        atomic_write(self.path / "prompts" / f"epoch-{epoch}.jsonl", "".join(json_line(row) for row in rows))

    def write_best(self, code: str, reward: float, solution_id: int, epoch: int, exact: str = "") -> None:
        """best_program.py; ``exact``: what its exact check found (tasks.base.exact_label), beside the reward."""
        said = f" ({exact})" if exact else ""
        header = f"# HELIX best program: reward {reward:.10g}{said}, solution {solution_id}, found in epoch {epoch}\n"
        atomic_write(self.path / "best_program.py", header + code)

    def close(self, exit_code: int = 0) -> None:
        if self._wandb is not None:
            self._wandb.finish(exit_code=exit_code)
            self._wandb = None
        run_lock.release(self.path)


def library_log(cfg: HelixConfig, rank: int = 0) -> Path | None:
    """Where a rank's library chatter goes (vLLM's and wandb's lines, Ray's reports) when run.library_logs is
    file; None when it goes to the terminal."""
    if cfg.run.library_logs != "file":
        return None
    return Path(cfg.run.output_dir) / cfg.run.name / ("library.log" if rank == 0 else f"library-rank{rank}.log")


def resume_command(run_path: Path) -> str:
    """The command that continues the run at ``run_path`` from its newest complete checkpoint."""
    script = sys.argv[0] if sys.argv[0].endswith("helix.py") else "train/helix.py"
    ranks = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    launcher = f"torchrun --nproc_per_node {ranks}" if ranks > 1 else "python"
    return f"{launcher} {script} --resume {run_path}"


CHECKPOINTS = "checkpoints"
_NAME = re.compile(r"^epoch-(\d{6})$")


def checkpoint_dirs(run_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first (temporary directories never match the name)."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and _NAME.match(p.name) and (p / "state.json").is_file()]
    return sorted(found, key=lambda p: int(_NAME.match(p.name).group(1)))


def latest_checkpoint(run_dir: Path) -> Path | None:
    dirs = checkpoint_dirs(run_dir)
    return dirs[-1] if dirs else None


def stop_line(run_path: Path, event: str, detail: str = "") -> str:
    """One line for a run that stops before its end (a lost Ray cluster, Ctrl-C): in which epoch, the
    last complete checkpoint, and the exact command that continues from it, e.g. ``interrupted in
    epoch 3; last complete checkpoint: epoch 2 (runs/x/checkpoints/epoch-000002); resume with:
    python train/helix.py --resume runs/x``."""
    epoch = last_epoch(run_path / "metrics.jsonl") + 1
    line = f"{event} in epoch {epoch}" + (f" ({detail})" if detail else "")
    ckpt = latest_checkpoint(run_path)
    if ckpt is None:
        return f"{line}; no complete checkpoint yet: start the run again"
    return f"{line}; last complete checkpoint: epoch {int(ckpt.name.split('-')[1])} ({ckpt}); resume with: " \
           f"{resume_command(run_path)}"


# The novelty gate's column (evolution.novelty_threshold > 0), after ``rep``: near repeats held back unrun.
NEAR_COLUMN = ("near_repeat_frac", "  near", "{:>6.2f}")
GROUPS_COLUMN = ("ds_groups", "groups", "{:>6d}")  # dynamic sampling: groups generated this epoch
# Search form (task.yaml form: search): the children that returned the construction they were given, and those
# scored on their last report because the time limit stopped them.
SEARCH_COLUMNS = [("same_construction_frac", "nogain", "{:>6.2f}"), ("reported_frac", "  @lim", "{:>6.2f}")]


def table_columns(novelty_gate: bool = False, dynamic_sampling: bool = False, search: bool = False) -> list[tuple[str, str, str]]:
    """The console table's columns: TABLE, plus ``near`` when the novelty gate is on, ``groups`` (the
    groups generated, refills included) under dynamic sampling, and ``nogain`` and ``@lim`` for a
    search-form task: a run without them prints the table it always did."""
    columns = list(TABLE)
    if novelty_gate:
        at = [key for key, _, _ in columns].index("repeat_frac") + 1
        columns[at:at] = [NEAR_COLUMN]
    if search:
        at = [key for key, _, _ in columns].index("repeat_frac") + 1
        columns[at:at] = SEARCH_COLUMNS
    if dynamic_sampling:
        at = [key for key, _, _ in columns].index("zero_std_frac")
        columns[at:at] = [GROUPS_COLUMN]
    return columns if columns != TABLE else TABLE


def table_header(columns: list[tuple[str, str, str]] = TABLE) -> str:
    return " ".join(h.rjust(len(fmt.format(0 if "d" in fmt else 0.0))) for _, h, fmt in columns)


def table_row(metrics: dict, columns: list[tuple[str, str, str]] = TABLE) -> str:
    cells = []
    for key, _, fmt in columns:
        value = metrics.get(key)
        width = len(fmt.format(0 if "d" in fmt else 0.0))
        cells.append("-".rjust(width) if value is None else fmt.format(value))
    return " ".join(cells)
