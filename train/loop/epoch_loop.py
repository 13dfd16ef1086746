"""One HELIX run as paper Algorithm 1: an object whose methods are the epoch's steps.

    for each epoch:  prompts -> generate -> evaluate -> grpo_step -> archive_and_select -> log_and_checkpoint

Every rank calls every step. Rank 0 alone owns the archive, the sandbox, the embedder, the
prompt builder and the run directory: they sit in one ``MainState`` (``self.main``, None on
the other ranks), and a step's rank-0 part is the block under ``if self.main``. Every step is
timed the same way (``_timed``) into the epoch's phase times (metrics.jsonl ``*_time_s``).
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from population.child import Child
from rewards import Evaluator
from rewards.ray_eval import check_reachable
from rollout.engines import Completion, SamplingParams, build_engine, engine_needs_weights, generate_streaming, preflight_engine
from rollout.operators import function_source, make_operator, uses_policy
from rollout.prompts import PromptBuilder
from tasks import load_task
from train.config.config import ConfigError, HelixConfig, check_form
from train.config.run_name import default_run_name
from train.learner import console
from train.learner.distributed import DistInfo, broadcast, gather, shard
from train.learner.export import export_hf, export_state
from train.learner.learner import Learner, Sample
from train.learner.memory import release_free_memory
from train.learner.models import TINY_RANDOM, cache_root, load_policy, load_tokenizer, resolve_policy_path
from train.loop import records
from train.loop.advantages import record_advantages
from train.loop.checkpoint import checkpoint_logs, load_checkpoint, save_checkpoint
from train.loop.children import BackgroundEvaluation, ChildRules, Job
from train.loop.dynamic_sampling import refill
from train.loop.epoch_metrics import add_phase_times, epoch_metrics, operator_metrics, search_metrics
from train.loop.evolution import Evolution
from train.loop.no_learning import LearningWatch
from train.loop.run_dir import RunDir, library_log, resume_command, table_columns, table_header, table_row
from train.loop.seeding import sampling_seed, seed_everything
from train.loop.task_tools import TaskTools, task_tools


@dataclass
class MainState:
    """What only rank 0 holds."""

    run_dir: RunDir
    evaluator: Evaluator
    evo: Evolution
    builder: PromptBuilder | None  # None: the run asks the policy nothing (iterate)


@dataclass
class Epoch:
    """What one epoch's steps hand each other (``None``: not on this rank, or not yet)."""

    number: int
    rng: np.random.Generator
    start: float = field(default_factory=time.perf_counter)
    times: dict = field(default_factory=dict)
    # Lists over the epoch's prompts, in job order; dynamic sampling's extra rounds append to them.
    jobs: list[Job] = field(default_factory=list)  # every rank's prompts
    round: list[Job] = field(default_factory=list)  # the prompts of the round being generated (all of them, or a refill)
    dropped: list[dict] = field(default_factory=list)  # what the token budget cut, per prompt (rank 0)
    shown: list[dict] = field(default_factory=list)  # what each prompt showed (rank 0; prompts/epoch-N.jsonl)
    mine: list[Job] = field(default_factory=list)  # this rank's share of the prompts
    completions: list[list[Completion]] = field(default_factory=list)  # this rank's groups
    evaluation: BackgroundEvaluation | None = None  # rank 0: the round's
    gate_embedded: int = 0  # programs the novelty gate embedded, all rounds
    outputs: list[list[Completion]] = field(default_factory=list)  # rank 0: every rank's groups, without logprobs
    children: list[Child] = field(default_factory=list)  # rank 0
    rewards: list[list[float]] = field(default_factory=list)  # trusted rewards per prompt and sample, on every rank
    trained: set[int] | None = None  # the prompts whose groups the step trains on (None: all; dynamic sampling)
    sampling: dict = field(default_factory=dict)  # dynamic sampling's metrics (train.loop.dynamic_sampling)
    advantages: dict | None = None  # rank 0: (prompt, sample) -> (advantage, tokens) the update used
    train: dict = field(default_factory=dict)
    diversity: np.ndarray | None = None
    chosen: np.ndarray | None = None
    metrics: dict | None = None
    samples: list[dict] | None = None
    stop: bool = False
    notes: list[str] = field(default_factory=list)  # rank 0: lines printed after the epoch's row (record claims)
    reached: tuple | None = None  # rank 0: (archive id, child) that reached run.stop_at_reward


