"""Scale plan: the expected epoch time per phase of a config on a target GPU node, and how many
evaluator cores keep evaluation under generation, from measured rates. A PROJECTION, not a
measurement: every input is printed with its source.

Why: at paper scale (B x G children an epoch, programs allowed up to a minute) the questions
before renting a node are where an epoch's time goes and how many CPU cores the sandbox needs.
Those follow from a few rates measured elsewhere (generation and train-step tokens/s per GPU,
sandbox evaluations/s per core) and the config; this script does only that arithmetic, and
says which number came from where.

    .venv/bin/python scripts/plan_scale.py --config configs/base/paper_14b.yaml task.name=circle_packing_26 \\
        --gen-tok-s-per-gpu 850 --train-tok-s-per-gpu 1670 --node-cores 112 --params 14.77e9 --disk-gb-s 2 \\
        --source gen-tok-s-per-gpu="scripts/bench/bench_rollout.py on the node, 2026-..." [section.key=value ...]

Model (the pure functions below; tests/commands/test_plan_scale.py checks them by hand):
- children per epoch = trainer.prompts_per_epoch x rollout.group_size.
- generate = children x answer tokens / (GPUs x generation tokens/s per GPU): decode-bound,
  prompt prefill not counted (with prefix caching a group's prompt is prefilled once).
- train = children x (prompt + answer tokens) x passes / (GPUs x train tokens/s per GPU), where
  the rate is that of one ``scripts/bench/bench_trainer_gpu.py`` step (policy forward + backward and
  a reference forward: 8N FLOPs a token) and passes = (6 x ppo_epochs + 2 if kl_coef > 0 + 2 if
  the rollouts take more than one optimizer step, for pi_old) / 8; 1 for the paper configs.
- evaluate = children x seconds per child / evaluator cores (mean durations), or
  children / (evaluations/s per core x cores) from a measured rate; the per-core rate is read
  from the measured figures (BENCHMARKS.json's sandbox rows) unless given. The worst case (every child runs to the task's
  time limit) is printed beside it, also in whole waves of ``cores`` programs.
- checkpoint = parameters x bytes per parameter / disk rate, every run.checkpoint_every epochs.
- evaluator cores needed so that evaluation takes no longer than generation =
  ceil(children x seconds per child / generation seconds).
Phases are added one after another (the loop's order); overlap from rollout.batch_size, weight
sync to the engine, vLLM sleep/wake and prompt building are not modelled.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

# The measured figures, beside BENCHMARKS.md in the checkout (as many folders up as this module is deep in train/).
MEASURED = Path(__file__).resolve().parents[__name__.count(".")] / "BENCHMARKS.json"

# ---------------------------------------------------------------------------------------------
# Pure arithmetic (no printing, no config): what the tests check.
# ---------------------------------------------------------------------------------------------


def _ceil(x: float) -> int:
    """ceil that does not turn 50.000000000001 (float noise at an exact boundary) into 51."""
    return math.ceil(round(x, 9))


def children_per_epoch(prompts_per_epoch: int, group_size: int) -> int:
    return prompts_per_epoch * group_size


def generation_s(children: int, answer_tokens: float, gpus: int, gen_tok_s_per_gpu: float) -> float:
    """Decode-bound: every generated token at the node's aggregate decode rate; prefill ignored."""
    return children * answer_tokens / (gpus * gen_tok_s_per_gpu)


def train_passes(ppo_epochs: int = 1, ppo_mini_batches: int = 1, kl_coef: float = 1e-3) -> float:
    """The step's cost relative to one bench_trainer_gpu step (6N policy forward + backward + 2N
    reference forward a token): ppo_epochs policy passes, the reference forward when there is a
    KL term, and a pi_old forward when the rollouts take more than one optimizer step."""
    flops = 6 * ppo_epochs + (2 if kl_coef > 0 else 0) + (2 if ppo_epochs * ppo_mini_batches > 1 else 0)
    return flops / 8


def train_s(children: int, prompt_tokens: float, answer_tokens: float, gpus: int, train_tok_s_per_gpu: float,
            passes: float = 1.0) -> float:
    """Every sample's prompt and answer through the step, counted per sample as bench_trainer_gpu counts."""
    return children * (prompt_tokens + answer_tokens) * passes / (gpus * train_tok_s_per_gpu)


def eval_s_from_duration(children: int, s_per_child: float, cores: int) -> float:
    """Mean durations: the pool's busy time spread over its cores."""
    return children * s_per_child / cores


