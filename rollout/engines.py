"""Every generation engine, registered by importing this module (``rollout.engine`` picks one).

The interface and registry live in ``rollout.engine_api``; each engine is its own module. The
vllm and openai modules import nothing heavy at module level, so registering them is free on a
machine that has neither vLLM nor a server.
"""

from rollout.engine_api import (  # noqa: F401
                                ENGINES,
                                Completion,
                                Engine,
                                OnBatch,
                                SamplingParams,
                                Weights,
                                build_engine,
                                engine_needs_weights,
                                generate_streaming,
                                parse_stop,
                                preflight_engine,
                                register_engine,
)
from rollout.hf_engine import HFEngine  # noqa: F401
from rollout.openai_engine import OpenAIEngine  # noqa: F401
from rollout.vllm_engine import VLLMEngine  # noqa: F401
