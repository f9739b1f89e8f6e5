"""Pictures of 2D partitions: regions filled so that neighbours never share a colour, boundaries drawn,
optional level sets of output 0.

What is drawn is a :class:`~regioncount.RegionSource` (:func:`~regioncount.region_source` picks the exact
``plane`` partition, the exact curved cells, or a grid of sampled codes, and then the title says "sampled"
and the count is a lower bound); this module only draws it. ``figure_*`` functions return ``(Figure, info)``:
``info`` is JSON-ready and says what was drawn; :func:`~regioncount.plotting.figure_bytes` renders a figure to
bytes, and ``plot_*`` do both at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.lines import Line2D

from .._domain import Box
from .._errors import RegionCountError
from .._views import (
    DEFAULT_MAX_REGIONS,
    RegionSource,
    SampledImage,
    check_linear,
    compare_compiled,
    domain_info,
    level_segments,
    level_values,
    linear_outlines,
    output_range,
    region_source,
    shared_edges as shared_edges,  # drawn by tests and by callers that imported it from here
    trapezoid_polygons,
    truncations,
)
from ..results import Cells, Partition
from ._colour import PALETTE, greedy_colouring, palette
from ._output import figure_bytes, new_figure

if TYPE_CHECKING:
    from ..networks import Maxout

_EDGE = "#333333"
_LEVEL = "#0b2a66"


def _level_cmap():
    """Level sets are coloured by their value of output 0 (read off the colour bar): viridis without its
    lightest quarter, so every level stays visible on pastel fills."""
    import matplotlib
    from matplotlib.colors import ListedColormap

    return ListedColormap(matplotlib.colormaps["viridis"](np.linspace(0.0, 0.75, 256)), name="levels")


def _level_norm(levels):
    """Colour norm over the level values (a flat range widened so a single level still has a colour)."""
    import matplotlib.colors as mcolors

    lv = np.asarray(levels, dtype=np.float64)
    lo, hi = float(lv.min()), float(lv.max())
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    return mcolors.Normalize(lo, hi)


_ZERO = "#c8102e"


# ----------------------------------------------------------------------------------------------------
# drawing


def region_colours(part: Partition, linear: bool = False, prefer: np.ndarray | None = None) -> np.ndarray:
    """Colour index ``(R,)`` of every region: a proper colouring of :meth:`Partition.adjacency`, so
    neighbours never share a colour. ``linear=True``: one colour per linear region (Montúfar et al. 2014),
    neighbouring linear regions differ. ``prefer (R,)``: colours to keep where no neighbour has them
    (-1: none), so a refined partition keeps its parents' colours where it can."""
    E = part.adjacency()
    if not linear:
        return greedy_colouring(part.n_regions, E, spread=len(PALETTE), prefer=prefer)
    _, lab = np.unique(part.linear_region_labels(), return_inverse=True)
    lab = lab.ravel()
    m = int(lab.max()) + 1 if lab.size else 0
    want = None
    if prefer is not None:
        want = np.full(m, -1, np.int64)
        want[lab] = prefer
    col = greedy_colouring(m, lab[E], spread=len(PALETTE), prefer=want)
    return col[lab]


def inherited_colours(part: Partition, parent: Partition | Cells, parent_colours: np.ndarray, linear: bool = False):
    """Colours for ``part`` that keep, where neighbours allow, the colour of the ``parent`` region holding
    each region's centroid (``part`` refines ``parent``: the partition one layer further on)."""
    idx = parent.locate(part.centroids())
    prefer = np.where(idx >= 0, np.asarray(parent_colours)[np.maximum(idx, 0)], -1)
    return region_colours(part, linear=linear, prefer=prefer)


def _polygons(part: Partition) -> list[np.ndarray]:
    return np.split(part.vertices, part.offsets[1:-1])


def _edge_width(n: int) -> float:
    return 0.8 if n < 100 else 0.5 if n < 1000 else 0.3 if n < 10000 else 0.12


