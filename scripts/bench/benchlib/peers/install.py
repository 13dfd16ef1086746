"""Each peer at a pinned version in a virtual environment of its own under HELIX's cache, installed once with
uv the way scripts/setup.sh installs HELIX: the indexes, wheel folders and certificates pip's own
configuration names (scripts/uv_flags.py), pip's timeout, and constraints.txt (torch pinned to the CPU
wheel, should a peer ask for torch at all). Never into HELIX's .venv: a peer's requirements (httpx==0.27,
hydra-core, ...) are not HELIX's.

    <HELIX_CACHE or ~/.cache/helix>/peers/<distribution>-<version>/

A finished install leaves a stamp (the pin and the constraints' hash); a venv with the right stamp is used
as it is, one without it is built again from scratch. A failed install is removed and raises PeerInstallError,
one line with uv's last error and the path of the full log.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
CONSTRAINTS = ROOT / "constraints.txt"
UV_FLAGS = ROOT / "scripts" / "uv_flags.py"
STAMP = ".helix-peer-stamp"


class PeerInstallError(RuntimeError):
    """A peer could not be installed; one line, naming the log."""


@dataclass(frozen=True)
class PeerPackage:
    distribution: str  # the PyPI name
    version: str
    module: str  # what `import` checks after the install

    @property
    def pin(self) -> str:
        return f"{self.distribution}=={self.version}"


def cache_root() -> Path:
    """HELIX's cache (as train.learner.models.cache_root: $HELIX_CACHE, else ~/.cache/helix), without
    importing torch for one path."""
    return Path(os.environ.get("HELIX_CACHE") or Path.home() / ".cache" / "helix")


def venv_dir(package: PeerPackage, root: Path | None = None) -> Path:
    return (root or cache_root()) / "peers" / f"{package.distribution}-{package.version}"


def stamp_text(package: PeerPackage) -> str:
    return f"{package.pin} constraints={hashlib.sha256(CONSTRAINTS.read_bytes()).hexdigest()[:16]}\n"


def installed(package: PeerPackage, venv: Path) -> bool:
    stamp = venv / STAMP
    return (venv / "bin" / "python").exists() and stamp.is_file() and stamp.read_text() == stamp_text(package)


def uv_binary() -> Path:
    """The uv setup.sh installed into HELIX's venv (next to this Python)."""
    uv = Path(sys.executable).parent / "uv"
    if not uv.exists():
        raise PeerInstallError(f"no uv next to {sys.executable}; run `bash scripts/setup.sh` (it installs uv 0.13.9)")
    return uv


def uv_environment() -> tuple[list[str], dict[str, str]]:
    """uv's flags and environment from pip's configuration, as setup.sh computes them."""
    flags = subprocess.run([sys.executable, str(UV_FLAGS), sys.executable], capture_output=True, text=True)
    if flags.returncode != 0:
        raise PeerInstallError(f"scripts/uv_flags.py failed: {flags.stderr.strip().splitlines()[-1:]}")
    timeout = subprocess.run([sys.executable, str(UV_FLAGS), "--timeout", sys.executable], capture_output=True, text=True)
    env = dict(os.environ)
    env.setdefault("UV_HTTP_TIMEOUT", timeout.stdout.strip() or "60")
    return [f for f in flags.stdout.splitlines() if f], env


def failure_line(log: Path) -> str:
    """uv's first error with the reason it gives on the next line; else the log's last line (a traceback's)."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    for i, line in enumerate(lines):
        if line.lower().startswith(("error", "×")):
            cause = lines[i + 1] if i + 1 < len(lines) and lines[i + 1].startswith(("cause:", "╰─▶", "Caused by")) else ""
            return f"{line} {cause}".strip()[:400]
    return (lines[-1] if lines else "(no output)")[:400]


def ensure_installed(package: PeerPackage, log: Path, root: Path | None = None) -> Path:
    """The peer's venv, installed now unless its stamp says it already is. Returns the venv's python."""
    venv = venv_dir(package, root)
    python = venv / "bin" / "python"
    if installed(package, venv):
        return python
    if venv.exists():
        shutil.rmtree(venv)
    log.parent.mkdir(parents=True, exist_ok=True)
    uv = uv_binary()
    flags, env = uv_environment()
    steps = [[str(uv), "venv", "--python", sys.executable, str(venv)],
             [str(uv), "pip", "install", "--python", str(python), *flags, "-c", str(CONSTRAINTS), package.pin],
             [str(python), "-c", f"import importlib.metadata as m, {package.module}; "
              f"v = m.version({package.distribution!r}); assert v == {package.version!r}, v; "
              "import importlib.util as u; t = u.find_spec('torch'); "
              "assert t is None or m.version('torch') == '2.13.0', 'a torch other than the CPU wheel 2.13.0'"]]
    with open(log, "w") as out:
        for step in steps:
            out.write(f"$ {' '.join(step)}\n")
            out.flush()
            proc = subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, env=env)
            if proc.returncode != 0:
                break
    if proc.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        raise PeerInstallError(f"installing {package.pin} failed (exit {proc.returncode}): {failure_line(log)} (log: {log})")
    (venv / STAMP).write_text(stamp_text(package))
    return python
