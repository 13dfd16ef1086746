"""``python -m train.warm_start --config CONFIG [--rebuild] [section.key=value ...]``: the warm-start
command (train.commands.warm_start; also ``helix warm-start``). An entry point, like train/helix.py:
the room itself imports no command."""

import sys

from train.commands.warm_start import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m train.warm_start"))
