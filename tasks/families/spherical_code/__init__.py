"""Points on the sphere with the largest minimum angle: spherical_code_30."""
