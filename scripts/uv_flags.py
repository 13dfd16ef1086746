"""pip's configuration as uv flags, so scripts/setup.sh's uv installs from exactly the indexes, wheel folders and
certificates pip would use (uv reads no pip.conf and no PIP_* variable).

    python3 scripts/uv_flags.py VENV_PYTHON              # one flag per line, for bash's mapfile
    python3 scripts/uv_flags.py --timeout VENV_PYTHON    # pip's timeout in seconds, or nothing: uv takes it as UV_HTTP_TIMEOUT

It asks pip itself (`VENV_PYTHON -m pip config list`: every config file and every PIP_* variable, merged) and keeps
pip's precedence: a PIP_* variable over the [install] section over [global]. Only the options that decide where
packages come from are translated; anything else in pip's configuration (a proxy, --prefer-binary, ...) is named on
stderr, and HELIX_INSTALLER=pip makes setup.sh install with pip itself. The constraint file is not translated:
setup.sh passes its own (constraints.txt), as it does to pip through PIP_CONSTRAINT.

Standard library only: it runs under the system python3.
"""

from __future__ import annotations

import ast
import subprocess
import sys

# pip option -> uv flag; the values of the first three are whitespace-separated lists in pip's configuration.
LISTS = {"extra-index-url": "--extra-index-url", "find-links": "--find-links", "trusted-host": "--allow-insecure-host"}
SINGLE = {"index-url": "--index-url", "cert": "--cert"}
SWITCHES = {"no-index": "--no-index"}
# pip's two names for one option (--timeout, --default-timeout): one key, so pip's precedence holds across them.
ALIASES = {"default-timeout": "timeout"}
# Set by setup.sh for uv (the constraints; the timeout as UV_HTTP_TIMEOUT), or irrelevant to what gets installed:
# never reported.
QUIET = {"constraint", "timeout", "disable-pip-version-check", "progress-bar", "no-compile",
         "root-user-action", "no-warn-script-location", "no-input", "quiet", "verbose", "cache-dir", "no-cache-dir"}
TRUE = {"1", "true", "yes", "on", "y", "t"}


def merged(listing: str) -> dict[str, str]:
    """`pip config list` lines (`section.key='value'`) as one value per option, with pip's own precedence."""
    rank = {"global": 0, "install": 1, ":env:": 2}
    best: dict[str, tuple[int, str]] = {}
    for line in listing.splitlines():
        if "=" not in line:
            continue
        name, _, raw = line.partition("=")
        section, _, key = name.rpartition(".")
        if section not in rank:
            continue  # another command's section, e.g. [freeze]
        key = key.replace("_", "-")
        key = ALIASES.get(key, key)
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        if key not in best or rank[section] >= best[key][0]:
            best[key] = (rank[section], str(value))
    return {key: value for key, (_, value) in best.items()}


def flags(options: dict[str, str]) -> tuple[list[str], list[str]]:
    """(uv flags, pip options left untranslated)."""
    out: list[str] = []
    for key, value in options.items():
        if key in SINGLE and value:
            out += [SINGLE[key], value]
        elif key in LISTS:
            for item in value.split():
                out += [LISTS[key], item]
        elif key in SWITCHES and value.strip().lower() in TRUE:
            out.append(SWITCHES[key])
    # pip takes the best version across all indexes; uv's default stops at the first index that has the package.
    out += ["--index-strategy", "unsafe-best-match"]
    left = sorted(k for k in options if k not in LISTS | SINGLE | SWITCHES and k not in QUIET)
    return out, left


def timeout(options: dict[str, str]) -> str:
    """pip's timeout as whole seconds for UV_HTTP_TIMEOUT (uv wants an integer), or "" when pip has none."""
    try:
        return str(max(1, round(float(options.get("timeout", "")))))
    except (ValueError, OverflowError):  # not a number, nan, inf
        return ""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    want_timeout = argv[:1] == ["--timeout"]
    argv = argv[1:] if want_timeout else argv
    if len(argv) != 1:
        print("uv_flags.py: usage: [--timeout] VENV_PYTHON", file=sys.stderr)
        return 2
    proc = subprocess.run([argv[0], "-m", "pip", "config", "list"], capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"uv_flags.py: `pip config list` failed:\n{proc.stderr}", file=sys.stderr)
        return proc.returncode
    if want_timeout:
        print(timeout(merged(proc.stdout)))
        return 0
    out, left = flags(merged(proc.stdout))
    if left:
        print(f"setup.sh: uv does not apply these pip settings: {', '.join(left)}; "
              "HELIX_INSTALLER=pip installs with pip if they matter", file=sys.stderr)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
