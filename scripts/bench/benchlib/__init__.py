"""What the benchmarks in scripts/bench/ share and their tests check by name: FLOP accounting against the measured
matmul peak (flops), each kernel of a step timed alone (kernel_ceiling), how far circle packing's starter goes by
its own numbers (reach), and bench_peers.py's comparison with OpenEvolve and ShinkaEvolve (peers). Imported as
``benchlib``: a benchmark runs as a script, with scripts/bench/ first on sys.path (pyproject.toml's pytest
pythonpath does the same for the tests); a benchmark's own ``python -m benchlib...`` subprocess gets scripts/bench/
on its PYTHONPATH. Nothing in the library rooms imports it."""