def eval_s_from_rate(children: int, evals_per_s_per_core: float, cores: int) -> float:
    return children / (evals_per_s_per_core * cores)


def eval_waves_s(children: int, s_per_child: float, cores: int) -> float:
    """Every child taking exactly ``s_per_child`` (a timeout): whole waves of ``cores`` programs."""
    return _ceil(children / cores) * s_per_child


def cores_needed(children: int, s_per_child: float, gen_s: float) -> int:
    """Evaluator cores so that children x s_per_child of work fits in the generation time."""
    return max(1, _ceil(children * s_per_child / gen_s))


def cores_needed_waves(children: int, s_per_child: float, gen_s: float) -> int | None:
    """The same when every child takes exactly ``s_per_child``: waves that fit = floor(gen / s);
    None when one child alone outlasts generation (no core count helps)."""
    waves = math.floor(round(gen_s / s_per_child, 9))
    return None if waves < 1 else max(1, _ceil(children / waves))


def checkpoint_bytes_per_param(strategy: str, model_dtype: str, bf16: bool) -> tuple[float, str]:
    """Bytes a checkpoint holds per parameter, and why, for what the backends save: the weights in
    the dtype the learner holds them, and torch AdamW's m and v in the same dtype. fsdp2 with
    trainer.bf16 holds fp32 master weights whatever model.dtype loaded (train.learner.backend_torch casts
    its shards after sharding). DeepSpeed with bf16 keeps fp32 master weights and fp32 Adam state
    beside the bf16 weights."""
    if strategy == "deepspeed" and bf16:
        return 14.0, "deepspeed bf16: bf16 weights 2 + fp32 master 4 + fp32 Adam m, v 8"
    if strategy == "fsdp2" and bf16:
        return 12.0, "fsdp2 bf16: fp32 master weights 4 + fp32 AdamW m, v 8 (bf16 is for compute only)"
    size = {"bfloat16": 2, "float32": 4}[model_dtype]
    return 3.0 * size, f"model.dtype={model_dtype}: weights {size} + AdamW m, v {2 * size} (AdamW's state takes the weights' dtype)"


def checkpoint_s(params: float, bytes_per_param: float, disk_gb_s: float) -> float:
    return params * bytes_per_param / (disk_gb_s * 1e9)


def params_from_hf_config(cfg: dict) -> int:
    """Parameters of a Llama/Qwen2-style decoder from its HF ``config.json``: q/k/v (Qwen2 has
    their biases), o, a gated MLP, two RMSNorms a layer, embeddings (the LM head again unless tied)
    and the final norm."""
    h, inter, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", heads)
    hd = cfg.get("head_dim") or h // heads
    bias = cfg.get("attention_bias", cfg.get("model_type") == "qwen2")
    attn = h * heads * hd + 2 * h * kv * hd + heads * hd * h + ((heads + 2 * kv) * hd if bias else 0)
    per_layer = attn + 3 * h * inter + 2 * h
    embeddings = cfg["vocab_size"] * h * (1 if cfg.get("tie_word_embeddings", False) else 2)
    return layers * per_layer + embeddings + h


def sandbox_rate(measured: dict, program: str, source: str = "BENCHMARKS.json") -> tuple[float, str]:
    """Evaluations/s per core from the measured figures' sandbox rows (BENCHMARKS.json, which
    ``scripts/bench/bench_sandbox.py --record`` writes): the row of ``program`` with the most workers (every
    core busy, as in the pool), its sandbox evals/s over its workers. ``source`` names the file in the answer."""
    sandbox = measured.get("sandbox") if isinstance(measured, dict) else None
    if not isinstance(sandbox, dict) or not isinstance(sandbox.get("rows"), list):
        raise ValueError("no sandbox rates (a 'sandbox' entry with 'rows')")
    try:
        rows = [(int(r["workers"]), float(r["sandbox_evals_per_s"])) for r in sandbox["rows"] if r.get("program") == program]
    except (AttributeError, KeyError, TypeError) as exc:
        raise ValueError(f"a sandbox row without its program, workers or sandbox_evals_per_s ({exc!r})") from None
    if not rows:
        raise ValueError(f"no row for '{program}' among the sandbox rates")
    workers, rate = max(rows)
    return rate / workers, (f"{source} sandbox ({sandbox.get('date', 'undated')}, {sandbox.get('machine', '?')}), "
                            f"row '{program}' with {workers} workers: {rate:g} sandbox evals/s / {workers} workers")


