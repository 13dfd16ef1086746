"""Evaluate many candidate programs in parallel sandboxes and turn results into trusted rewards."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from rewards.sandbox import run_program

FEEDBACK_LIMIT = 2000


@dataclass(frozen=True)
class Evaluation:
    reward: float
    valid: bool
    feedback: str
    metrics: dict[str, float] = field(default_factory=dict)
    eval_time_s: float = 0.0
    status: str = "ok"  # ok | invalid | error | timeout | crash | bad_output


def _bounded(text: str) -> str:
    return text if len(text) <= FEEDBACK_LIMIT else text[: FEEDBACK_LIMIT - 20] + "\n...(truncated)"


class Evaluator:
    """Thread pool whose threads each drive one sandboxed subprocess; the GIL is not a bottleneck."""

    def __init__(self, task, workers: int | None = None, timeout_s: float | None = None, memory_mb: int | None = None):
        self.task = task
        self.workers = workers or os.cpu_count() or 1
        self.timeout_s = timeout_s or task.timeout_s
        self.memory_mb = memory_mb or task.memory_mb

    def evaluate(self, code: str) -> Evaluation:
        run = run_program(code, self.task.entry_function, self.timeout_s, self.memory_mb)
        timing = f" (ran {run.elapsed_s:.2f} s)"
        if run.status != "ok":
            text = f"{run.status}: {run.error.strip()}"
            if run.output_tail.strip():
                text += f"\nlast output:\n{run.output_tail[-500:]}"
            return Evaluation(0.0, False, _bounded(text + timing), {}, run.elapsed_s, run.status)
        verdict = self.task.verify(run.value)
        status = "ok" if verdict.valid else "invalid"
        reward = verdict.reward if verdict.valid else 0.0
        return Evaluation(reward, verdict.valid, _bounded(verdict.feedback + timing), dict(verdict.metrics), run.elapsed_s, status)

    def evaluate_many(self, codes: list[str], progress: bool = False) -> list[Evaluation]:
        if not codes:
            return []
        with ThreadPoolExecutor(max_workers=min(self.workers, len(codes))) as pool:
            results = pool.map(self.evaluate, codes)
            if progress:
                from tqdm import tqdm

                results = tqdm(results, total=len(codes), desc="evaluate", leave=False)
            return list(results)
