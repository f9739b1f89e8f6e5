"""Seconds and regions for the digits CNN on the slice through three test digits (issue 12).

Reads the ONNX file and the three images that ``scripts/digits_cnn.py`` wrote (default ``docs/digits``), and
times, each ``--repeat`` times (median, min, max): reading the ONNX file; the exact ``plane`` partition of the
network (activation and linear regions); the exact partition of the network followed by the argmax of its
logits (decision regions); a sampled count on a ``--grid`` x ``--grid`` grid (jit compile in its first run
only, reported apart); the ``line`` engine along the segment from the first digit to the second.

    OPENBLAS_NUM_THREADS=1 python benchmarks/digits_cnn.py [--dir docs/digits] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np
from _machine import Clock, machine

import regioncount as rc
from regioncount import partition_plane, slice_through
from regioncount.networks import DecisionNet
from regioncount.results import decision_summary

CPU: dict[str, list[float]] = {}


def timed(key, fn, *args, **kwargs):
    """``(result, wall seconds)``; the CPU seconds of the call go to ``CPU[key]`` (on a shared machine
    wall time moves with the load, CPU time much less)."""
    with Clock() as c:
        out = fn(*args, **kwargs)
    CPU.setdefault(key, []).append(c.cpu)
    return out, c.wall


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("docs/digits"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--grid", type=int, default=400)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from regioncount import class_of_cells

    pts = np.stack([np.load(args.dir / f"digit_{c}.npy").reshape(-1) for c in "abc"])
    dom, _ = slice_through(pts)
    seg = rc.Segment(pts[0], pts[1])
    times: dict[str, list[float]] = {k: [] for k in ("load", "exact", "exact_decision", "sampled", "line")}
    first_sampled = None
    for i in range(args.repeat):
        net, t = timed("load", rc.load_onnx, args.dir / "digits_cnn.onnx")
        times["load"].append(t)
        part, t = timed("exact", partition_plane, net, dom)
        times["exact"].append(t)
        dnet = DecisionNet(net)
        dpart, t = timed("exact_decision", partition_plane, dnet, dom)
        times["exact_decision"].append(t)
        samp, t = timed("sampled", rc.count_sampled, net, dom, grid=args.grid)
        if i == 0:
            first_sampled = t
        else:
            times["sampled"].append(t)
        line, t = timed("line", rc.walk_line, net, seg)
        times["line"].append(t)
    dec = decision_summary(dpart, class_of_cells(dpart, dnet))
    row = {
        "regions": part.n_regions,
        "linear_regions": part.linear_regions(),
        "decision_regions": dec["decision_regions"],
        "decision_cells": dpart.n_regions,
        "classes": sorted(int(c) for c in dec["classes"]),
        "sampled_regions": int(samp.regions),
        "sampled_grid": args.grid,
        "line_pieces_digit_a_to_b": int(line.activation_pieces),
        "sampled_first_run_s": first_sampled,
        "seconds": {k: {"median": statistics.median(v), "min": min(v), "max": max(v)} for k, v in times.items() if v},
        "cpu_seconds_median": {k: statistics.median(v) for k, v in CPU.items()},
        "regions_per_s_exact": part.n_regions / statistics.median(times["exact"]),
        "machine": machine(),
    }
    if args.json:
        print(json.dumps(row, indent=2))
        return row
    print(f"digits CNN, slice through {args.dir}/digit_{{a,b,c}}.npy, {args.repeat} repeats")
    print(
        f"activation regions {row['regions']:,}; linear regions {row['linear_regions']:,}; decision regions "
        f"{row['decision_regions']} over classes {row['classes']} ({row['decision_cells']:,} cells)"
    )
    print(
        f"sampled lower bound on a {args.grid}^2 grid: {row['sampled_regions']:,}; line pieces a->b: "
        f"{row['line_pieces_digit_a_to_b']}"
    )
    for k, v in row["seconds"].items():
        print(f"  {k:15s} median {v['median']:.3f} s  (min {v['min']:.3f}, max {v['max']:.3f})")
    print(f"  sampled, first run (jit compile included): {first_sampled:.3f} s")
    cpu = ", ".join(f"{k} {v:.3f}" for k, v in row["cpu_seconds_median"].items())
    print(f"  CPU seconds, median per call (sampled includes its compile run): {cpu}")
    print(f"  exact: {row['regions_per_s_exact']:,.0f} regions/s; machine {row['machine']}")
    return row


if __name__ == "__main__":
    main()
