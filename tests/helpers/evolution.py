"""train.loop.evolution.Evolution on circle_packing_26 with a fixed evaluator (no sandbox)."""

from rewards.evaluator import Evaluation
from tasks import load_task
from train.config.config import load_config
from train.loop.evolution import Evolution

STARTER = 1.8365015544609251  # the circle-packing starter's sum of radii


class FixedEvaluator:
    """The starter's evaluation, without a sandbox: Evolution only evaluates the starter itself."""

    def evaluate(self, code):
        return Evaluation(STARTER, True, "valid packing")


def make(tmp_path, *overrides, resume=None):
    cfg = load_config(None, ["task.name=circle_packing_26", "population.size=2", "population.knn_k=2", *overrides])
    return Evolution(cfg, tmp_path / "archive.sqlite", load_task("circle_packing_26"), FixedEvaluator(), resume=resume)
