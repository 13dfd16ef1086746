"""Circle packing: 21 circles in a rectangle of perimeter 4 (width + height = 2), maximising the sum of radii."""
import numpy as np


# EVOLVE-BLOCK-START
def construct_packing():
    """A 1 x 1 square with 21 circles on a 5 x 5 grid, sized to fit."""
    width, height = 1.0, 1.0  # width + height must be <= 2
    n = 21
    centers = np.array([[0.1 + 0.2 * (k % 5), 0.1 + 0.2 * (k // 5)] for k in range(n)])
    radii = compute_max_radii(centers, width, height)
    return width, height, centers, radii


def compute_max_radii(centers, width, height):
    """Each radius: the distance to the nearest wall, or half the distance to the nearest other centre."""
    x, y = centers[:, 0], centers[:, 1]
    d = np.linalg.norm(centers[:, None] - centers[None], axis=2)
    np.fill_diagonal(d, np.inf)
    return np.min([x, y, width - x, height - y, d.min(axis=1) / 2], axis=0)
# EVOLVE-BLOCK-END


def run_packing():
    width, height, centers, radii = construct_packing()
    return {"width": width, "height": height, "centers": centers, "radii": radii}
