"""Typed run configuration: one dataclass per section, loaded from YAML, strictly validated.

Why strict: a typo such as ``trainer.kl_coeff`` silently falling back to a default wastes a
GPU-day. Every unknown key, wrong type and out-of-range value fails at start-up with the
key, the file it came from, and the nearest valid key.

Each package owns the dataclass of its section (tasks.config, rollout.config, population.config);
this module owns train's own sections (model, trainer, run, warm_start), composes them into
HelixConfig, reads YAML (with ``base:`` inheritance) and validates: types from the annotations,
ranges from each field's ``rule`` metadata, names against the registries.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

import yaml

from population.config import PopulationConfig, SelectionConfig
from population.selection import SELECTION_STRATEGIES
from rollout.config import EvolutionConfig, RolloutConfig
from rollout.engines import ENGINES
from rollout.operators import OPERATORS
from tasks import available_tasks
from tasks.config import TaskConfig


class ConfigError(ValueError):
    """A config problem the user must fix; the message says where and how."""


def _rule(default, ok, text: str):
    """A field with its range rule beside it (checked by ``validate``)."""
    return field(default=default, metadata={"rule": (ok, text)})


@dataclass
class ModelConfig:
    # "smollm2-135m-instruct" (embedded, converted once and cached), "tiny-random" (tests),
    # or a local Hugging Face model directory.
    policy: str = "smollm2-135m-instruct"
    dtype: Literal["float32", "bfloat16"] = "float32"
    cache_dir: Optional[str] = None  # where converted models live; default ~/.cache/helix
    gradient_checkpointing: bool = False


@dataclass
class TrainerConfig:
    enabled: bool = True  # False: EvoOnly (frozen policy, no optimizer, no reference model)
    epochs: int = _rule(80, lambda v: v >= 1, "must be >= 1")
    prompts_per_epoch: int = _rule(8, lambda v: v >= 1, "must be >= 1")  # B: parents sampled per epoch
    lr: float = _rule(1e-6, lambda v: v >= 0, "must be >= 0")
    weight_decay: float = _rule(0.0, lambda v: v >= 0, "must be >= 0")
    grad_clip: float = _rule(1.0, lambda v: v > 0, "must be > 0")
    adv_estimator: str = "grpo"  # any name in verl's advantage-estimator registry
    norm_adv_by_std: bool = True
    policy_loss: str = "vanilla"  # any name in verl's policy-loss registry
    clip_ratio_low: float = _rule(0.2, lambda v: 0 <= v < 1, "must be in [0, 1)")
    clip_ratio_high: float = _rule(0.2, lambda v: v >= 0, "must be >= 0")
    # eq. 4 averages tokens within each answer, then answers over the group: verl's seq-mean-token-mean
    loss_agg_mode: Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = \
        "seq-mean-token-mean"
    kl_coef: float = _rule(1e-3, lambda v: v >= 0, "must be >= 0")  # beta in eq. 4; 0 drops the reference model
    kl_type: Literal["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full"] = "low_var_kl"
    entropy_coeff: float = _rule(0.0, lambda v: v >= 0, "must be >= 0")
    # sequences per forward/backward; gradients accumulate
    micro_batch_size: int = _rule(4, lambda v: v >= 1, "must be >= 1")
    # Optimizer steps per epoch: the rollouts are cut into ppo_mini_batches parts (whole groups),
    # passed over ppo_epochs times. 1 x 1 (default): one step, pi_old = pi, so the clip never binds;
    # more: pi_old is the sampling policy (one extra forward pass) and eq. 4's clip does its job.
    ppo_mini_batches: int = _rule(1, lambda v: v >= 1, "must be >= 1")
    ppo_epochs: int = _rule(1, lambda v: v >= 1, "must be >= 1")
    mask_truncated: bool = False  # drop completions cut at max_new_tokens from the loss
    # auto: none for one process, ddp under torchrun. fsdp2 shards parameters, gradients and
    # optimizer state per decoder layer (what 14B/32B need); deepspeed runs DeepSpeed ZeRO
    # (zero_stage); see README "Training at scale".
    strategy: Literal["auto", "none", "ddp", "fsdp2", "deepspeed"] = "auto"
    bf16: bool = False  # fsdp2/deepspeed: bf16 compute with fp32 master weights
    offload_params: bool = False  # fsdp2: params, grads and optimizer state on the CPU; deepspeed: ZeRO-3 offload_param
    offload_optimizer: bool = False  # deepspeed: ZeRO offload_optimizer; fsdp2: same as offload_params
    # deepspeed only: 1 optimizer state, 2 + gradients, 3 + parameters sharded
    zero_stage: int = _rule(3, lambda v: v in (1, 2, 3), "must be 1, 2 or 3")
    # >0: micro-batches by padded token count instead of micro_batch_size
    max_tokens_per_micro_batch: int = _rule(0, lambda v: v >= 0, "must be >= 0 (0: micro_batch_size sequences)")
    # Compute a group's prompt once for all its responses in a micro-batch (4D mask; exact, not an
    # approximation). Falls back to one row per sample if the attention implementation takes no
    # custom 4D mask (flash_attention_*, flex); only sdpa and eager do.
    shared_prefix: bool = True
    # With an engine that returns logprobs (vllm): none = only log the engine/trainer mismatch
    # (rollout_logprob_diff); token / sequence = verl's truncated importance sampling (TIS) weights
    # pi_trainer / pi_engine, capped at rollout_is_threshold. Needs rollout.temperature 1.0.
    rollout_is: Literal["none", "token", "sequence"] = "none"
    rollout_is_threshold: float = _rule(2.0, lambda v: v >= 1, "must be >= 1 (the cap on pi_trainer / pi_engine)")
    # linear warmup over this many optimizer steps, then constant (paper: constant)
    lr_warmup_steps: int = _rule(0, lambda v: v >= 0, "must be >= 0")


@dataclass
class RunConfig:
    output_dir: str = "runs"
    name: Optional[str] = None  # default: <task>-<variant>-<timestamp> (train/run_name.py)
    seed: int = 0
    export: bool = True  # write an HF model directory at the end
    # offline: wandb files under RUN_DIR/wandb (`wandb sync` them later); nothing leaves the machine
    # unless this says online. metrics.jsonl is written either way.
    wandb: Literal["disabled", "offline", "online"] = "offline"
    progress: bool = True
    # file: library chatter (vLLM's INFO/WARNING lines and load bars, wandb's banners) goes to
    # RUN_DIR/library.log and transformers' bars are off, so the terminal shows the progress bar,
    # the epoch table and HELIX's own lines. console: everything as the libraries print it.
    library_logs: Literal["file", "console"] = "file"
    # completions written to samples.jsonl for inspection
    samples_per_epoch: int = _rule(2, lambda v: v >= 0, "must be >= 0")
    # epochs between checkpoints (model, optimizer, RNG, population); 0: never
    checkpoint_every: int = _rule(1, lambda v: v >= 0, "must be >= 0 (0 disables checkpoints)")
    # newest checkpoints kept on disk; older ones are deleted
    keep_checkpoints: int = _rule(2, lambda v: v >= 1, "must be >= 1")
    # write the model and optimizer files in a background thread while the next epoch runs (the
    # loop waits only for the copy to CPU memory); false: the loop waits for the whole write
    async_checkpoint: bool = True
    # Budgets for fair comparisons (scripts/ablate.py): stop after the epoch that reaches either.
    # children generated (edited and evaluated); 0: no limit
    max_evaluations: int = _rule(0, lambda v: v >= 0, "must be >= 0 (0: no limit)")
    time_budget_s: float = _rule(0.0, lambda v: v >= 0, "must be >= 0 (0: no limit)")  # wall-clock seconds; 0: no limit
    # epochs in a row with no applied edit or no GRPO reward spread before one warning with the likely
    # cause and fix (train/no_learning.py); 0: never warn
    no_learning_epochs: int = _rule(2, lambda v: v >= 0, "must be >= 0 (0: never warn)")


@dataclass
class WarmStartConfig:
    # A short supervised fine-tune of model.policy on synthetic edits of the task's starter program
    # (train/warm_start.py), built once and cached; the run's policy AND reference model start from it.
    enabled: bool = False
    tasks: str = ""  # comma-separated task names whose starters make the data; empty: the run's task
    # prompts: the starter and valid mutants of it (each shown with its ancestor)
    parents: int = _rule(8, lambda v: v >= 1, "must be >= 1")
    # target edits per prompt, each a valid mutant of that parent
    answers_per_parent: int = _rule(8, lambda v: v >= 1, "must be >= 1")
    epochs: int = _rule(2, lambda v: v >= 1, "must be >= 1")  # passes over the prompts; one optimizer step per prompt
    lr: float = _rule(5.0e-5, lambda v: v > 0, "must be > 0")
    # autocast dtype for the fine-tune, which runs on the CPU (weights stay fp32). auto: bfloat16 where the
    # CPU computes it natively (AVX512-BF16/AMX), else float32: on an AVX2-only CPU bf16 is emulated and a
    # training step is 22x slower than in fp32 (BENCHMARKS.md "CPU dtype")
    dtype: Literal["auto", "bfloat16", "float32"] = "auto"
    seed: int = 0


@dataclass
class HelixConfig:
    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    population: PopulationConfig = field(default_factory=PopulationConfig)
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    run: RunConfig = field(default_factory=RunConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    evolution: EvolutionConfig = field(default_factory=EvolutionConfig)


_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _nearest(name: str, options: list[str]) -> str:
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)  # no close match: no unrelated suggestion
    return f" Did you mean '{close[0]}'?" if close else ""


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Check ``value`` against the annotation ``tp``; ints are accepted where floats are."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], where)
    if origin is dict:
        key_tp, value_tp = typing.get_args(tp)
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__} {value!r}")
        return {_coerce(k, key_tp, f"{where} (a key)"): _coerce(v, value_tp, f"{where}.{k}") for k, v in value.items()}
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ConfigError(f"{where}: {value!r} is not one of {list(allowed)}.{_nearest(str(value), [str(a) for a in allowed])}")
        return value
    if tp is float:
        # PyYAML (YAML 1.1) reads "1e-6" as a string; a number is what the user meant.
        if isinstance(value, str) and _NUMBER.match(value.strip()):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {type(value).__name__} {value!r}")
        if value != value:
            raise ConfigError(f"{where}: NaN is not allowed")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {type(value).__name__} {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {type(value).__name__} {value!r}")
        return value
    raise TypeError(f"unsupported config annotation {tp!r} at {where}")


def _build(cls: type, data: Any, prefix: str, source: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: '{prefix or 'top level'}' must be a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if key not in names:
            valid = ", ".join(names)
            raise ConfigError(f"{source}: unknown key '{dotted}'.{_nearest(str(key), names)} Valid keys here: {valid}")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            kwargs[key] = _build(tp, value, dotted, source)
        else:
            kwargs[key] = _coerce(value, tp, f"{source}: {dotted}")
    return cls(**kwargs)


def _merge(base: dict, override: dict, depth: int = 0) -> dict:
    """Sections merge key by key; a setting's value replaces the base's whole, a mapping too
    (``evolution.operators``: the mix given is the mix run)."""
    out = dict(base)
    for key, value in override.items():
        if depth == 0 and isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value, 1)
        else:
            out[key] = value
    return out


def parse_override(text: str) -> dict:
    """``trainer.lr=2e-6`` -> {"trainer": {"lr": 2e-6}}; the value is parsed as YAML."""
    if "=" not in text:
        raise ConfigError(f"override '{text}' must look like section.key=value")
    key, raw = text.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ConfigError(f"override '{text}': empty key segment")
    value = yaml.safe_load(raw) if raw.strip() else ""
    out: dict = {}
    node = out
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def _check_rules(section: Any, prefix: str, source: str) -> None:
    """Every field's ``rule`` (its metadata, beside the field in the section's own module)."""
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            _check_rules(value, f"{prefix}{f.name}.", source)
        elif "rule" in f.metadata:
            ok, rule = f.metadata["rule"]
            if not ok(value):
                raise ConfigError(f"{source}: {prefix}{f.name} = {value!r} {rule}")


def validate(cfg: HelixConfig, source: str = "<config>") -> HelixConfig:
    _check_rules(cfg, "", source)
    registries = [("selection.strategy", SELECTION_STRATEGIES), ("rollout.engine", ENGINES), ("task.name", available_tasks())]
    if cfg.trainer.enabled:  # verl's registries, so a typo fails now and not after the first epoch's rollouts
        from train.grpo import known_estimators, known_policy_losses  # deferred: imports verl, seconds


        registries += [("trainer.adv_estimator", known_estimators()), ("trainer.policy_loss", known_policy_losses())]
    for dotted, registry in registries:
        section, key = dotted.split(".")
        value = getattr(getattr(cfg, section), key)
        if value not in registry:
            raise ConfigError(f"{source}: {dotted} = {value!r} is not registered."
                              f"{_nearest(value, sorted(registry))} Valid: {sorted(registry)}")
    for name in cfg.evolution.operators:
        if name not in OPERATORS:
            raise ConfigError(f"{source}: evolution.operators names {name!r}, which is not registered."
                              f"{_nearest(name, sorted(OPERATORS))} Valid: {sorted(OPERATORS)}")
    if cfg.rollout.engine == "openai" and cfg.trainer.enabled:
        raise ConfigError(f"{source}: rollout.engine = 'openai' samples from a frozen policy behind an HTTP endpoint; "
                          "set trainer.enabled=false (EvoOnly) or use rollout.engine=vllm / hf to train")
    if cfg.trainer.rollout_is != "none" and cfg.rollout.temperature != 1.0:
        raise ConfigError(f"{source}: trainer.rollout_is = {cfg.trainer.rollout_is!r} needs rollout.temperature = 1.0 "
                          f"(engines return raw logprobs); got {cfg.rollout.temperature}")
    if cfg.selection.strategy == "islands" and cfg.population.size < cfg.selection.n_islands:
        raise ConfigError(f"{source}: population.size = {cfg.population.size} must be >= selection.n_islands = "
                          f"{cfg.selection.n_islands} (every island needs a slot)")
    return cfg


def _read_yaml(path: Path, chain: tuple[Path, ...] = ()) -> dict:
    """A config file, with ``base: other.yaml`` (relative to the file) merged underneath it, so an
    ablation is its base config plus the one setting it changes."""
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}" + (f" (the base of {chain[-1]})" if chain else ""))
    if path.resolve() in chain:
        raise ConfigError(f"{path}: 'base' files form a cycle: {' -> '.join(str(c) for c in chain + (path,))}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(data).__name__}")
    base = data.pop("base", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ConfigError(f"{path}: 'base' must be a file name, got {base!r}")
    return _merge(_read_yaml(path.parent / base, chain + (path.resolve(),)), data)


def load_config(path: str | Path | None, overrides: list[str] = ()) -> HelixConfig:
    """Load a YAML file (and its ``base`` chain), apply dotted overrides, and validate everything."""
    data: dict = {}
    source = "<defaults>"
    if path is not None:
        path = Path(path)
        source = str(path)
        data = _read_yaml(path)
    for text in overrides:
        data = _merge(data, parse_override(text))
    if overrides:
        source += f" (with overrides {' '.join(overrides)})"
    cfg = _build(HelixConfig, data, "", source)
    return validate(cfg, source)


def to_dict(cfg: HelixConfig) -> dict:
    return dataclasses.asdict(cfg)


def dump_config(cfg: HelixConfig, path: str | Path) -> None:
    """Write the fully resolved config; loading it back gives the same config."""
    Path(path).write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
