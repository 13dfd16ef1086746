#!/usr/bin/env bash
# Fresh machine -> a finished HELIX run on the CPU: set up .venv, then run the quickstart config.
# Extra arguments are config overrides, e.g.  bash scripts/quickstart.sh trainer.epochs=2
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" train/helix.py --config configs/quickstart.yaml "$@"
