"""Draw a circle packing for reports (scripts/report.py): the container (unit square or unit
disk) and each circle, coloured by radius, so overlaps and wasted space are visible at a glance.
Shared by the circle-packing tasks; each task's render.py picks its container.

``render(artefact, ax)`` gets what the program's entry function returned, JSON-decoded: a
(centers, radii[, sum]) sequence or a dict with "centers" and "radii", as the verifier accepts.
"""

import numpy as np
from matplotlib import colormaps
from matplotlib.collections import PatchCollection
from matplotlib.colors import Normalize
from matplotlib.patches import Circle, Rectangle


def _unpack(artefact):
    if isinstance(artefact, dict):
        centers, radii = artefact.get("centers"), artefact.get("radii")
    elif isinstance(artefact, (list, tuple)) and len(artefact) in (2, 3):
        centers, radii = artefact[0], artefact[1]
    else:
        raise ValueError("expected (centers, radii[, sum]) or a dict with 'centers' and 'radii', "
                         f"got {type(artefact).__name__}")
    centers, radii = np.asarray(centers, dtype=np.float64), np.asarray(radii, dtype=np.float64)
    if centers.ndim != 2 or centers.shape[1] != 2 or radii.shape != (len(centers),):
        raise ValueError(f"centers must be (n, 2) and radii (n,), got {centers.shape} and {radii.shape}")
    return centers, radii


def render_packing(artefact, ax, container: str = "square") -> None:
    centers, radii = _unpack(artefact)
    norm = Normalize(radii.min(), radii.max() if radii.max() > radii.min() else radii.min() + 1e-9)
    circles = PatchCollection([Circle(c, r) for c, r in zip(centers, radii)], cmap="viridis", norm=norm,
                              edgecolor="black", linewidth=0.8, alpha=0.85)
    circles.set_array(radii)
    ax.add_collection(circles)
    if container == "disk":
        ax.add_patch(Circle((0, 0), 1, fill=False, edgecolor="black", linewidth=1.5))
    else:
        ax.add_patch(Rectangle((0, 0), 1, 1, fill=False, edgecolor="black", linewidth=1.5))
    for i, (c, r) in enumerate(zip(centers, radii)):
        ax.text(c[0], c[1], str(i), ha="center", va="center", fontsize=max(5.0, min(9.0, 90 * r)),
                color=colormaps["viridis"](0.0) if norm(r) > 0.6 else "white")
    ax.figure.colorbar(circles, ax=ax, label="radius", shrink=0.8)
    low, high = (-1.02, 1.02) if container == "disk" else (-0.02, 1.02)
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_aspect("equal")
    ax.set_xlabel(f"{len(radii)} circles, sum of radii {radii.sum():.6f}")
