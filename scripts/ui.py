"""The run browser: a read-only web UI over a run, a folder of runs or an ablation folder.

    .venv/bin/python scripts/ui.py runs/              # prints the URL (http://127.0.0.1:8765/)
    .venv/bin/python scripts/ui.py runs/latest --port 0
    ssh -L 8765:127.0.0.1:8765 gpu-box               # from a laptop, then open http://127.0.0.1:8765/

The same as `helix ui PATH` (train/runs/ui/server.py; ``--help`` for every flag), without importing torch first.
"""

import sys

from train.runs.ui.server import main

if __name__ == "__main__":
    sys.exit(main())
