"""Heilbronn's problem in a triangle: 11 points in the equilateral triangle (0, 0), (1, 0), (1/2, sqrt(3)/2)
whose smallest triangle is as large as possible."""
import numpy as np


# EVOLVE-BLOCK-START
def place_points():
    """11 points evenly spaced on the triangle's inscribed circle: no three of them are collinear."""
    n = 11
    center = np.array([0.5, np.sqrt(3) / 6])
    radius = np.sqrt(3) / 6
    angles = 2 * np.pi * np.arange(n) / n
    return center + radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)
# EVOLVE-BLOCK-END


def run_heilbronn():
    return place_points()
