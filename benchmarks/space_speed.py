"""The exact ``space`` engine (3D and 4D) beside edge subdivision, in-library, side by side in one process.

Issue 21's 3D/4D nets, built in NumPy with PyTorch's default ``nn.Linear`` init (weights and biases
uniform in +-1/sqrt(fan_in): ``random_mlp(q, widths, init="torch")``, fixed seeds, so counts differ from
the issue's torch seeds): 3->16x3 on [-2,2]^3, 4->10x2 on [-1,1]^4 and [-2,2]^4, 3->8x4 on [-2,2]^3 and
3->32x3 on [-1,1]^3 (28,154 regions). For each net: regions, CPU seconds (this process's and its forked
workers', ``_machine.cpu_seconds``) and wall of ``partition_space`` (best of ``--repeat`` warm calls: import
and first-call costs are left out, as they are for edge subdivision), microseconds of CPU per region, the same
with the workers off (``one_*``: ``REGIONCOUNT_WORKERS=1``, all in this process; a worker costs CPU for the
wall it saves), the linear-region merge alone (``linear_regions``
on a fresh partition) and the whole library count (``count_regions(..., method="exact")``: partition, linear
regions, the record) with its CPU per region, and the same for edge subdivision where
``benchmarks/edge_subdivision.py`` (our float32 implementation of Berzins 2023) is present beside this
script, with both counts (edge subdivision is float32, so a count may differ on hard nets; these agree).

    python benchmarks/space_speed.py                  # every case (under a minute)
    python benchmarks/space_speed.py --json out.json  # also write the rows and the machine as JSON
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from _machine import cpu_seconds, machine, write_json

try:  # our own edge subdivision, where it is present (benchmarks/edge_subdivision.py)
    from edge_subdivision import edge_subdivision
except ImportError:  # pragma: no cover - depends on the checkout
    edge_subdivision = None

#: (input dim, hidden widths, box half-side, seed)
CASES = [
    (3, (16, 16, 16), 2.0, 0),
    (4, (10, 10), 1.0, 0),
    (4, (10, 10), 2.0, 0),
    (3, (8, 8, 8, 8), 2.0, 0),
    (3, (32, 32, 32), 1.0, 0),
]
HEAD = [
    "net",
    "box",
    "regions",
    "cpu_s",
    "wall_s",
    "us_per_region",
    "one_cpu_s",
    "one_us_per_region",
    "linear_cpu_s",
    "count_cpu_s",
    "count_us_per_region",
    "es_regions",
    "es_cpu_s",
    "es_wall_s",
    "ratio",
]


def _best(fn, repeat: int):
    best = None
    for _ in range(repeat):
        c0, t0 = cpu_seconds(), time.perf_counter()
        out = fn()
        cpu, wall = cpu_seconds() - c0, time.perf_counter() - t0
        if best is None or cpu < best[1]:
            best = (out, cpu, wall)
    assert best is not None
    return best


def _one_process(fn):
    """``fn()`` with the engine's workers off (``REGIONCOUNT_WORKERS=1``): everything in this process."""
    old = os.environ.get("REGIONCOUNT_WORKERS")
    os.environ["REGIONCOUNT_WORKERS"] = "1"
    try:
        return fn()
    finally:
        if old is None:
            del os.environ["REGIONCOUNT_WORKERS"]
        else:
            os.environ["REGIONCOUNT_WORKERS"] = old


def one(q: int, widths, side: float, seed: int, repeat: int) -> dict:
    from regioncount import Box, count_regions, partition_space, random_mlp

    net = random_mlp(q, list(widths), 1, seed=seed, init="torch")
    box = Box(-side, side, q)
    part, cpu, wall = _best(lambda: partition_space(net, box), repeat)
    _, one_cpu, one_wall = _one_process(lambda: _best(lambda: partition_space(net, box), repeat))
    # the linear-region merge alone (on fresh partitions: it is cached), and the whole library count
    lin_cpu = min(_best(partition_space(net, box).linear_regions, 1)[1] for _ in range(repeat))
    _, count_cpu, _ = _best(lambda: count_regions(net, box, method="exact"), repeat)
    row = {
        "net": f"{q}->{'x'.join(map(str, widths))}",
        "box": f"[-{side:g},{side:g}]^{q}",
        "regions": part.n_regions,
        "cpu_s": round(cpu, 4),
        "wall_s": round(wall, 4),
        "us_per_region": round(1e6 * cpu / part.n_regions, 1),
        "one_cpu_s": round(one_cpu, 4),
        "one_wall_s": round(one_wall, 4),
        "one_us_per_region": round(1e6 * one_cpu / part.n_regions, 1),
        "exact_decisions": part.exact_decisions,
        "linear_cpu_s": round(lin_cpu, 4),
        "count_cpu_s": round(count_cpu, 4),
        "count_us_per_region": round(1e6 * count_cpu / part.n_regions, 1),
    }
    if edge_subdivision is not None:
        Ws, bs = [np.asarray(W) for W in net.weights[:-1]], [np.asarray(b) for b in net.biases[:-1]]
        es, ecpu, ewall = _best(lambda: edge_subdivision(Ws, bs, box.lo, box.hi), repeat)
        row.update(es_regions=es["regions"], es_cpu_s=round(ecpu, 4), es_wall_s=round(ewall, 4))
        row["ratio"] = round(ecpu / cpu, 2)  # > 1: regioncount is ahead
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="warm calls per case; the one with least CPU is kept")
    ap.add_argument("--json", default=None, metavar="FILE", help="write the rows and the machine as JSON to FILE")
    args = ap.parse_args(argv)
    from regioncount import Box, partition_space, random_mlp

    partition_space(random_mlp(3, [4], 1, seed=0), Box(-1, 1, 3))  # imports and first-call costs out of the way
    if edge_subdivision is not None:
        edge_subdivision([np.eye(3)], [np.zeros(3)], -np.ones(3), np.ones(3))
    else:
        print("benchmarks/edge_subdivision.py is absent: regioncount only")
    rows = []
    print("  ".join(f"{h:>14}" for h in HEAD))
    for q, widths, side, seed in CASES:
        row = one(q, widths, side, seed, args.repeat)
        rows.append(row)
        print("  ".join(f"{row.get(h, '-')!s:>14}" for h in HEAD), flush=True)
    info = machine()
    print(f"load average {info['loadavg']} on {info['nproc']} CPUs ({info['cpu']})")
    if args.json:
        write_json(args.json, {"benchmark": "space_speed", "machine": info, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
