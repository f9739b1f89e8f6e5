"""Pictures of 2D partitions: regions filled so that neighbours never share a colour, boundaries drawn,
optional level sets of output 0.

A picture comes from the exact ``plane`` partition where that engine can split the network, from the
exact curved cells (:mod:`regioncount.engines._curved`: hardmax after a token-wise FFN, the first
ReLU-attention op) where boundaries are conics; otherwise (boundaries of degree above 2, or more regions
than a cap) from a grid of sampled activation codes, and then the title says "sampled" and the count is a lower
bound. ``figure_*`` functions return ``(Figure, info)``: ``info`` is JSON-ready and says what was drawn;
:func:`~regioncount.plotting.figure_bytes` renders a figure to bytes, and ``plot_*`` do both at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.lines import Line2D

from .._count import region_kind
from .._domain import Box, Slice
from .._errors import CurvedBoundaryError, DomainError, MemoryCapError, NotPiecewiseError, RegionCountError
from ..networks import MLP, Maxout, Transformer, check_domain, lower, truncate, walk_widths
from ..networks._ops import Attention
from ..results._partition import Partition
from ._colour import PALETTE, greedy_colouring, palette
from ._output import figure_bytes, new_figure

#: Grid points per axis of a sampled picture when none is asked for.
DEFAULT_GRID = 400
#: Exact partitions with more regions than this are drawn from samples instead.
DEFAULT_MAX_REGIONS = 200_000
#: Points per forward-pass batch of a sampled picture (one jit compilation per network).
_BATCH = 1 << 16

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
# what is drawn: an exact partition or a sampled image


@dataclasses.dataclass(frozen=True, eq=False)
class SampledImage:
    """Activation codes of a ``grid x grid`` lattice of cell centres over a 2D domain.

    ``ids (grid, grid)``: code id of each cell, row ``i`` is ``u2``, column ``j`` is ``u1`` (image layout,
    origin at the bottom left); equal ids <=> equal codes. ``output (grid, grid)``: network output 0 there.
    ``n_codes``: distinct codes met, a lower bound on the number of regions.
    """

    domain: Box | Slice
    grid: int
    ids: np.ndarray
    output: np.ndarray
    n_codes: int

    @property
    def extent(self) -> tuple[float, float, float, float]:
        lo, hi = self.domain.param_lo, self.domain.param_hi
        return float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1])

    def adjacency(self) -> np.ndarray:
        """Pairs ``(E, 2)`` of code ids met in side-by-side cells (``i < j``, sorted, unique)."""
        pairs = [
            np.stack([self.ids[:, :-1].ravel(), self.ids[:, 1:].ravel()], 1),
            np.stack([self.ids[:-1, :].ravel(), self.ids[1:, :].ravel()], 1),
        ]
        P = np.concatenate(pairs)
        P = P[P[:, 0] != P[:, 1]]
        if P.size == 0:
            return np.zeros((0, 2), np.int64)
        return np.unique(np.sort(P, axis=1), axis=0).astype(np.int64)


@dataclasses.dataclass(frozen=True, eq=False)
class RegionSource:
    """What a picture is drawn from: ``partition`` (exact) or ``image`` (sampled), and why it was sampled."""

    net: object
    domain: Box | Slice
    partition: Partition | None = None
    image: SampledImage | None = None
    reason: str | None = None
    cells: object = None  # results._cells.Cells: exact curved cells

    @property
    def exact(self) -> bool:
        return self.partition is not None or self.cells is not None

    def sampled_image(self) -> SampledImage:
        """The sampled image of a source that is not exact."""
        if self.image is None:
            raise ValueError("this source is exact: it has a partition, not a sampled image")
        return self.image


def _check_piecewise(program) -> None:
    for op, _, _ in walk_widths(program):
        if isinstance(op, Attention) and op.sigma == "softmax":
            raise NotPiecewiseError(
                "softmax attention is smooth: the network has no regions to draw (hardmax attention is its λ → ∞ limit)"
            )


def _check_plane_domain(program, domain) -> None:
    q = program.input_dim
    if isinstance(domain, Slice):
        if domain.x0.shape[0] != q:
            raise DomainError(f"the slice lives in R^{domain.x0.shape[0]} but the network takes {q} inputs")
    elif not (isinstance(domain, Box) and domain.dim == 2 and q == 2):
        raise DomainError(
            f"a picture needs a 2D domain: a 2D box for a 2-input network, or a slice (--origin/--dir1/--dir2) "
            f"for this {q}-input one"
        )


def _input_bbox(domain) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = domain.param_lo, domain.param_hi
    corners = np.array([[lo[0], lo[1]], [hi[0], lo[1]], [hi[0], hi[1]], [lo[0], hi[1]]])
    X = domain.to_input(corners)
    return X.min(axis=0), X.max(axis=0)


def sample_image(net, domain, grid: int = DEFAULT_GRID) -> SampledImage:
    """Codes and output 0 of ``net`` at the ``grid x grid`` cell centres of a 2D ``domain`` (Box or Slice).

    Forward passes run in fixed-size batches (one jit compilation); memory is ``grid**2`` codes as int8.
    """
    from ..engines._forward import forward_codes

    if grid < 2:
        raise RegionCountError(f"a sampled picture needs at least 2 grid points per axis, got {grid}")
    program = lower(net)
    _check_piecewise(program)
    _check_plane_domain(program, domain)
    check_domain(net, *_input_bbox(domain))
    lo, hi = domain.param_lo, domain.param_hi
    a1 = lo[0] + (np.arange(grid) + 0.5) * (hi[0] - lo[0]) / grid
    a2 = lo[1] + (np.arange(grid) + 0.5) * (hi[1] - lo[1]) / grid
    U = np.stack(np.meshgrid(a1, a2, indexing="xy"), -1).reshape(-1, 2)  # row-major: rows u2, columns u1
    n = U.shape[0]
    batch = min(_BATCH, n)
    codes, outs = [], []
    for s in range(0, n, batch):
        Ub = U[s : s + batch]
        m = Ub.shape[0]
        if m < batch:
            Ub = np.concatenate([Ub, np.repeat(Ub[:1], batch - m, axis=0)])
        Y, C, _ = forward_codes(program, domain.to_input(Ub))
        C = np.asarray(C)[:m]
        # digits are ReLU bits or argmax indices: small non-negative ints
        codes.append(C.astype(np.int8) if C.size == 0 or C.max() < 127 else C)
        outs.append(np.asarray(Y)[:m, 0] if np.asarray(Y).shape[1] else np.zeros(m))
    ids = _code_ids(np.concatenate(codes)).reshape(grid, grid)
    return SampledImage(domain, grid, ids, np.concatenate(outs).reshape(grid, grid), int(ids.max()) + 1)


def _code_ids(C: np.ndarray) -> np.ndarray:
    """Ids ``(N,)`` of the distinct rows of ``C (N, L)``, numbered in order of first appearance.

    Rows are sorted by a 64-bit hash (one fast 1D sort instead of a row-wise one) and every row is then
    compared with its group's first row, so the ids are exact: a collision falls back to a row-wise sort.
    """
    from ..engines._forward import hash_multipliers

    if C.shape[1] == 0:
        return np.zeros(C.shape[0], np.int64)
    key = C.astype(np.uint64) @ hash_multipliers(C.shape[1])[0]
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    inv = inv.ravel()
    if not np.array_equal(C, C[first[inv]]):
        _, first, inv = np.unique(C, axis=0, return_index=True, return_inverse=True)
        inv = inv.ravel()
    # number groups by first appearance so the ids do not depend on hash values
    rank = np.empty(first.size, np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inv]


def region_source(
    net, domain, *, sampled: bool = False, grid: int | None = None, max_regions: int = DEFAULT_MAX_REGIONS
) -> RegionSource:
    """The exact partition of ``domain`` where the ``plane`` engine can make it, else a sampled image.

    ``sampled=True`` or a ``grid`` forces the sampled image (``grid`` points per axis, default
    :data:`DEFAULT_GRID`). Falls back to sampling on curved boundaries (:class:`CurvedBoundaryError`:
    quadric hardmax boundaries, ReLU-attention spline pieces) and on partitions above ``max_regions``.
    Softmax attention raises :class:`NotPiecewiseError`; a wrong domain raises :class:`DomainError`.
    """
    from ..engines._plane import partition_plane

    program = lower(net)
    _check_piecewise(program)
    _check_plane_domain(program, domain)
    reason = "asked for a sampled picture"
    if not sampled and grid is None:
        try:
            return RegionSource(net, domain, partition=partition_plane(net, domain, max_regions=max_regions))
        except CurvedBoundaryError as e:
            reason = str(e)
            # conic boundaries: the curved engine draws them exactly (its trapezoids count against the cap)
            from ..engines._curved import partition_curved

            try:
                return RegionSource(net, domain, cells=partition_curved(net, domain, max_traps=max_regions))
            except CurvedBoundaryError as e2:
                reason = str(e2)
            except MemoryCapError as e2:
                reason = f"more than {max_regions:,} trapezoids for an exact picture of curved cells ({e2})"
        except MemoryCapError as e:
            reason = f"more than {max_regions:,} regions for an exact picture ({e})"
    return RegionSource(net, domain, image=sample_image(net, domain, grid or DEFAULT_GRID), reason=reason)


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


def inherited_colours(part: Partition, parent: Partition, parent_colours: np.ndarray, linear: bool = False):
    """Colours for ``part`` that keep, where neighbours allow, the colour of the ``parent`` region holding
    each region's centroid (``part`` refines ``parent``: the partition one layer further on)."""
    idx = parent.locate(part.centroids())
    prefer = np.where(idx >= 0, np.asarray(parent_colours)[np.maximum(idx, 0)], -1)
    return region_colours(part, linear=linear, prefer=prefer)


