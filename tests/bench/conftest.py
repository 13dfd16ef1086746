"""The benchmarks' tests import the benchmarks' package as the benchmarks do (``benchlib``, with scripts/bench/
first on sys.path): the name ``scripts`` may be another installed package's."""

import sys
from pathlib import Path

BENCH = str(Path(__file__).resolve().parents[2] / "scripts" / "bench")
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)
