"""Online bin packing (Weibull items): the priority with which FunSearch's harness puts an item in each bin."""
import numpy as np


# EVOLVE-BLOCK-START
def priority(item, bins):
    """Returns the priority with which we want to add `item` to each bin.
    item: the item's size (a float); bins: remaining capacities of the bins it fits in.
    The item goes to the bin with the highest priority. Best fit: the tightest bin."""
    return -(bins - item)
# EVOLVE-BLOCK-END
