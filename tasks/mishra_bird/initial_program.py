"""Random feasible search for the Mishra's Bird minimum."""
import numpy as np


# EVOLVE-BLOCK-START
def minimize():
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(-10, 0, 2000), rng.uniform(-6.5, 0, 2000)])
    x = x[(x[:, 0] + 5) ** 2 + (x[:, 1] + 5) ** 2 < 25]
    f = np.sin(x[:, 1]) * np.exp((1 - np.cos(x[:, 0])) ** 2) + np.cos(x[:, 0]) * np.exp((1 - np.sin(x[:, 1])) ** 2) \
        + (x[:, 0] - x[:, 1]) ** 2
    return x[np.argmin(f)].tolist()
# EVOLVE-BLOCK-END
