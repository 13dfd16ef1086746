"""Turn completions into child programs and evaluate them, overlapped with generation.

A child is what the prompt's operator (rollout.operators) makes of the completion: by default its
parent with the SEARCH/REPLACE edits applied. An answer that yields no program is archived as a
failed edit with the reason as feedback, and never run. Nor is a
child whose edits change nothing (canonically equal to its parent, or for a crossover to either
parent): it is archived as "unchanged" with reward 0 and stays out of the selection pool. A
child that is a program an earlier epoch archived is a *repeat* (``metrics["repeat"]``); under
``evolution.repeats: zero`` it is treated like an unchanged one, not run and rewarded 0. With
``evolution.novelty_threshold`` > 0 the novelty gate (train.loop.novelty) embeds the rest first and
holds back near repeats too, unrun (``metrics["near_repeat"]``). With
``rollout.batch_size`` > 0 the engine hands over each batch of prompts as it finishes, and
``BackgroundEvaluation`` evaluates those children in a thread while the next batch generates:
on a GPU node the sandbox pool (CPU) then runs under generation (GPU) instead of after it.

A search-form task (task.yaml ``form: search``) calls each child's program with the construction its
job carries (its first parent's, or that parent's nearest valid ancestor's) and a seed of its own
(``child_seed``); the verified construction comes back on the child. The ``iterate`` operator (the
no-LLM baseline, configs/ablations/iterate.yaml) makes its children without a completion: each is its
parent's program, unchanged, rerun on the parent's construction with a fresh seed. It deliberately
skips the checks that keep an unchanged or repeated program from running, and the novelty gate.
A changed program that returns the construction it was given (``metrics["same_construction"]``: its
search found nothing better) is scored like any child; under ``evolution.no_gain: archive`` it is
archived only, out of the selection pool, so an edit that broke the parent's search cannot displace
the parent whose search works (``iterate``'s reruns always join: a rerun is its parent's program).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from population.canonical import canonicalize
from population.child import Child
from rollout.edits import EditError
from rollout.engine_api import Completion
from rollout.operators import make_operator
from train.loop.novelty import NoveltyGate, hold_back

UNCHANGED = ("Edit applied but changed nothing: the child is the parent again (same code up to layout and "
             "comments). Change what the program computes.")
SAME = ("The answer is a parent again (same code up to layout and comments). Change what the program "
        "computes.")


@dataclass(frozen=True)
class Job:
    """One prompt of the epoch (train.loop.epoch_loop builds them): the parent it came from, its token
    ids, and how its completions become children."""

    index: int
    parent_id: int
    parent_code: str
    token_ids: list[int]
    tag: int = -1  # the parent's population-slot tag (its island), inherited by the children
    operator: str = "edit"  # how its completions become children (rollout.operators)
    mate_id: int | None = None  # crossover: the second parent
    version: int = 0  # best_shot: the answer is version v{version} of the entry function
    mate_code: str | None = None  # crossover: the second parent's program (a child equal to it is no new program)
    construction: str | None = None  # search form: what its children are handed (JSON text); None: start from nothing


@dataclass(frozen=True)
class ChildRules:
    """The run's settings that decide what becomes of a child besides its own code, in one value, so the
    background evaluator hands them on whole. The defaults are a run with no archive behind it."""

    archived: Callable[[str], int | None] | None = None  # archive id of an earlier program with this code
    repeats: str = "score"  # evolution.repeats: what a repeat gets ("score" or "zero")
    gate: NoveltyGate | None = None  # the novelty gate (Evolution.novelty_gate), or None
    run_seed: int = 0  # run.seed: a search-form child's seed is drawn from it (child_seed)
    no_gain: str = "pool"  # evolution.no_gain: where a changed program that returned its input goes


def child_seed(run_seed: int, epoch: int, prompt: int, sample: int) -> int:
    """The seed a search-form program is called with: fresh for every child, and the same for the same child
    of a resumed run (the seed evaluation is epoch 0, prompt 0, sample 0)."""
    return int(np.random.SeedSequence([run_seed, epoch, prompt, sample]).generate_state(1)[0])


def repeat_feedback(solution_id: int) -> str:
    return (f"This program is already in the archive (solution {solution_id}), so it earns nothing again. "
            "Change what it computes in a way not tried before.")


def evaluate_children(task, evaluator, jobs: list[Job], outputs: list[list[Completion]], epoch: int,
                      progress: bool, rules: ChildRules = ChildRules()) -> list[Child]:
    """Apply each completion's edits to its parent and evaluate the new programs in the sandbox.
    ``outputs``: each job's completions (their logprobs are not needed)."""
    archived, repeats, gate = rules.archived, rules.repeats, rules.gate
    children, programs, reruns = [], [], []
    calls: dict[int, tuple[str | None, int]] = {}  # search form: id(child) -> (construction handed in, seed)
    search = getattr(task, "form", "construct") == "search"
    for job, group in zip(jobs, outputs):
        parent_forms = {canonicalize(job.parent_code)}
        if job.mate_code is not None:  # a crossover that copies its second parent is no new program either
            parent_forms.add(canonicalize(job.mate_code))
        operator = make_operator(job.operator, task.entry_function)
        for g, completion in enumerate(group):
            text = completion.text
            child = Child(parent_id=job.parent_id, epoch=epoch, prompt_id=f"e{epoch}-p{job.index}-g{g}",
                          completion=text, code=job.parent_code, tag=job.tag, operator=job.operator,
                          second_parent_id=job.mate_id)
            children.append(child)
            if search:
                calls[id(child)] = (job.construction, child_seed(rules.run_seed, epoch, job.index, g))
            if job.operator == "iterate":  # the parent's program again, on purpose: no edit, no repeat check
                child.is_program = True
                reruns.append(child)
                continue
            try:
                child.code = operator.child(job.parent_code, text, job.version)
            except EditError as err:
                what = "Edit not applied" if job.operator == "edit" else "Answer not used"
                child.feedback, child.metrics = f"{what}: {err}", {"edit_failed": 1.0}
                continue
            if canonicalize(child.code) in parent_forms:
                # A no-op (same code up to layout and comments) is no new program: it is not run, does
                # not join the pool, and the learner sees reward 0, so copying the parent earns nothing.
                child.feedback, child.metrics = UNCHANGED if job.operator == "edit" else SAME, {"unchanged": 1.0}
                continue
            known = archived(child.code) if archived is not None else None
            if known is not None and repeats == "zero":
                child.feedback, child.metrics = repeat_feedback(known), {"repeat": 1.0}
                continue
            child.is_program = True
            child.metrics = {"repeat": 1.0} if known is not None else {}
            if gate is not None and known is not None:  # same canonical code: cosine 1, nothing to embed
                hold_back(child, gate.exact(known), gate.threshold, repeats)
                continue
            programs.append(child)
    if gate is not None:
        programs = _gate(gate, programs, repeats)
    programs += reruns
    extra = {}
    if search:
        extra = dict(constructions=[None if calls[id(c)][0] is None else json.loads(calls[id(c)][0]) for c in programs],
                     seeds=[calls[id(c)][1] for c in programs])
    for child, result in zip(programs, evaluator.evaluate_many([c.code for c in programs], progress=progress, **extra)):
        child.reward, child.valid, child.feedback, child.eval_time_s = (result.reward, result.valid, result.feedback,
                                                                        result.eval_time_s)
        child.artefact, child.exact = result.artefact, result.exact
        child.construction = result.construction
        child.metrics = dict(result.metrics, status_ok=float(result.status == "ok"), **child.metrics)
        if result.status == "infra":  # never judged (rewards.ray_eval): archived for the record only
            child.is_program = False
        elif rules.no_gain == "archive" and child.metrics.get("same_construction") and child.operator != "iterate":
            child.is_program = False  # scored (its input's score), archived, but no new state for selection
    return children


