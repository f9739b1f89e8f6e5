"""Speed of the certified curved engine (exact algebraic predicates, python-flint) against the float curved
engine on the same small random hardmax Transformers ``random_transformer(tokens=3, d_model=4, depth=D,
seed)`` on [-1, 1]^2: cells, trapezoids, seconds and cells per second of each, and whether the counts and
code sets agree.

    python benchmarks/curved_certified_speed.py --depths 1 2 3 --seeds 0 1
"""

from __future__ import annotations

import argparse
import json
import time


def measure(depth: int, seed: int) -> dict:
    import numpy as np

    from regioncount import Box, partition_curved
    from regioncount.networks import random_transformer

    net = random_transformer(tokens=3, d_model=4, depth=depth, seed=seed)
    box = Box([-1.0, -1.0], [1.0, 1.0])
    t = time.perf_counter()
    f = partition_curved(net, box, certified=False)
    nf = f.n_cells
    tf = time.perf_counter() - t
    t = time.perf_counter()
    c = partition_curved(net, box, certified=True)
    nc = c.n_cells
    tc = time.perf_counter() - t

    def key(a):
        return {bytes(r) for r in np.asarray(a, np.int64)}

    return {
        "depth": depth,
        "seed": seed,
        "cells": nc,
        "trapezoids": c.n_traps,
        "float_s": round(tf, 2),
        "certified_s": round(tc, 2),
        "certified_cells_per_s": round(nc / tc),
        "agree": nf == nc and key(f.cell_codes) == key(c.cell_codes),
        "exact": c.exact,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--depths", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = [measure(d, s) for d in args.depths for s in args.seeds]
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
