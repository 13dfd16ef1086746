"""Cap set in Z_3^4: the priority with which FunSearch's greedy builder adds each vector."""
import numpy as np


# EVOLVE-BLOCK-START
def priority(element, n):
    """Returns the priority with which we want to add `element` to the cap set.
    element is a tuple of n ints in {0, 1, 2}; higher priorities are added first."""
    return 0.0
# EVOLVE-BLOCK-END
