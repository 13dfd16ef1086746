"""Time to a first result on a new task: README's "Adding your own task" recipe, timed, on this machine.

    python scripts/bench/bench_new_task.py [--name bench_task_1] [--resume-check] [--keep]

Steps (the commands README shows, with the CPU run's output folder moved to a temporary one):
``helix new-task NAME`` (the template as it is: 12 points in the unit square), ``check-task NAME``,
then the CPU run on configs/quickstart.yaml, which builds the task's warm start (a new task has no
cached one) and trains. The clock stops at the first epoch's table row. With --resume-check the run
then gets a SIGINT (what Ctrl-C sends) in epoch 2, and the printed resume command is run for one more
epoch: the stop line and the resume are printed too. The load average before and after is printed:
the target (under 10 minutes) is for a quiet 2-core box. Afterwards the task folder, the run and the
warm start this created are removed (--keep keeps them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\s+(\d+)\s+-?\d+\.\d{4}\s")


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default=f"bench_task_{os.getpid()}")
    parser.add_argument("--resume-check", action="store_true", help="Ctrl-C in epoch 2, then resume for one epoch")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    py, name, out = sys.executable, args.name, Path(tempfile.mkdtemp(prefix="helix-bench-new-task-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    marks, lines, warm_dir = {"load_before": load()}, [], None
    start = time.perf_counter()

    def mark(key: str) -> None:
        marks[key] = round(time.perf_counter() - start, 1)
        print(f"[bench] {key}: {marks[key]} s", flush=True)

    subprocess.run([py, "train/helix.py", "new-task", name], cwd=ROOT, env=env, check=True, capture_output=True)
    mark("new_task_s")
    check = subprocess.run([py, "train/helix.py", "check-task", name], cwd=ROOT, env=env, capture_output=True, text=True)
    print(check.stdout.strip() or check.stderr.strip(), flush=True)
    mark("check_task_s")
    cmd = [py, "train/helix.py", "--config", "configs/quickstart.yaml", f"task.name={name}", f"run.output_dir={out}"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        for line in proc.stdout:
            lines.append(line)
            text = line.strip()
            if "warm start: building" in text:
                warm_dir = Path(text.split("building ", 1)[1].split(" (", 1)[0])
                mark("warm_start_begins_s")
                print(text, flush=True)
            elif "warm start:" in text and "examples" in text:
                mark("warm_start_built_s")
                print(text, flush=True)
            elif text.startswith("epoch") and "R mean" in text:
                mark("table_header_s")
            m = ROW.match(line)
            if m and m.group(1) == "1":
                mark("first_epoch_row_s")
                print(line.rstrip(), flush=True)
                if not args.resume_check:
                    os.killpg(proc.pid, signal.SIGTERM)
                    break
                time.sleep(20)  # into epoch 2 (epoch 1's checkpoint may still be being written)
                os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: the whole foreground group
                mark("sigint_s")
                break
        if args.resume_check and "sigint_s" in marks:
            rest = proc.communicate(timeout=300)[0]
            lines.append(rest)
            tail = [ln for ln in rest.splitlines() if ln.strip()]
            print("[bench] after Ctrl-C the terminal got:\n" + "\n".join(tail[-5:]), flush=True)
            print(f"[bench] exit code {proc.returncode}; 'Traceback' in the output: {'Traceback' in rest}", flush=True)
            stop = next((ln for ln in tail if "resume with: " in ln), None)
            if stop:
                resume = shlex.split(stop.split("resume with: ", 1)[1])
                resume = [py if resume[0] == "python" else resume[0], *resume[1:], "trainer.epochs=2"]
                again = subprocess.run(resume, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
                shown = [ln for ln in again.stdout.splitlines() if "resuming" in ln or ROW.match(ln)]
                print("[bench] resume:\n" + "\n".join(shown) + f"\n[bench] resume exit code {again.returncode}", flush=True)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        marks["load_after"] = load()
        print(json.dumps(marks), flush=True)
        (out / "bench_output.txt").write_text("".join(lines))
        if not args.keep:
            shutil.rmtree(ROOT / "tasks" / name, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            if warm_dir is not None and warm_dir.name.startswith("smollm2") and "-warm-" in warm_dir.name:
                shutil.rmtree(warm_dir, ignore_errors=True)  # the one this bench built, no other
                for extra in (warm_dir.parent / f"{warm_dir.name}.log", warm_dir.parent / f".{warm_dir.name}.lock"):
                    extra.unlink(missing_ok=True)
    return 0 if "first_epoch_row_s" in marks else 1


if __name__ == "__main__":
    sys.exit(main())