def draw_partition(
    ax,
    part: Partition,
    *,
    linear: bool = False,
    colours: np.ndarray | None = None,
    levels: np.ndarray | Sequence[float] = (),
    zero: bool = False,
) -> dict:
    """Draw ``part`` on ``ax``: every region a filled polygon (one PolyCollection, region order), coloured
    by ``colours (R,)`` (default :func:`region_colours`), boundaries drawn; with ``linear`` the fills and
    bold outlines are the linear regions and activation boundaries are faint. ``levels``: values of output 0
    whose level sets are drawn; ``zero``: the zero set (decision boundary) in red. Returns what was drawn."""
    n = part.n_regions
    if colours is None:
        colours = region_colours(part, linear=linear)
    colours = np.asarray(colours, dtype=np.int64)
    ncol = int(colours.max()) + 1 if colours.size else 0
    fills = list(np.array(palette(ncol), dtype=object)[colours]) if ncol else []
    lw = _edge_width(n)
    pc = PolyCollection(
        _polygons(part),
        facecolors=fills,
        edgecolors="#ffffff" if linear else _EDGE,
        linewidths=lw * (0.6 if linear else 1.0),
        antialiaseds=True,
    )
    pc.set_gid("regions")
    ax.add_collection(pc)
    info: dict = {"colours": ncol}
    if linear:
        outlines = linear_outlines(part)
        ax.add_collection(LineCollection(list(outlines), colors=_EDGE, linewidths=max(lw, 0.3) * 1.6))
    if len(levels) and part.maps.shape[1]:
        norm, cmap = _level_norm(levels), _level_cmap()
        by_level = [(float(v), level_segments(part, float(v))) for v in levels]
        segs = [s for _, ss in by_level for s in ss]
        cols = [cmap(norm(v)) for v, ss in by_level for _ in ss]
        ax.add_collection(LineCollection(segs, colors=cols, linewidths=1.2))
    if zero and part.maps.shape[1]:
        zero_segs = level_segments(part, 0.0)
        ax.add_collection(LineCollection(list(zero_segs), colors=_ZERO, linewidths=2.2))
        info["zero_set_segments"] = int(len(zero_segs))
    info["zero_set_drawn"] = bool(info.get("zero_set_segments"))
    _frame_axes(ax, part.domain)
    return info


def draw_sampled(
    ax, image: SampledImage, *, levels: np.ndarray | Sequence[float] = (), zero: bool = False, prefer=None
) -> dict:
    """Draw a sampled image on ``ax``: code ids coloured by a proper colouring of their grid adjacency,
    cells next to another code darkened as boundaries, level sets of output 0 as contours. ``prefer
    (n_codes,)``: colours to keep where no neighbouring code has them (-1: none)."""
    import matplotlib.colors as mcolors

    col = greedy_colouring(image.n_codes, image.adjacency(), spread=len(PALETTE), prefer=prefer)
    ncol = int(col.max()) + 1
    rgb = np.array([mcolors.to_rgb(c) for c in palette(ncol)])[col[image.ids]]
    ids = image.ids
    edge = np.zeros(ids.shape, bool)
    edge[:, :-1] |= ids[:, :-1] != ids[:, 1:]
    edge[:-1, :] |= ids[:-1, :] != ids[1:, :]
    rgb[edge] = rgb[edge] * 0.25 + 0.75 * np.array(mcolors.to_rgb(_EDGE))
    im = ax.imshow(rgb, origin="lower", extent=image.extent, interpolation="nearest", aspect="auto")
    im.set_gid("sampled")
    a1, a2 = image.centres()
    out = image.output
    if len(levels):
        lv = np.sort(np.asarray(levels))
        ax.contour(a1, a2, out, levels=lv, cmap=_level_cmap(), norm=_level_norm(lv), linewidths=1.2, linestyles="solid")
    info: dict = {"colours": ncol, "zero_set_drawn": False}
    if zero and out.min() < 0 < out.max():
        ax.contour(a1, a2, out, levels=[0.0], colors=_ZERO, linewidths=2.2, linestyles="solid")
        info["zero_set_drawn"] = True
    _frame_axes(ax, image.domain)
    return info


