"""Population: the lineage archive, kNN embedding diversity, and selection strategies."""
