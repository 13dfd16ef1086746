"""The run: config composition, the epoch loop (HelixRun), evolution, children, metrics, the run
directory, checkpoints and `helix export`. Nothing imports it but the entry points (train/helix.py,
``python -m train.warm_start``, scripts/)."""
