"""Population benchmark: embedding throughput, and the per-epoch cost of adding B*G children to
archives of 10^3..10^6 solutions (incremental kNN diversity + NSGA-II selection, as the loop
calls them), measured in the same run against the plain fp32 index, a naive full kNN
recomputation and pymoo's own NSGA2 survival.

    .venv/bin/python scripts/bench/bench_population.py            # prints a markdown table
    .venv/bin/python scripts/bench/bench_population.py --sizes 10000 100000 1000000 --skip-embedding --skip-ann

Archive embeddings are random unit vectors of the embedder's width (384): kNN and selection
costs depend on the sizes only, and the correctness of both is covered by tests/.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from population.diversity import BF16_MIN_ROWS, KnnIndex, div_from_topk, knn_diversity, normalise
from population.selection import Pool, make_strategy


def timed(fn, repeat: int = 1):
    best = float("inf")
    out = None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def bench_embedding(n: int = 64) -> list[tuple[str, float]]:
    from population.embedding import Embedder
    from tasks import load_task

    base = load_task("circle_packing_26").initial_program
    codes = [base.replace("0.3 *", f"0.{i % 9 + 1} *") + f"\nx_{i} = {i}\n" for i in range(n)]
    rows = []
    for dtype in ("float32", "bfloat16"):
        emb = Embedder(dtype=dtype)
        emb.embed(codes[:4])  # load and warm up
        seconds, _ = timed(lambda: emb.embed(codes))
        rows.append((dtype, n / seconds))
    return rows


def pymoo_survival(rewards: np.ndarray, diversity: np.ndarray, size: int) -> float:
    from pymoo.algorithms.moo.nsga2 import RankAndCrowdingSurvival
    from pymoo.core.population import Population
    from pymoo.core.problem import Problem

    def run():
        pop = Population.new("F", -np.column_stack([rewards, diversity]))
        return RankAndCrowdingSurvival().do(Problem(n_var=1, n_obj=2), pop, n_survive=size)

    return timed(run)[0]


def loop_epoch(index, new: np.ndarray, rewards: np.ndarray, size: int) -> np.ndarray:
    """What Evolution does with an epoch's children: index.add, index.diversity, NSGA-II on the pool."""
    index.add(new)
    diversity = index.diversity()
    return make_strategy("nsga2").select(Pool(rewards[: len(diversity)], diversity), size, np.random.default_rng(0))[0]


def bench_archive(n: int, children: int, k: int, dim: int, size: int, naive_limit: int, rng, repeat: int = 3) -> dict:
    """One epoch at archive size n, as the loop runs it, timed over ``repeat`` epochs (fresh children
    each, the index growing): the default index (bf16-prefiltered from BF16_MIN_ROWS rows where bf16
    is native) against the plain fp32 one, and the largest top-k difference between the two."""
    emb = normalise(rng.standard_normal((n, dim), dtype=np.float32))
    # The archive's current neighbour lists. Updating sorted synthetic lists costs exactly what
    # updating exact ones does, and building exact ones is O(N^2 d); tests/ cover exactness.
    topk = -np.sort(-rng.uniform(0.3, 0.9, size=(n, k)), axis=1).astype(np.float32)
    batches = [normalise(rng.standard_normal((children, dim), dtype=np.float32)) for _ in range(repeat + 1)]
    rewards = rng.random(n + children * (repeat + 1))
    row: dict = {"n": n}
    lists = {}
    for name, min_rows in (("fp32", None), ("default", BF16_MIN_ROWS)):
        index = KnnIndex.from_state(k, emb, topk, bf16_min_rows=min_rows)
        start = time.perf_counter()
        index.add(batches[0])  # after a restore: grows the buffer (and builds the bf16 copy) once
        row[f"{name}_first_s"] = time.perf_counter() - start
        times, cpu = [], []
        for new in batches[1:]:
            start, start_cpu = time.perf_counter(), time.process_time()
            index.add(new)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        row[f"{name}_knn_s"] = min(times)
        row[f"{name}_cpu_s"] = min(cpu)  # CPU seconds, all threads: what contention on a shared box cannot inflate much
        lists[name] = index.topk
        del index
    row["max_diff"] = float(np.abs(lists["fp32"] - lists["default"]).max())
    diversity = div_from_topk(lists["default"].astype(np.float64))
    pool = Pool(rewards[: len(diversity)], diversity)
    row["select_s"] = timed(lambda: make_strategy("nsga2").select(pool, size, np.random.default_rng(0)), repeat=3)[0]
    row["pymoo_s"] = pymoo_survival(pool.rewards, diversity, size)
    if n <= naive_limit:
        everything = np.vstack([emb, batches[0]])
        row["naive_s"] = timed(lambda: knn_diversity(everything, everything, k, np.arange(len(everything))))[0]
    return row


