"""Rewards: run untrusted programs in sandboxes and compute trusted rewards and feedback."""

from rewards.evaluator import Evaluation, Evaluator
from rewards.sandbox import RunResult, run_program

__all__ = ["Evaluation", "Evaluator", "RunResult", "run_program"]
