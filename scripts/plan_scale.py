"""Scale plan: the expected epoch time per phase of a config on a target GPU node, and the evaluator
cores that keep evaluation under generation, from measured rates (a PROJECTION, with its sources).

    .venv/bin/python scripts/plan_scale.py --config configs/base/paper_14b.yaml task.name=circle_packing_26 \
        --gen-tok-s-per-gpu 850 --train-tok-s-per-gpu 1670 --node-cores 112 --params 14.77e9 --disk-gb-s 2

The model and its arithmetic are train/commands/scale_plan.py (``--help`` for every flag).
"""

import sys

from train.commands.scale_plan import main

if __name__ == "__main__":
    sys.exit(main())
