"""Speed and memory of the curved exact 2D engine (DESIGN §7, curved cells).

Random hardmax Transformers ``random_transformer(tokens=4, d_model=8, depth=D, seed)`` on the box
[-1, 2]^2. Each depth runs in its own process (so peak RSS is that run's), once, cold. Reported: connected
cells, distinct codes, linear regions, trapezoids, wall and CPU seconds of ``partition_curved`` plus the
cell derivation (adjacency, components, areas), cells per second, the process's peak RSS, whether the run
is ``exact`` (every arc-order check passed, every area integral converged) and the area-sum error.

    python benchmarks/curved_speed.py                    # depths 3, 6, 9
    python benchmarks/curved_speed.py --depths 3 6 --json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from _machine import Clock


def measure(depth: int, seed: int) -> dict:
    from regioncount import Box, partition_curved
    from regioncount.networks import random_transformer

    net = random_transformer(tokens=4, d_model=8, depth=depth, seed=seed)
    box = Box([-1.0, -1.0], [2.0, 2.0])
    with Clock() as c:
        cells = partition_curved(net, box)
        engine = c.elapsed()
        s = cells.summary()
    wall, cpu, rss = c.wall, c.cpu, c.rss1
    return {
        "depth": depth,
        "seed": seed,
        "cells": s["regions"],
        "codes": s["codes"],
        "linear_regions": s["linear_regions"],
        "trapezoids": s["trapezoids"],
        "engine_s": round(engine, 2),
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "cells_per_s": round(s["regions"] / wall),
        "peak_rss_mb": round(rss / 1024, 1),
        "exact": s["exact"],
        "area_sum_error": float(abs(cells.cell_area.sum() - 9.0)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--depths", type=int, nargs="+", default=[3, 6, 9])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.one, args.seed)))
        return
    rows = []
    for D in args.depths:
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(D), "--seed", str(args.seed)],
            capture_output=True,
            text=True,
            check=True,
            env=dict(os.environ),
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        if args.json:
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        return
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    cols = ["depth", "cells", "codes", "linear_regions", "trapezoids", "seconds", "cpu_seconds", "cells_per_s"]
    cols += ["peak_rss_mb", "exact", "area_sum_error"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print(
            "| "
            + " | ".join(
                f"{r[c]:,}" if isinstance(r[c], int) and not isinstance(r[c], bool) else str(r[c]) for c in cols
            )
            + " |"
        )


if __name__ == "__main__":
    main()
