"""Linear starter model for dv_dt (paper appendix D.5)."""
import numpy as np


# EVOLVE-BLOCK-START
def func(x, params):
    """Linear combination of the input variables.

    Args:
        x (np.ndarray): shape (n_samples, 2), columns (x, v).
        params (np.ndarray): shape (10,), fitted externally with BFGS.

    Returns:
        np.ndarray: predictions of shape (n_samples,).
    """
    result = x[:, 0] * params[0] + x[:, 1] * params[1]
    return result
# EVOLVE-BLOCK-END
