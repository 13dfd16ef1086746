"""Draw the packing for reports (scripts/report.py); the drawing is in tasks/circles_render.py."""

from tasks.circles_render import render_packing


def render(artefact, ax) -> None:
    render_packing(artefact, ax, "disk")
