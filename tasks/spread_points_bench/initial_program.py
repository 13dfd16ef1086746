"""The starter program of spread_points_bench: a correct but weak solution the search starts from.

Replace it with your own. It must define the entry function named in task.yaml (solve), return plain
JSON data (lists, numbers, dicts; numpy arrays via .tolist()), and score above 0 but below best_known.
The model edits only the lines between the EVOLVE-BLOCK markers; keep numbers there that a small
change improves, since the warm start teaches the model on such changes.
"""
import numpy as np


# EVOLVE-BLOCK-START
def solve():
    """A 4 x 3 grid with a shift of alternate rows (smallest distance 1/3)."""
    cols, rows = 4, 3
    shift = 0.0
    xs = np.linspace(0.0, 1.0, cols)
    ys = np.linspace(0.0, 1.0, rows)
    points = [(min(x + shift * (j % 2), 1.0), y) for j, y in enumerate(ys) for x in xs]
    return np.clip(np.array(points), 0.0, 1.0).tolist()
# EVOLVE-BLOCK-END
