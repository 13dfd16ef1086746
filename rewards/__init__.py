"""Rewards: run untrusted programs in sandboxes and compute trusted rewards and feedback."""

from rewards.evaluator import EVAL_BACKENDS, Evaluation, Evaluator, InfraError, make_runner
from rewards.sandbox import Isolation, RunResult, isolation, run_program

__all__ = ["EVAL_BACKENDS", "Evaluation", "Evaluator", "InfraError", "make_runner", "Isolation", "RunResult", "isolation", "run_program"]
