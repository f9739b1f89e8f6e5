"""Speed of the exact 1D ``line`` engine (``walk_line``) on ReLU MLPs and Maxout networks.

For each network: pieces along the segment, CPU seconds of one walk (best of ``--repeat`` after a
warm-up), pieces per CPU second, and the predicates the engine decided with how many of them needed exact
rational arithmetic. ``--compare REV`` also times the engine of git revision ``REV`` (read with
``git show``), interleaved with the current one in the same process, and prints the ratio.

    python benchmarks/line_speed.py                       # the table
    python benchmarks/line_speed.py --compare aafff23     # against the engine before issue 16
    python benchmarks/line_speed.py --json

CPU time (``time.process_time``) is used because wall time on the shared 2-core machine moves with load.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

from regioncount import random_maxout, random_mlp, walk_line
from regioncount.theory import fold_maxout_network, fold_relu_network

CASES = {
    "mlp 2-64x4 torch, diagonal of [-20,20]^2": (lambda: random_mlp(2, [64] * 4, seed=0), 20.0),
    "mlp 2-256x3 torch, diagonal of [-50,50]^2": (lambda: random_mlp(2, [256] * 3, seed=1), 50.0),
    "mlp 2-100x5 normal, diagonal of [-5,5]^2": (lambda: random_mlp(2, [100] * 5, seed=2, init="normal"), 5.0),
    "maxout 2-32x3 k=3, diagonal of [-20,20]^2": (lambda: random_maxout(2, [32] * 3, k=3, seed=3), 20.0),
    "relu fold 5x5x5x5x5 on [-1, 2]": (lambda: fold_relu_network([5] * 5), None),
    "maxout fold 4x4x4 k=3 on [-1, 2]": (lambda: fold_maxout_network([4] * 3, 3), None),
}


def _segment(net, r):
    if r is None:
        return (np.array([-1.0]), np.array([2.0]))
    return (np.array([-r, -0.8 * r]), np.array([r, 0.9 * r]))


def _load_rev(rev: str):
    """The line engine of git revision ``rev`` as a module inside ``regioncount.engines``."""
    src = subprocess.run(
        ["git", "show", f"{rev}:regioncount/engines/_line.py"], capture_output=True, text=True, check=True
    ).stdout
    path = pathlib.Path(tempfile.mkdtemp()) / "_line_rev.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("regioncount.engines._line_rev", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod.walk_line


def _cpu(fn, net, seg) -> tuple[float, object]:
    t0 = time.process_time()
    res = fn(net, seg)
    return time.process_time() - t0, res


def measure(name: str, repeat: int, other=None) -> dict:
    make, r = CASES[name]
    net = make()
    seg = _segment(net, r)
    res = walk_line(net, seg)  # warm-up
    if other is not None:
        other(net, seg)
    mine, theirs = [], []
    for _ in range(repeat):
        dt, res = _cpu(walk_line, net, seg)
        mine.append(dt)
        if other is not None:
            dt, old = _cpu(other, net, seg)
            theirs.append(dt)
    best = min(mine)
    out = {"case": name, "pieces": res.activation_pieces, "cpu_ms": round(1e3 * best, 2)}
    out["pieces_per_cpu_s"] = round(res.activation_pieces / best)
    out["predicates"] = int(res.predicates)
    out["exact_predicates"] = int(res.exact_predicates)
    out["exact_fraction"] = round(res.exact_predicates / max(res.predicates, 1), 4)
    if other is not None:
        out["before_pieces"] = old.activation_pieces
        out["before_cpu_ms"] = round(1e3 * min(theirs), 2)
        out["ratio"] = round(best / min(theirs), 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--compare", metavar="REV", help="also time the engine of this git revision")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    other = _load_rev(args.compare) if args.compare else None
    for name in CASES:
        row = measure(name, args.repeat, other)
        print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