def _polygons(part: Partition) -> list[np.ndarray]:
    return np.split(part.vertices, part.offsets[1:-1])


def _edge_width(n: int) -> float:
    return 0.8 if n < 100 else 0.5 if n < 1000 else 0.3 if n < 10000 else 0.12


def level_segments(part: Partition, value: float, output: int = 0) -> np.ndarray:
    """Segments ``(S, 2, 2)`` of the level set ``{output == value}``, exactly: the output is affine on each
    convex region, so the set meets it in one segment (or not at all)."""
    P = part.vertices
    reg = np.repeat(np.arange(part.n_regions), np.diff(part.offsets))
    nxt = np.arange(P.shape[0]) + 1
    nxt[part.offsets[1:] - 1] = part.offsets[:-1]
    m = part.maps[reg, output]
    f = m[:, 0] * P[:, 0] + m[:, 1] * P[:, 1] + m[:, 2] - value
    g = f[nxt]
    # half-open signs: a vertex on the level counts as above, so each crossing is found once
    cross = (f >= 0) != (g >= 0)
    idx = np.flatnonzero(cross)
    if idx.size == 0:
        return np.zeros((0, 2, 2))
    t = f[idx] / (f[idx] - g[idx])
    X = P[idx] + t[:, None] * (P[nxt[idx]] - P[idx])
    r = reg[idx]
    # a convex region is crossed on two edges; pair its first and last crossing
    first = np.ones(r.size, bool)
    first[1:] = r[1:] != r[:-1]
    last = np.ones(r.size, bool)
    last[:-1] = r[1:] != r[:-1]
    two = first & ~last
    a = np.flatnonzero(two)
    b = np.flatnonzero(last)[np.isin(r[last], r[two])]
    return np.stack([X[a], X[b]], axis=1)


