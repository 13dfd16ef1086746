"""The run: the epoch loop (HelixRun), evolution, children, metrics, the run directory, checkpoints
and the Ctrl-C guard. Its config lives below it (train/config/), the commands above it
(train/commands/); nothing imports it but the entry point (train/helix.py), the commands and scripts/."""
