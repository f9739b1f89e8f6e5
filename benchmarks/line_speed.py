"""Speed of the exact 1D ``line`` engine (``walk_line``) on ReLU MLPs and Maxout networks.

For each network: pieces along the segment, seconds (best of ``--repeat`` runs after one warm-up), pieces
per second, and the predicates the engine decided and how many of them needed exact rational arithmetic
(where the engine reports them).

    python benchmarks/line_speed.py            # the table
    python benchmarks/line_speed.py --json     # one JSON object per line
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from regioncount import random_maxout, random_mlp
from regioncount.engines._line import walk_line

CASES = {
    "mlp 2-64x4 torch, [-20,20] diagonal": (lambda: random_mlp(2, [64] * 4, seed=0), 20.0),
    "mlp 2-256x3 torch, [-50,50] diagonal": (lambda: random_mlp(2, [256] * 3, seed=1), 50.0),
    "mlp 2-100x5 normal, [-5,5] diagonal": (lambda: random_mlp(2, [100] * 5, seed=2, init="normal"), 5.0),
    "maxout 2-32x3 k=3, [-20,20] diagonal": (lambda: random_maxout(2, [32] * 3, k=3, seed=3), 20.0),
}


def measure(name: str, repeat: int) -> dict:
    make, r = CASES[name]
    net = make()
    seg = (np.array([-r, -0.8 * r]), np.array([r, 0.9 * r]))
    res = walk_line(net, seg)  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = walk_line(net, seg)
        times.append(time.perf_counter() - t0)
    best = min(times)
    out = {"case": name, "pieces": res.activation_pieces, "seconds": round(best, 4)}
    out["pieces_per_s"] = round(res.activation_pieces / best)
    for key in ("predicates", "exact_predicates"):
        if hasattr(res, key):
            out[key] = int(getattr(res, key))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for name in CASES:
        row = measure(name, args.repeat)
        print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
