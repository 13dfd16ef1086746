"""How long the run browser's pages take on synthetic runs of 10^3, 10^4 and 10^5 solutions.

    .venv/bin/python scripts/bench/bench_ui.py                    # 1000 10000 100000, in /tmp/helix-bench-ui
    .venv/bin/python scripts/bench/bench_ui.py --sizes 1000 --out /tmp/b

Each run is written with the real Archive writer the way a run writes it: epochs of B = 32 prompts x
G = 8 children (a ~1.5 kB program and a completion each, GRPO prompt ids, every 20th a crossover with a
second parent, a third invalid), parents drawn from the previous population of 64 (stored with its Div),
and metrics.jsonl. Then `scripts/ui.py` serves the folder and each page is timed two ways: its API
calls over HTTP (first call and median of 3), and in headless Chromium from navigation until the page
has drawn (body[data-ready]), which includes parsing the vendored libraries and drawing the charts/tree.

    .venv/bin/python scripts/bench/bench_ui.py --start-only       # start-up: process start to the first page

Start-up is timed from launching `scripts/ui.py` until `/api/runs` first answers 200 (the interpreter, the
imports, binding, the first page), 5 times; the run browser imports no torch, verl or sandbox.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import yaml

from population.archive import Archive

ROOT = Path(__file__).resolve().parents[2]
B, G, POP = 32, 8, 64
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def make_run(run: Path, n: int, seed: int = 0) -> dict:
    """A synthetic run of ``n`` solutions (starter included); returns ids worth opening."""
    rng = np.random.default_rng(seed)
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"task": {"name": "circle_packing_26"}, "trainer": {"epochs": 10**6},
                                                    "rollout": {"n_ancestors": 2, "group_size": G}}))
    body = "".join(f"    x{i} = np.sin({i} * t) * {i}.5  # line {i} of the evolved block\n" for i in range(40))
    metrics = []
    with Archive(run / "archive.sqlite") as arch:
        (root,) = arch.add_many([dict(parent_id=None, epoch=0, code="import numpy as np\n" + body, reward=1.0, valid=True,
                                      feedback="ok")])
        pop, pop_r, epoch, made = [root], [1.0], 0, 1
        arch.set_population(0, pop, diversity=[1.0])
        while made < n:
            epoch += 1
            rows = []
            for p in range(B):
                parent = pop[int(rng.integers(len(pop)))]
                mate = pop[int(rng.integers(len(pop)))] if p % 20 == 19 else None
                for g in range(G):
                    if made + len(rows) >= n:
                        break
                    valid = rng.random() > 0.33
                    reward = float(1 + epoch * 0.01 + rng.normal(0, 0.05)) if valid else 0.0
                    rows.append(dict(parent_id=parent, epoch=epoch, code=f"import numpy as np\n# child e{epoch} p{p} g{g}\n" + body,
                                     reward=reward, valid=valid, feedback="valid" if valid else "ran and failed: IndexError",
                                     metrics={"sum_radii": reward}, eval_time_s=float(rng.random()), prompt_id=f"e{epoch}-p{p}-g{g}",
                                     completion="<think>try</think><answer>" + "SEARCH/REPLACE " * 30 + "</answer>",
                                     second_parent_id=mate, operator="crossover" if mate else "edit"))
            ids = arch.add_many(rows)
            made += len(ids)
            cand = pop + ids
            rewards = np.array(pop_r + [r["reward"] for r in rows])
            keep = np.argsort(-rewards, kind="stable")[:POP]
            pop, pop_r = [cand[k] for k in keep], [float(rewards[k]) for k in keep]
            arch.set_population(epoch, pop, diversity=rng.random(len(pop)).tolist())
            metrics.append({"epoch": epoch, "reward_mean": float(np.mean([r["reward"] for r in rows])), "best_reward": max(pop_r),
                            "reward_max": max(r["reward"] for r in rows), "valid_frac": float(np.mean([r["valid"] for r in rows])),
                            "kl": 0.001, "entropy": 0.5, "gen_time_s": 10.0, "eval_time_s": 2.0, "train_time_s": 5.0,
                            "prompt_dropped": []})
        best = arch.best().id
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    return dict(n=n, best=best, epochs=epoch, mid_epoch=epoch // 2)


def get(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as r:
        r.read()
        assert r.status == 200, (url, r.status)
    return time.perf_counter() - start


def start_times(folder: Path, repeats: int = 5) -> list[float]:
    """Seconds from launching scripts/ui.py until /api/runs first answers 200, ``repeats`` times."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "ui.py"), str(folder), "--port", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        try:
            url = re.search(r"(http://127\.0\.0\.1:\d+)/", proc.stdout.readline())[1] + "/api/runs"
            while True:  # a server that prints its URL before it listens refuses at first
                try:
                    get(url)
                    break
                except urllib.error.URLError:
                    time.sleep(0.01)
            out.append(time.perf_counter() - start)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return out