@dataclass
class Phase:
    name: str
    seconds: float
    how: str


@dataclass
class Plan:
    children: int
    phases: list[Phase]
    gen_s: float
    eval_s_per_child: float  # the expected (mean) seconds a child takes
    worst_s_per_child: float | None  # the task's time limit
    eval_cores: int
    extra: dict = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return sum(p.seconds for p in self.phases)


def make_plan(*, prompts_per_epoch: int, group_size: int, prompt_tokens: float, answer_tokens: float, gpus: int,
              gen_tok_s_per_gpu: float, train_tok_s_per_gpu: float, eval_cores: int, passes: float = 1.0,
              eval_s_per_child: float | None = None, evals_per_s_per_core: float | None = None,
              timeout_s: float | None = None, params: float | None = None, bytes_per_param: float | None = None,
              disk_gb_s: float | None = None, checkpoint_every: int = 1) -> Plan:
    """All phases of one epoch; ``eval_s_per_child`` wins over ``evals_per_s_per_core``."""
    if eval_s_per_child is None and evals_per_s_per_core is None:
        raise ValueError("need eval_s_per_child or evals_per_s_per_core")
    n = children_per_epoch(prompts_per_epoch, group_size)
    gen = generation_s(n, answer_tokens, gpus, gen_tok_s_per_gpu)
    phases = [Phase("generate", gen, f"{n} x {answer_tokens:g} answer tokens / ({gpus} GPUs x {gen_tok_s_per_gpu:g} tok/s)")]
    if eval_s_per_child is not None:
        ev = eval_s_from_duration(n, eval_s_per_child, eval_cores)
        how = f"{n} children x {eval_s_per_child:g} s / {eval_cores} cores"
        per_child = eval_s_per_child
    else:
        ev = eval_s_from_rate(n, evals_per_s_per_core, eval_cores)
        how = f"{n} children / ({evals_per_s_per_core:g} evals/s x {eval_cores} cores)"
        per_child = 1.0 / evals_per_s_per_core
    phases.append(Phase("evaluate", ev, how))
    tokens = n * (prompt_tokens + answer_tokens)
    phases.append(Phase("train step", train_s(n, prompt_tokens, answer_tokens, gpus, train_tok_s_per_gpu, passes),
                        f"{tokens:,.0f} tokens x {passes:g} (train passes) / ({gpus} GPUs x {train_tok_s_per_gpu:g} tok/s)"))
    extra = {}
    if params is not None and bytes_per_param is not None:
        extra["checkpoint_gb"] = params * bytes_per_param / 1e9
        if disk_gb_s is not None and checkpoint_every > 0:
            one = checkpoint_s(params, bytes_per_param, disk_gb_s)
            extra["checkpoint_s"] = one
            phases.append(Phase(f"checkpoint (every {checkpoint_every} epochs, amortised)", one / checkpoint_every,
                                f"{extra['checkpoint_gb']:.1f} GB / {disk_gb_s:g} GB/s = {one:.1f} s, / {checkpoint_every}"))
    return Plan(n, phases, gen, per_child, timeout_s, eval_cores, extra)


