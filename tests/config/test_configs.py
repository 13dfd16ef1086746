"""Every shipped config loads and validates; configs inherit their bases; every ablation variant, applied to every
run, is that run's config plus one setting; an explicit time limit wins over the task's own.

Layout: configs/base/ holds the scales a task runs on by name (cpu.yaml; paper_14b.yaml / paper_32b.yaml on
paper.yaml): `--config configs/base/cpu.yaml task.name=T`, with the task's own time limit from its task.yaml.
configs/<name>.yaml are configs that say something of their own on a base (the quickstart), a few lines each.
configs/ablations/<variant>.yaml are overlays, not configs: the setting(s) a variant changes, applied by
scripts/ablate.py to any config as dotted overrides.
"""

import functools
from pathlib import Path

import pytest
import yaml

from tasks import shipped_tasks
from train.commands import ablate
from train.config.config import ConfigError, HelixConfig, load_config, to_dict
from train.config.schema import flatten, leaves

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
ALL = sorted(CONFIGS.rglob("*.yaml"))
RUNNABLE = sorted(CONFIGS.glob("*.yaml"))
BASES = sorted((CONFIGS / "base").glob("*.yaml"))
VARIANTS = sorted((CONFIGS / "ablations").glob("*.yaml"))
SCALES = [CONFIGS / "base" / f for f in ("cpu.yaml", "paper_14b.yaml", "paper_32b.yaml")]  # run with task.name=T
PAPER_TASKS = ("circle_packing_26", "keane_bump_30", "symreg_chemistry")  # the tasks the paper scales were set up for
# What the ablation check runs every variant on: the quickstart, every task at CPU scale, the paper tasks at both sizes.
RUNS = [(p, ()) for p in RUNNABLE] + [(SCALES[0], (f"task.name={t}",)) for t in shipped_tasks()] + [
    (base, (f"task.name={t}",)) for base in SCALES[1:] for t in PAPER_TASKS]


def _ids(paths):
    return [str(p.relative_to(CONFIGS)) for p in paths]


def _run_ids(runs):
    return [" ".join([str(p.relative_to(CONFIGS)), *o]) for p, o in runs]




@functools.cache
def _resolved(path: Path, overrides: tuple[str, ...] = ()) -> dict:
    return flatten(load_config(path, list(overrides)))


def _bases(path: Path) -> list[Path]:
    """The chain of ``base:`` files under ``path``, nearest first."""
    chain = []
    while (base := (yaml.safe_load(path.read_text()) or {}).get("base")) is not None:
        path = (path.parent / base).resolve()
        chain.append(path)
    return chain


def test_there_are_configs_to_check():
    assert len(RUNNABLE) >= 1 and len(BASES) >= 4 and len(VARIANTS) >= 7 and len(RUNS) >= 30


def test_every_yaml_is_a_config_a_base_or_a_variant():
    """No other folders: the old per-task ablation folders (configs/ablations/<task>/) are gone for good."""
    assert set(ALL) == set(RUNNABLE) | set(BASES) | set(VARIANTS), set(ALL) - set(RUNNABLE) - set(BASES) - set(VARIANTS)


@pytest.mark.parametrize("path", RUNNABLE + BASES, ids=_ids(RUNNABLE + BASES))
def test_config_loads_and_validates(path):
    cfg = load_config(path)
    assert cfg.trainer.epochs >= 1
    header = path.read_text().splitlines()[0]
    assert header.startswith("#"), f"{path} must open with a comment saying what it is for"


