"""Exact 2D counting speed of the ``plane`` engine (DESIGN §7).

2-input ReLU MLPs with PyTorch's default init (``random_mlp(..., init="torch")``) on the box [-2, 2]^2.
For each network: regions, seconds (best of ``--repeat`` runs after one warm-up run), regions per second,
the peak of traced allocations during a run (``tracemalloc``, which sees NumPy's buffers), the growth of
the process's peak RSS, and the size of the resulting Partition.

    python benchmarks/exact2d_speed.py                 # the table
    python benchmarks/exact2d_speed.py --json          # one JSON object per line
    python benchmarks/exact2d_speed.py --widths 1800 --once   # 10^6 regions: one run, time and peak RSS

BLAS threads matter for the (small) matrix products: compare ``OPENBLAS_NUM_THREADS=1`` with the default.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tracemalloc

import numpy as np
from _machine import Clock, cpu_model, load_average, peak_rss_kb

from regioncount import Box, partition_plane, random_mlp

CASES = [(32, 32, 32), (64, 64, 64), (128, 128, 128), (100, 100, 100, 100, 100)]
ROW = ["widths", "regions", "seconds", "cpu_seconds", "regions_per_s", "peak_traced_mb", "peak_rss_mb"]
ROW += ["peak_rss_growth_mb", "partition_mb"]


def measure(widths, seed: int, repeat: int, lo: float, hi: float, once: bool = False) -> dict:
    net = random_mlp(2, widths, seed=seed, init="torch")
    box = Box(lo, hi, 2)
    if once:
        # a single cold run: wall and CPU time, and how far it pushed the process's peak RSS
        with Clock() as c:
            part = partition_plane(net, box)
        return {
            "widths": "x".join(map(str, widths)),
            "regions": part.n_regions,
            "seconds": round(c.wall, 2),
            "cpu_seconds": round(c.cpu, 2),
            "regions_per_s": round(part.n_regions / c.wall),
            "peak_rss_mb": round(c.rss1 / 1024, 1),
            "peak_rss_growth_mb": round((c.rss1 - c.rss0) / 1024, 1),
            "partition_mb": round(part.nbytes / 2**20, 1),
        }
    partition_plane(net, box)  # warm-up
    times, cpu = [], []
    for _ in range(repeat):
        with Clock() as c:
            part = partition_plane(net, box)
        times.append(c.wall)
        cpu.append(c.cpu)
    rss0 = peak_rss_kb()
    tracemalloc.start()
    part = partition_plane(net, box)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss1 = peak_rss_kb()
    best = min(times)
    return {
        "widths": "x".join(map(str, widths)),
        "regions": part.n_regions,
        "seconds": round(best, 4),
        "median_seconds": round(statistics.median(times), 4),
        "cpu_seconds": round(min(cpu), 4),
        "regions_per_s": round(part.n_regions / best),
        "regions_per_s_median": round(part.n_regions / statistics.median(times)),
        "regions_per_s_min": round(part.n_regions / max(times)),
        "regions_per_s_max": round(part.n_regions / min(times)),
        "peak_traced_mb": round(peak / 2**20, 1),
        "peak_rss_growth_mb": round((rss1 - rss0) / 1024, 1),
        "partition_mb": round(part.nbytes / 2**20, 2),
        "bytes_per_region_peak": round(peak / part.n_regions),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", action="append", help="comma-separated hidden widths (repeatable); default: the set")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per network (best is reported)")
    ap.add_argument("--box", type=float, nargs=2, default=(-2.0, 2.0), metavar=("LO", "HI"))
    ap.add_argument("--json", action="store_true", help="print one JSON object per network")
    ap.add_argument("--once", action="store_true", help="one cold run per network: time and peak RSS only")
    ap.add_argument("--quick", action="store_true", help="3x32 and 3x128 only")
    args = ap.parse_args()
    cases = [tuple(int(w) for w in s.split(",")) for s in args.widths] if args.widths else CASES
    if args.quick and not args.widths:
        cases = [(32, 32, 32), (128, 128, 128)]
    env = {
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "loadavg": load_average(),
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
    }
    rows = [measure(c, args.seed, args.repeat, *args.box, once=args.once) | {"seed": args.seed} for c in cases]
    if args.json:
        for r in rows:
            print(json.dumps(r | {"machine": env}))
        return
    print(
        f"machine: {env['nproc']} CPUs, {env['cpu']}, numpy {env['numpy']}, load {env['loadavg']}, "
        f"OPENBLAS_NUM_THREADS={env['OPENBLAS_NUM_THREADS']}"
    )
    head = [h for h in ROW if h in rows[0]]
    print(" | ".join(f"{h:>14}" for h in head))
    for r in rows:
        print(" | ".join(f"{r[h]!s:>14}" for h in head))


if __name__ == "__main__":
    main()