def render(plan: Plan, inputs: list[tuple[str, str, str]], title: str) -> str:
    """The report: header, inputs with sources, the phase table, the evaluator-core answer."""
    out = [f"PROJECTION, not a measurement: {title}", "", "Inputs:", "", "| input | value | source |", "|---|---|---|"]
    out += [f"| {name} | {value} | {source.replace('|', '/')} |" for name, value, source in inputs]
    total = plan.total_s
    out += ["", f"Projected epoch ({plan.children} children):", "",
            "| phase | seconds | share of epoch | how |", "|---|---|---|---|"]
    out += [f"| {p.name} | {p.seconds:.1f} | {100 * p.seconds / total:.1f}% | {p.how} |" for p in plan.phases]
    out += [f"| epoch | {total:.1f} | 100% | phases one after another |", ""]
    need = cores_needed(plan.children, plan.eval_s_per_child, plan.gen_s)
    out.append(f"Evaluator cores needed so evaluation takes no longer than generation ({plan.gen_s:.1f} s): "
               f"{need} at {plan.eval_s_per_child:.4g} s a child (ceil({plan.children} x {plan.eval_s_per_child:.4g} / "
               f"{plan.gen_s:.1f})); the plan has {plan.eval_cores}.")
    worst = plan.worst_s_per_child
    if worst:
        fluid = cores_needed(plan.children, worst, plan.gen_s)
        waves = cores_needed_waves(plan.children, worst, plan.gen_s)
        worst_eval = eval_waves_s(plan.children, worst, plan.eval_cores)
        rest = total - plan.phases[1].seconds
        out.append(f"Worst case, every child runs to the task's {worst:g} s limit: {fluid} cores by the work "
                   f"(ceil({plan.children} x {worst:g} / {plan.gen_s:.1f})); "
                   + (f"{waves} when whole {worst:g} s programs run in waves" if waves is not None else
                      f"no core count when whole programs run in waves, since one {worst:g} s child outlasts generation")
                   + f". With the plan's {plan.eval_cores} cores evaluation takes {worst_eval:.0f} s "
                   f"({_ceil(plan.children / plan.eval_cores)} waves) and the epoch {rest + worst_eval:.1f} s.")
    if "checkpoint_gb" in plan.extra:
        out.append(f"Checkpoint size: {plan.extra['checkpoint_gb']:.1f} GB each"
                   + (f", {plan.extra['checkpoint_s']:.1f} s to write" if "checkpoint_s" in plan.extra else
                      " (no --disk-gb-s: its time is not in the epoch)") + ".")
    out.append("Not modelled: overlap of evaluation with generation (rollout.batch_size), weight sync to the engine, "
               "vLLM sleep/wake, prompt prefill, prompt building and selection.")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Command line: config + rates -> inputs with sources -> plan -> report.
# ---------------------------------------------------------------------------------------------

INPUT_NAMES = ["gen-tok-s-per-gpu", "train-tok-s-per-gpu", "evals-per-s-per-core", "eval-s-per-child", "gpus",
               "node-cores", "eval-cores", "prompt-tokens", "answer-tokens", "params", "ckpt-bytes-per-param",
               "disk-gb-s"]