def _gate(gate: NoveltyGate, programs: list[Child], repeats: str) -> list[Child]:
    """The programs still to run; the others are held back. Each keeps its embedding for the kNN index,
    and its similarity to the nearest archived program (metrics ``novelty_similarity``, what a threshold
    is chosen from)."""
    parents = [(c.parent_id,) if c.second_parent_id is None else (c.parent_id, c.second_parent_id) for c in programs]
    verdicts, emb = gate.check([c.code for c in programs], parents)
    run = []
    for child, near, vector in zip(programs, verdicts, emb):
        child.embedding = vector
        if near.held:
            hold_back(child, near, gate.threshold, repeats)
        else:
            child.metrics["novelty_similarity"] = near.similarity
            run.append(child)
    return run


class BackgroundEvaluation:
    """One epoch's children, evaluated batch by batch in one background thread, in job order."""

    def __init__(self, task, evaluator, jobs: list[Job], epoch: int, rules: ChildRules = ChildRules()):
        self._task, self._evaluator, self._jobs, self._epoch, self.rules = task, evaluator, jobs, epoch, rules
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="helix-evaluate")
        self._parts: list = []
        self._next = 0  # the first job not yet submitted: batches must come in order, without gaps
        self.busy_s = 0.0  # time spent evaluating, overlapped or not

    def submit(self, first: int, outputs: list[list[Completion]], progress: bool = False) -> None:
        """``outputs``: the completions of jobs first, first + 1, ...
        ``progress``: a bar, for a batch submitted once generation is over (no bars to tangle with)."""
        if first != self._next:
            raise ValueError(f"batches must arrive in job order: expected job {self._next}, got {first}")
        self._next += len(outputs)
        self._parts.append(self._thread.submit(self._evaluate, self._jobs[first:self._next], outputs, progress))

    def _evaluate(self, jobs: list[Job], outputs: list[list[Completion]], progress: bool):
        start = time.perf_counter()
        try:
            return evaluate_children(self._task, self._evaluator, jobs, outputs, self._epoch, progress, self.rules)
        finally:
            self.busy_s += time.perf_counter() - start  # one worker thread: no race

    def result(self) -> list[Child]:
        """Every job's children, in job order, once all are evaluated."""
        children: list[Child] = []
        try:
            for part in self._parts:
                children += part.result()
        finally:
            self._thread.shutdown(wait=True)
        if self._next != len(self._jobs):
            raise RuntimeError(f"only {self._next} of {len(self._jobs)} prompts' completions reached the evaluator")
        return children