@pytest.mark.parametrize("path", RUNNABLE, ids=_ids(RUNNABLE))
def test_config_is_a_few_lines_on_a_base(path):
    """A config is `base: base/cpu.yaml` (or base/paper_*.yaml) plus what is its own, and something of its own
    besides the task: a task alone is `--config configs/base/cpu.yaml task.name=T`, its time limit in task.yaml."""
    chain = _bases(path)
    assert chain and chain[0].parent == (CONFIGS / "base").resolve(), (
        f"{path.name}: inherit the shared settings (`base: base/cpu.yaml`; see configs/base/) instead of repeating them")
    own = leaves({k: v for k, v in yaml.safe_load(path.read_text()).items() if k != "base"}, HelixConfig)
    assert set(own) - {"task.name", "task.timeout_s"}, (
        f"{path.name} names only a task (and a time limit): run `--config configs/base/{chain[0].name} task.name=...` "
        "instead, with the limit in the task's task.yaml (cpu_timeout_s / timeout_s)")
    inherited = _resolved(chain[0])
    repeated = [k for k, v in own.items() if not k.startswith("task.") and inherited.get(k) == v
                and path.stem != "quickstart"]  # the quickstart spells out a few defaults on purpose
    assert not repeated, f"{path.name} sets what it gets from {chain[0].name} anyway: {repeated}"


@pytest.mark.parametrize("base", BASES, ids=_ids(BASES))
def test_every_base_is_run_or_has_children(base):
    children = [p.name for p in RUNNABLE + SCALES if base.resolve() in _bases(p)]
    assert base in SCALES or children, f"{base.name} is the base of no config and no scale a task runs on"


def test_paper_scales_differ_only_in_model_size():
    """base/paper_14b.yaml and base/paper_32b.yaml are base/paper.yaml plus the model: they differ in model.policy
    and rollout.vllm.tp only, whichever task they run."""
    for task in PAPER_TASKS:
        small, large = (_resolved(base, (f"task.name={task}",)) for base in SCALES[1:])
        diff = {k for k, v in small.items() if large[k] != v}
        assert diff == {"model.policy", "rollout.vllm.tp"}, diff


def test_an_explicit_limit_wins_over_the_tasks_own():
    assert _resolved(SCALES[0], ("task.name=eggholder", "task.timeout_s=7"))["task.timeout_s"] == 7.0
    assert _resolved(SCALES[0], ("task.name=eggholder", "task.timeout_scale=paper"))["task.timeout_s"] == 120.0
    assert _resolved(SCALES[1], ("task.name=eggholder", "task.timeout_scale=cpu"))["task.timeout_s"] == 30.0


def test_quickstart_is_pinned():
    """The quickstart is checked seed-for-seed: a change to base/cpu.yaml must not move it (override it in
    configs/quickstart.yaml instead)."""
    pinned = {
        "task.name": "circle_packing_26", "task.timeout_s": 20.0, "model.policy": "smollm2-135m-instruct",
        "model.dtype": "float32", "model.gradient_checkpointing": True,
        "rollout.vllm.kv_cache_gb": 0.3, "warm_start.enabled": True, "warm_start.answers_per_parent": 4,
        "rollout.engine": "vllm", "rollout.vllm.dtype": "auto",
        "rollout.group_size": 4, "rollout.temperature": 0.7, "rollout.top_p": 0.95, "rollout.max_new_tokens": 256,
        "rollout.stop": "</answer>", "rollout.description": "brief", "rollout.max_prompt_tokens": 1280,
        "rollout.n_ancestors": 2, "trainer.epochs": 4, "trainer.prompts_per_epoch": 2, "trainer.lr": 2e-5, "trainer.lora.enabled": True,
        "trainer.kl_coef": 1e-3, "trainer.kl_type": "low_var_kl", "trainer.adv_estimator": "grpo",
        "trainer.policy_loss": "vanilla", "trainer.loss_agg_mode": "seq-mean-token-mean", "trainer.micro_batch_size": 4,
        "population.size": 8, "population.knn_k": 5, "population.embedder": "all-minilm-l6-v2",
        "selection.strategy": "nsga2", "run.output_dir": "runs", "run.seed": 0, "run.export": True,
        "run.async_checkpoint": False,
    }
    resolved = _resolved(CONFIGS / "quickstart.yaml")
    assert {k: resolved[k] for k in pinned} == pinned


