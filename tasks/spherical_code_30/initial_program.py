"""Spherical code: 30 points on the unit sphere, maximising the smallest angle between two of them."""
import numpy as np


# EVOLVE-BLOCK-START
def fibonacci_sphere(n):
    """n points spread evenly in height, turning by the golden angle around the z axis."""
    i = np.arange(n) + 0.5
    z = 1 - 2 * i / n
    phi = np.pi * (1 + np.sqrt(5)) * i
    r = np.sqrt(1 - z * z)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)
# EVOLVE-BLOCK-END


def run_spherical_code():
    return fibonacci_sphere(30)
