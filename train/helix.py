"""HELIX entry point and epoch loop (paper Algorithm 1).

    python train/helix.py --config configs/quickstart.yaml [section.key=value ...]
    torchrun --nproc_per_node 2 train/helix.py --config configs/quickstart.yaml
    python train/helix.py --resume runs/quickstart-20261122-101500 [trainer.epochs=8]
    python train/helix.py export runs/quickstart-20261122-101500 my-model/

Per epoch: sample B parents -> build eq.-5 prompts -> G rollouts each -> apply SEARCH/REPLACE
edits -> evaluate children in the sandbox -> GRPO step -> embed + kNN diversity (eq. 6) ->
NSGA-II selection of the next population. Rank 0 owns the archive, the sandbox and the
embedder; every rank generates for its share of the prompts and takes part in the GRPO step.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the repo's packages, not train/'s siblings
    _here = Path(__file__).resolve().parent
    sys.path = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import argparse  # noqa: E402
import contextlib  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402

if "DS_ACCELERATOR" not in os.environ and not torch.cuda.is_available():
    os.environ["DS_ACCELERATOR"] = "cpu"  # what DeepSpeed picks here anyway, without its warning on every start

from train.config import ConfigError, HelixConfig, load_config  # noqa: E402
from train.distributed import DistInfo, broadcast, gather, init_distributed, shard, shutdown  # noqa: E402


@dataclass(frozen=True)
class Job:
    """One prompt of the epoch: the parent it came from and its token ids."""

    index: int
    parent_id: int
    parent_code: str
    token_ids: list[int]
    tag: int = -1  # the parent's population-slot tag (its island), inherited by the children


def _say(message: str, progress: bool) -> None:
    """Print without tearing an active tqdm bar."""
    if progress:
        from tqdm import tqdm

        tqdm.write(message)
    else:
        print(message, flush=True)


def _progress(iterable, enabled: bool, **kw):
    if not enabled:
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, **kw)


def plain(groups: list) -> list[list[tuple]]:
    """Completions as (token_ids, text, truncated): what crosses ranks and reaches the evaluator."""
    return [[(c.token_ids, c.text, c.truncated) for c in group] for group in groups]


def sampling_seed(run_seed: int, epoch: int, first_prompt: int, group_size: int) -> int:
    """The seed of this rank's generate call. Engines seed prompt i of a call with seed + i*G and its
    sample j with + j, so with ``first_prompt`` the epoch-wide index of the rank's first prompt, sample
    j of epoch prompt k uses base + k*G + j: distinct for every sample of the epoch, on any number of
    ranks. The base is hashed from (run seed, epoch), so epochs do not reuse each other's streams."""
    base = int(np.random.SeedSequence([run_seed, epoch]).generate_state(1)[0]) % 2**30
    return base + first_prompt * group_size


