"""Draw the packing for reports (scripts/report.py); the drawing is in tasks/families/circles/render.py."""

from tasks.families.circles.render import render_packing


def render(artefact, ax) -> None:
    render_packing(artefact, ax, "square")
