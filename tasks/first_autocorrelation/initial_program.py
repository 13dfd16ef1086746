"""Step heights on [-1/4, 1/4] for the first autocorrelation inequality: minimise max f*f / (integral f)^2."""
import numpy as np


# EVOLVE-BLOCK-START
def find_better_c1_upper_bound():
    """A constant function on 20 equal steps: C = 2."""
    n = 20
    heights = np.ones(n)
    return heights.tolist()
# EVOLVE-BLOCK-END
