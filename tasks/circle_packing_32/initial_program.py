"""Constructor-based circle packing: 32 circles in the unit square, maximising the sum of radii."""
import numpy as np


# EVOLVE-BLOCK-START
def construct_packing():
    """Place 32 circles on a centre circle and two rings around it, then size them to fit."""
    n = 32
    centers = np.zeros((n, 2))
    centers[0] = [0.5, 0.5]
    for i in range(10):
        angle = 2 * np.pi * i / 10
        centers[1 + i] = [0.5 + 0.28 * np.cos(angle), 0.5 + 0.28 * np.sin(angle)]
    for i in range(21):
        angle = 2 * np.pi * i / 21
        centers[11 + i] = [0.5 + 0.45 * np.cos(angle), 0.5 + 0.45 * np.sin(angle)]
    centers = np.clip(centers, 0.01, 0.99)
    radii = compute_max_radii(centers)
    return centers, radii


def compute_max_radii(centers):
    """Largest radii keeping every circle inside the square, then shrink overlapping pairs."""
    n = centers.shape[0]
    radii = np.min([centers[:, 0], centers[:, 1], 1 - centers[:, 0], 1 - centers[:, 1]], axis=0)
    for i in range(n):
        for j in range(i + 1, n):
            d = np.linalg.norm(centers[i] - centers[j])
            if radii[i] + radii[j] > d:
                scale = d / (radii[i] + radii[j])
                radii[i] *= scale
                radii[j] *= scale
    return radii
# EVOLVE-BLOCK-END


def run_packing():
    centers, radii = construct_packing()
    return centers, radii, float(np.sum(radii))
