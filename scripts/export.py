"""Export a run's trained policy as a Hugging Face model directory.

    python scripts/export.py runs/latest my-model/            # newest checkpoint
    python scripts/export.py runs/latest my-model/ --checkpoint runs/latest/checkpoints/epoch-000004
"""

import sys

from train.commands.export_cli import main

if __name__ == "__main__":
    sys.exit(main())