def _frame_axes(ax, domain) -> None:
    lo, hi = domain.param_lo, domain.param_hi
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_aspect("equal" if 0.2 < (hi[1] - lo[1]) / (hi[0] - lo[0]) < 5 else "auto")
    names = ("x1", "x2") if isinstance(domain, Box) else ("u1", "u2")
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    ax.tick_params(labelsize=8)


def _title(src: RegionSource, info: dict, linear: bool) -> str:
    """Panel title: the count of ``info`` (:meth:`RegionSource.summary`), exact or a sampled lower bound."""
    kind, n, lin = info["kind"], info["regions"], info["linear_regions"]
    if src.cells is not None:
        word = "exact" if info["exact"] else "not certified exact"
        if linear:
            return f"{lin:,} linear regions ({n:,} connected cells), {word}"
        title = f"{n:,} {kind} ({word}, curved)"
        if info["codes"] != n:
            title += f"\n{info['codes']:,} distinct codes"
        return title
    if src.exact:
        if linear:
            return f"{lin:,} linear regions ({n:,} activation regions), exact"
        return f"{n:,} activation regions (exact)"
    return f"≥{n:,} {kind} (lower bound)\nsampled on a {info['grid']}×{info['grid']} grid"


def _sampled_preference(img: SampledImage, parent: Partition | Cells, parent_colours: np.ndarray) -> np.ndarray:
    """Preferred colour of each code of a sampled image: that of the ``parent`` region under its first cell."""
    idx = parent.locate(img.first_points())
    return np.where(idx >= 0, np.asarray(parent_colours)[np.maximum(idx, 0)], -1)


def draw_source(
    ax, src: RegionSource, *, linear=False, levels=(), zero=False, title_prefix: str = "", colours=None
) -> dict:
    """Draw a :class:`RegionSource` (exact or sampled) with a title that says which; returns its info.
    ``colours``: colour indices of an exact partition's regions (default :func:`region_colours`), or
    preferred colours of a sampled image's codes."""
    if linear:
        check_linear(src.net, not src.exact, src.reason)
    info = src.summary(linear)
    title = _title(src, info, linear)
    if src.cells is not None:
        info.update(draw_cells(ax, src.cells, linear=linear, colours=colours))
    elif src.exact:
        info.update(draw_partition(ax, src.exact_partition(), linear=linear, levels=levels, zero=zero, colours=colours))
    else:
        info.update(draw_sampled(ax, src.sampled_image(), levels=levels, zero=zero, prefer=colours))
    ax.set_title(title_prefix + title, fontsize=10)
    return info


def cell_colours(cells, linear: bool = False, parent=None) -> np.ndarray:
    """Colour index of every cell of curved ``cells``: a proper colouring of their adjacency (of the linear
    regions' adjacency with ``linear``). ``parent``: ``(Partition or Cells, colours)`` of the panel before,
    whose colour under each cell's witness point is kept where no neighbour has it."""
    prefer = None
    if parent is not None and parent[1] is not None:
        idx = parent[0].locate(cells.witness)
        prefer = np.where(idx >= 0, np.asarray(parent[1])[np.maximum(idx, 0)], -1)
    E = cells.adjacency
    lab = cells.linear_region_labels() if linear else None
    if lab is None:
        return greedy_colouring(cells.n_cells, E, spread=len(PALETTE), prefer=prefer)
    m = int(lab.max()) + 1 if lab.size else 0
    want = None
    if prefer is not None:
        want = np.full(m, -1, np.int64)
        want[lab] = prefer
    return greedy_colouring(m, lab[E], spread=len(PALETTE), prefer=want)[lab]


