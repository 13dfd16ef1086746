"""The run's configuration: every section composed into ``HelixConfig``, read from YAML (with
``base:`` inheritance and dotted overrides), validated, and written back resolved.

Each package and room owns the dataclass of its section (tasks.config, rollout.config,
population.config, train.learner.config, train.warm_start.config); this module owns the ``run:``
section, composes the rest, and checks what no one section can: names against the registries and
settings that must agree across sections. How a section is built and its bounds checked:
train.config.schema.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, Optional, Union

import yaml

from population.config import PopulationConfig, SelectionConfig
from population.selection import SELECTION_STRATEGIES
from rollout.config import EvolutionConfig, RolloutConfig
from rollout.engines import ENGINES
from rollout.operators import OPERATORS, uses_policy
from tasks import available_tasks, own_timeout_s, task_form
from tasks.config import TaskConfig
from tasks.paths import ENV, check_paths, use_config_paths
from train.config.schema import ConfigError, build, check_bounds, merge, nearest, parse_override
from train.learner.config import GROUP_RELATIVE, ModelConfig, TrainerConfig
from train.warm_start.config import WarmStartConfig, WarmStartInputs


@dataclass
class RunConfig:
    output_dir: str = "runs"
    name: Optional[str] = None  # default: <task>-<variant>-<timestamp> (train/config/run_name.py)
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
    samples_per_epoch: Annotated[int, ">= 0"] = 2
    # epochs between checkpoints (model, optimizer, RNG, population); 0: never
    checkpoint_every: Annotated[int, ">= 0 (0 disables checkpoints)"] = 1
    # newest checkpoints kept on disk; older ones are deleted
    keep_checkpoints: Annotated[int, ">= 1"] = 2
    # write the model and optimizer files in a background thread while the next epoch runs (the
    # loop waits only for the copy to CPU memory); false: the loop waits for the whole write
    async_checkpoint: bool = True
    # Budgets for fair comparisons (scripts/ablate.py): stop after the epoch that reaches either.
    # children generated (edited and evaluated); 0: no limit
    max_evaluations: Annotated[int, ">= 0 (0: no limit)"] = 0
    time_budget_s: Annotated[float, ">= 0 (0: no limit)"] = 0.0  # wall-clock seconds; 0: no limit
    # stop after the epoch in which a child reaches this reward (up to the task's improvement_tolerance) and its
    # exact check holds (exact, or unchecked for a task that cannot be checked; never within tolerance only):
    # a number, or best_known (the task's); checkpoint, export and resume as for the budgets. null: never
    stop_at_reward: Optional[Union[float, Literal["best_known"]]] = None
    # epochs in a row with no applied edit or no GRPO reward spread before one warning with the likely
    # cause and fix (train/loop/no_learning.py); 0: never warn
    no_learning_epochs: Annotated[int, ">= 0 (0: never warn)"] = 2
    # seconds between handing the C heap's free pages back to the system while the run works (glibc's
    # malloc_trim on a background thread; train/learner/memory.py): the CPU peak stays near what tensors
    # hold (the GRPO step's ~3 GB of heap holes) for a few percent of step time; changes no value. 0: off
    release_memory_every_s: Annotated[float, ">= 0 (0: off)"] = 1.0


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


def validate(cfg: HelixConfig, source: str = "<config>") -> HelixConfig:
    check_bounds(cfg, "", source)
    try:  # task.paths first: task.name is looked up in them (and in HELIX_TASKS's folders)
        cfg.task.paths = [str(p) for p in check_paths(cfg.task.paths)]
        use_config_paths(cfg.task.paths)
        tasks = available_tasks()
    except ValueError as exc:  # a folder that is not one, or a user task shadowing a shipped one
        raise ConfigError(f"{source}: {exc}") from None
    mix = cfg.evolution.operators
    if not (all(w >= 0 for w in mix.values()) and sum(mix.values()) > 0):
        raise ConfigError(f"{source}: evolution.operators = {mix!r} must give every operator a weight >= 0, "
                          "and one a weight > 0")
    if any(w > 0 and name in OPERATORS and not OPERATORS[name].needs_policy for name, w in mix.items()):
        _check_iterate(cfg, source)
    _check_registered(cfg, source, [("selection.strategy", SELECTION_STRATEGIES), ("rollout.engine", ENGINES)])
    if cfg.task.name not in tasks:
        raise ConfigError(f"{source}: task.name = {cfg.task.name!r} is not registered: no task under tasks/ or in task.paths or "
                          f"{ENV}'s folders (your own tasks: docs/adding_a_task.md).{nearest(cfg.task.name, tasks)} "
                          f"Valid: {tasks}")
    for name in cfg.evolution.operators:
        if name not in OPERATORS:
            raise ConfigError(f"{source}: evolution.operators names {name!r}, which is not registered."
                              f"{nearest(name, sorted(OPERATORS))} Valid: {sorted(OPERATORS)}")
    if cfg.rollout.engine == "openai" and cfg.trainer.enabled:
        raise ConfigError(f"{source}: rollout.engine = 'openai' samples from a frozen policy behind an HTTP endpoint; "
                          "set trainer.enabled=false (EvoOnly) or use rollout.engine=vllm / hf to train")
    if cfg.trainer.rollout_is != "none" and cfg.rollout.temperature != 1.0:
        raise ConfigError(f"{source}: trainer.rollout_is = {cfg.trainer.rollout_is!r} needs rollout.temperature = 1.0 "
                          f"(engines return raw logprobs); got {cfg.rollout.temperature}")
    if cfg.trainer.dynamic_sampling.enabled:
        _check_dynamic_sampling(cfg, source)
    if isinstance(cfg.run.stop_at_reward, float) and not math.isfinite(cfg.run.stop_at_reward):
        raise ConfigError(f"{source}: run.stop_at_reward = {cfg.run.stop_at_reward} must be a finite number, best_known "
                          "or null")
    if cfg.selection.strategy == "islands" and cfg.population.size < cfg.selection.n_islands:
        raise ConfigError(f"{source}: population.size = {cfg.population.size} must be >= selection.n_islands = "
                          f"{cfg.selection.n_islands} (every island needs a slot)")
    return cfg


def _check_iterate(cfg: HelixConfig, source: str) -> None:
    """A mix of operators that ask the policy nothing (iterate, the no-LLM baseline) is the whole run: mixed
    with operators the policy answers, its children would join GRPO groups without tokens. That it runs on a
    search-form task is checked before the run starts (``check_form``), since it needs the task's folder."""
    mix = {name: w for name, w in cfg.evolution.operators.items() if w > 0}
    if len(mix) > 1:
        raise ConfigError(f"{source}: evolution.operators = {cfg.evolution.operators!r}: iterate reruns the parent's "
                          "program without the policy, so it is the only operator of a run (configs/ablations/iterate.yaml)")
    if cfg.trainer.enabled:
        raise ConfigError(f"{source}: evolution.operators = {cfg.evolution.operators!r} trains nothing (its children "
                          "come from no completion): set trainer.enabled=false, as configs/ablations/iterate.yaml does")


