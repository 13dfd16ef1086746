"""Circles in a rectangle of perimeter 4: circle_packing_rect_21."""
