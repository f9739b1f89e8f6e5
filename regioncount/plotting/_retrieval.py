"""Pictures of retrieval cells: cells coloured by the key they retrieve, the target's cell boundaries drawn
over them, and the mistaken area hatched. Draws a :class:`~regioncount.relations.Retrieval` and a
:class:`~regioncount.relations.RetrievalError` that the caller computed; computes nothing itself."""

from __future__ import annotations

import numpy as np
from matplotlib.artist import Artist
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .._domain import Box
from ._colour import palette
from ._output import figure_bytes, new_figure

_EDGE = "#222222"
_TARGET = "#c8102e"


def _rings(geom) -> list[np.ndarray]:
    """Exterior and interior rings ``(m, 2)`` of a (multi)polygon."""
    out = []
    for poly in getattr(geom, "geoms", [geom]):
        if poly.is_empty or poly.geom_type != "Polygon":
            continue
        out.append(np.asarray(poly.exterior.coords))
        out += [np.asarray(r.coords) for r in poly.interiors]
    return out


def _label_edges(labels: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Segments ``(E, 2, 2)`` between side-by-side grid cells of different labels (row ``i`` is ``u2``)."""
    g1, g2 = labels.shape[1], labels.shape[0]
    dx, dy = (hi[0] - lo[0]) / g1, (hi[1] - lo[1]) / g2
    segs = []
    i, j = np.nonzero(labels[:, 1:] != labels[:, :-1])
    x = lo[0] + (j + 1) * dx
    segs.append(np.stack([np.stack([x, lo[1] + i * dy], 1), np.stack([x, lo[1] + (i + 1) * dy], 1)], 1))
    i, j = np.nonzero(labels[1:, :] != labels[:-1, :])
    y = lo[1] + (i + 1) * dy
    segs.append(np.stack([np.stack([lo[0] + j * dx, y], 1), np.stack([lo[0] + (j + 1) * dx, y], 1)], 1))
    return np.concatenate(segs)


def figure_retrieval(retrieval, error=None, *, title: str | None = None):
    """Retrieval cells of ``retrieval`` coloured by key, with the target's cell boundaries (dashed) and the
    mistakes (hatched) of ``error`` when given -> ``(Figure, info)``. Keys are marked where they live in the
    drawn plane (a 2D box and 2D keys)."""
    P = retrieval.partition
    n = retrieval.n_keys
    colours = palette(n)
    lo, hi = np.asarray(retrieval.domain.param_lo, float), np.asarray(retrieval.domain.param_hi, float)
    fig = new_figure(7.4, 5.6)
    ax = fig.add_subplot()
    polys = [P.polygon(r) for r in range(P.n_regions)]
    face = [colours[k] for k in retrieval.key_of_region]
    ax.add_collection(PolyCollection(polys, facecolors=face, edgecolors=face, linewidths=0.3))
    for ring in (r for cell in retrieval.cells for r in _rings(cell)):
        ax.plot(ring[:, 0], ring[:, 1], color=_EDGE, lw=0.9)
    handles: list[Artist] = [
        Patch(facecolor=colours[k], edgecolor=_EDGE, label=f"key {k}") for k in retrieval.retrieved[:12]
    ]
    info = {
        "keys": n,
        "retrieved_keys": int(retrieval.retrieved.size),
        "cells": retrieval.n_cells,
        "exact": True,
        "colours": colours,
    }
    if error is not None:
        if error.target_cells is not None:
            for ring in (r for cell in error.target_cells for r in _rings(cell)):
                ax.plot(ring[:, 0], ring[:, 1], color=_TARGET, lw=1.1, ls="--")
        elif error.target_grid is not None:
            ax.add_collection(LineCollection(list(_label_edges(error.target_grid, lo, hi)), colors=_TARGET, lw=0.8))
        if error.mistakes:
            for ring in (r for m in error.mistakes for r in _rings(m)):
                ax.fill(ring[:, 0], ring[:, 1], facecolor="none", edgecolor=_EDGE, hatch="////", lw=0)
        handles.append(Line2D([], [], color=_TARGET, ls="--", label="target cells"))
        if error.exact:
            handles.append(Patch(facecolor="none", edgecolor=_EDGE, hatch="////", label="mistakes"))
        info.update(error.as_dict())
    if isinstance(retrieval.domain, Box) and retrieval.keys.shape[1] == 2:
        K = retrieval.keys
        inside = np.all((K >= lo) & (K <= hi), axis=1)
        ax.scatter(K[inside, 0], K[inside, 1], s=18, c="black", zorder=5)
        for k in np.flatnonzero(inside):
            ax.annotate(str(k), K[k], xytext=(3, 3), textcoords="offset points", fontsize=8)
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_aspect("equal")
    ax.set_xlabel("x1" if isinstance(retrieval.domain, Box) else "u1")
    ax.set_ylabel("x2" if isinstance(retrieval.domain, Box) else "u2")
    if title is None:
        title = f"retrieval cells (exact): {info['retrieved_keys']} of {n} keys retrieved, {info['cells']} cells"
        if error is not None:
            how = "exact" if error.exact else f"sampled, ± {error.std_error:.2g}"
            title += f"\nmistake area {error.area:.4g} ({100 * error.fraction:.2f}%, {how})"
    ax.set_title(title, fontsize=10)
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig, info


def plot_retrieval(retrieval, error=None, fmt: str = "png", dpi: float = 150, **kwargs) -> bytes:
    """:func:`figure_retrieval` rendered to image bytes (png, svg or pdf)."""
    fig, _ = figure_retrieval(retrieval, error, **kwargs)
    return figure_bytes(fig, fmt, dpi)
