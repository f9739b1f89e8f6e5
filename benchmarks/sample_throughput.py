"""Sampled-counting throughput: forward + codes alone vs the whole count (dedup included).

Target (issue 2, DESIGN §7): the whole count keeps at least half the forward-only throughput.
Usage: python benchmarks/sample_throughput.py [--points N] [--repeats R] [--json FILE]
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import numpy as np
from _machine import write_json

import regioncount as rc
from regioncount import Box, count_sampled, forward_codes


def _forward_only(program, X, chunk):
    for i in range(0, len(X), chunk):
        jax.block_until_ready(forward_codes(program, X[i : i + chunk]))


def measure(name, net, points, repeats, chunk=1 << 18):
    grid = int(round(points**0.5))
    box = Box(-2, 2, 2)
    axes = [-2 + (np.arange(grid) + 0.5) * 4 / grid] * 2
    X = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 2)
    X = X[: (len(X) // chunk) * chunk] if len(X) >= chunk else X
    program = net.lower()
    _forward_only(program, X[:chunk], chunk)  # compile
    count_sampled(net, box, grid=grid, chunk=chunk)  # compile
    fwd, whole = [], []
    regions = None
    for _ in range(repeats):
        t = time.perf_counter()
        _forward_only(program, X, chunk)
        fwd.append(len(X) / (time.perf_counter() - t))
        t = time.perf_counter()
        res = count_sampled(net, box, grid=grid, chunk=chunk)
        whole.append(res.samples / (time.perf_counter() - t))
        regions = res.regions
    row = {
        "network": name,
        "points": grid * grid,
        "regions_seen": regions,
        "forward_pts_per_s": statistics.median(fwd),
        "forward_min": min(fwd),
        "forward_max": max(fwd),
        "count_pts_per_s": statistics.median(whole),
        "count_min": min(whole),
        "count_max": max(whole),
    }
    row["ratio"] = row["count_pts_per_s"] / row["forward_pts_per_s"]
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=2_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="250k points, 3 repeats")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    points = 250_000 if args.quick else args.points
    nets = {
        "MLP 2-32x3 (torch init)": rc.random_mlp(2, [32, 32, 32], seed=0),
        "hardmax Transformer T=4 d=8 depth 3": rc.random_transformer(2, tokens=4, d_model=8, depth=3, seed=0),
    }
    rows = [measure(n, net, points, args.repeats) for n, net in nets.items()]
    print(f"{'network':40s} {'points':>10s} {'fwd pts/s':>12s} {'count pts/s':>12s} {'ratio':>6s}")
    for r in rows:
        print(
            f"{r['network']:40s} {r['points']:>10,d} {r['forward_pts_per_s']:>12,.0f} {r['count_pts_per_s']:>12,.0f} {r['ratio']:>6.2f}"
        )
    if args.json:
        write_json(args.json, rows)
    return rows


if __name__ == "__main__":
    main()
