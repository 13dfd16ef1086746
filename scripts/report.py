"""Write a self-contained HTML report of a HELIX run (or of ablation folders), its plots also as PNGs.

    .venv/bin/python scripts/report.py runs/latest                 # -> runs/latest/report/report.html
    .venv/bin/python scripts/report.py runs/quality-ws runs/q-keane --out q.html   # ablation folders

The report itself is train/runs/report.py (``--help`` for every flag).
"""

import sys

from train.runs.report import main

if __name__ == "__main__":
    sys.exit(main())
