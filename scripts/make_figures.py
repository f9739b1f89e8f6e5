"""Regenerate every figure the README embeds, into docs/figures/ (under 30 s on 2 CPU cores).

    python scripts/make_figures.py [--out docs/figures] [--dpi 110] [NAME ...]

Each figure is rendered to bytes first and written whole (``write_atomic``), as a PNG of at most 256
colours; the counts drawn are printed. Networks are seeded, so the figures are reproducible.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import regioncount as rc
from regioncount import Box, Segment, partition_plane, write_atomic
from regioncount.plotting import (
    figure_bytes,
    figure_compiled,
    figure_line,
    figure_region_graph,
    figure_region_stats,
    figure_regions,
    plot_scan,
)
from regioncount.theory import product_maxout


def regions():
    """A random ReLU MLP (2 -> 16,16,16 -> 1, He init, seed 0) on [-2, 2]^2: exact activation regions,
    level sets of the output and its zero set."""
    net = rc.random_mlp(2, [16, 16, 16], init="normal", seed=0)
    return figure_regions(net, Box(-2, 2, 2), levels=6, zero=True, title="ReLU MLP 2-16-16-16-1 on [-2, 2]²")


def layers():
    """The same kind of MLP (widths 8,8,8, seed 0): the partition after each hidden layer."""
    net = rc.random_mlp(2, [8, 8, 8], init="normal", seed=0)
    return figure_regions(net, Box(-2, 2, 2), layers=True, title="ReLU MLP 2-8-8-8-1: each layer refines the last")


def linear():
    """A narrow-ended MLP (8,4,1, seed 0) whose output is constant on many regions: linear regions (bold
    outlines, one colour each) are unions of activation regions (faint)."""
    net = rc.random_mlp(2, [8, 4, 1], init="normal", seed=0)
    return figure_regions(net, Box(-2, 2, 2), linear=True, title="ReLU MLP 2-8-4-1-1: linear regions")


def maxout_vs_transformer():
    """The bound-attaining Maxout network (widths 4,2, rank 3; Montúfar et al. product construction)
    and the hardmax Transformer compiled from it (compact layout), exact on [-1, 2]^2."""
    net = product_maxout([4, 2], 2, 3)
    return figure_compiled(
        net, -1.0, 2.0, layout="compact", levels=0, title="Maxout network and the hardmax Transformer compiled from it"
    )


def transformer_layers():
    """A random hardmax Transformer (T=4, d=8, 3 blocks, seed 0) on [-1, 1]^2: block 1 has straight
    boundaries (plane engine), blocks 2 and 3 conic ones (curved engine): exact at every block."""
    net = rc.random_transformer(2, tokens=4, d_model=8, depth=3, attention="hardmax", seed=0)
    return figure_regions(net, Box(-1, 1, 2), layers=True, title="hardmax Transformer, T=4, d=8, 3 blocks")


def relu_attention():
    """A random ReLU-attention Transformer (T=3, d=4, 1 block, seed 1): spline pieces bounded by curves,
    sampled (its FFN follows the attention, so its boundaries have degree above 2)."""
    net = rc.random_transformer(2, tokens=3, d_model=4, depth=1, attention="relu", seed=1)
    return figure_regions(net, Box(-1, 1, 2), levels=6, grid=400, title="ReLU-attention Transformer, T=3, d=4, 1 block")


def line():
    """Output of the ReLU-attention Transformer of ``relu_attention`` along the diagonal of [-1, 1]^2:
    spline pieces (cubic for one block), exact breakpoints."""
    net = rc.random_transformer(2, tokens=3, d_model=4, depth=1, attention="relu", seed=1)
    return figure_line(net, Segment([-1.0, -1.0], [1.0, 1.0]))


def line_mlp():
    """Output of the MLP of ``regions`` along the diagonal of [-2, 2]^2: linear pieces, exact breakpoints."""
    net = rc.random_mlp(2, [16, 16, 16], init="normal", seed=0)
    return figure_line(net, Segment([-2.0, -2.0], [2.0, 2.0]))


def region_stats():
    """Region areas and vertex counts of a larger MLP (2 -> 32,32,32, PyTorch init, seed 0) on [-2, 2]^2."""
    part = partition_plane(rc.random_mlp(2, [32, 32, 32], seed=0), Box(-2, 2, 2))
    return figure_region_stats(part, title=f"ReLU MLP 2-32-32-32-1 on [-2, 2]²: {part.n_regions:,} regions")


def region_graph():
    """The region graph of a small MLP (2 -> 8,8 -> 1, seed 0), nodes at region centroids."""
    part = partition_plane(rc.random_mlp(2, [8, 8], init="normal", seed=0), Box(-2, 2, 2))
    return figure_region_graph(part)


def depth():
    """Counts against depth beside Thm 4.4 (small scan: T=4, q=2, depth 6, 2 seeds, 100x100 grid)."""
    from regioncount import scan

    rows = scan(6, tokens=4, m=1, q=2, lo=-1.0, hi=2.0, seeds=2, d_model=8, grid=100, region_cap=20_000)
    return plot_scan(rows, title="T=4, m=1, q=2, box [-1, 2]², 2 seeds", dpi=100), {"rows": rows}


_COUNTS = (
    "regions",
    "linear_regions",
    "method",
    "maxout_regions",
    "transformer_regions",
    "identical",
    "pieces",
    "nodes",
)

FIGURES = {
    "regions": regions,
    "layers": layers,
    "linear_regions": linear,
    "maxout_vs_transformer": maxout_vs_transformer,
    "transformer_layers": transformer_layers,
    "relu_attention": relu_attention,
    "line": line,
    "line_mlp": line_mlp,
    "region_stats": region_stats,
    "region_graph": region_graph,
    "depth": depth,
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "figures")
    ap.add_argument("--dpi", type=float, default=110)
    ap.add_argument("only", nargs="*", help=f"figures to make (default all): {', '.join(FIGURES)}")
    args = ap.parse_args(argv)
    unknown = set(args.only) - set(FIGURES)
    if unknown:
        print(f"make_figures: unknown figure(s) {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    t_all = time.perf_counter()
    for name in args.only or FIGURES:
        t = time.perf_counter()
        fig, info = FIGURES[name]()
        data = fig if isinstance(fig, bytes) else figure_bytes(fig, "png", args.dpi, compact=True)
        write_atomic(args.out / f"{name}.png", data)
        counts = {k: v for k, v in info.items() if k in _COUNTS}
        print(f"{name + '.png':28s} {len(data) / 1024:5.0f} KB {time.perf_counter() - t:5.1f} s  {json.dumps(counts)}")
    print(f"total {time.perf_counter() - t_all:.1f} s")
    return 0


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    sys.exit(main())
