"""A child: one completion turned into a program (or not), typed from the moment its edit is
applied (train.loop.children) to the moment the archive stores it (population.archive)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


@dataclass
class Child:
    parent_id: int
    epoch: int
    prompt_id: str  # e{epoch}-p{prompt}-g{sample}
    completion: str
    code: str  # the child program; the parent's code when the edit did not apply
    reward: float = 0.0  # trusted: recomputed by the task's verifier, 0 for a non-program
    valid: bool = False
    feedback: str = ""
    metrics: dict = field(default_factory=dict)
    eval_time_s: float = 0.0
    # The edit applied and changed what the program computes: it was run in the sandbox, and it
    # joins the kNN index and the selection pool. A failed or no-op edit is archived only.
    is_program: bool = False
    tag: int = -1  # the population slot (island) of the prompt it came from
    operator: str = "edit"  # how it was made (rollout.operators)
    second_parent_id: int | None = None  # crossover: the other parent
    # Recorded for the run browser and the report, which only read: what the GRPO update applied to its
    # tokens and what the estimator saw (train.loop.epoch_loop), and what its program returned (JSON,
    # bounded; tasks with a render.py only, rewards.evaluator).
    advantage: float | None = None
    advantage_inputs: dict | None = None
    artefact: str | None = None
    exact: dict | None = None  # the task's exact check of a record candidate {status, detail, value} (rewards.evaluator)
    # Search form: the verified construction of a valid child (JSON text, bounded by the evaluator), archived
    # so that its children start from it.
    construction: str | None = None
    # The novelty gate's embedding of its code (train.loop.novelty), which the kNN index then takes as
    # it is instead of embedding the program again; None without the gate. Never archived as a column.
    embedding: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def scored(self) -> bool:
        """False when the evaluation infrastructure lost the program (status "infra"): it has no
        reward at all, so it stays out of its GRPO group, the selection pool and reward statistics."""
        return not self.metrics.get("infra_error")

    def archive_row(self) -> dict:
        """The columns the archive stores (is_program and tag live in the selection pool)."""
        return dict(parent_id=self.parent_id, epoch=self.epoch, code=self.code, reward=self.reward, valid=self.valid,
                    feedback=self.feedback, metrics=self.metrics, eval_time_s=self.eval_time_s,
                    prompt_id=self.prompt_id, completion=self.completion, operator=self.operator,
                    second_parent_id=self.second_parent_id, advantage=self.advantage,
                    advantage_inputs=self.advantage_inputs, artefact=self.artefact, exact=self.exact,
                    construction=self.construction)