def draw_cells(ax, cells, *, linear: bool = False, colours: np.ndarray | None = None, samples: int = 24) -> dict:
    """Draw curved ``cells`` on ``ax``: every trapezoid filled with its cell's colour (its arcs sampled at
    ``samples`` Chebyshev-spaced points), and every boundary between two cells drawn as a polyline of its
    conic arc or segment. Level sets are not drawn on curved cells."""
    if colours is None:
        colours = cell_colours(cells, linear=linear)
    colours = np.asarray(colours, dtype=np.int64)
    ncol = int(colours.max()) + 1 if colours.size else 0
    P = trapezoid_polygons(cells, samples)
    fills = np.array(palette(max(ncol, 1)), dtype=object)[colours[cells.cell_of]]
    pc = PolyCollection(list(P), facecolors=list(fills), edgecolors=list(fills), linewidths=0.3)
    pc.set_gid("regions")
    ax.add_collection(pc)
    lines = cells.boundary_polylines(samples)
    lw = _edge_width(cells.n_cells)
    ax.add_collection(LineCollection(lines, colors="#ffffff" if linear else _EDGE, linewidths=lw))
    _frame_axes(ax, cells.domain)
    return {"colours": ncol, "boundary_pieces": len(lines), "trapezoids": cells.n_traps}


def _level_legend(fig, levels, zero: bool, axes=None) -> None:
    """The legend of the level sets and of the zero set (only when one was drawn), and a colour bar giving
    the value of output 0 on each level set (beside ``axes``)."""
    handles = []
    if len(levels):
        handles.append(Line2D([], [], color=_LEVEL, lw=1.2, label=f"{len(levels)} level sets of output 0"))
        from matplotlib.cm import ScalarMappable

        sm = ScalarMappable(norm=_level_norm(levels), cmap=_level_cmap())
        bar = fig.colorbar(sm, ax=axes if axes is not None else fig.axes, shrink=0.8, pad=0.02)
        bar.set_ticks(np.asarray(levels, dtype=np.float64))
        bar.ax.tick_params(labelsize=7)
        bar.set_label("output 0 on the level sets", fontsize=8)
    if zero:
        handles.append(Line2D([], [], color=_ZERO, lw=2.2, label="zero set of output 0 (decision boundary)"))
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False)


# ----------------------------------------------------------------------------------------------------
# public figures


