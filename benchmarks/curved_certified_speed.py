"""Speed of the certified curved engine (exact algebraic predicates, python-flint) by depth, for hardmax and
ReLU-attention Transformers ``random_transformer(tokens, d_model, depth=D, attention, seed)`` on [-1, 1]^2:
cells (connected cells; spline pieces for ReLU attention, never called linear regions), trapezoids, the
largest wall degree met, CPU and wall seconds, certified cells per CPU second and peak RSS of the run (each
run in its own process, so the peak is that run's). For hardmax the float curved engine runs too, and the
last column says whether its cells and code set agree with the certified ones (the float engine cannot
split walls of degree >= 3, so ReLU-attention rows have no such column).

    python benchmarks/curved_certified_speed.py --depths 1 2 3 --seeds 0 1
    python benchmarks/curved_certified_speed.py --attention relu --tokens 2 --d-model 2 --depths 1 2 --seeds 0 1
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time


def measure(attention: str, tokens: int, d_model: int, depth: int, seed: int) -> dict:
    import resource

    import numpy as np

    from regioncount import Box, partition_curved
    from regioncount.networks import random_transformer

    kw = dict(tokens=tokens, d_model=d_model, depth=depth, attention=attention, seed=seed)
    if attention == "relu" and d_model <= 2:
        kw["d_ff"] = 2
    net = random_transformer(**kw)
    box = Box([-1.0, -1.0], [1.0, 1.0])
    t, c0 = time.perf_counter(), time.process_time()
    c = partition_curved(net, box, certified=True)
    nc = c.n_cells
    pieces = c.polynomial_pieces() if c.kind == "spline" else c.linear_regions()
    tc, cpu = time.perf_counter() - t, time.process_time() - c0
    row = {
        "attention": attention,
        "T": tokens,
        "d_model": d_model,
        "depth": depth,
        "seed": seed,
        "cells": nc,
        "pieces": pieces,
        "trapezoids": c.n_traps,
        "largest_degree": int(c.degree),
        "cpu_s": round(cpu, 2),
        "wall_s": round(tc, 2),
        "cells_per_cpu_s": round(nc / max(cpu, 1e-9)),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "exact": c.exact,
    }
    if attention == "hardmax":
        f = partition_curved(net, box, certified=False)

        def key(a):
            return {bytes(r) for r in np.asarray(a, np.int64)}

        row["agree_with_float"] = f.n_cells == nc and key(f.cell_codes) == key(c.cell_codes)
    return row


def _one(args) -> dict:
    return measure(*args)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attention", choices=["hardmax", "relu"], default="hardmax")
    ap.add_argument("--tokens", type=int, default=3)
    ap.add_argument("--d-model", type=int, default=4)
    ap.add_argument("--depths", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    ctx = multiprocessing.get_context("spawn")
    rows = []
    for d in args.depths:
        for s in args.seeds:
            with ctx.Pool(1, maxtasksperchild=1) as pool:  # one process per run: its own peak RSS
                rows.append(pool.apply(_one, ((args.attention, args.tokens, args.d_model, d, s),)))
            if not args.json:
                print(json.dumps(rows[-1]), flush=True)
    if args.json:
        print(json.dumps(rows))
        return
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
