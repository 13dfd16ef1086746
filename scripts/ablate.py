"""Run a set of ablations with several seeds under one budget, and write one comparison table.

    python scripts/ablate.py --task circle_packing_26 --seeds 0 1 2 --evaluations 64
    python scripts/ablate.py --task keane_bump_20 --variants helix evo_only --wall-s 900

The command is train/commands/ablate.py (``--help`` for every flag); its table is train/runs/ablation.py.
"""

import sys

from train.commands.ablate import main

if __name__ == "__main__":
    sys.exit(main())
