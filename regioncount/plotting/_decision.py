"""Decision regions drawn beside activation and linear regions (DESIGN §9): three exact panels of one slice."""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .._enums import Kind, Picture
from .._views import DEFAULT_MAX_REGIONS, decision_view, domain_info
from ..results import topology
from ._output import new_figure
from ._regions import _edge_width, _frame_axes, _polygons, draw_partition

_BOUNDARY = "#111111"
_HOLE = "#c2185b"


def class_colours(n: int) -> list[str]:
    """One fill per class: matplotlib's tab10 / tab20, lightened so cell edges stay visible."""
    import matplotlib as mpl
    import matplotlib.colors as mcolors

    cmap = mpl.colormaps["tab10" if n <= 10 else "tab20"]
    return [mcolors.to_hex(tuple(0.55 * np.array(cmap(i % cmap.N)[:3]) + 0.45)) for i in range(n)]


def _mark_points(ax, points, names) -> None:
    if points is None:
        return
    P = np.asarray(points)
    ax.scatter(P[:, 0], P[:, 1], s=36, c="#000000", marker="o", zorder=5, edgecolors="#ffffff", linewidths=1.0)
    for i, (x, y) in enumerate(P):
        label = names[i] if names else "abc"[i]
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8, zorder=6)


def figure_decision(
    net, domain, *, points=None, point_names=None, classes: int | None = None, max_regions: int = DEFAULT_MAX_REGIONS
):
    """Activation regions, linear regions and decision regions of ``net`` on a 2D ``domain`` -> ``(Figure, info)``.

    All three panels are exact (plane engine); a network it cannot split exactly, or more than
    ``max_regions`` cells, raises :class:`RegionCountError`. The decision panel fills each cell with the
    colour of its predicted class and draws the decision boundary (edges between cells of different
    classes) bold; each hole of a decision region (its b1, :func:`regioncount.results.topology`) is ringed by a
    dashed outline and marked with a cross, and ``info["topology"]`` holds the Betti numbers.
    ``points (3, 2)``: data points in ``(u1, u2)`` to mark, named by ``point_names``.
    """
    view = decision_view(net, domain, classes=classes, max_regions=max_regions)
    base, dec, cls, boundary = view.base, view.cells, view.classes, view.boundary
    fig = new_figure(16.5, 6.0)
    axes = fig.subplots(1, 3, squeeze=True)
    n, lin = base.n_regions, base.linear_regions()
    draw_partition(axes[0], base)
    axes[0].set_title(f"{n:,} activation regions (exact)", fontsize=10)
    draw_partition(axes[1], base, linear=True)
    axes[1].set_title(f"{lin:,} linear regions (exact)", fontsize=10)
    fills = class_colours(view.n_classes)
    pc = PolyCollection(
        _polygons(dec),
        facecolors=[fills[c] for c in cls],
        edgecolors="#ffffff",
        linewidths=_edge_width(dec.n_regions) * 0.6,
    )
    pc.set_gid("decision")
    ax = axes[2]
    ax.add_collection(pc)
    ax.add_collection(LineCollection(list(boundary), colors=_BOUNDARY, linewidths=2.0))
    topo = topology(dec, cls)
    for ring in topo.hole_outlines:
        ax.add_collection(LineCollection(list(ring), colors=_HOLE, linewidths=1.6, linestyles="--", zorder=4))
    if len(topo.hole_points):
        H = topo.hole_points
        ax.scatter(H[:, 0], H[:, 1], s=40, marker="x", c=_HOLE, linewidths=1.8, zorder=5, label="hole")
    _frame_axes(ax, domain)
    n_dec = view.decision_regions
    present = view.present
    holes = int(topo.b1.sum()) if topo.b1 is not None else 0
    ax.set_title(f"{n_dec:,} decision regions, {holes} holes, {present.size} classes (exact)", fontsize=10)
    marks = [Line2D([], [], color=_HOLE, marker="x", ls="--", label="hole (b1)")] if holes else []
    ax.legend(
        handles=[Patch(facecolor=fills[c], edgecolor="#666666", label=f"class {c}") for c in present] + marks,
        loc="upper right",
        fontsize=7,
        framealpha=0.85,
    )
    for a in axes:
        _mark_points(a, points, point_names)
    info = {
        "method": Picture.EXACT,
        "exact": True,
        "kind": Kind.ACTIVATION_REGIONS,
        "regions": int(n),
        "linear_regions": int(lin),
        "decision_regions": n_dec,
        "decision_cells": int(dec.n_regions),
        "classes_present": [int(c) for c in present],
        "decision_boundary_segments": int(len(boundary)),
        "topology": topo.as_dict(),
        "drawn": "activation regions, linear regions, decision regions",
        **domain_info(domain),
    }
    if points is not None:
        info["points_u"] = np.asarray(points).tolist()
    return fig, info
