"""A step function h on [0, 2] with values in [0, 1] and integral 1, for Erdős' minimum overlap problem."""
import numpy as np


# EVOLVE-BLOCK-START
def find_step_function():
    """h = 1/2 on all of [0, 2] (20 equal steps): the overlap is 1/2 at shift 0."""
    n = 20
    heights = np.full(n, 0.5)
    return heights.tolist()
# EVOLVE-BLOCK-END
