"""Points in a triangle whose smallest triangle is as large as possible (Heilbronn's problem): heilbronn_triangle_11."""