def pages(rel: str, info: dict) -> dict[str, tuple[str, list[str]]]:
    """page name -> (its URL, the API calls it makes)."""
    q = f"run={rel}"
    return {
        "runs": ("/", ["/api/runs"]),
        "overview": (f"/run?{q}", [f"/api/overview?{q}", f"/api/solutions?{q}&offset=0&limit=50&order=-id"]),
        "solutions mid-page": (f"/run?{q}", [f"/api/solutions?{q}&offset={info['n'] // 2}&limit=50&order=-reward"]),
        "lineage": (f"/lineage?{q}", [f"/api/lineage?{q}&best=5"]),
        "expand a node": (f"/lineage?{q}", [f"/api/expand?{q}&id=1&limit=30"]),
        "solution": (f"/solution?{q}&id={info['best']}", [f"/api/solution?{q}&id={info['best']}"]),
        "population": (f"/population?{q}&epoch={info['mid_epoch']}", [f"/api/population?{q}&epoch={info['mid_epoch']}"]),
        "compare": (f"/compare?runs={rel}", [f"/api/compare?runs={rel}"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 10000, 100000])
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "helix-bench-ui")
    parser.add_argument("--no-browser", action="store_true", help="time the API calls only")
    parser.add_argument("--start-only", action="store_true", help="time the server's start-up only (the smallest size)")
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()}, cpus: {os.cpu_count()}")
    infos = {}
    for n in args.sizes:
        run = args.out / f"n{n}"
        if not (run / "archive.sqlite").is_file():
            start = time.perf_counter()
            infos[n] = make_run(run, n)
            (run / "bench.json").write_text(json.dumps(infos[n]))
            print(f"wrote {n} solutions ({infos[n]['epochs']} epochs) in {time.perf_counter() - start:.1f} s: {run}")
        infos[n] = json.loads((run / "bench.json").read_text())
    if args.start_only:
        times = start_times(args.out / f"n{min(args.sizes)}")
        print(f"start-up to the first /api/runs (s): {' '.join(f'{t:.2f}' for t in times)}; median "
              f"{statistics.median(times):.2f}, max {max(times):.2f}; load average after: {os.getloadavg()}")
        return 0
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "ui.py"), str(args.out), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    base = re.search(r"(http://127\.0\.0\.1:\d+)/", proc.stdout.readline())[1]
    results = []
    try:
        browser = None
        if not args.no_browser:
            from playwright.sync_api import sync_playwright

            pw = sync_playwright().start()
            browser = pw.chromium.launch_persistent_context(tempfile.mkdtemp(), executable_path="/usr/bin/chromium",
                                                            args=FLAGS, headless=True, viewport={"width": 1400, "height": 1000})
            tab = browser.new_page()
        for n in args.sizes:
            for name, (page, calls) in pages(f"n{n}", infos[n]).items():
                first = sum(get(base + c) for c in calls)
                warm = statistics.median(sum(get(base + c) for c in calls) for _ in range(3))
                shown = None
                if browser is not None:
                    start = time.perf_counter()
                    tab.goto(base + page)
                    tab.wait_for_selector("body[data-ready]", timeout=120_000)
                    shown = time.perf_counter() - start
                    assert tab.get_attribute("body", "data-ready") == "1", tab.inner_text("main")[:300]
                results.append((n, name, first, warm, shown))
                print(f"{n:>7} {name:<18} api first {first:6.3f} s  api median {warm:6.3f} s  "
                      f"browser {'-' if shown is None else f'{shown:6.3f} s'}", flush=True)
        if browser is not None:
            browser.close()
            pw.stop()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"load average after: {os.getloadavg()}")
    print("\n| solutions | page | API, first call (s) | API, median of 3 (s) | in Chromium until drawn (s) |\n|---|---|---|---|---|")
    for n, name, first, warm, shown in results:
        print(f"| {n} | {name} | {first:.3f} | {warm:.3f} | {'-' if shown is None else f'{shown:.3f}'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
