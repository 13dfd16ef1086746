#!/usr/bin/env bash
# Fresh machine -> lint (ruff, config in pyproject.toml), then the whole test suite (slow end-to-end
# tests included). `.ci/run` calls this. Extra arguments go to pytest, e.g.
#   bash scripts/test.sh -m "not slow"      bash scripts/test.sh -k config      HELIX_SKIP_LINT=1 bash scripts/test.sh
# pytest runs on HELIX_TEST_WORKERS (default 2) pytest-xdist workers; tests marked xdist_group (a shared
# Ray cluster, the vLLM engines) stay on one worker. HELIX_TEST_WORKERS=0 (or -n 0) runs in one process.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" || exit $?
# tests/runs/test_ui_browser.py drives Debian's headless chromium (Playwright comes with setup.cfg's test extra;
# never `playwright install`). Installed here, as root or through sudo, when it is missing.
if [[ ! -x "${HELIX_CHROMIUM:-/usr/bin/chromium}" ]]; then
  echo "scripts/test.sh: installing Debian's chromium for the run browser's test (apt-get)" >&2
  if [[ $(id -u) -eq 0 ]]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  else sudo apt-get update -qq && sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi \
    || { echo "scripts/test.sh: could not install chromium (apt-get install -y chromium as root); the browser test needs it" >&2; exit 1; }
fi
cd "$ROOT"
if [[ -z "${HELIX_SKIP_LINT:-}" ]]; then
  # A user's own task folder in tasks/ (helix new-task; untracked) is theirs, not the project's: not linted, as the
  # tests check only the tasks git tracks (tasks/paths.py). Once added to git it is linted like any other.
  own=()
  while IFS= read -r dir; do [[ $dir =~ ^tasks/[^/]+/$ ]] && own+=(--extend-exclude "${dir%/}"); done \
    < <(git -C "$ROOT" ls-files --others --exclude-standard --directory -- tasks/ 2>/dev/null)
  "$ROOT/.venv/bin/ruff" check . "${own[@]}" || { echo "scripts/test.sh: ruff check failed (see above); fix it or run .venv/bin/ruff check --fix ." >&2; exit 1; }
fi
start=$SECONDS
"$ROOT/.venv/bin/python" -m pytest -n "${HELIX_TEST_WORKERS:-2}" --dist loadgroup "$@"
rc=$?
echo "scripts/test.sh: pytest took $((SECONDS - start)) s in all (exit code $rc, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null))"
if [[ $rc -eq 5 ]]; then
  echo "scripts/test.sh: pytest collected no tests; treating that as a failure." >&2
  exit 1
fi
exit $rc