def _seed_everything(seed: int) -> None:
    import random

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def run(cfg: HelixConfig, config_stem: str, info: DistInfo, resume: Path | None = None) -> Path | None:
    """The whole run; ``resume`` is a checkpoint directory to continue from."""
    from rollout.engines import SamplingParams, build_engine, generate_streaming
    from rollout.prompts import PromptBuilder
    from tasks import load_task
    from train.learner import Learner, Sample
    from train.models import load_policy
    from train.warm_start import policy_source
    from train import console
    from train.checkpoint import checkpoint_logs, load_checkpoint, save_checkpoint
    from train.epoch_metrics import add_phase_times, epoch_metrics
    from train.children import BackgroundEvaluation
    from train.evolution import Evolution
    from train.run_dir import RunDir, table_header, table_row

    _seed_everything(cfg.run.seed)
    if cfg.trainer.prompts_per_epoch < info.world:
        raise ConfigError(f"trainer.prompts_per_epoch = {cfg.trainer.prompts_per_epoch} must be >= the number of ranks ({info.world})")
    task = load_task(cfg.task.name)
    progress = cfg.run.progress and info.is_main
    policy = policy_source(cfg)  # model.policy, or its warm-started copy (built once, cached)
    cfg.run.name = broadcast(cfg.run.name or f"{config_stem}-{time.strftime('%Y%m%d-%H%M%S')}", info)
    library_log = None  # where library chatter goes (run.library_logs: file): the terminal stays readable
    if cfg.run.library_logs == "file":
        library_log = Path(cfg.run.output_dir) / cfg.run.name / ("library.log" if info.is_main else f"library-rank{info.rank}.log")
        console.quiet_environment()
    with console.to_file(library_log):
        model, tokenizer = load_policy(policy, cfg.model.dtype, cfg.model.cache_dir, seed=cfg.run.seed)
    if cfg.model.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    learner = None
    if cfg.trainer.enabled:
        learner = Learner(model, cfg.trainer, cfg.rollout.group_size, cfg.rollout.temperature, tokenizer.pad_token_id, info)
    else:
        model.requires_grad_(False)  # EvoOnly: no optimizer, no reference model
    with console.to_file(library_log):
        engine = build_engine(cfg.rollout.engine, cfg, model=model, tokenizer=tokenizer, info=info, progress=progress,
                              model_path=policy)
    console.library_loggers_to(library_log)
    if learner is None and getattr(engine, "shares_trainer_module", False):
        model.to(info.device)  # EvoOnly sampling from the HF module (the learner places it otherwise)

    start_epoch, evo_state = 0, None
    if resume is not None:
        start_epoch, evo_state = load_checkpoint(resume, learner, info)
        if learner is not None and engine.needs_sync:  # the engine started from the base weights
            engine.sync_weights(learner.full_state_dict())
        if start_epoch >= cfg.trainer.epochs:
            raise ConfigError(f"{resume} is already at epoch {start_epoch} of trainer.epochs = {cfg.trainer.epochs}; "
                              f"to train longer, resume with trainer.epochs=<more>")

    run_dir = evo = None
    if info.is_main:
        from rewards import Evaluator

        run_dir = RunDir(cfg, config_stem, resume_epoch=start_epoch if resume else None,
                         resume_logs=checkpoint_logs(resume) if resume else None)
        print(f"[helix] run directory: {run_dir.path}", flush=True)
        if resume is not None:
            print(f"[helix] resuming from {resume} (epoch {start_epoch} of {cfg.trainer.epochs})", flush=True)
        evaluator = Evaluator(task, workers=cfg.task.eval_workers or None, timeout_s=cfg.task.timeout_s, memory_mb=cfg.task.memory_mb)
        evo = Evolution(cfg, run_dir.archive_path, task, evaluator, resume=evo_state)
        builder = PromptBuilder(tokenizer, task.prompt_description(cfg.rollout.description), task.entry_function, evaluator.timeout_s,
                                cfg.rollout.max_prompt_tokens, cfg.rollout.n_ancestors, template=task.prompt_template)
        print(table_header(), flush=True)

    G = cfg.rollout.group_size
    t_start = time.perf_counter()
    epochs = range(start_epoch + 1, cfg.trainer.epochs + 1)
    for epoch in _progress(epochs, progress, desc="epochs", position=0, initial=start_epoch, total=cfg.trainer.epochs):
        t0 = time.perf_counter()
        rng = np.random.default_rng([cfg.run.seed, epoch])
        jobs, dropped = None, []
        if info.is_main:  # 1-2. sample parents, build their prompts
            jobs = []
            for j, parent in enumerate(evo.sample_parents(rng)):
                sol = parent.solution
                prompt = builder.build(sol, evo.archive.ancestors(sol.id, cfg.rollout.n_ancestors), sol.id)
                if prompt.dropped:  # what the token budget cut, per prompt (metrics.jsonl: prompt_dropped)
                    dropped.append({"prompt": j, "parent_id": sol.id, "dropped": list(prompt.dropped)})
                jobs.append(Job(j, sol.id, sol.code, prompt.token_ids, parent.tag))
        jobs = broadcast(jobs, info)

        # 3. G rollouts per prompt, each rank its own share of the prompts
        mine = shard(jobs, info)
        t_gen = time.perf_counter()
        params = SamplingParams.from_config(cfg.rollout, seed=sampling_seed(cfg.run.seed, epoch, mine[0].index if mine else 0, G))
        # An engine sampling from the trainer's own module (hf) does so with the layers held unsharded
        # under fsdp2/deepspeed (no per-forward collectives); vllm has its own copy of the weights.
        on_module = learner is not None and getattr(engine, "shares_trainer_module", False)
        # 4a. rank 0 evaluates its own finished batches of prompts while the rest generate
        # (rollout.batch_size > 0; its prompts are the first ones: shards are contiguous).
        evaluation = BackgroundEvaluation(evo, jobs, epoch) if info.is_main else None
        on_batch = None
        if evaluation is not None and cfg.rollout.batch_size:
            on_batch = lambda first, groups: evaluation.submit(first, plain(groups))  # noqa: E731
        with learner.generation_context() if on_module else contextlib.nullcontext():
            completions = generate_streaming(engine, [j.token_ids for j in mine], params, on_batch)
        gen_time = time.perf_counter() - t_gen
        gathered = gather((plain(completions), gen_time), info)

        # 4b. apply the rest of the edits, evaluate in the sandbox (rank 0), share the trusted rewards
        rewards = None
        if info.is_main:
            outputs = [group for part, _ in gathered for group in part]
            gen_time = max(t for _, t in gathered)
            t_eval = time.perf_counter()
            done = len(mine) if on_batch is not None else 0
            if done < len(outputs):
                evaluation.submit(done, outputs[done:], progress)
            rows, is_program = evaluation.result()
            eval_time = time.perf_counter() - t_eval  # what generation did not hide
            rewards = [[rows[j * G + g]["reward"] for g in range(G)] for j in range(len(jobs))]
        rewards = broadcast(rewards, info)

        # 5. GRPO step (all ranks)
        train_metrics, sync_time = {}, 0.0
        if learner is not None:
            # Engine logprobs are raw log pi (temperature 1): comparable with the trainer's only then.
            raw = cfg.rollout.temperature == 1.0
            samples = [Sample(job.token_ids, c.token_ids, rewards[job.index][g], job.index, c.truncated,
                              c.logprobs if raw else None)
                       for job, group in zip(mine, completions) for g, c in enumerate(group)]
            train_metrics = learner.step(samples)
            if engine.needs_sync and not train_metrics.get("skipped_step"):  # an engine with its own copy of the weights
                t_sync = time.perf_counter()
                engine.sync_weights(learner.full_state_dict())  # collective under fsdp2/deepspeed
                sync_time = time.perf_counter() - t_sync

        ids = diversity = chosen = best = select_time = None
        if info.is_main:  # 6-7. archive, embed, kNN diversity, selection
            t_sel = time.perf_counter()
            ids = evo.add_children(rows, is_program, [job.tag for job in jobs for _ in range(G)])
            diversity, chosen = evo.select(epoch, rng)
            select_time = time.perf_counter() - t_sel
            best = evo.archive.best()
            if best is not None:
                run_dir.write_best(best.code, best.reward, best.id, best.epoch)

        metrics = samples = None
        if info.is_main:
            times = dict(gen_time_s=gen_time, eval_time_s=eval_time, train_time_s=train_metrics.pop("train_time_s", 0.0),
                         weight_sync_time_s=sync_time, eval_busy_s=evaluation.busy_s, embed_select_time_s=select_time)
            metrics = epoch_metrics(
                epoch, rows, is_program, [len(c[0]) for group in outputs for c in group],
                [bool(c[2]) for group in outputs for c in group], np.asarray(evo.pool_rewards), diversity, chosen,
                best.reward if best else None, evo.archive.count(), train_metrics,
                extra=dict(embedded=evo.embedded_last, prompt_items_dropped=sum(len(d["dropped"]) for d in dropped),
                           prompt_dropped=dropped))
            add_phase_times(metrics, dict(times, epoch_time_s=time.perf_counter() - t0))  # final after the checkpoint
            samples = [dict(epoch=epoch, solution_id=ids[i], parent_id=rows[i]["parent_id"], reward=rows[i]["reward"],
                            feedback=rows[i]["feedback"][:500], completion=rows[i]["completion"])
                       for i in range(min(cfg.run.samples_per_epoch, len(rows)))]

        # Budgets (fair ablations): every rank must agree to stop, so rank 0 decides.
        stop = None
        if info.is_main:
            spent = evo.archive.count() - 1  # children so far (the seed is not one)
            stop = bool((cfg.run.max_evaluations and spent >= cfg.run.max_evaluations)
                        or (cfg.run.time_budget_s and time.perf_counter() - t_start >= cfg.run.time_budget_s))
        stop = broadcast(stop, info)

        # 8. checkpoint (all ranks: the learner may be sharded). It carries this epoch's log rows,
        # so a kill between the checkpoint and the log append loses no row on resume.
        t_ckpt = time.perf_counter()
        if cfg.run.checkpoint_every and (epoch % cfg.run.checkpoint_every == 0 or epoch == cfg.trainer.epochs or stop):
            save_checkpoint(run_dir.path if run_dir else None, epoch, learner, evo, info, cfg.run.keep_checkpoints,
                            logs=dict(metrics=metrics, samples=samples) if info.is_main else None)
        ckpt_time = time.perf_counter() - t_ckpt

        if info.is_main:
            times.update(checkpoint_time_s=ckpt_time, epoch_time_s=time.perf_counter() - t0)
            run_dir.log_metrics(add_phase_times(metrics, times))
            run_dir.log_samples(samples)
            _say(table_row(metrics), progress)
            if stop and epoch < cfg.trainer.epochs:
                _say(f"[helix] budget reached after epoch {epoch} ({spent} children); stopping", progress)
        if stop:
            break

    out = None
    # Sharded weights are gathered by every rank together; rank 0 writes them.
    sharded = learner is not None and learner.strategy in ("fsdp2", "deepspeed")
    full = learner.full_state_dict() if cfg.run.export and sharded else None
    if info.is_main:
        if cfg.run.export:
            from train.export import export_hf, export_state

            if full is not None:
                out = export_state(full, policy, run_dir.export_path, cfg.model.dtype, cfg.model.cache_dir)
            else:
                out = export_hf(model, tokenizer, run_dir.export_path)
            print(f"[helix] exported Hugging Face model to {out}", flush=True)
        best = evo.archive.best()
        if best is not None:
            print(f"[helix] best reward {best.reward:.10g} (solution {best.id}, epoch {best.epoch}); "
                  f"program: {run_dir.path / 'best_program.py'}", flush=True)
        evo.archive.close()
        run_dir.close()
        out = run_dir.path
    broadcast(None, info)  # keep the other ranks alive until rank 0 is done writing
    return out


