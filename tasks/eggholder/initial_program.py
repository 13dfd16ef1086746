"""Random search for the Eggholder minimum."""
import numpy as np


# EVOLVE-BLOCK-START
def minimize():
    rng = np.random.default_rng(0)
    x = rng.uniform(-512, 512, size=(2000, 2))
    f = -(x[:, 1] + 47) * np.sin(np.sqrt(np.abs(x[:, 1] + 47 + x[:, 0] / 2))) \
        - x[:, 0] * np.sin(np.sqrt(np.abs(x[:, 0] - (x[:, 1] + 47))))
    return x[np.argmin(f)].tolist()
# EVOLVE-BLOCK-END