MEASURE = {
    "gen-tok-s-per-gpu": "generation tokens/s per GPU: measure it with scripts/bench/bench_rollout.py on the target node "
                         "(the config's model, max_new_tokens and concurrency), divided by the GPUs it used",
    "train-tok-s-per-gpu": "train-step tokens/s per GPU: measure it with scripts/bench/bench_trainer_gpu.py on the target "
                           "node (its tokens/s over the ranks)",
}


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="plan_scale.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="a config under configs/, e.g. configs/base/paper_14b.yaml")
    ap.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="dotted config overrides, e.g. rollout.group_size=8")
    ap.add_argument("--gen-tok-s-per-gpu", type=float, help="REQUIRED: generation (decode) tokens/s per GPU")
    ap.add_argument("--train-tok-s-per-gpu", type=float, help="REQUIRED: train-step tokens/s per GPU (prompt + answer)")
    ap.add_argument("--evals-per-s-per-core", type=float,
                    help="sandbox evaluations/s per core (default: the measured sandbox rates, row '<task> starter')")
    ap.add_argument("--eval-s-per-child", type=float,
                    help="mean seconds a child program runs; overrides --evals-per-s-per-core")
    ap.add_argument("--gpus", type=int, help="GPUs on the node (default 8)")
    ap.add_argument("--node-cores", type=int, help="CPU cores on the node (default: this machine's os.cpu_count())")
    ap.add_argument("--eval-cores", type=int, help="evaluator cores (default: node cores - 2 per GPU, at least 1)")
    ap.add_argument("--prompt-tokens", type=float, help="mean prompt tokens (default: rollout.max_prompt_tokens, a cap)")
    ap.add_argument("--answer-tokens", type=float, help="mean answer tokens (default: rollout.max_new_tokens, a cap)")
    ap.add_argument("--params", type=float, help="policy parameters, e.g. 14.77e9 (default: model.policy's config.json)")
    ap.add_argument("--ckpt-bytes-per-param", type=float, help="default: from trainer.strategy, model.dtype, trainer.bf16")
    ap.add_argument("--disk-gb-s", type=float, help="checkpoint write rate in GB/s (without it: no checkpoint phase)")
    ap.add_argument("--measured", default=str(MEASURED), help="the measured figures (JSON) the sandbox rate is read from")
    ap.add_argument("--sandbox-row", help="program row of the sandbox rates (default: '<task.name> starter')")
    ap.add_argument("--source", action="append", default=[], metavar="NAME=TEXT",
                    help=f"where an input came from, printed beside it; NAME is one of: {', '.join(INPUT_NAMES)}")
    args = ap.parse_args(argv)
    for name in ("gen_tok_s_per_gpu", "train_tok_s_per_gpu"):
        if getattr(args, name) is None:
            flag = "--" + name.replace("_", "-")
            ap.error(f"missing {flag}: {MEASURE[flag[2:]]}. There is no default: it is a GPU rate this script cannot "
                     "read from the measured figures (no GPU row there yet).")
    for name in ("gen_tok_s_per_gpu", "train_tok_s_per_gpu", "evals_per_s_per_core", "eval_s_per_child", "gpus",
                 "eval_cores", "node_cores", "params", "disk_gb_s"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            ap.error(f"--{name.replace('_', '-')} must be > 0, got {value}")
    args.gpus_given, args.gpus = args.gpus is not None, args.gpus or 8
    args.sources = {}
    for text in args.source:
        name, sep, what = text.partition("=")
        if not sep or name not in INPUT_NAMES:
            ap.error(f"--source {text!r}: must be NAME=TEXT with NAME one of {', '.join(INPUT_NAMES)}")
        args.sources[name] = what
    args.error = ap.error
    return args


def _source(args: argparse.Namespace, name: str, default: str | None = None) -> str:
    """Where input ``name`` came from: its --source text, else ``default`` (by default: the flag itself)."""
    return args.sources.get(name, f"--{name} (no --source given)" if default is None else default)


def _model_inputs(args: argparse.Namespace, cfg) -> tuple[list[tuple[str, str, str]], float, float, float]:
    """The config, children, GPUs and their two rates, the tokens of a child and the train passes."""
    inputs = [
        ("config", args.config + (" " + " ".join(args.overrides) if args.overrides else ""), "--config"),
        ("children per epoch", f"{cfg.trainer.prompts_per_epoch} x {cfg.rollout.group_size}",
         "config: trainer.prompts_per_epoch x rollout.group_size"),
        ("gpus", str(args.gpus), _source(args, "gpus") if args.gpus_given else _source(args, "gpus", "default: one 8-GPU node")),
        ("gen-tok-s-per-gpu", f"{args.gen_tok_s_per_gpu:g}", _source(args, "gen-tok-s-per-gpu")),
        ("train-tok-s-per-gpu", f"{args.train_tok_s_per_gpu:g}", _source(args, "train-tok-s-per-gpu")),
    ]
    prompt_tokens = args.prompt_tokens if args.prompt_tokens is not None else cfg.rollout.max_prompt_tokens
    answer_tokens = args.answer_tokens if args.answer_tokens is not None else cfg.rollout.max_new_tokens
    inputs += [
        ("prompt-tokens", f"{prompt_tokens:g}", _source(args, "prompt-tokens") if args.prompt_tokens is not None else
         "config: rollout.max_prompt_tokens (the cap, assumed as the mean: an upper bound)"),
        ("answer-tokens", f"{answer_tokens:g}", _source(args, "answer-tokens") if args.answer_tokens is not None else
         "config: rollout.max_new_tokens (the cap, assumed as the mean: an upper bound)"),
    ]
    passes = train_passes(cfg.trainer.ppo_epochs, cfg.trainer.ppo_mini_batches, cfg.trainer.kl_coef)
    inputs.append(("train passes", f"{passes:g}", f"config: trainer.ppo_epochs={cfg.trainer.ppo_epochs}, ppo_mini_batches="
                   f"{cfg.trainer.ppo_mini_batches}, kl_coef={cfg.trainer.kl_coef:g} (relative to a bench_trainer_gpu step)"))
    return inputs, prompt_tokens, answer_tokens, passes


def _evaluator_inputs(args: argparse.Namespace, cfg) -> tuple[list[tuple[str, str, str]], float | None, int]:
    """A child's evaluation (given, or the measured sandbox rate) and the evaluator cores."""
    inputs, evals_rate = [], args.evals_per_s_per_core
    if args.eval_s_per_child is not None:
        inputs.append(("eval-s-per-child", f"{args.eval_s_per_child:g}", _source(args, "eval-s-per-child")))
    elif evals_rate is not None:
        inputs.append(("evals-per-s-per-core", f"{evals_rate:g}", _source(args, "evals-per-s-per-core")))
    else:
        row = args.sandbox_row or f"{cfg.task.name} starter"
        try:
            evals_rate, how = sandbox_rate(json.loads(Path(args.measured).read_text()), row, Path(args.measured).name)
        except (OSError, ValueError) as exc:  # json's errors are ValueErrors
            args.error(f"missing --evals-per-s-per-core (or --eval-s-per-child): could not read it from "
                       f"{args.measured} ({exc}); measure it with scripts/bench/bench_sandbox.py --record")
        inputs.append(("evals-per-s-per-core", f"{evals_rate:.4g}", _source(args, "evals-per-s-per-core", f"measured: {how} "
                       "(the starter program; LLM-written children may run far longer)")))
    node_cores = args.node_cores or os.cpu_count() or 1
    inputs.append(("node-cores", str(node_cores), _source(args, "node-cores") if args.node_cores else
                   "os.cpu_count() of the machine running this script"))
    if args.eval_cores:
        eval_cores = args.eval_cores
        inputs.append(("eval-cores", str(eval_cores), _source(args, "eval-cores")))
    else:
        eval_cores = max(1, node_cores - 2 * args.gpus)
        inputs.append(("eval-cores", str(eval_cores), _source(args, "eval-cores", f"ASSUMED: node cores {node_cores} - 2 per GPU "
                       f"(a trainer rank and its vLLM engine) x {args.gpus}")))
    return inputs, evals_rate, eval_cores


def _limits_inputs(args: argparse.Namespace, cfg) -> tuple[list[tuple[str, str, str]], float | None, float | None, float]:
    """The worst-case child (the task's time limit), the parameters and the checkpoint bytes per parameter."""
    inputs, timeout = [], cfg.task.timeout_s  # the task's own limit unless the config sets one (load_config)
    if timeout:
        inputs.append(("worst-case s per child", f"{timeout:g}", "config: task.timeout_s (or the task's own limit)"))
    params = args.params
    if params is not None:
        inputs.append(("params", f"{params:.4g}", _source(args, "params")))
    else:
        hf = Path(cfg.model.policy) / "config.json"
        if hf.is_file():
            params = params_from_hf_config(json.loads(hf.read_text()))
            inputs.append(("params", f"{params:.4g}", f"computed from {hf}"))
    bpp = args.ckpt_bytes_per_param
    if bpp is not None:
        inputs.append(("ckpt-bytes-per-param", f"{bpp:g}", _source(args, "ckpt-bytes-per-param")))
    else:
        bpp, why = checkpoint_bytes_per_param(cfg.trainer.strategy, cfg.model.dtype, cfg.trainer.bf16)
        inputs.append(("ckpt-bytes-per-param", f"{bpp:g}", f"config: trainer.strategy={cfg.trainer.strategy}, {why}"))
    if args.disk_gb_s is not None:
        if params is None:
            args.error(f"--disk-gb-s needs the parameter count: give --params (model.policy {cfg.model.policy!r} "
                       "has no config.json here)")
        inputs.append(("disk-gb-s", f"{args.disk_gb_s:g}", _source(args, "disk-gb-s")))
        inputs.append(("checkpoint_every", str(cfg.run.checkpoint_every), "config: run.checkpoint_every"))
    return inputs, timeout, params, bpp


def main(argv=None) -> int:
    args = parse_args(argv)
    from train.config.config import ConfigError, load_config

    try:
        cfg = load_config(args.config, args.overrides)
    except ConfigError as exc:
        args.error(str(exc))
    inputs, prompt_tokens, answer_tokens, passes = _model_inputs(args, cfg)
    evaluator, evals_rate, eval_cores = _evaluator_inputs(args, cfg)
    limits, timeout, params, bpp = _limits_inputs(args, cfg)
    plan = make_plan(prompts_per_epoch=cfg.trainer.prompts_per_epoch, group_size=cfg.rollout.group_size,
                     prompt_tokens=prompt_tokens, answer_tokens=answer_tokens, gpus=args.gpus,
                     gen_tok_s_per_gpu=args.gen_tok_s_per_gpu, train_tok_s_per_gpu=args.train_tok_s_per_gpu,
                     eval_cores=eval_cores, passes=passes, eval_s_per_child=args.eval_s_per_child,
                     evals_per_s_per_core=evals_rate, timeout_s=timeout, params=params, bytes_per_param=bpp,
                     disk_gb_s=args.disk_gb_s, checkpoint_every=cfg.run.checkpoint_every)
    print(render(plan, inputs + evaluator + limits, f"{args.config} on {args.gpus} GPUs"))
    return 0