def check_form(cfg: HelixConfig) -> None:
    """What the task's form (task.yaml ``form``) must agree with, checked before a run loads anything: the
    iterate operator reruns a program on its parent's construction, which only a search-form task has (a
    construct-form program run again builds the same answer again)."""
    if not uses_policy(cfg.evolution.operators) and task_form(cfg.task.name) != "search":
        raise ConfigError(f"evolution.operators = {cfg.evolution.operators!r} (the iterate baseline) reruns each "
                          f"parent's program on the parent's construction, but {cfg.task.name} is a construct-form task "
                          "(its program takes no construction, so a rerun builds the same answer); run it on a "
                          "search-form task (task.yaml form: search, docs/search_form.md)")


def check_learner_names(cfg: HelixConfig, source: str = "<config>") -> None:
    """trainer.adv_estimator and trainer.policy_loss against verl's registries, which only importing verl (and
    torch: seconds) can read. Not part of ``validate``, so loading a config imports no torch: a run's start
    (train.api.start) checks them before the warm start and the first epoch's rollouts."""
    if not cfg.trainer.enabled:
        return
    from train.learner.grpo import known_estimators, known_policy_losses

    _check_registered(cfg, source, [("trainer.adv_estimator", known_estimators()),
                                    ("trainer.policy_loss", known_policy_losses())])