def without_logprobs(groups: list[list[Completion]]) -> list[list[Completion]]:
    """What crosses ranks and reaches the evaluator: the completions less their logprobs, which only
    this rank's learner reads."""
    return [[Completion(c.token_ids, c.text, c.truncated) for c in group] for group in groups]


class HelixRun:
    @staticmethod
    def preflight(cfg: HelixConfig, info: DistInfo) -> None:
        """What must hold before anything is loaded, warm-started or written (the start routine calls it
        first, train.api.start): a wrong URL or Ray address costs seconds, and no run directory."""
        if cfg.trainer.prompts_per_epoch < info.world:
            raise ConfigError(f"trainer.prompts_per_epoch = {cfg.trainer.prompts_per_epoch} must be >= the number "
                              f"of ranks ({info.world})")
        check_form(cfg)  # the iterate baseline needs a search-form task (task.yaml alone is read)
        # The engine's own checks (openai: the server answers and serves the model) come before
        # anything is loaded or written: a wrong URL costs seconds, and no run directory.
        if uses_policy(cfg.evolution.operators):
            preflight_engine(cfg.rollout.engine, cfg.rollout, model_name=cfg.model.policy)
        if cfg.task.eval_backend == "ray" and info.is_main:
            check_reachable(cfg.task.ray_address)  # likewise: no Ray cluster is an error within seconds

    def __init__(self, cfg: HelixConfig, config_stem: str, info: DistInfo, policy: str, resume: Path | None = None,
                 tools: TaskTools | None = None):
        """Everything a run holds: the policy, its learner and engine on every rank, and rank 0's
        ``MainState``. ``policy`` is the model to load: ``model.policy`` or its warm-started copy,
        resolved before the run is built (train.api.start; every rank the same). ``resume`` is a
        checkpoint directory to continue from. ``tools``: rank 0's evaluator and prompt builder when the
        start made them (the warm start's data used them first); without them the run makes its own."""
        seed_everything(cfg.run.seed)
        self.cfg, self.info, self.resume, self.tools = cfg, info, resume, tools
        self.task = load_task(cfg.task.name)
        self.stop_target = records.stop_target(self.task, cfg.run.stop_at_reward)  # run.stop_at_reward as a number
        self.progress = cfg.run.progress and info.is_main
        self.search = self.task.form == "search"
        # The iterate baseline asks the policy nothing: no model, tokenizer or engine is built at all.
        self.generates = uses_policy(cfg.evolution.operators)
        # EvoOnly with an engine that holds its own policy (openai: the server's) needs the
        # tokenizer alone: no weights are loaded, warm-started or exported.
        self.needs_weights = self.generates and (cfg.trainer.enabled or engine_needs_weights(cfg.rollout.engine))
        self.policy = policy
        cfg.run.name = broadcast(cfg.run.name or default_run_name(cfg), info)
        self.library_log = library_log(cfg, info.rank)  # where library chatter goes: the terminal stays readable
        if self.library_log is not None:
            console.quiet_environment()
        self._build_policy()
        self.pending_checkpoint = None  # a Future while an asynchronous checkpoint is being written
        self.start_epoch, evo_state = self._resume() if resume is not None else (0, None)
        self.main = self._build_main(config_stem, evo_state) if info.is_main else None
        # one warning if the run cannot learn (the iterate baseline learns nothing by design)
        self.watch = LearningWatch(cfg, cfg.run.no_learning_epochs if self.generates else 0)
        self.columns = table_columns(novelty_gate=cfg.evolution.novelty_threshold > 0,  # the console table's
                                     dynamic_sampling=cfg.trainer.dynamic_sampling.enabled, search=self.search)
        self._build_operators()

    def _resume(self) -> tuple[int, dict]:
        """The checkpoint's epoch and evolution state; the learner (and an engine with its own weights) restored."""
        cfg, resume = self.cfg, self.resume
        start_epoch, evo_state = load_checkpoint(resume, self.learner, self.info)
        if self.learner is not None and self.engine.needs_sync:  # the engine started from the base weights
            self.engine.sync_weights(self.learner.full_state_view())
        if start_epoch >= cfg.trainer.epochs:
            raise ConfigError(f"{resume} is already at epoch {start_epoch} of trainer.epochs = "
                              f"{cfg.trainer.epochs}; to train longer, resume with trainer.epochs=<more>")
        return start_epoch, evo_state

    def _build_operators(self) -> None:
        """The mix's operators (weight > 0) and their draw probabilities, plus edit: what a crossover
        with no second parent in P_t falls back to."""
        mix = {name: w for name, w in self.cfg.evolution.operators.items() if w > 0}
        self.operators = {name: make_operator(name, self.task.entry_function) for name in mix}
        self.operator_weights = np.array(list(mix.values()), np.float64) / sum(mix.values())
        self.edit = make_operator("edit", self.task.entry_function)
        if "best_shot" in mix and function_source(self.task.initial_program, self.task.entry_function) is None:
            raise ConfigError(f"evolution.operators: best_shot evolves one function, but {self.cfg.task.name}'s "
                              f"program has no top-level def {self.task.entry_function}()")

    def _build_policy(self) -> None:
        cfg, info = self.cfg, self.info
        self.learner = None
        if not self.generates:  # iterate: children are reruns, made without a prompt or a completion
            self.model = self.tokenizer = self.engine = None
            self.on_module = False
            return
        with console.to_file(self.library_log):
            if self.needs_weights:
                self.model, self.tokenizer = load_policy(self.policy, cfg.model.dtype, cfg.model.cache_dir, seed=cfg.run.seed)
            else:  # the tokenizer renders the prompts; the engine's server holds the weights
                self.model, self.tokenizer = None, load_tokenizer(self.policy, cfg.model.cache_dir)
        if cfg.model.gradient_checkpointing and self.model is not None:
            self.model.gradient_checkpointing_enable()
        if cfg.trainer.enabled:
            self.learner = Learner(self.model, cfg.trainer, cfg.rollout.group_size, cfg.rollout.temperature,
                                   self.tokenizer.pad_token_id, info)
        elif self.model is not None:
            self.model.requires_grad_(False)  # EvoOnly: no optimizer, no reference model
        model_path = None if self.policy == TINY_RANDOM else resolve_policy_path(self.policy, cfg.model.cache_dir)
        with console.to_file(self.library_log):
            self.engine = build_engine(cfg.rollout.engine, cfg.rollout, model=self.model, tokenizer=self.tokenizer,
                                       info=info, progress=self.progress, model_path=model_path,
                                       model_name=cfg.model.policy, dtype=cfg.model.dtype, seed=cfg.run.seed,
                                       cache_dir=cache_root(cfg.model.cache_dir))
        console.library_loggers_to(self.library_log)
        # The hf engine samples from the trainer's own module, held unsharded under fsdp2/deepspeed
        # (no per-forward collectives); vllm has its own copy of the weights.
        self.on_module = getattr(self.engine, "shares_trainer_module", False)
        if self.learner is None and self.on_module:
            self.model.to(info.device)  # EvoOnly sampling from the HF module (the learner places it otherwise)

    def _build_main(self, config_stem: str, evo_state: dict | None) -> MainState:
        cfg, resume = self.cfg, self.resume
        # First: an unreachable Ray cluster fails here, before a run directory exists.
        tools = self.tools or task_tools(cfg, self.task, self.tokenizer, library_log=self.library_log, say=self._say)
        run_dir = RunDir(cfg, config_stem, resume_epoch=self.start_epoch if resume else None,
                         resume_logs=checkpoint_logs(resume) if resume else None)
        print(f"[helix] run directory: {run_dir.path}", flush=True)
        if resume is not None:
            print(f"[helix] resuming from {resume} (epoch {self.start_epoch} of {cfg.trainer.epochs})", flush=True)
        evo = Evolution(cfg, run_dir.archive_path, self.task, tools.evaluator, resume=evo_state)
        return MainState(run_dir, tools.evaluator, evo, tools.builder)

    # ---- the loop ---------------------------------------------------------------------
    def train(self) -> Path | None:
        """Every epoch's steps, then the export. Returns the run directory (rank 0)."""
        if self.main:
            self.main.run_dir.point_latest()  # checks passed, everything loaded: training starts now
            print(table_header(self.columns), flush=True)
        self.t_start = time.perf_counter()
        epochs = range(self.start_epoch + 1, self.cfg.trainer.epochs + 1)
        if self.progress:
            epochs = tqdm(epochs, desc="epochs", position=0, initial=self.start_epoch, total=self.cfg.trainer.epochs)
        try:
            for number in epochs:
                epoch = Epoch(number, np.random.default_rng([self.cfg.run.seed, number]))
                self.prompts(epoch)
                self.generate(epoch)
                self.evaluate(epoch)
                if self.cfg.trainer.dynamic_sampling.enabled:
                    refill(self, epoch)  # more rounds until B groups have spread, or the cap
                self.grpo_step(epoch)
                self.archive_and_select(epoch)
                self.log_and_checkpoint(epoch)
                if epoch.stop:
                    break
        except BaseException:
            # An error or Ctrl-C: let a checkpoint being written finish, so --resume starts from it.
            with contextlib.suppress(Exception):
                self.wait_for_checkpoint()
            if self.main:  # finish the wandb run as failed, so a later run in this process starts its own
                for close in (self.main.evo.archive.close, lambda: self.main.run_dir.close(exit_code=1),
                              self.main.evaluator.close):
                    with contextlib.suppress(Exception):
                        close()
            raise
        return self.finish()

    @contextlib.contextmanager
    def _timed(self, epoch: Epoch, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:  # summed: dynamic sampling's extra rounds add to their phases
            epoch.times[name] = epoch.times.get(name, 0.0) + time.perf_counter() - start

    def _say(self, message: str) -> None:
        """Print without tearing an active tqdm bar."""
        if self.progress:
            tqdm.write(message)
        else:
            print(message, flush=True)

    def prompts(self, epoch: Epoch, count: int | None = None) -> None:
        """Steps 1-2 (rank 0): sample B parents from P_t (``count`` for a dynamic-sampling round) and build
        their eq.-5 prompts, numbered on from the epoch's earlier ones; every rank gets them."""
        jobs = None
        if self.main:
            main, jobs, shown, first = self.main, [], [], len(epoch.jobs)
            parents = main.evo.sample_parents(epoch.rng, count)
            names = list(self.operators)
            # One operator: no draw, so the paper's edit-only run keeps its random stream exactly.
            drawn = epoch.rng.choice(len(names), len(parents), p=self.operator_weights) if len(names) > 1 else [0] * len(parents)
            for j, (parent, pick) in enumerate(zip(parents, drawn), start=first):
                sol, op = parent.solution, self.operators[names[pick]]
                handed = main.evo.construction_for(sol.id) if self.search else None  # (from id, JSON text)
                if not op.needs_policy:  # iterate: the parent's program reruns on the parent's construction
                    shown.append({"epoch": epoch.number, "prompt": j, "parent_id": sol.id, "operator": op.name,
                                  "ancestors": [], "others": [], "dropped": [], "text": "",
                                  "construction_from": handed[0] if handed else None})
                    jobs.append(Job(j, sol.id, sol.code, [], parent.tag, op.name,
                                    construction=handed[1] if handed else None))
                    continue
                others = []
                if op.extra_parents == "mate":
                    mate = main.evo.mate(sol.id, parent.tag)
                    others, op = ([mate], op) if mate is not None else ([], self.edit)
                elif op.extra_parents == "shots":
                    others = main.evo.shots(sol.id, parent.tag, self.cfg.evolution.best_shot_k)
                ancestors = main.evo.archive.ancestors(sol.id, self.cfg.rollout.n_ancestors) if op.lineage else []
                prompt = main.builder.build(sol, ancestors, sol.id, layout=op.layout(), others=others)
                if prompt.dropped:  # metrics.jsonl: prompt_dropped
                    epoch.dropped.append({"prompt": j, "parent_id": sol.id, "dropped": list(prompt.dropped)})
                shown.append({"epoch": epoch.number, "prompt": j, "parent_id": sol.id, "operator": op.name,
                              "ancestors": [a.id for a in ancestors], "others": [o.id for o in others],
                              "dropped": list(prompt.dropped), "text": prompt.text})
                if self.search:  # which solution's construction the children are handed
                    shown[-1]["construction_from"] = handed[0] if handed else None
                mate = others[0] if op.extra_parents == "mate" else None
                jobs.append(Job(j, sol.id, sol.code, prompt.token_ids, parent.tag, op.name, mate.id if mate else None,
                                len(others), mate.code if mate else None, handed[1] if handed else None))
            epoch.shown += shown
            main.run_dir.log_prompts(epoch.number, epoch.shown)  # what each prompt showed (train/runs/browse.py)
        epoch.round = broadcast(jobs, self.info)
        epoch.jobs += epoch.round

    def generate(self, epoch: Epoch) -> None:
        """Step 3: G rollouts per prompt, each rank its own share. With rollout.batch_size > 0, rank 0
        starts evaluating its finished batches while the rest generate (its prompts come first)."""
        cfg = self.cfg
        mine = shard(epoch.round, self.info)
        start = time.perf_counter()
        seed = sampling_seed(cfg.run.seed, epoch.number, mine[0].index if mine else 0, cfg.rollout.group_size)
        params = SamplingParams.from_config(cfg.rollout, seed=seed)
        on_batch = None
        if self.main:
            evo = self.main.evo
            best = evo.archive.best()  # this epoch's record candidates, re-checked exactly by the evaluator
            self.main.evaluator.exact_from = records.check_from(self.task, best.reward if best else None, self.stop_target)
            rules = ChildRules(evo.archived, cfg.evolution.repeats, evo.novelty_gate(epoch.round), cfg.run.seed,
                               cfg.evolution.no_gain)
            epoch.evaluation = BackgroundEvaluation(self.task, self.main.evaluator, epoch.round, epoch.number, rules)
            if cfg.rollout.batch_size:
                on_batch = lambda first, groups: epoch.evaluation.submit(first, without_logprobs(groups))  # noqa: E731
        on_module = self.learner is not None and self.on_module
        if not self.generates:  # iterate: each child is a rerun, G per prompt, with no completion behind it
            completions = [[Completion([], "", False) for _ in range(cfg.rollout.group_size)] for _ in mine]
        else:
            with self.learner.generation_context() if on_module else contextlib.nullcontext():
                completions = generate_streaming(self.engine, [j.token_ids for j in mine], params, on_batch)
        epoch.mine += mine
        epoch.completions += completions
        gathered = gather((without_logprobs(completions), time.perf_counter() - start), self.info)
        if self.main:
            epoch.outputs += [group for part, _ in gathered for group in part]
            # the slowest rank's, summed over the epoch's rounds
            epoch.times["gen_time_s"] = epoch.times.get("gen_time_s", 0.0) + max(t for _, t in gathered)

    def evaluate(self, epoch: Epoch) -> None:
        """Step 4 (rank 0): apply the remaining edits and evaluate the children in the sandbox; every
        rank gets the trusted rewards."""
        rewards = None
        if self.main:
            with self._timed(epoch, "eval_time_s"):  # what generation did not hide
                outputs = epoch.outputs[len(epoch.outputs) - len(epoch.round):]  # the round's
                done = len(shard(epoch.round, self.info)) if self.cfg.rollout.batch_size else 0  # streamed already
                if done < len(outputs):
                    epoch.evaluation.submit(done, outputs[done:], self.progress)
                children = epoch.evaluation.result()
                epoch.children += children
                G = self.cfg.rollout.group_size
                # NaN: an infra failure, no reward (train.learner.learner leaves it out of its group)
                rewards = [[c.reward if c.scored else float("nan") for c in children[j * G:(j + 1) * G]]
                           for j in range(len(epoch.round))]
            epoch.times["eval_busy_s"] = epoch.times.get("eval_busy_s", 0.0) + epoch.evaluation.busy_s
            gate = epoch.evaluation.rules.gate
            epoch.gate_embedded += gate.embedded if gate else 0
        epoch.rewards += broadcast(rewards, self.info)

    def grpo_step(self, epoch: Epoch) -> None:
        """Step 5 (all ranks): the GRPO update on this rank's rollouts, then the engine's weight sync."""
        epoch.times["weight_sync_time_s"] = 0.0
        if self.learner is None:
            epoch.times["train_time_s"] = 0.0
            return
        raw = self.cfg.rollout.temperature == 1.0  # engine logprobs are raw log pi: comparable only then
        kept = [(job, group) for job, group in zip(epoch.mine, epoch.completions)
                if epoch.trained is None or job.index in epoch.trained]
        samples = [Sample(job.token_ids, c.token_ids, epoch.rewards[job.index][g], job.index, c.truncated,
                          c.logprobs if raw else None)
                   for job, group in kept for g, c in enumerate(group)]
        where = [(job.index, g) for job, group in kept for g in range(len(group))]
        if not samples:  # dynamic sampling kept none of this rank's groups: a sample without a reward keeps
            job, c = epoch.mine[0], epoch.completions[0][0]  # it in step with the others (no tokens, no group)
            samples = [Sample(job.token_ids, c.token_ids, float("nan"), job.index, c.truncated)]
        epoch.train = self.learner.step(samples)
        recorded = gather(list(zip(where, self.learner.last_advantages)), self.info)  # archived by rank 0
        if self.main:
            epoch.advantages = dict(pair for part in recorded for pair in part)
        epoch.times["train_time_s"] = epoch.train.pop("train_time_s", 0.0)
        if self.engine.needs_sync and not epoch.train.get("skipped_step"):  # an engine with its own weights
            release_free_memory()  # the step's activations first: the sync's own buffers come on top of what is kept
            with self._timed(epoch, "weight_sync_time_s"):
                self.engine.sync_weights(self.learner.full_state_view())  # collective under fsdp2/deepspeed
        release_free_memory()  # the step's freed activations and logits, back to the system before generation

    def archive_and_select(self, epoch: Epoch) -> None:
        """Steps 6-7 (rank 0): archive the children, embed the programs, kNN diversity (eq. 6), and
        select P_{t+1}; then the epoch's metrics row and the budget check (all ranks agree to stop)."""
        stop = None
        if self.main:
            evo = self.main.evo
            prior = evo.archive.best()  # what a child must beat to count as a new best
            if epoch.advantages is not None:
                record_advantages(epoch.children, epoch.advantages, epoch.rewards, self.cfg)
            with self._timed(epoch, "embed_select_time_s"):
                ids = evo.add_children(epoch.children)
                epoch.diversity, epoch.chosen = evo.select(epoch.number, epoch.rng)
            best = evo.archive.best()
            if best is not None:
                self.main.run_dir.write_best(best.code, best.reward, best.id, best.epoch, records.exact_label(best.exact))
            epoch.notes = records.claims(self.task, epoch.number, ids, epoch.children)
            if self.stop_target is not None:
                epoch.reached = records.target_hit(self.task, self.stop_target, ids, epoch.children)
            epoch.metrics = self._metrics(epoch, best.reward if best else None, prior.reward if prior else None)
            epoch.samples = [dict(epoch=epoch.number, solution_id=ids[i], parent_id=c.parent_id, reward=c.reward,
                                  feedback=c.feedback[:500], completion=c.completion)
                             for i, c in enumerate(epoch.children[: self.cfg.run.samples_per_epoch])]
            spent = evo.archive.count() - 1  # children so far (the seed is not one)
            run = self.cfg.run
            stop = bool((run.max_evaluations and spent >= run.max_evaluations) or epoch.reached is not None
                        or (run.time_budget_s and time.perf_counter() - self.t_start >= run.time_budget_s))
        epoch.stop = broadcast(stop, self.info)

    def _metrics(self, epoch: Epoch, best_reward: float | None, prior_best: float | None) -> dict:
        evo = self.main.evo
        completions = [c for group in epoch.outputs for c in group]
        embedded = evo.embedded_last + epoch.gate_embedded  # the novelty gate's embeddings went into the index as they were
        extra = dict(embedded=embedded, prompt_items_dropped=sum(len(d["dropped"]) for d in epoch.dropped),
                     prompt_dropped=epoch.dropped, **operator_metrics(epoch.children, prior_best, self.task.improves))
        if self.search:
            extra.update(search_metrics(epoch.children))
        if epoch.sampling:  # its 0-std is the generated groups'; the learner's is the trained batch's
            extra.update(epoch.sampling, train_zero_std_frac=epoch.train.get("zero_std_frac"))
        metrics = epoch_metrics(epoch.number, epoch.children, [len(c.token_ids) for c in completions],
                                [bool(c.truncated) for c in completions], evo.pool["reward"], epoch.diversity, epoch.chosen,
                                best_reward, evo.archive.count(), epoch.train, extra=extra)
        # Final once the checkpoint is written; the checkpoint carries this provisional row.
        return add_phase_times(metrics, dict(epoch.times, epoch_time_s=time.perf_counter() - epoch.start))

    def log_and_checkpoint(self, epoch: Epoch) -> None:
        """Step 8: checkpoint (all ranks: the learner may be sharded), then the log row. The checkpoint
        carries the epoch's row, so a kill between the two loses no row on resume."""
        cfg, n = self.cfg, epoch.number
        with self._timed(epoch, "checkpoint_time_s"):  # what the loop waits: all of it, or the staging
            if cfg.run.checkpoint_every and (n % cfg.run.checkpoint_every == 0 or n == cfg.trainer.epochs or epoch.stop):
                self.wait_for_checkpoint()  # one write in flight at a time
                self.pending_checkpoint = save_checkpoint(
                    self.main.run_dir.path if self.main else None, n, self.learner, self.main.evo if self.main else None,
                    self.info, cfg.run.keep_checkpoints, logs=dict(metrics=epoch.metrics, samples=epoch.samples)
                    if self.main else None, asynchronous=cfg.run.async_checkpoint and self.learner is not None)
        if self.main:
            epoch.times["epoch_time_s"] = time.perf_counter() - epoch.start
            self.main.run_dir.log_metrics(add_phase_times(epoch.metrics, epoch.times))
            self.main.run_dir.log_samples(epoch.samples)
            self._say(table_row(epoch.metrics, self.columns))
            for note in epoch.notes:
                self._say(note)
            warning = self.watch.update(epoch.metrics)
            if warning:
                self._say(warning)
            resume = resume_command(self.main.run_dir.path)
            if epoch.reached is not None:
                self._say(records.stop_line(n, epoch.reached, self.stop_target, cfg.run.stop_at_reward, resume))
            elif epoch.stop and n < cfg.trainer.epochs:
                self._say(f"[helix] budget reached after epoch {n} ({self.main.evo.archive.count() - 1} children); "
                          f"stopping. To go on: {resume} with a larger run.max_evaluations or run.time_budget_s")

    def wait_for_checkpoint(self) -> None:
        """Block until the background checkpoint write, if any, is renamed into place (its errors raise here)."""
        if isinstance(self.pending_checkpoint, Future):
            self.pending_checkpoint.result()
        self.pending_checkpoint = None

    def finish(self) -> Path | None:
        """Export the policy (sharded weights are gathered by all ranks, rank 0 writes) and close."""
        self.wait_for_checkpoint()
        cfg, out = self.cfg, None
        # sharded weights are gathered; LoRA adapters are merged into the base (the module holds them apart)
        gathered = self.learner is not None and (self.learner.backend.sharded or cfg.trainer.lora.enabled)
        full = self.learner.full_state_dict() if cfg.run.export and gathered else None
        if self.main:
            run_dir, evo = self.main.run_dir, self.main.evo
            if cfg.run.export and not self.generates:
                print("[helix] nothing to export: the iterate baseline loads no model", flush=True)
            elif cfg.run.export and self.model is None:
                print(f"[helix] nothing to export: rollout.engine={cfg.rollout.engine} sampled from its own model", flush=True)
            elif cfg.run.export:
                if full is not None:
                    path = export_state(full, self.policy, run_dir.export_path, cfg.model.dtype, cfg.model.cache_dir)
                else:
                    path = export_hf(self.model, self.tokenizer, run_dir.export_path)
                print(f"[helix] exported Hugging Face model to {path}", flush=True)
            for line in records.end_of_run(self.task, evo.archive, self.main.evaluator, run_dir.path / "best_program.py"):
                print(line, flush=True)
            evo.archive.close()
            run_dir.close()
            self.main.evaluator.close()
            out = run_dir.path
        broadcast(None, self.info)  # keep the other ranks alive until rank 0 is done writing
        return out