def clustered(rng, n: int, dim: int, clusters: int = 2000) -> np.ndarray:
    """A stand-in for code embeddings, which are clustered (random Gaussian vectors in 384-d are
    all nearly orthogonal, a degenerate case for any approximate index)."""
    centers = rng.normal(size=(clusters, dim))
    return normalise((centers[rng.integers(0, clusters, n)] + 0.35 * rng.normal(size=(n, dim))).astype(np.float32))


def bench_ann(n: int, children: int, k: int, dim: int, rng) -> dict:
    """faiss HNSW vs exact, on the same clustered archive: time to add the children, recall of
    the children's top-k neighbour similarities, and the mean |Div error| over the children."""
    from population.ann import FaissKnnIndex

    emb, new = clustered(rng, n, dim), clustered(rng, children, dim)
    approx = FaissKnnIndex(k)
    t_build, _ = timed(lambda: approx.add(emb))
    t_add, _ = timed(lambda: approx.add(new))
    start = time.perf_counter()
    exact_new = knn_diversity(new, np.vstack([emb, new]), k, np.arange(n, n + children))
    t_exact = time.perf_counter() - start
    sims = new @ np.vstack([emb, new]).T
    sims[np.arange(children), np.arange(n, n + children)] = -np.inf
    exact_top = -np.sort(-sims, axis=1)[:, :k]
    recall = np.mean([len(np.intersect1d(np.round(a, 4), np.round(e, 4))) / k for a, e in zip(approx.topk[n:], exact_top)])
    err = float(np.abs(approx.diversity()[n:] - exact_new).mean())
    return {"n": n, "build_s": t_build, "add_s": t_add, "exact_s": t_exact, "recall": recall, "div_err": err}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--children", type=int, default=256)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--population", type=int, default=32)
    parser.add_argument("--naive-limit", type=int, default=100_000, help="largest archive to recompute naively")
    parser.add_argument("--skip-embedding", action="store_true")
    parser.add_argument("--skip-ann", action="store_true")
    parser.add_argument("--ann-sizes", type=int, nargs="+", default=[1000, 10_000, 100_000],
                        help="archive sizes for the faiss comparison (its HNSW build is slow past 10^5)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)

    if not args.skip_embedding:
        print("| embedder dtype | snippets/s |\n|---|---|")
        for dtype, rate in bench_embedding():
            print(f"| {dtype} | {rate:.1f} |")
        print()
    print(f"One epoch's selection work for {args.children} children (d=384, k={args.k}, population {args.population}); "
          f"load average {open('/proc/loadavg').read().split()[0]}:\n")
    print("| archive | kNN add, default | (CPU s) | kNN add, fp32 | (CPU s) | default / fp32 | max top-k diff | NSGA-II on the pool "
          "| total (default) | first add after restore | naive full kNN | pymoo NSGA2 survival | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        r = bench_archive(n, args.children, args.k, 384, args.population, args.naive_limit, rng)
        naive = f"{r['naive_s']:.3f} s" if "naive_s" in r else "-"
        print(f"| {n:,} | {r['default_knn_s']:.3f} s | {r['default_cpu_s']:.2f} | {r['fp32_knn_s']:.3f} s | {r['fp32_cpu_s']:.2f} "
              f"| {r['default_knn_s'] / r['fp32_knn_s']:.2f} | {r['max_diff']:.1e} | {r['select_s']:.3f} s "
              f"| {r['default_knn_s'] + r['select_s']:.3f} s | {r['default_first_s']:.2f} s | {naive} | {r['pymoo_s']:.3f} s "
              f"| {open('/proc/loadavg').read().split()[0]} |", flush=True)
    if not args.skip_ann:
        print(f"\nApproximate index (faiss HNSW, M=32, efSearch=128) on clustered embeddings, adding {args.children} children:\n")
        print("| archive | index build (once) | add children | exact kNN for the children | recall@k | mean abs Div error |")
        print("|---|---|---|---|---|---|")
        for n in args.ann_sizes:
            r = bench_ann(n, args.children, args.k, 384, rng)
            print(f"| {n:,} | {r['build_s']:.2f} s | {r['add_s']:.3f} s | {r['exact_s']:.3f} s | {r['recall']:.3f} | "
                  f"{r['div_err']:.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
