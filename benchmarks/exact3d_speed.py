"""Exact 3D counting speed and memory of the ``space`` engine (polytopes; issue 9).

3-input ReLU MLPs with PyTorch's default init (``random_mlp(3, widths, init="torch")``) on boxes
[-s, s]^3 of growing side, so the same network is counted at growing region counts: how the cost grows
with regions. Each case runs in a fresh child process (one cold run), which reports regions, wall and
CPU seconds, regions per second, its peak RSS, the peak RSS growth during the run (what the partition
and the engine's working set took) per region, the result's own size, and how many vertex signs were
decided in rational arithmetic.

    python benchmarks/exact3d_speed.py                  # the default cases (about a minute)
    python benchmarks/exact3d_speed.py --json out.json  # also write the rows and the machine as JSON
    python benchmarks/exact3d_speed.py --widths 64,64,64 --side 1   # one case
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from _machine import Clock, machine, write_json

# (widths, box half-side): 3 -> 32x3 and 3 -> 64x3, the latter at growing sides
CASES = [
    ((32, 32, 32), 0.5),
    ((32, 32, 32), 1.0),
    ((64, 64, 64), 0.25),
    ((64, 64, 64), 0.5),
    ((64, 64, 64), 0.75),
]
HEAD = ["widths", "box", "regions", "seconds", "cpu_seconds", "regions_per_s", "peak_rss_mb", "rss_growth_mb"]
HEAD += ["bytes_per_region", "result_mb", "exact_decisions"]


def one(widths, side: float, seed: int) -> dict:
    from regioncount import Box, partition_space, random_mlp

    net = random_mlp(3, list(widths), 1, seed=seed, init="torch")
    box = Box(-side, side, 3)
    partition_space(random_mlp(3, [4], 1, seed=0), Box(-1, 1, 3))  # import and first-call costs out of the way
    with Clock() as c:
        part = partition_space(net, box)
    wall, cpu, rss0, rss1 = c.wall, c.cpu, c.rss0, c.rss1
    return {
        "widths": "x".join(map(str, widths)),
        "box": f"[-{side:g}, {side:g}]^3",
        "regions": part.n_regions,
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "regions_per_s": round(part.n_regions / wall),
        "peak_rss_mb": round(rss1 / 1024, 1),
        "rss_growth_mb": round((rss1 - rss0) / 1024, 1),
        "bytes_per_region": round((rss1 - rss0) * 1024 / part.n_regions),
        "result_mb": round(part.nbytes / 2**20, 1),
        "exact_decisions": part.exact_decisions,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default=None, help="one case: hidden widths, comma-separated")
    ap.add_argument("--side", type=float, default=1.0, help="one case: the box [-side, side]^3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, metavar="FILE", help="write the rows and the machine as JSON to FILE")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(one(tuple(int(w) for w in args.widths.split(",")), args.side, args.seed)))
        return 0
    cases = CASES if args.widths is None else [(tuple(int(w) for w in args.widths.split(",")), args.side)]
    rows = []
    print("  ".join(f"{h:>15}" for h in HEAD))
    for widths, side in cases:
        cmd = [sys.executable, __file__, "--child", "--widths", ",".join(map(str, widths)), "--side", str(side)]
        cmd += ["--seed", str(args.seed)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ).stdout
        row = json.loads(out.strip().splitlines()[-1])
        rows.append(row)
        print("  ".join(f"{row[h]!s:>15}" for h in HEAD), flush=True)
    if args.json:
        write_json(args.json, {"benchmark": "exact3d_speed", "machine": machine(), "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