def level_values(lo: float, hi: float, levels: int) -> np.ndarray:
    """``levels`` evenly spaced values strictly inside ``(lo, hi)``."""
    if levels <= 0 or not hi > lo:
        return np.zeros(0)
    return np.linspace(lo, hi, levels + 2)[1:-1]


def _output_range(src: RegionSource) -> tuple[float, float]:
    if src.cells is not None:
        c = src.cells
        if c.maps is None or c.maps.shape[1] == 0:
            return 0.0, 0.0
        x, y = c.traps.witness()
        f = c.maps[:, 0, 0] * x + c.maps[:, 0, 1] * y + c.maps[:, 0, 2]  # normalised coordinates
        return float(f.min()), float(f.max())
    if src.exact:
        part = src.partition
        reg = np.repeat(np.arange(part.n_regions), np.diff(part.offsets))
        m = part.maps[reg, 0] if part.maps.shape[1] else np.zeros((reg.size, 3))
        f = m[:, 0] * part.vertices[:, 0] + m[:, 1] * part.vertices[:, 1] + m[:, 2]
        return float(f.min()), float(f.max())
    img = src.sampled_image()
    return float(img.output.min()), float(img.output.max())


def shared_edges(part: Partition, pairs: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """The boundary segments ``(S, 2, 2)`` that the regions of each pair ``(i, j)`` in ``pairs (m, 2)`` share.

    Edges of ``i`` and ``j`` on one line (within 1e-9 of the domain's diameter) running in opposite
    directions (both polygons are counter-clockwise) overlap in the shared segment; T-junctions (an edge of
    ``i`` that meets several regions across) are handled because only the overlap is kept. NumPy, in chunks
    of pairs; no polygon unions, so no slivers from rounding.
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if pairs.size == 0:
        return np.zeros((0, 2, 2))
    nv = np.diff(part.offsets)
    M = int(nv.max())
    k = np.arange(M)
    diam = float(np.hypot(*(part.domain.param_hi - part.domain.param_lo)))
    eps = 1e-9 * diam
    out = []
    for s in range(0, len(pairs), chunk):
        pr = pairs[s : s + chunk]

        def edges(r):
            n = nv[r][:, None]
            a = part.offsets[r][:, None] + np.minimum(k, n - 1)
            b = part.offsets[r][:, None] + (k + 1) % n
            return part.vertices[a], part.vertices[b], k < n

        Pa, Qa, va = edges(pr[:, 0])  # (m, M, 2)
        Pb, Qb, vb = edges(pr[:, 1])
        d = Qa - Pa
        L = np.hypot(d[..., 0], d[..., 1])
        u = d / np.where(L > 0, L, 1.0)[..., None]
        nrm = np.stack([-u[..., 1], u[..., 0]], -1)
        # distances of b's endpoints from a's line, and positions along it: (m, M_a, M_b)
        off_p = np.einsum("mak,mbk->mab", nrm, Pb) - np.einsum("mak,mak->ma", nrm, Pa)[..., None]
        off_q = np.einsum("mak,mbk->mab", nrm, Qb) - np.einsum("mak,mak->ma", nrm, Pa)[..., None]
        t_p = np.einsum("mak,mbk->mab", u, Pb) - np.einsum("mak,mak->ma", u, Pa)[..., None]
        t_q = np.einsum("mak,mbk->mab", u, Qb) - np.einsum("mak,mak->ma", u, Pa)[..., None]
        lo = np.maximum(0.0, np.minimum(t_p, t_q))
        hi = np.minimum(L[..., None], np.maximum(t_p, t_q))
        ok = (
            va[:, :, None]
            & vb[:, None, :]
            & (L[..., None] > eps)
            & (np.abs(off_p) <= eps)
            & (np.abs(off_q) <= eps)
            & (t_q < t_p)  # opposite direction
            & (hi - lo > eps)
        )
        m_, a_, _ = np.nonzero(ok)
        P0 = Pa[m_, a_] + lo[ok][:, None] * u[m_, a_]
        P1 = Pa[m_, a_] + hi[ok][:, None] * u[m_, a_]
        out.append(np.stack([P0, P1], axis=1))
    return np.concatenate(out)


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
        lab = part.linear_region_labels()
        E = part.adjacency()
        outlines = shared_edges(part, E[lab[E[:, 0]] != lab[E[:, 1]]])
        ax.add_collection(LineCollection(list(outlines), colors=_EDGE, linewidths=max(lw, 0.3) * 1.6))
    if len(levels) and part.maps.shape[1]:
        norm, cmap = _level_norm(levels), _level_cmap()
        by_level = [(float(v), level_segments(part, float(v))) for v in levels]
        segs = [s for _, ss in by_level for s in ss]
        cols = [cmap(norm(v)) for v, ss in by_level for _ in ss]
        ax.add_collection(LineCollection(segs, colors=cols, linewidths=1.2))
    if zero and part.maps.shape[1]:
        segs = level_segments(part, 0.0)
        ax.add_collection(LineCollection(list(segs), colors=_ZERO, linewidths=2.2))
        info["zero_set_segments"] = int(len(segs))
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
    lo, hi = image.domain.param_lo, image.domain.param_hi
    a1 = lo[0] + (np.arange(image.grid) + 0.5) * (hi[0] - lo[0]) / image.grid
    a2 = lo[1] + (np.arange(image.grid) + 0.5) * (hi[1] - lo[1]) / image.grid
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


def _describe(src: RegionSource, linear: bool) -> tuple[str, dict]:
    """Panel title and JSON-ready counts."""
    kind = region_kind(src.net)
    if src.cells is not None:
        c = src.cells
        n, lin = c.n_cells, c.linear_regions()
        word = "exact" if c.exact else "not certified exact"
        title = f"{n:,} {kind} ({word}, curved)"
        if c.n_codes != n:
            title += f"\n{c.n_codes:,} distinct codes"
        if linear:
            title = f"{lin:,} linear regions ({n:,} connected cells), {word}"
        info = {
            "method": "exact",
            "engine": "curved",
            "exact": bool(c.exact),
            "regions": n,
            "codes": c.n_codes,
            "linear_regions": lin,
            "lower_bound": False,
        }
    elif src.exact:
        part = src.partition
        n = part.n_regions
        lin = part.linear_regions() if kind == "activation regions" else None
        title = f"{n:,} activation regions (exact)"
        if linear:
            title = f"{lin:,} linear regions ({n:,} activation regions), exact"
        info = {"method": "exact", "exact": True, "regions": n, "linear_regions": lin, "lower_bound": False}
    else:
        img = src.sampled_image()
        title = f"≥{img.n_codes:,} {kind} (lower bound)\nsampled on a {img.grid}×{img.grid} grid"
        info = {
            "method": "sampled",
            "exact": False,
            "regions": img.n_codes,
            "linear_regions": None,
            "lower_bound": True,
            "grid": img.grid,
            "samples": img.grid**2,
            "why_sampled": src.reason,
        }
    info["kind"] = kind
    info["drawn"] = "linear regions" if linear else kind
    return title, info


def _check_linear(net, sampled: bool, reason: str | None = None) -> None:
    if region_kind(net) != "activation regions":
        raise RegionCountError("ReLU attention has spline pieces, not linear regions: drop --linear")
    if sampled:
        why = f" ({reason})" if reason else ""
        raise RegionCountError(
            f"linear regions need the exact partition and this picture is sampled{why}; drop --linear to draw "
            "the sampled activation codes"
        )


def _sampled_preference(img: SampledImage, parent: Partition, parent_colours: np.ndarray) -> np.ndarray:
    """Preferred colour of each code of a sampled image: that of the ``parent`` region under its first cell."""
    _, first = np.unique(img.ids.ravel(), return_index=True)
    lo, hi = img.domain.param_lo, img.domain.param_hi
    r, c = np.divmod(first, img.grid)
    pts = np.stack([lo[0] + (c + 0.5) * (hi[0] - lo[0]) / img.grid, lo[1] + (r + 0.5) * (hi[1] - lo[1]) / img.grid], 1)
    idx = parent.locate(pts)
    return np.where(idx >= 0, np.asarray(parent_colours)[np.maximum(idx, 0)], -1)


def draw_source(
    ax, src: RegionSource, *, linear=False, levels=(), zero=False, title_prefix: str = "", colours=None
) -> dict:
    """Draw a :class:`RegionSource` (exact or sampled) with a title that says which; returns its info.
    ``colours``: colour indices of an exact partition's regions (default :func:`region_colours`), or
    preferred colours of a sampled image's codes."""
    if linear:
        _check_linear(src.net, not src.exact, src.reason)
    title, info = _describe(src, linear)
    if src.cells is not None:
        info.update(draw_cells(ax, src.cells, linear=linear, colours=colours))
    elif src.exact:
        info.update(draw_partition(ax, src.partition, linear=linear, levels=levels, zero=zero, colours=colours))
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
    t = cells.traps
    th = np.linspace(0, np.pi, samples)
    X = (t.xa + t.xb)[:, None] / 2 - (t.xb - t.xa)[:, None] / 2 * np.cos(th)
    from ..engines._conic import branch_y

    lo = branch_y(t.Lc[:, None], t.Lk[:, None], X)
    hi = branch_y(t.Uc[:, None], t.Uk[:, None], X)
    P = np.concatenate([np.stack([X, lo], -1), np.stack([X, hi], -1)[:, ::-1]], axis=1)
    P = cells.centre + cells.half * P
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


def _domain_info(domain) -> dict:
    if isinstance(domain, Box):
        return {"box": {"lo": domain.lo.tolist(), "hi": domain.hi.tolist()}}
    return {
        "slice": {
            "origin": domain.x0.tolist(),
            "dir1": domain.v1.tolist(),
            "dir2": domain.v2.tolist(),
            "lo": domain.lo.tolist(),
            "hi": domain.hi.tolist(),
        }
    }


# ----------------------------------------------------------------------------------------------------
# truncations: the partition after each layer or block


def truncations(net) -> list[tuple[str, object]]:
    """``(label, network)`` for the network cut after each hidden layer (MLP, Maxout) or block
    (Transformer); the last entry is ``net`` itself.

    An MLP or Maxout network cut after layer ``l`` reads out layer ``l`` unchanged (identity readout), so
    its output 0 is unit 1 of that layer; a Transformer keeps its readout (:func:`networks.truncate`)."""
    out: list[tuple[str, object]]
    if isinstance(net, MLP):
        L = len(net.widths)
        out = []
        for l in range(1, L):
            n = net.widths[l - 1]
            out.append((f"layer {l}", MLP(net.weights[:l] + (np.eye(n),), net.biases[:l] + (np.zeros(n),))))
        out.append((f"layer {L}" if L else "affine", net))
        return out
    if isinstance(net, Maxout):
        L = len(net.widths)
        out = []
        for l in range(1, L):
            n = net.widths[l - 1]
            out.append((f"layer {l}", Maxout(net.weights[:l], net.biases[:l], np.eye(n), np.zeros(n))))
        out.append((f"layer {L}", net))
        return out
    if isinstance(net, Transformer):
        out = [(f"block {d}", truncate(net, d)) for d in range(1, net.depth)]
        out.append((f"block {net.depth}", net))
        return out
    return [("network", net)]


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
):
    """The partition of a 2D ``domain`` (Box for 2-input nets, or Slice) by ``net`` -> ``(Figure, info)``.

    Exact where :func:`region_source` can, else sampled (said in the title and in ``info``). ``linear``:
    colour linear regions instead of activation regions (exact partitions of piecewise-linear nets only).
    ``levels``: that many level sets of output 0, evenly spaced over its range; ``zero``: its zero set.
    ``layers``: one panel per truncation (:func:`truncations`), the last panel the whole network; level
    sets are drawn on the last panel only. ``info`` is JSON-ready: counts, method, colours, levels.
    """
    if levels < 0:
        raise RegionCountError(f"--levels must be at least 0, got {levels}")
    if linear:
        _check_linear(net, sampled or grid is not None)
    parts = truncations(net) if layers else [("network", net)]
    srcs = [region_source(n_, domain, sampled=sampled, grid=grid, max_regions=max_regions) for _, n_ in parts]
    values = level_values(*_output_range(srcs[-1]), levels)
    k = len(srcs)
    ncols = min(k, 4)
    nrows = -(-k // ncols)
    side = 5.6 if k == 1 else 3.0
    fig = new_figure(side * ncols + 0.3, side * nrows + (0.55 if (levels or zero) else 0.2))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    panels = []
    prev: tuple[Partition, np.ndarray] | None = None  # (partition, colours) of the panel before, when exact
    for i, ((label, _), src) in enumerate(zip(parts, srcs)):
        last = i == k - 1
        prefix = f"after {label}\n" if layers else ""
        colours = None
        if src.cells is not None:
            colours = cell_colours(src.cells, linear=linear, parent=prev)
        elif src.exact:
            colours = (
                region_colours(src.partition, linear=linear)
                if prev is None
                else inherited_colours(src.partition, prev[0], prev[1], linear=linear)
            )
        elif prev is not None:
            colours = _sampled_preference(src.sampled_image(), *prev)
        prev = (src.cells if src.cells is not None else src.partition, colours) if src.exact else None
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
    info.update(_domain_info(domain))
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
    from ..engines._plane import partition_plane
    from ..theory import compile_maxout

    if not isinstance(net, Maxout) or net.input_dim != 2:
        raise RegionCountError("figure_compiled draws a 2-input Maxout network")
    box = Box(lo, hi, 2)
    tf = compile_maxout(net, box.lo, box.hi, layout=layout)
    pm = partition_plane(net, box)
    pt = partition_plane(tf, box)
    cm = region_colours(pm)
    match = pm.locate(pt.centroids())
    box_area = float(np.prod(box.hi - box.lo))
    identical = bool(
        pm.n_regions == pt.n_regions
        and np.all(match >= 0)
        and np.array_equal(np.sort(match), np.arange(pm.n_regions))
        and np.allclose(pt.areas, pm.areas[match], rtol=0, atol=1e-9 * box_area)
        and np.allclose(pt.maps[:, 0], pm.maps[match, 0], rtol=1e-9, atol=1e-9)
    )
    ct = cm[match] if identical else region_colours(pt)
    values = level_values(*_output_range(RegionSource(net, box, partition=pm)), levels)
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
        **_domain_info(box),
    }
    return fig, info


def plot_compiled(net: Maxout, lo, hi, *, layout: str = "compact", fmt: str = "png", dpi: float = 150) -> bytes:
    """:func:`figure_compiled` rendered to image bytes."""
    fig, _ = figure_compiled(net, lo, hi, layout=layout)
    return figure_bytes(fig, fmt, dpi)
