"""Random feasible search for the 10-D Keane bump minimum."""
import numpy as np


# EVOLVE-BLOCK-START
def minimize():
    d = 10
    rng = np.random.default_rng(0)

    def f(x):
        c = np.cos(x)
        return -abs(np.sum(c**4) - 2 * np.prod(c**2)) / np.sqrt(np.sum(np.arange(1, d + 1) * x**2))

    best_x, best_f = np.ones(d), f(np.ones(d))
    for _ in range(2000):
        x = rng.uniform(0.5, 4.0, d)
        if x.sum() <= 7.5 * d and np.prod(x) >= 0.75 and f(x) < best_f:
            best_x, best_f = x, f(x)
    return best_x.tolist()
# EVOLVE-BLOCK-END
