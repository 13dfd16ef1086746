"""scripts/setup.sh says what it is doing: a line per stage (scripts/setup_stages.py), pip's output kept aside and
shown in full when an install fails, no progress bars or counters in CI logs and pipes, and the up-to-date fast path."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAGES = ROOT / "scripts" / "setup_stages.py"
SETUP = ROOT / "scripts" / "setup.sh"

# A failing pip as the stage sees it: progress on stdout, a multi-line error on stderr, each line flushed as pip's
# logging does, and an explanation on stdout again.
FAILING = r"""
import sys
print("Collecting torch==2.13.0", flush=True)
print("  Downloading torch-2.13.0.whl (183.4 MB)", flush=True)
print("ERROR: Could not find a version that satisfies the requirement torch==2.13.0 (from versions: none)", file=sys.stderr, flush=True)
print("  hint line two of the error, indented", file=sys.stderr, flush=True)
print("ERROR: No matching distribution found for torch==2.13.0", file=sys.stderr, flush=True)
print("The conflict is caused by: nothing at all", flush=True)
sys.exit(3)
"""
# A succeeding pip: a progress bar and "Collecting" lines on stdout, one warning worth reading and the resolver's
# expected notes about verl's deliberately missing requirements on stderr.
SUCCEEDING = r"""
import sys, time
print("Collecting six", flush=True)
print("   ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 183.4/183.4 MB 12.0 MB/s eta 0:00:00", flush=True)
print("Successfully installed six-1.16.0 wheel-0.43.0", flush=True)
print("ERROR: pip's dependency resolver does not currently take into account all the packages that are installed.",
      file=sys.stderr)
