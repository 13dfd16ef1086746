#!/usr/bin/env bash
# Fresh machine -> the whole test suite (slow end-to-end tests included). `.ci/run` calls this.
# Extra arguments go to pytest, e.g.  bash scripts/test.sh -m "not slow"  or  bash scripts/test.sh -k config
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" || exit $?
cd "$ROOT"
"$ROOT/.venv/bin/python" -m pytest "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "scripts/test.sh: pytest collected no tests; treating that as a failure." >&2
  exit 1
fi
exit $rc