def _check_registered(cfg: HelixConfig, source: str, registries: list) -> None:
    for dotted, registry in registries:
        section, key = dotted.split(".")
        value = getattr(getattr(cfg, section), key)
        if value not in registry:
            raise ConfigError(f"{source}: {dotted} = {value!r} is not registered."
                              f"{nearest(value, sorted(registry))} Valid: {sorted(registry)}")


def _check_dynamic_sampling(cfg: HelixConfig, source: str) -> None:
    """Dynamic sampling drops groups whose own advantages are 0: that needs a trainer, and an estimator
    whose advantage is relative to the group (a batch-whitened one gives a tied group signal)."""
    if not cfg.trainer.enabled:
        raise ConfigError(f"{source}: trainer.dynamic_sampling.enabled needs trainer.enabled (EvoOnly trains on no group)")
    if cfg.trainer.adv_estimator not in GROUP_RELATIVE:
        raise ConfigError(f"{source}: trainer.dynamic_sampling drops groups whose advantages are all 0, which "
                          f"needs a group-relative trainer.adv_estimator ({', '.join(sorted(GROUP_RELATIVE))}); "
                          f"got {cfg.trainer.adv_estimator!r}")


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
    return merge(_read_yaml(path.parent / base, chain + (path.resolve(),)), data, HelixConfig)


def config_source(path: str | Path | None, overrides: list[str] = ()) -> str:
    """How an error names a config: its file and the overrides on it."""
    source = "<defaults>" if path is None else str(path)
    return source + (f" (with overrides {' '.join(overrides)})" if overrides else "")


def load_config(path: str | Path | None, overrides: list[str] = ()) -> HelixConfig:
    """Load a YAML file (and its ``base`` chain), apply dotted overrides, and validate everything. Imports no
    torch: verl's names (trainer.adv_estimator, trainer.policy_loss) are checked by ``check_learner_names``."""
    data: dict = {} if path is None else _read_yaml(Path(path))
    for text in overrides:
        data = merge(data, parse_override(text), HelixConfig)
    source = config_source(path, overrides)
    cfg = validate(build(HelixConfig, data, "", source), source)
    if cfg.task.timeout_s is None:  # the task's own limit, written into the run's config.yaml as resolved
        try:
            cfg.task.timeout_s = own_timeout_s(cfg.task.name, cfg.task.timeout_scale)
        except ValueError as exc:  # a broken task.yaml: one line, as the task check would give it
            raise ConfigError(f"{exc} (details: helix check-task {cfg.task.name} --verbose)") from None
    return cfg


def to_dict(cfg: HelixConfig) -> dict:
    return dataclasses.asdict(cfg)


def dump_config(cfg: HelixConfig, path: str | Path) -> None:
    """Write the fully resolved config; loading it back gives the same config."""
    Path(path).write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))


def warm_start_inputs(cfg: HelixConfig) -> WarmStartInputs:
    """What the warm start reads, taken from the run's sections once: its recipe, the base model, the
    tasks (``warm_start.tasks``, else the run's), and the prompt settings its cache key holds."""
    tasks = tuple(t.strip() for t in cfg.warm_start.tasks.split(",") if t.strip()) or (cfg.task.name,)
    return WarmStartInputs(cfg.warm_start, cfg.model.policy, cfg.model.cache_dir, tasks, dict(cfg.evolution.operators),
                           cfg.rollout.description, cfg.rollout.max_prompt_tokens, cfg.rollout.n_ancestors,
                           cfg.task.timeout_s, cfg.run.release_memory_every_s)