@pytest.mark.parametrize("path", VARIANTS, ids=_ids(VARIANTS))
def test_variant_is_an_overlay_of_its_settings(path):
    """A variant holds only the setting(s) it changes: no base, and every key is a real setting."""
    assert path.read_text().startswith("#"), f"{path} must open with a comment saying what the variant is"
    settings = ablate.variant_settings(path.stem)
    assert len(settings) <= 1 or _parent_variant(path.stem), settings  # best_of_n: evo_only plus one
    load_config(None, ablate.variant_overrides(path.stem))  # every key exists and every value has the right type


def _parent_variant(variant: str) -> str | None:
    """The variant this one is one setting on top of (best_of_n: evo_only); None: the config itself."""
    mine = ablate.variant_settings(variant).items()
    parents = [v.stem for v in VARIANTS if len(ablate.variant_settings(v.stem)) == len(mine) - 1 >= 1
               and ablate.variant_settings(v.stem).items() <= mine]
    assert len(mine) <= 1 or parents, f"{variant} changes {len(mine)} settings and is no other variant plus one"
    return parents[0] if parents else None


@pytest.mark.parametrize("variant", [p.stem for p in VARIANTS])
@pytest.mark.parametrize("config, task", RUNS, ids=_run_ids(RUNS))
def test_variant_changes_exactly_one_setting_of_every_config(config, task, variant):
    """Each variant, applied to each run's config as scripts/ablate.py applies it, differs from that config
    (best_of_n: from the config's evo_only) in exactly one resolved setting; helix in none. Where the config already
    has the variant's value the variant would repeat helix: ablate.py skips it there, and so does this test."""
    parent = _parent_variant(variant)
    reference = _resolved(config, task + (tuple(ablate.variant_overrides(parent)) if parent else ()))
    resolved = _resolved(config, task + tuple(ablate.variant_overrides(variant)))
    diff = {k: (reference[k], v) for k, v in resolved.items() if reference[k] != v}
    if variant != "helix" and not diff:
        pytest.skip(f"{variant} leaves {config.name} unchanged (it already has {ablate.variant_settings(variant)})")
    assert len(diff) == (0 if variant == "helix" else 1), f"{variant} on {config.name} changes {diff}"
    assert set(diff) <= set(ablate.variant_settings(variant)), f"{variant} on {config.name} changes {diff}"


def test_ablation_modes_mean_what_they_say():
    task = CONFIGS / "base" / "cpu.yaml"
    by_name = {p.stem: load_config(task, ["task.name=circle_packing_26", *ablate.variant_overrides(p.stem)]) for p in VARIANTS}
    assert by_name["evo_only"].trainer.enabled is False and by_name["evo_only"].population.enabled is True
    assert by_name["train_only"].trainer.enabled is True and by_name["train_only"].population.enabled is False
    assert by_name["best_of_n"].trainer.enabled is False and by_name["best_of_n"].population.enabled is False
    assert {by_name[s].selection.strategy for s in ("top_score", "top_div", "random")} == {"top_score", "top_div", "random"}
    assert to_dict(by_name["helix"]) == to_dict(load_config(task, ["task.name=circle_packing_26"]))


def test_base_chain_errors_are_clear(tmp_path):
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_config(tmp_path / "a.yaml")
    (tmp_path / "c.yaml").write_text("base: missing.yaml\n")
    with pytest.raises(ConfigError, match="missing.yaml.*the base of"):
        load_config(tmp_path / "c.yaml")
    (tmp_path / "d.yaml").write_text("base: e.yaml\ntrainer: {lr: 2.0e-6}\n")
    (tmp_path / "e.yaml").write_text("trainer: {lr: 1.0e-6, epochs: 3}\n")
    cfg = load_config(tmp_path / "d.yaml")
    assert cfg.trainer.lr == 2e-6 and cfg.trainer.epochs == 3  # the child's value wins, the rest is inherited
