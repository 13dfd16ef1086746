"""A task's evaluator and prompt builder as a run sets them up: one sandbox pool (or Ray runner) with the run's
limits, and one prompt layout with the run's budget and ancestors.

Made once per run on rank 0 by its start (train.api.start): the warm start's data is scored and shown with them
(train.warm_start.build), and the loop then uses the same two (HelixRun's ``MainState``), so what the warm start
teaches is what the run shows. ``helix warm-start`` makes its own the same way.
"""

from __future__ import annotations

import contextlib
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from rewards import Evaluator, make_runner
from rollout.prompts import PromptBuilder
from train.config.config import HelixConfig


@dataclass
class TaskTools:
    evaluator: Evaluator
    builder: PromptBuilder | None  # None: a run that prompts nothing (iterate)

    def close(self) -> None:
        self.evaluator.close()


def say(message: str) -> None:
    """Print above the run's progress bars (tqdm's write), at once."""
    from tqdm import tqdm

    tqdm.write(message)
    sys.stdout.flush()


def task_tools(cfg: HelixConfig, task, tokenizer, library_log: Path | None = None, say=say) -> TaskTools:
    """``task``'s evaluator (task.eval_backend's runner: an unreachable Ray cluster fails here, before a run
    directory exists; ``library_log`` and ``say``: where Ray's reports go) and prompt builder (``tokenizer``:
    the policy's; None, for a run that prompts nothing (the iterate baseline), makes no builder). The
    evaluator re-checks exactly from the first valid program on (the starter is the run's first best); the
    loop then raises ``exact_from`` as records.check_from says."""
    runner = make_runner(cfg.task.eval_backend, task, cfg.task.ray_address, cfg.task.eval_workers,
                         library_log=library_log, say=say)
    evaluator = Evaluator(task, workers=cfg.task.eval_workers or None, timeout_s=cfg.task.timeout_s,
                          memory_mb=cfg.task.memory_mb, runner=runner,
                          keep_artefacts=(task.folder / "render.py").is_file(),  # drawn by train/runs
                          exact_from=-math.inf)
    builder = None if tokenizer is None else PromptBuilder(
        tokenizer, task.prompt_description(cfg.rollout.description), task.entry_function, evaluator.timeout_s,
        cfg.rollout.max_prompt_tokens, cfg.rollout.n_ancestors, template=task.prompt_template, form=task.form)
    return TaskTools(evaluator, builder)


def tools_for(cfg: HelixConfig, tokenizer, run_tools: TaskTools | None = None):
    """What the warm start borrows its tools from (train.warm_start.build.ToolsFor): ``tools_for(name)`` is a
    ``with`` that lends the run's own tools (``run_tools``, left open: the loop goes on with them) for the run's
    task, and a pair made with the run's settings, closed after, for another task (warm_start.tasks)."""
    from tasks import load_task

    @contextlib.contextmanager
    def lend(name: str) -> Iterator[TaskTools]:
        if run_tools is not None and name == cfg.task.name:
            yield run_tools
            return
        tools = task_tools(cfg, load_task(name), tokenizer)
        try:
            yield tools
        finally:
            tools.close()

    return lend
