"""Function minimisation over a feasible set: eggholder, mishra_bird, keane_bump_10/20/30."""