print("verl 0.8.0 requires hydra-core, which is not installed.", file=sys.stderr, flush=True)
print("WARNING: the script foo is installed in '/x/bin' which is not on PATH.", file=sys.stderr, flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""


def stage(*command: str, env: dict | None = None, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(STAGES), "2/6", "HELIX and its requirements", "120 packages; typically 2 min",
                           *extra, "--", *command], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_a_failing_command_prints_its_whole_output_in_order_and_exits_with_its_status():
    proc = stage(sys.executable, "-c", FAILING)
    assert proc.returncode == 3
    assert proc.stdout.startswith("setup.sh: [2/6] HELIX and its requirements (120 packages; typically 2 min)\n")
    assert "FAILED after" in proc.stdout and "(exit status 3)" in proc.stdout and "done in" not in proc.stdout
    body = proc.stderr.split(" ----\n", 1)[1]
    assert body == ("Collecting torch==2.13.0\n  Downloading torch-2.13.0.whl (183.4 MB)\n"
                    "ERROR: Could not find a version that satisfies the requirement torch==2.13.0 (from versions: none)\n"
                    "  hint line two of the error, indented\nERROR: No matching distribution found for torch==2.13.0\n"
                    "The conflict is caused by: nothing at all\n----\n")


def test_a_command_that_cannot_start_is_a_one_line_failure():
    proc = stage("/nonexistent/pip")
    assert proc.returncode == 127 and "FAILED: cannot run /nonexistent/pip" in proc.stderr


def test_a_succeeding_command_shows_its_warnings_only_and_no_progress(tmp_path):
    noted = tmp_path / "noted"
    proc = stage(sys.executable, "-c", SUCCEEDING, extra=("--noted", str(noted)), env={"CI": ""})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "setup.sh: [2/6] HELIX and its requirements (120 packages; typically 2 min)"
    assert lines[1].startswith("    done in ") and lines[1].endswith("), 2 packages installed") and len(lines) == 2
    assert "━" not in proc.stdout + proc.stderr and "Collecting" not in proc.stdout + proc.stderr
    assert "\r" not in proc.stdout  # stdout is a pipe here: no counter rewriting its line
    assert proc.stderr == "WARNING: the script foo is installed in '/x/bin' which is not on PATH.\n"
    assert noted.exists()  # setup.sh then says once, at the end, why pip complained about verl


def test_the_venv_growth_is_reported(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    grow = f"import os; open({str(venv / 'blob')!r}, 'wb').write(os.urandom(3 << 20))"
    proc = stage(sys.executable, "-c", grow, extra=("--venv", str(venv)))
    assert proc.returncode == 0 and proc.stdout.splitlines()[1].endswith(", venv +3 MB"), proc.stdout


def _on_a_terminal(env: dict) -> str:
    """The stage's stdout as a person at a terminal sees it (a pty), for a command that runs 2.5 s."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, str(STAGES), "1/1", "x", "y", "--", sys.executable, "-c", SUCCEEDING, "2.5"],
                            stdout=follower, stderr=subprocess.DEVNULL, env={**os.environ, **env})
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    return out.decode()


@pytest.mark.slow  # end to end through a subprocess (5-9 s): kept out of the -m 'not slow' tier
def test_a_terminal_gets_a_seconds_counter_and_ci_does_not():
    """On a TTY the stage counts the seconds in place; with CI=true (a TTY in some CI runners) it writes whole
    lines only, as in a pipe."""
    live = _on_a_terminal({"CI": ""})
    assert "\r    ... 1 s" in live and "\r    ... 2 s" in live and "done in 3 s" in live
    ci = _on_a_terminal({"CI": "true"})
    assert "\r" not in ci.replace("\r\n", "\n") and "... " not in ci and "done in 3 s" in ci


def _setup_env(tmp_path: Path) -> dict:
    """setup.sh on a throwaway venv, with pip cut off from every index and wheel folder: any install fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "HELIX_VENV": str(tmp_path / "venv"), "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "CI": "true"}


@pytest.mark.slow  # creates a venv: 5-40 s on a loaded 2-core box
def test_setup_fails_at_the_first_stage_with_pips_error_in_full(tmp_path):
    """The real pip, cut off from every index: it states the error on stderr and explains it on stdout; both show."""
    proc = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=600, env=_setup_env(tmp_path))
    assert proc.returncode == 1
    assert "setup.sh: [1/6] torch 2.13.0, the CPU wheel (" in proc.stdout and "FAILED after" in proc.stdout
    error = proc.stderr
    assert error.index("ERROR: Cannot install torch==2.13.0") < error.index("The conflict is caused by:") < error.index(
        "The user requested (constraint) torch==2.13.0") < error.index("ERROR: ResolutionImpossible")
    assert "[2/6]" not in proc.stdout and not (tmp_path / "venv" / ".helix-setup-stamp").exists()


def test_setup_with_unchanged_requirements_installs_nothing(tmp_path):
    """The fast path: a venv whose stamp matches what setup.sh would install returns at once."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    digest = hashlib.sha256(b"".join((ROOT / f).read_bytes() for f in ("setup.cfg", "constraints.txt", "scripts/setup.sh")))
    (venv / ".helix-setup-stamp").write_text(f"{digest.hexdigest()} test\n")
    proc = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=60, env=_setup_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"setup.sh: {venv} is up to date; nothing to install.\n"


@pytest.mark.parametrize("seconds, text", [(0.4, "0 s"), (59, "59 s"), (60, "1 min 00 s"), (245.6, "4 min 06 s")])
def test_durations_read_as_minutes_and_seconds(seconds, text):
    spec = importlib.util.spec_from_file_location("setup_stages", STAGES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.duration(seconds) == text


def _fake_venv(tmp_path: Path, uv_installs: bool) -> tuple[Path, Path]:
    """A venv whose python and uv record each call's arguments (a line of them per call) instead of installing. Its
    pip installs uv or fails to, answers `pip config list` with one find-links folder and a timeout, and fails every
    other install; the fake uv records the UV_HTTP_TIMEOUT it was given and fails with a two-line error."""
    venv, calls = tmp_path / "venv", tmp_path / "calls"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f"""#!/bin/sh
echo "python $*" >> '{calls}'
case "$*" in
  *"pip config list"*) echo "global.find-links='/srv/wheels'"; echo "global.timeout='240'"; exit 0 ;;
  *" uv=="*) {'exit 0' if uv_installs else 'echo "ERROR: No matching distribution found for uv"; exit 1'} ;;
