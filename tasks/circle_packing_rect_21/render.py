"""Draw the packing for reports (scripts/report.py): the program's rectangle [0, w] x [0, h] and
each circle, coloured by radius, so overlaps and wasted space are visible at a glance."""

import numpy as np
from matplotlib import colormaps
from matplotlib.collections import PatchCollection
from matplotlib.colors import Normalize
from matplotlib.patches import Circle, Rectangle


def render(artefact, ax) -> None:
    if not isinstance(artefact, dict):
        raise ValueError('expected a dict with "width", "height", "centers" and "radii", '
                         f"got {type(artefact).__name__}")
    width, height = float(artefact["width"]), float(artefact["height"])
    centers = np.asarray(artefact["centers"], dtype=np.float64)
    radii = np.asarray(artefact["radii"], dtype=np.float64)
    if centers.ndim != 2 or centers.shape[1] != 2 or radii.shape != (len(centers),):
        raise ValueError(f"centers must be (n, 2) and radii (n,), got {centers.shape} and {radii.shape}")
    norm = Normalize(radii.min(), radii.max() if radii.max() > radii.min() else radii.min() + 1e-9)
    circles = PatchCollection([Circle(c, r) for c, r in zip(centers, radii)], cmap="viridis", norm=norm,
                              edgecolor="black", linewidth=0.8, alpha=0.85)
    circles.set_array(radii)
    ax.add_collection(circles)
    ax.add_patch(Rectangle((0, 0), width, height, fill=False, edgecolor="black", linewidth=1.5))
    for i, (c, r) in enumerate(zip(centers, radii)):
        ax.text(c[0], c[1], str(i), ha="center", va="center", fontsize=max(5.0, min(9.0, 90 * r)),
                color=colormaps["viridis"](0.0) if norm(r) > 0.6 else "white")
    ax.figure.colorbar(circles, ax=ax, label="radius", shrink=0.8)
    pad = 0.02 * max(width, height)
    ax.set_xlim(-pad, width + pad)
    ax.set_ylim(-pad, height + pad)
    ax.set_aspect("equal")
    ax.set_xlabel(f"{len(radii)} circles in {width:.4f} x {height:.4f} (perimeter {2 * (width + height):.6f}), "
                  f"sum of radii {radii.sum():.6f}")
