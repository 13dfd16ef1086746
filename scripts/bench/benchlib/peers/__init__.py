"""HELIX side by side with its peers (OpenEvolve, ShinkaEvolve) on one model and one problem:
scripts/bench/bench_peers.py. Each module does one job: installing a peer into a venv of its own,
serving the model, scoring a peer's program with HELIX's sandbox, driving one system, the
no-LLM optimiser, and the results table."""