esac
echo "ERROR: pip cannot install here"; exit 1
""")
    uv = venv / "bin" / "uv"
    uv.write_text(f"#!/bin/sh\necho \"uv $*\" >> '{calls}'\necho \"UV_HTTP_TIMEOUT=$UV_HTTP_TIMEOUT\" >> '{calls}'\n"
                  "echo 'error: No solution found'\necho '  hint: two'\nexit 2\n")
    for exe in (python, uv):
        exe.chmod(0o755)
    return venv, calls


def _bare_env(tmp_path: Path, **extra: str) -> dict:
    env = {k: v for k, v in _setup_env(tmp_path).items() if k not in ("PYTHONDONTWRITEBYTECODE", "HELIX_INSTALLER")}
    return {**env, **extra}


@pytest.mark.parametrize("never_write", [False, True])
def test_uv_installs_from_pips_sources_with_the_constraints_and_shows_its_error_in_full(tmp_path, never_write):
    """uv (4-6x pip's speed) gets pip's find-links, the project's constraints, the venv's python, and compiles only
    where Python would never keep bytecode; when it fails, its whole output shows and setup stops."""
    venv, calls = _fake_venv(tmp_path, uv_installs=True)
    env = _bare_env(tmp_path, **({"PYTHONDONTWRITEBYTECODE": "1"} if never_write else {}))
    env.pop("UV_HTTP_TIMEOUT", None)
    proc = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "setup.sh: installing with uv 0.13.9" in proc.stdout and "[1/6] torch 2.13.0" in proc.stdout
    assert "error: No solution found\n  hint: two\n" in proc.stderr and "[2/6]" not in proc.stdout
    made = calls.read_text().splitlines()
    assert made[0].startswith("python -m pip --disable-pip-version-check install") and made[0].endswith(" uv==0.13.9")
    assert made[1] == made[2] == "python -m pip config list"  # the sources, then the timeout
    uv = made[3].split()
    assert uv[:5] == ["uv", "pip", "install", "--python", str(venv / "bin" / "python")]
    assert uv[uv.index("--find-links") + 1] == "/srv/wheels" and uv[uv.index("-c") + 1] == str(ROOT / "constraints.txt")
    assert uv[-1] == "torch==2.13.0" and ("--compile-bytecode" in uv) is never_write
    assert made[4] == "UV_HTTP_TIMEOUT=240"  # pip's configured timeout, not the 60 s default
    assert not (venv / ".helix-setup-stamp").exists()


def test_without_uv_pip_installs_and_says_why(tmp_path):
    """A box where uv cannot be installed (no wheel for it, no network to PyPI) falls back to pip, in one line."""
    _, calls = _fake_venv(tmp_path, uv_installs=False)
    proc = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=60, env=_bare_env(tmp_path))
    assert proc.returncode == 1
    assert ("setup.sh: uv 0.13.9 could not be installed (ERROR: No matching distribution found for uv); "
            "installing with pip instead") in proc.stdout
    assert calls.read_text().splitlines()[-1].split()[1:4] == ["-m", "pip", "--disable-pip-version-check"]
    assert "ERROR: pip cannot install here" in proc.stderr


def test_helix_installer_chooses_pip_or_is_refused(tmp_path):
    _, calls = _fake_venv(tmp_path, uv_installs=True)
    proc = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=60,
                          env=_bare_env(tmp_path, HELIX_INSTALLER="pip"))
    assert proc.returncode == 1 and "uv" not in calls.read_text() and "installing with uv" not in proc.stdout
    proc = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=60,
                          env=_bare_env(tmp_path, HELIX_INSTALLER="conda"))
    assert proc.returncode == 2 and "HELIX_INSTALLER must be uv or pip, not 'conda'" in proc.stderr


@pytest.mark.parametrize("never_write", [False, True])
def test_pip_leaves_byte_compiling_to_first_imports_unless_python_never_keeps_bytecode(tmp_path, never_write):
    """HELIX_INSTALLER=pip: --no-compile saves 20-45% of setup (pip compiles 3.4 GB of packages, most never imported); Python then compiles
    what a run imports, once. Under PYTHONDONTWRITEBYTECODE it would compile on every start, so pip compiles."""
    venv, argv = tmp_path / "venv", tmp_path / "argv"
    (venv / "bin").mkdir(parents=True)
    fake = venv / "bin" / "python"  # the venv's python, as stage 1 calls it: records its arguments, fails the stage
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > '{argv}'\nexit 1\n")
    fake.chmod(0o755)
    env = _bare_env(tmp_path, HELIX_INSTALLER="pip")
    if never_write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 1 and "[1/6] torch 2.13.0" in proc.stdout
    args = argv.read_text().split("\n")
    assert args[:2] == ["-m", "pip"] and "install" in args and "torch==2.13.0" in args
    assert ("--no-compile" in args) is not never_write
