"""Statistics of an exact partition (region areas, vertices per region) and a drawing of its region graph."""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.ticker import MaxNLocator

from .._errors import RegionCountError
from ..results._partition import Partition
from ._colour import palette
from ._output import figure_bytes, new_figure
from ._regions import _frame_axes, _polygons, region_colours

#: Largest partition :func:`figure_region_graph` draws: beyond it nodes and edges are a grey smear.
MAX_GRAPH_REGIONS = 600


def region_stats(part: Partition) -> dict:
    """JSON-ready summary: counts, area quantiles (relative to the domain's area) and the histogram of
    vertices per region."""
    rel = part.areas / float(np.prod(part.domain.param_hi - part.domain.param_lo))
    nv = np.diff(part.offsets)
    vals, cnts = np.unique(nv, return_counts=True)
    return {
        "regions": part.n_regions,
        "linear_regions": part.linear_regions(),
        "neighbour_pairs": int(len(part.adjacency())),
        "area_fraction": {
            "min": float(rel.min()),
            "median": float(np.median(rel)),
            "max": float(rel.max()),
            "total": float(rel.sum()),
        },
        "vertices_per_region": {str(int(v)): int(c) for v, c in zip(vals, cnts)},
        "mean_neighbours": float(2 * len(part.adjacency()) / max(part.n_regions, 1)),
    }


def figure_region_stats(part: Partition, *, title: str | None = None):
    """Histograms of region areas (log scale, as a fraction of the domain) and of vertices per region
    -> ``(Figure, info)``."""
    info = region_stats(part)
    rel = part.areas / float(np.prod(part.domain.param_hi - part.domain.param_lo))
    nv = np.diff(part.offsets)
    fig = new_figure(8.4, 3.6)
    ax1, ax2 = fig.subplots(1, 2)
    lo, hi = np.log10(rel.min()), np.log10(rel.max())
    bins = np.logspace(lo - 0.05, hi + 0.05, 31) if hi > lo else 10
    ax1.hist(rel, bins=bins, color=palette(5)[4], edgecolor="#2b2b2b", linewidth=0.5)
    ax1.set_xscale("log")
    ax1.axvline(1.0 / part.n_regions, color="#c8102e", lw=1.2, ls="--", label="1 / regions (equal split)")
    ax1.set_xlabel("region area / domain area")
    ax1.set_ylabel("regions")
    ax1.legend(fontsize=7.5, frameon=False)
    edges = np.arange(nv.min(), nv.max() + 2) - 0.5
    ax2.hist(nv, bins=edges, color=palette(6)[5], edgecolor="#2b2b2b", linewidth=0.5)
    ax2.xaxis.set_major_locator(MaxNLocator(integer=True))  # vertex counts are integers
    ax2.set_xlabel("vertices per region")
    ax2.set_ylabel("regions")
    for ax in (ax1, ax2):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # so are region counts
        ax.tick_params(labelsize=8)
        ax.grid(True, axis="y", alpha=0.25)
    fig.suptitle(
        title
        or f"{part.n_regions:,} activation regions, {info['neighbour_pairs']:,} neighbour pairs, "
        f"{info['mean_neighbours']:.2f} neighbours on average",
        fontsize=10,
    )
    return fig, info


def figure_region_graph(part: Partition, *, max_regions: int = MAX_GRAPH_REGIONS, title: str | None = None):
    """The region graph of ``part`` drawn at the region centroids over the faint partition -> ``(Figure, info)``.

    Nodes are coloured like :func:`~regioncount.plotting.figure_regions` colours the regions; an edge joins
    regions that share a boundary segment (:meth:`Partition.adjacency`). Refuses partitions above
    ``max_regions``; write those with :meth:`Partition.write_graphml` instead.
    """
    import networkx as nx

    if part.n_regions > max_regions:
        raise RegionCountError(
            f"the partition has {part.n_regions:,} regions, too many to draw its graph (at most {max_regions:,}); "
            "export it with --graphml instead"
        )
    G = part.to_networkx()
    C = part.centroids()
    pos = {i: C[i] for i in range(part.n_regions)}
    col = region_colours(part)
    fills = palette(int(col.max()) + 1)
    fig = new_figure(6.2, 6.2)
    ax = fig.subplots()
    ax.add_collection(
        PolyCollection(_polygons(part), facecolors="none", edgecolors="#9a9a9a", linewidths=0.5, zorder=1)
    )
    E = part.adjacency()
    ax.add_collection(LineCollection(C[E], colors="#303030", linewidths=0.8, zorder=2))
    size = 42 if part.n_regions < 100 else 18 if part.n_regions < 300 else 9
    nx.draw_networkx_nodes(
        G, pos, ax=ax, node_size=size, node_color=[fills[c] for c in col], edgecolors="#303030", linewidths=0.6
    ).set_zorder(3)
    _frame_axes(ax, part.domain)
    ax.tick_params(left=True, bottom=True, labelleft=True, labelbottom=True)
    ax.set_title(
        title or f"region graph: {G.number_of_nodes():,} regions, {G.number_of_edges():,} neighbour pairs", fontsize=10
    )
    return fig, {"nodes": G.number_of_nodes(), "edges": G.number_of_edges()}


def plot_region_stats(part: Partition, *, fmt: str = "png", dpi: float = 150) -> bytes:
    """:func:`figure_region_stats` rendered to image bytes."""
    fig, _ = figure_region_stats(part)
    return figure_bytes(fig, fmt, dpi)


def plot_region_graph(part: Partition, *, fmt: str = "png", dpi: float = 150, **options) -> bytes:
    """:func:`figure_region_graph` rendered to image bytes."""
    fig, _ = figure_region_graph(part, **options)
    return figure_bytes(fig, fmt, dpi)
