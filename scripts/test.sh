#!/usr/bin/env bash
# Fresh machine -> lint (ruff, config in pyproject.toml), then the whole test suite (slow end-to-end
# tests included). `.ci/run` calls this. Extra arguments go to pytest, e.g.
#   bash scripts/test.sh -m "not slow"      bash scripts/test.sh -k config      HELIX_SKIP_LINT=1 bash scripts/test.sh
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" || exit $?
# tests/test_ui_browser.py drives Debian's headless chromium (Playwright comes with setup.cfg's test extra;
# never `playwright install`). Installed here, as root or through sudo, when it is missing.
if [[ ! -x "${HELIX_CHROMIUM:-/usr/bin/chromium}" ]]; then
  echo "scripts/test.sh: installing Debian's chromium for the run browser's test (apt-get)" >&2
  if [[ $(id -u) -eq 0 ]]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  else sudo apt-get update -qq && sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi \
    || { echo "scripts/test.sh: could not install chromium (apt-get install -y chromium as root); the browser test needs it" >&2; exit 1; }
fi
cd "$ROOT"
if [[ -z "${HELIX_SKIP_LINT:-}" ]]; then
  "$ROOT/.venv/bin/ruff" check . || { echo "scripts/test.sh: ruff check failed (see above); fix it or run .venv/bin/ruff check --fix ." >&2; exit 1; }
fi
"$ROOT/.venv/bin/python" -m pytest "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "scripts/test.sh: pytest collected no tests; treating that as a failure." >&2
  exit 1
fi
exit $rc
