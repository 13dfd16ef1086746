"""Constructor-based circle packing: 26 circles in the unit disk, maximising the sum of radii."""
import numpy as np


# EVOLVE-BLOCK-START
def construct_packing():
    """Place 26 circles on two rings around the centre of the disk, then size them to fit."""
    n = 26
    centers = np.zeros((n, 2))
    for i in range(8):
        angle = 2 * np.pi * i / 8
        centers[1 + i] = [0.45 * np.cos(angle), 0.45 * np.sin(angle)]
    for i in range(17):
        angle = 2 * np.pi * i / 17
        centers[9 + i] = [0.82 * np.cos(angle), 0.82 * np.sin(angle)]
    radii = compute_max_radii(centers)
    return centers, radii


def compute_max_radii(centers):
    """Largest radii keeping every circle inside the disk (|c| + r <= 1), then shrink overlapping pairs."""
    n = centers.shape[0]
    radii = 1.0 - np.linalg.norm(centers, axis=1)
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
