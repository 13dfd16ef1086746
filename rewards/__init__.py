"""Rewards: run untrusted programs in sandboxes and compute trusted rewards and feedback."""

from rewards.evaluator import Evaluation, Evaluator
from rewards.sandbox import Isolation, RunResult, isolation, run_program

__all__ = ["Evaluation", "Evaluator", "Isolation", "RunResult", "isolation", "run_program"]
