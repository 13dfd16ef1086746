"""Warm start: a short supervised fine-tune that teaches a small policy to answer in SEARCH/REPLACE
edits that apply, keep the program running, and change something (and, when the run's operator mix
asks for them, in rewrite and crossover's whole-program format).

Why: the embedded 135M model, prompted cold, writes no edit that applies, so every reward ties and
GRPO has nothing to learn from. The targets are made from the tasks' own starter programs (random
numeric and line mutations, and the kinds a task adds in its task.yaml's ``warm_start_mutations``,
kept only when the sandbox says the child is valid and it is
not canonically its parent again), written as answers
by ``rollout.edits.make_diff`` and shown under the very prompts the loop builds (parent, reward,
feedback, and an ancestor). Nothing comes from outside the repository.

The result is a derived model directory, built once and cached like the GGUF conversion, keyed by
everything that decides it (base model, tasks and their starters, prompt settings, recipe):

    python -m train.warm_start --config configs/quickstart.yaml            # build (or find) it; prints a summary
    python -m train.warm_start --config configs/quickstart.yaml --rebuild  # build it again

The warm-started model is also the run's reference model for the KL: the GRPO update is measured
against the policy that starts the run. Everything here reads ``WarmStartInputs`` (train.warm_start.config),
which the run gathers from its config once. The data is made here, in the caller's process, with the run's
own evaluator and prompt builder (``tools_for``: the run's start hands them over, train.api.start); the
fine-tune is the learner's supervised step (train.learner.supervised), run in a child process
(train.warm_start.isolated) so that what it leaves in memory leaves with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, ContextManager

import numpy as np

from train.warm_start.config import WarmStartInputs

RECIPE_VERSION = 2  # bump when the data or training changes, so cached models are rebuilt


@dataclass(frozen=True)
class Program:
    """What PromptBuilder needs to show a program (population.archive.Solution has the same fields)."""

    code: str
    reward: float
    valid: bool
    feedback: str


@dataclass(frozen=True)
class Example:
    task: str
    parent: int  # numbered across the tasks: examples of one parent share one prompt
    prompt_ids: list[int]
    answer: str
    answer_ids: list[int]


# The run's evaluator and prompt builder for a task (train.loop.task_tools.TaskTools: ``.evaluator``,
# ``.builder``), lent for the time of a ``with``: the run's own for its task, made and closed for another.
ToolsFor = Callable[[str], ContextManager]


def policy_source(inputs: WarmStartInputs, tools_for: ToolsFor) -> str:
    """``model.policy``, or the warm-started directory built from it when ``warm_start.enabled``."""
    if not inputs.recipe.enabled:
        return inputs.base
    return str(ensure_warm_start(inputs, tools_for))


def built_policy_source(inputs: WarmStartInputs) -> str:
    """What ``policy_source`` returned for a run that has happened: ``model.policy``, or its warm-started directory,
    which must be in the cache already (an export merges LoRA adapters into it and never builds one)."""
    if not inputs.recipe.enabled:
        return inputs.base
    out = warm_start_dir(inputs)
    if not (out / "config.json").is_file():
        raise FileNotFoundError(f"the run's warm-started policy {out} is not in the cache (another machine, or a "
                                "cleared cache): build it with `python train/helix.py warm-start --config "
                                "RUN_DIR/config.yaml`, then export again")
    return str(out)


TRAINABLE = ("edit", "rewrite", "crossover")  # operators whose answers the warm start can write


def _operators(inputs: WarmStartInputs) -> list[str]:
    """The run's operators the warm start teaches, in the mix's order (best_shot answers are
    left to the policy: a starter's entry function is often a thin wrapper, see README)."""
    return [name for name, w in inputs.operators.items() if w > 0 and name in TRAINABLE] or ["edit"]


def operator_plan(mix: dict[str, float], n: int) -> list[str]:
    """Which operator each of ``n`` parent prompts teaches: shares as close to the mix's weights as
    whole prompts allow (largest remainder), at least one each, and never crossover for prompt 0
    (the starter: there is no second lineage yet; make_examples teaches an edit where crossover
    has no usable mate, as the loop does). Deterministic, so the data needs no random draw."""
    names = [k for k in mix if mix[k] > 0]
    total = sum(mix[k] for k in names)
    exact = {k: n * mix[k] / total for k in names}
    counts = {k: max(1, int(exact[k])) for k in names}
    while sum(counts.values()) < n:  # the most under-served operator gets the next prompt
        counts[max(names, key=lambda k: (exact[k] - counts[k], -names.index(k)))] += 1
    while sum(counts.values()) > n:  # more operators than prompts: the most over-served gives one back
        counts[max(names, key=lambda k: (counts[k] - exact[k], -names.index(k)))] -= 1
    plan = [k for k in names if k != "crossover" for _ in range(counts[k])]
    plan[1:1] = ["crossover"] * counts.get("crossover", 0)
    return plan[:n]


def cpu_has_native_bf16() -> bool:
    """oneDNN's own check (AVX512-BF16 or AMX); without it torch emulates bf16 matmuls far slower than fp32."""
    import torch

    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def autocast_dtype(setting: str) -> str:
    """warm_start.dtype resolved on this machine: the fine-tune runs on the CPU."""
    if setting == "auto":
        return "bfloat16" if cpu_has_native_bf16() else "float32"
    return setting


def cache_key(inputs: WarmStartInputs) -> str:
    """Hash of everything that decides the warm-started weights."""
    from tasks import load_task

    recipe = asdict(inputs.recipe) | {"dtype": autocast_dtype(inputs.recipe.dtype)}  # the weights depend on the resolved one
    del recipe["gradient_checkpointing"]  # it changes no weight (bitwise), only the memory the fine-tune takes
    # The tasks as resolved, not as written: warm_start.tasks naming one task is that task's own warm start
    # (keyed by its starter below), whichever run asks for it; "a, b" and "a,b" are one recipe.
    recipe["tasks"] = "" if len(inputs.tasks) == 1 else ",".join(inputs.tasks)
    parts = {"version": RECIPE_VERSION, "base": inputs.base, "recipe": recipe,
             "prompt": [inputs.max_prompt_tokens, inputs.n_ancestors, inputs.timeout_s]}
    if _operators(inputs) != ["edit"]:  # the edit-only default keeps the keys (and caches) it always had
        parts["operators"] = _operators(inputs)
    for name in inputs.tasks:
        task = load_task(name)
        parts[name] = [task.initial_program, task.prompt_description(inputs.description), task.prompt_template or ""]
        if task.warm_start_mutations:  # tasks without extra kinds keep the keys (and caches) they always had
            parts[name].append(list(task.warm_start_mutations))
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def warm_start_dir(inputs: WarmStartInputs) -> Path:
    from train.learner.models import cache_root

    base = Path(inputs.base).name if "/" in inputs.base else inputs.base
    return cache_root(inputs.cache_dir) / "models" / f"{base}-warm-{cache_key(inputs)}"


def ensure_warm_start(inputs: WarmStartInputs, tools_for: ToolsFor, rebuild: bool = False, progress: bool = True) -> Path:
    """The cached warm-started model directory, built first if missing (one builder at a time: another
    process that wants the same one waits on a file lock and then finds it)."""
    out = warm_start_dir(inputs)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if rebuild and out.exists():
            shutil.rmtree(out)
        if not (out / "config.json").is_file():
            build(inputs, tools_for, out, progress)
    return out


def build(inputs: WarmStartInputs, tools_for: ToolsFor, out: Path, progress: bool = True) -> Path:
    """Make the data here (the tasks' mutants scored and shown with the run's tools), then fine-tune in a
    child process, which writes ``out`` atomically with ``warm_start.json`` and ``warm_start_data.jsonl``."""
    from train.learner.models import TINY_RANDOM, resolve_policy_path
    from train.warm_start.eta import announce
    from train.warm_start.isolated import build_in_child

    start = time.perf_counter()
    print(f"[helix] warm start: building {out} "
          f"({announce(inputs.recipe, list(inputs.tasks), autocast_dtype(inputs.recipe.dtype))})", flush=True)
    if inputs.base != TINY_RANDOM:
        resolve_policy_path(inputs.base, inputs.cache_dir)  # a first GGUF conversion says so here
    examples, stats = make_examples(inputs, tools_for, np.random.default_rng(inputs.recipe.seed))
    if not examples:
        raise RuntimeError("warm start: no valid mutation of the starter program(s) was found; nothing to train on")
    stats["data_s"] = round(time.perf_counter() - start, 1)
    return build_in_child(inputs, examples, stats, out, progress)  # its process's leftovers leave with it


def _valid_children(evaluator, parent: str, rng: np.random.Generator, want: int, tries: int, seen: set[str],
                    extra: tuple[str, ...] = ()):
    """Up to ``want`` distinct valid mutants of ``parent`` (from ``tries`` draws) with their results. A
    mutant canonically equal to its parent is no target: the loop scores such a child 0 as "unchanged"
    (train.loop.children), and a policy taught to write it learns to change nothing."""
    from population.canonical import canonicalize
    from train.warm_start.data import mutate

    draws, same = [], canonicalize(parent)
    for _ in range(tries):
        m = mutate(parent, rng, extra=extra)
        if m is not None and m.code not in seen and canonicalize(m.code) != same:
            seen.add(m.code)
            draws.append(m)
    results = evaluator.evaluate_many([m.code for m in draws])
    kept = [(m, r) for m, r in zip(draws, results) if r.valid and r.reward > 0]
    return kept[:want], len(draws), len(kept)


@contextlib.contextmanager
def _short_search_budget(evaluator):
    """A search-form program spends the budget it is told: a mutant here needs only to run and come back valid
    (its first call, from None), so while the data is made it gets the task check's short budget, not a whole
    search; the run's evaluator gets its own budget back after."""
    if getattr(evaluator, "form", "construct") != "search":  # a stand-in evaluator (tests) has no form
        yield
        return
    from rewards.search_channel import CHECK_BUDGET_S

    saved = evaluator.budget_s
    evaluator.budget_s = min(CHECK_BUDGET_S, saved)
    try:
        yield
    finally:
        evaluator.budget_s = saved


def make_examples(inputs: WarmStartInputs, tools_for: ToolsFor, rng: np.random.Generator,
                  say=print) -> tuple[list[Example], dict]:
    """Every task's examples in turn, each scored by the run's evaluator for that task and shown by its
    prompt builder (``tools_for``), so the warm start's prompts are the loop's."""
    from tasks import load_task

    examples, stats, next_parent = [], {"drawn": 0, "valid": 0}, 0
    for name in inputs.tasks:
        task = load_task(name)
        with tools_for(name) as tools, _short_search_budget(tools.evaluator):
            made, n_parents = _task_examples(name, task, inputs, tools.evaluator, tools.builder,
                                             tools.builder.tokenizer, rng, stats, next_parent)
        examples += made
        next_parent += n_parents
        say(f"[helix] warm start: {name}: {n_parents} parents, "
            f"{sum(e.task == name for e in examples)} answers")
    return examples, stats


def _task_examples(name: str, task, inputs: WarmStartInputs, evaluator, builder, tokenizer, rng: np.random.Generator,
                   stats: dict, first: int) -> tuple[list[Example], int]:
    """One task's parents (the starter and valid mutants of it, numbered from ``first``) and, per parent,
    valid mutants as target answers in its planned operator's format; also how many parents there were.
    ``stats`` counts the mutants drawn and kept and the prompts per operator."""
    from rollout.operators import make_operator
    from train.warm_start.data import answer_for

    ws = inputs.recipe
    seed_result = evaluator.evaluate(task.initial_program)
    root = Program(task.initial_program, seed_result.reward, seed_result.valid, seed_result.feedback)
    seen = {root.code}
    extra = task.warm_start_mutations
    kids, drawn, valid = _valid_children(evaluator, root.code, rng, ws.parents - 1, 4 * ws.parents, seen, extra)
    stats["drawn"] += drawn
    stats["valid"] += valid
    parents = [(root, [])] + [(Program(m.code, r.reward, r.valid, r.feedback), [root]) for m, r in kids]
    mix = {k: inputs.operators[k] for k in _operators(inputs)} if _operators(inputs) != ["edit"] else {"edit": 1.0}
    examples = []
    for i, ((parent, ancestors), op) in enumerate(zip(parents, operator_plan(mix, len(parents)))):
        crossed = _crossover(evaluator, root, parents, i) if op == "crossover" else None
        if op == "crossover" and crossed is None:
            op = "edit"  # as the loop does when it has no mate: the changes clash or break the program
        others, start = ([crossed[0]], crossed[1].code) if crossed else ([], parent.code)
        prompt = builder.build(parent, ancestors, layout=make_operator(op, task.entry_function).layout(),
                               others=others)
        want = ws.answers_per_parent - (1 if others else 0)
        # Targets are new programs; with extra kinds they may be other prompts' parents too (symreg's starter
        # has four index literals: its numeric mutants are mostly parents already, and its prompt, the one
        # every run starts from, would be left with one or two answers).
        answers, drawn, valid = _valid_children(evaluator, start, rng, want, 3 * ws.answers_per_parent,
                                                (set() if extra else set(seen)) | {parent.code, start}, extra)
        if crossed:
            answers = [crossed[1:]] + answers
        stats["drawn"] += drawn
        stats["valid"] += valid
        stats.setdefault("operators", {}).setdefault(op, 0)
        stats["operators"][op] += 1
        for m, _ in answers:
            text = answer_for(parent.code, m, op, task.entry_function)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            examples.append(Example(name, first + i, prompt.token_ids, text, ids))
    return examples, len(parents)


def _crossover(evaluator, root: Program, parents: list, i: int):
    """Parent i's crossover: (mate, both changes in one program, its evaluation), or None when there is
    no mate (too few parents) or the two changes clash or break the program. The mate is the next mutant;
    the program with both changes is the prompt's first answer."""
    from train.warm_start.data import combine

    mate = parents[1 + i % (len(parents) - 1)][0] if len(parents) > 2 else None
    both = combine(root.code, parents[i][0].code, mate.code) if mate else None
    result = evaluator.evaluate(both.code) if both else None
    if result is None or not (result.valid and result.reward > 0):
        return None
    return mate, both, result
