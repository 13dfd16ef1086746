"""train/helix.py with tests/helpers/planted_spread.py's engine registered as ``planted``, rank 1's groups
all without spread: dynamic sampling under torchrun (tests/loop/test_dynamic_sampling.py). Started with the
checkout on its PYTHONPATH (tests.helpers.env.child_env)."""

import sys

from rollout.engines import ENGINES
from tests.helpers.planted_spread import PlantedSpreadEngine, rank_one_flat
from train.helix import main

PlantedSpreadEngine.FLAT = staticmethod(rank_one_flat)
ENGINES["planted"] = PlantedSpreadEngine

if __name__ == "__main__":
    sys.exit(main())
