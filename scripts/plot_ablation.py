"""Best reward so far against children evaluated, one curve per variant, from an ablation's runs,
and the table of best-so-far at fixed budgets.

    .venv/bin/python scripts/plot_ablation.py runs/ablate-circle_packing_26
    .venv/bin/python scripts/plot_ablation.py runs/quality-ws --budgets 16 32 64 --out quality.png

The command is train/runs/plot_ablation.py (``--help``); the numbers are train/runs/ablation.py.
"""

import sys

from train.runs.plot_ablation import main

if __name__ == "__main__":
    sys.exit(main())
