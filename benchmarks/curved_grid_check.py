"""Check the curved engine's partition of random hardmax Transformers against a fine grid (too slow for the
test suite, which does the same on 200^2 grids and smaller networks).

For each (tokens, depth, seed): the exact cells on the box [-1, 2]^2; every point of a ``grid``^2 lattice of
cell centres is located in the partition and its cell's code compared with the point's own forward-pass
code; distinct codes of the partition against the grid's; cell areas against the box area; witness codes;
the line engine's pieces along random segments against the cells they cross, in order.

    python benchmarks/curved_grid_check.py                       # T = 2, 4; depths 2-6; 1000^2 grid
    python benchmarks/curved_grid_check.py --grid 400 --cases 4:3:0
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from regioncount import Box, Segment, forward_codes, partition_curved, walk_line
from regioncount.networks import random_transformer

CASES = ["2:2:0", "2:4:1", "2:6:2", "4:2:0", "4:4:1", "4:6:2"]


def segment_mismatches(net, cells, segments: int, seed: int) -> tuple[int, int]:
    """Line-engine pieces along random segments against the cells they cross: returns (pieces checked,
    pieces whose 25 interior points are not all in one cell of the piece's code, or whose neighbours share
    its cell)."""
    rng = np.random.default_rng(seed)
    checked = bad = 0
    for _ in range(segments):
        a, b = rng.uniform(-1, 2, 2), rng.uniform(-1, 2, 2)
        lp = walk_line(net, Segment(a, b))
        lo, hi = lp.breaks[:-1], lp.breaks[1:]
        t = lo[:, None] + np.linspace(0.02, 0.98, 25)[None, :] * (hi - lo)[:, None]
        where = cells.locate(lp.points(t).reshape(-1, 2)).reshape(t.shape)
        ok = np.all(where == where[:, :1], axis=1) & np.all(cells.cell_codes[where[:, 0]] == lp.codes, axis=1)
        ok[1:] &= where[1:, 0] != where[:-1, 0]
        checked += ok.size
        bad += int(np.count_nonzero(~ok))
    return checked, bad


def check(tokens: int, depth: int, seed: int, grid: int, segments: int = 5) -> dict:
    net = random_transformer(tokens=tokens, d_model=8, depth=depth, seed=seed)
    program = net.lower()
    box = Box([-1.0, -1.0], [2.0, 2.0])
    t0 = time.process_time()
    cells = partition_curved(net, box)
    cpu = time.process_time() - t0
    xs = -1.0 + 3.0 * (np.arange(grid) + 0.5) / grid
    mismatched = located = 0
    grid_codes = set()
    for lo in range(0, grid, 100):  # 100 columns of the lattice at a time (one compilation: equal shapes)
        X, Y = np.meshgrid(xs[lo : lo + 100], xs, indexing="ij")
        P = np.stack([X.ravel(), Y.ravel()], 1)
        _, codes, _ = forward_codes(program, np.asarray(P, dtype=np.float64))
        codes = np.asarray(codes)
        where = cells.locate(P)
        located += int(np.count_nonzero(where >= 0))
        mismatched += int(np.count_nonzero(np.any(cells.cell_codes[np.maximum(where, 0)] != codes, axis=1)))
        grid_codes.update(map(bytes, codes.astype(np.int32)))
    pieces, bad_pieces = segment_mismatches(net, cells, segments, seed)
    _, wc, _ = forward_codes(program, cells.witness)
    E = cells.adjacency
    cc = cells.cell_codes
    return {
        "tokens": tokens,
        "depth": depth,
        "seed": seed,
        "cells": cells.n_cells,
        "codes": cells.n_codes,
        "grid_codes": len(grid_codes),
        "grid_points": grid * grid,
        "located": located,
        "code_mismatches": mismatched,
        "witness_mismatches": int(np.count_nonzero(np.any(np.asarray(wc) != cc, axis=1))),
        "adjacent_same_code": int(np.count_nonzero(np.all(cc[E[:, 0]] == cc[E[:, 1]], axis=1))),
        "line_pieces": pieces,
        "line_piece_mismatches": bad_pieces,
        "area_sum_error": float(abs(cells.cell_area.sum() - 9.0)),
        "exact": bool(cells.exact),
        "engine_cpu_s": round(cpu, 1),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", type=int, default=1000)
    ap.add_argument("--cases", nargs="+", default=CASES, help="TOKENS:DEPTH:SEED")
    ap.add_argument("--segments", type=int, default=5, help="random segments checked against the line engine")
    args = ap.parse_args()
    for case in args.cases:
        T, D, s = (int(v) for v in case.split(":"))
        print(json.dumps(check(T, D, s, args.grid, args.segments)), flush=True)


if __name__ == "__main__":
    main()
