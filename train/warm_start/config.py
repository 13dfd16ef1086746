"""The ``warm_start:`` config section, and the warm start's inputs.

``WarmStartConfig`` is the recipe (a section of the run's config, bounds in its annotations, checked
by train.config.config). ``WarmStartInputs`` is everything the warm start reads, the recipe included:
the run gathers it from its config once (train.config.config.warm_start_inputs), so this room never
walks the run's config object and imports nothing from the run room."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal, Optional


@dataclass
class WarmStartConfig:
    # A short supervised fine-tune of model.policy on synthetic edits of the task's starter program
    # (train/warm_start/build.py), built once and cached; the run's policy AND reference model start from it.
    enabled: bool = False
    tasks: str = ""  # comma-separated task names whose starters make the data; empty: the run's task
    # prompts: the starter and valid mutants of it (each shown with its ancestor)
    parents: Annotated[int, ">= 1"] = 8
    # target edits per prompt, each a valid mutant of that parent
    answers_per_parent: Annotated[int, ">= 1"] = 8
    epochs: Annotated[int, ">= 1"] = 2  # passes over the prompts; one optimizer step per prompt
    # answers of a prompt that go through forward and backward together: their activations are alive at
    # once (8 x 240 tokens held ~6 GB on SmolLM2). Fewer: less memory, the same gradient up to rounding
    answers_per_pass: Annotated[int, ">= 1"] = 2
    # recompute each decoder layer in backward instead of keeping its activations: a pass's ~0.9 GB on
    # SmolLM2 becomes one layer's, for ~6% more time; the weights are bitwise the same (not in the cache key)
    gradient_checkpointing: bool = True
    lr: Annotated[float, "> 0"] = 5.0e-5
    # autocast dtype for the fine-tune, which runs on the CPU (weights stay fp32). auto: bfloat16 where the
    # CPU computes it natively (AVX512-BF16/AMX), else float32: on an AVX2-only CPU bf16 is emulated and a
    # training step is 22x slower than in fp32 (BENCHMARKS.md "CPU dtype")
    dtype: Literal["auto", "bfloat16", "float32"] = "auto"
    seed: int = 0


@dataclass(frozen=True)
class WarmStartInputs:
    """What decides the warm-started model (its cache key), and how its fine-tune runs. The data is scored and
    shown by the run's own evaluator and prompt builder, which the caller lends (train.warm_start.build)."""

    recipe: WarmStartConfig
    base: str  # model.policy: the model fine-tuned
    cache_dir: Optional[str]  # model.cache_dir: where the result is cached
    tasks: tuple[str, ...]  # whose starter programs make the data
    operators: dict[str, float] = field(default_factory=lambda: {"edit": 1.0})  # the run's mix (evolution.operators)
    # the prompt, as the loop builds it (rollout.description, max_prompt_tokens, n_ancestors)
    description: str = "full"
    max_prompt_tokens: int = 4096
    n_ancestors: int = 2
    # the time limit the prompts state (task.timeout_s: None = each task's own); the run's evaluator enforces it
    timeout_s: Optional[float] = None
    # run.release_memory_every_s: the fine-tune hands free heap pages back this often (0: never)
    release_memory_every_s: float = 1.0