def _resolve_resume(target: str) -> tuple[Path, Path]:
    """(run dir, its newest complete checkpoint) for ``--resume RUN_DIR`` (or a checkpoint dir)."""
    from train.checkpoint import latest_checkpoint

    path = Path(target)
    if (path / "state.json").is_file() and path.parent.name == "checkpoints":
        return path.parent.parent, path
    if not (path / "config.yaml").is_file():
        raise ConfigError(f"--resume {target}: not a run directory (no config.yaml in it)")
    ckpt = latest_checkpoint(path)
    if ckpt is None:
        raise ConfigError(f"--resume {target}: no complete checkpoint in {path / 'checkpoints'} (the run stopped "
                          "before its first one, or run.checkpoint_every was 0); start a new run instead")
    return path, ckpt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["export"]:  # helix export RUN_DIR OUT_DIR
        from train.export_cli import main as export_main

        return export_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="helix", description="HELIX: GRPO + NSGA-II evolutionary program search. "
        "Also: 'helix export RUN_DIR OUT_DIR' writes a run's policy as a Hugging Face model directory.")
    parser.add_argument("--config", help="YAML file under configs/ (a new run)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its newest complete checkpoint, "
                        "with the run's own config.yaml (overrides still apply, e.g. trainer.epochs=120)")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. trainer.lr=2e-6 selection.strategy=top_score")
    args = parser.parse_args(argv)
    if bool(args.config) == bool(args.resume):
        parser.error("give exactly one of --config (a new run) or --resume RUN_DIR")
    resume = None
    try:
        if args.resume:
            run_path, resume = _resolve_resume(args.resume)
            cfg = load_config(str(run_path / "config.yaml"), list(args.overrides) + [
                f"run.output_dir={run_path.parent}", f"run.name={run_path.name}"])
            stem = run_path.name
        else:
            cfg = load_config(args.config, args.overrides)
            stem = Path(args.config).stem
    except ConfigError as err:
        print(f"helix: config error: {err}", file=sys.stderr)
        return 2
    from train.models import ModelNotFoundError

    from train.sharding import needs_process_group

    info = init_distributed(single_process_group=needs_process_group(cfg.trainer.strategy, cfg.trainer.enabled))
    try:
        run(cfg, stem, info, resume=resume)
    except ConfigError as err:
        print(f"helix: config error: {err}", file=sys.stderr)
        return 2
    except (ModelNotFoundError, FileNotFoundError) as err:  # a model that is not on this machine
        print(f"helix: error: {err}", file=sys.stderr)
        return 2
    finally:
        shutdown(info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
