"""Step functions on equal steps, scored through a correlation of their heights: first_autocorrelation and
erdos_minimum_overlap."""
