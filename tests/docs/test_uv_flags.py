"""scripts/uv_flags.py: uv installs from exactly where pip would (pip's config files and PIP_* variables), with pip's
precedence, because uv reads neither."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "uv_flags.py"
spec = importlib.util.spec_from_file_location("uv_flags", SCRIPT)
uv_flags = importlib.util.module_from_spec(spec)
spec.loader.exec_module(uv_flags)

# `pip config list` on this project's CI boxes: a find-links folder and two file:// indexes in the global file,
# and PIP_* variables, which pip prints as ":env:".
LISTING = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/old-wheels'
"""


def test_the_ci_boxes_pip_config_becomes_the_same_sources_for_uv():
    out, left = uv_flags.flags(uv_flags.merged(LISTING))
    assert out == ["--cert", "/etc/ssl/certs/ca-certificates.crt", "--find-links", "/opt/wheels",
                   "--extra-index-url", "file:///opt/pypi/simple", "--extra-index-url", "file:///opt/pypi-more/simple",
                   "--index-strategy", "unsafe-best-match"]
    assert left == []  # the constraint and the timeout are setup.sh's own business


def test_a_variable_beats_the_install_section_which_beats_global_whatever_the_order():
    listing = ("install.index-url='https://install.example/simple'\n:env:.index-url='https://env.example/simple'\n"
               "global.index-url='https://global.example/simple'\nfreeze.index-url='https://freeze.example/simple'\n")
    assert uv_flags.merged(listing)["index-url"] == "https://env.example/simple"
    no_env = "\n".join(line for line in listing.splitlines() if not line.startswith(":env:"))
    assert uv_flags.merged(no_env)["index-url"] == "https://install.example/simple"


def test_underscored_keys_switches_and_trusted_hosts():
    listing = "global.extra_index_url='http://mirror.lan/simple'\nglobal.no-index='yes'\nglobal.trusted-host='mirror.lan a.b'\n"
    out, _ = uv_flags.flags(uv_flags.merged(listing))
    assert out[:2] == ["--extra-index-url", "http://mirror.lan/simple"] and "--no-index" in out
    assert out[out.index("--allow-insecure-host") + 1] == "mirror.lan" and out.count("--allow-insecure-host") == 2
    out, _ = uv_flags.flags(uv_flags.merged("global.no-index='false'\n"))
    assert "--no-index" not in out


def test_a_setting_uv_would_ignore_is_named_on_stderr(tmp_path):
    fake = tmp_path / "python"  # a venv python whose pip has a proxy and a prefer-binary setting
    fake.write_text("#!/bin/sh\nprintf \"global.proxy='http://proxy:3128'\\nglobal.prefer-binary='1'\\n"
                    "global.find-links='/w'\\n\"\n")
    fake.chmod(0o755)
    proc = subprocess.run([sys.executable, str(SCRIPT), str(fake)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0
    assert proc.stdout.split() == ["--find-links", "/w", "--index-strategy", "unsafe-best-match"]
    assert "uv does not apply these pip settings: prefer-binary, proxy" in proc.stderr and "HELIX_INSTALLER=pip" in proc.stderr


def test_a_failing_pip_config_fails_with_its_error(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'ERROR: pip is broken' >&2\nexit 4\n")
    fake.chmod(0o755)
    proc = subprocess.run([sys.executable, str(SCRIPT), str(fake)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 4 and "ERROR: pip is broken" in proc.stderr and proc.stdout == ""


def test_pips_timeout_reaches_uv_from_a_config_file_or_a_variable(tmp_path):
    # Either of pip's names, with pip's precedence across them: a variable over the config file.
    assert uv_flags.timeout(uv_flags.merged("global.timeout='300'\n")) == "300"
    assert uv_flags.timeout(uv_flags.merged("global.timeout='300'\n:env:.default-timeout='180'\n")) == "180"
    assert uv_flags.timeout(uv_flags.merged(":env:.default-timeout='180'\ninstall.default_timeout='90'\n")) == "180"
    assert uv_flags.timeout(uv_flags.merged("global.timeout='12.6'\n")) == "13"  # uv wants whole seconds
    assert uv_flags.timeout(uv_flags.merged("global.timeout='soon'\n")) == ""
    assert uv_flags.timeout(uv_flags.merged("global.timeout='inf'\n")) == ""  # setup.sh then uses its 60 s
    assert uv_flags.timeout(uv_flags.merged(LISTING)) == "180"
    assert uv_flags.timeout({}) == ""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nprintf \"global.timeout='240'\\nglobal.find-links='/w'\\n\"\n")
    fake.chmod(0o755)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--timeout", str(fake)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout == "240\n" and proc.stderr == ""
    proc = subprocess.run([sys.executable, str(SCRIPT), str(fake)], capture_output=True, text=True, timeout=30)
    assert proc.stdout.split() == ["--find-links", "/w", "--index-strategy", "unsafe-best-match"]
    assert proc.stderr == ""  # the timeout is no setting "uv does not apply"
