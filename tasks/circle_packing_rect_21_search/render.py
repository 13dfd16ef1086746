"""Draw the packing for reports (scripts/report.py): circle_packing_rect_21's drawing (its render.py),
since a search-form packing is the same dict {"width", "height", "centers", "radii"}."""

import importlib.util
from pathlib import Path

_SOURCE = Path(__file__).resolve().parents[1] / "circle_packing_rect_21" / "render.py"
_spec = importlib.util.spec_from_file_location("helix_circle_packing_rect_21_render", _SOURCE)
_drawing = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_drawing)
render = _drawing.render