def figure_regions(
    net,
    domain,
    *,
    linear: bool = False,
    levels: int = 0,
    zero: bool = False,
    layers: bool = False,
    sampled: bool = False,
    grid: int | None = None,
    max_regions: int = DEFAULT_MAX_REGIONS,
    title: str | None = None,
    source: RegionSource | None = None,
):
    """The partition of a 2D ``domain`` (Box for 2-input nets, or Slice) by ``net`` -> ``(Figure, info)``.

    Exact where :func:`region_source` can, else sampled (said in the title and in ``info``). ``linear``:
    colour linear regions instead of activation regions (exact partitions of piecewise-linear nets only).
    ``levels``: that many level sets of output 0, evenly spaced over its range; ``zero``: its zero set.
    ``layers``: one panel per truncation (:func:`truncations`), the last panel the whole network; level
    sets are drawn on the last panel only. ``info`` is JSON-ready: counts, method, colours, levels.
    ``source``: the :class:`RegionSource` of ``net`` on ``domain`` already computed (a caller that also needs
    its partition, for statistics or a graph), drawn as it is instead of computed again.
    """
    if levels < 0:
        raise RegionCountError(f"--levels must be at least 0, got {levels}")
    if linear:
        check_linear(net, sampled or grid is not None)
    if source is not None and (source.net is not net or source.domain is not domain):
        raise ValueError("source is the region source of another network or domain")
    parts = truncations(net) if layers else [("network", net)]
    srcs = [
        source
        if source is not None and i == len(parts) - 1
        else region_source(n_, domain, sampled=sampled, grid=grid, max_regions=max_regions)
        for i, (_, n_) in enumerate(parts)
    ]
    values = level_values(*output_range(srcs[-1]), levels)
    k = len(srcs)
    ncols = min(k, 4)
    nrows = -(-k // ncols)
    side = 5.6 if k == 1 else 3.0
    fig = new_figure(side * ncols + 0.3, side * nrows + (0.55 if (levels or zero) else 0.2))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    panels = []
    prev: tuple[Partition | Cells, np.ndarray] | None = None  # (partition, colours) of the panel before, if exact
    for i, ((label, _), src) in enumerate(zip(parts, srcs)):
        last = i == k - 1
        prefix = f"after {label}\n" if layers else ""
        colours: np.ndarray | None = None
        if src.cells is not None:
            colours = cell_colours(src.cells, linear=linear, parent=prev)
            prev = (src.cells, colours)
        elif src.partition is not None:
            part = src.partition
            colours = (
                region_colours(part, linear=linear)
                if prev is None
                else inherited_colours(part, prev[0], prev[1], linear=linear)
            )
            prev = (part, colours)
        else:
            if prev is not None:
                colours = _sampled_preference(src.sampled_image(), *prev)
            prev = None
        inf = draw_source(
            axes[i],
            src,
            linear=linear,
            levels=values if last else (),
            zero=zero and last,
            title_prefix=prefix,
            colours=colours,
        )
        inf["panel"] = label
        panels.append(inf)
        if layers:
            axes[i].title.set_fontsize(8.5)
    for ax in axes[k:]:
        ax.set_visible(False)
    zero_drawn = bool(zero and panels[-1].get("zero_set_drawn"))
    _level_legend(fig, values, zero_drawn, axes=axes[k - 1])
    if title:
        fig.suptitle(title, fontsize=11)
    info = dict(panels[-1])
    info.pop("panel")
    info.update(domain_info(domain))
    info["levels"] = values.tolist()
    info["zero_set"] = zero_drawn  # False where asked for but output 0 has no zero on the domain
    if layers:
        info["panels"] = panels
    return fig, info


def plot_regions(net, domain, *, fmt: str = "png", dpi: float = 150, **options) -> bytes:
    """:func:`figure_regions` rendered to image bytes in ``fmt`` (png, svg, pdf)."""
    fig, _ = figure_regions(net, domain, **options)
    return figure_bytes(fig, fmt, dpi)


def figure_compiled(net: Maxout, lo, hi, *, layout: str = "compact", levels: int = 8, title: str | None = None):
    """A Maxout network and the hardmax Transformer :func:`~regioncount.theory.compile_maxout` makes of it,
    side by side on the box ``[lo, hi]^2`` -> ``(Figure, info)``.

    Both partitions are exact. The Transformer's regions take the colour of the Maxout region that holds
    their centroid, so equal partitions look identical; ``info["identical"]`` is True when that map is a
    bijection with equal areas (to 1e-9 of the box) and equal outputs, region by region.
    """
    cmp = compare_compiled(net, lo, hi, layout=layout)
    pm, pt, tf, identical = cmp.maxout, cmp.compiled, cmp.transformer, cmp.identical
    cm = region_colours(pm)
    ct = cm[cmp.match] if identical else region_colours(pt)
    values = level_values(*output_range(RegionSource(net, cmp.box, partition=pm)), levels)
    fig = new_figure(8.8, 4.9)
    ax1, ax2 = fig.subplots(1, 2)
    draw_partition(ax1, pm, colours=cm, levels=values)
    draw_partition(ax2, pt, colours=ct, levels=values)
    ax1.set_title(
        f"Maxout, rank k={net.k}, widths {','.join(map(str, net.widths))}\n{pm.n_regions:,} activation regions",
        fontsize=10,
    )
    ax2.set_title(
        f"hardmax Transformer ({layout}): T={tf.tokens} tokens, {tf.depth} blocks\n"
        f"{pt.n_regions:,} activation regions" + ("" if identical else " (partitions differ)"),
        fontsize=10,
    )
    _level_legend(fig, values, False, axes=[ax1, ax2])
    if title:
        fig.suptitle(title, fontsize=11)
    info = {
        "maxout_regions": pm.n_regions,
        "transformer_regions": pt.n_regions,
        "identical": identical,
        "layout": layout,
        "blocks": tf.depth,
        "tokens": tf.tokens,
        "levels": values.tolist(),
        **domain_info(cmp.box),
    }
    return fig, info


def plot_compiled(net: Maxout, lo, hi, *, layout: str = "compact", fmt: str = "png", dpi: float = 150) -> bytes:
    """:func:`figure_compiled` rendered to image bytes."""
    fig, _ = figure_compiled(net, lo, hi, layout=layout)
    return figure_bytes(fig, fmt, dpi)
