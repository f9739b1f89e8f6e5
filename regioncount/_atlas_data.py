"""What an atlas page shows, computed: the exact partition of a 2D domain as drawable pieces with everything a
hover panel, a layer slider and the view toggles need (:mod:`regioncount.plotting._atlas` only writes it out
as HTML).

An :class:`Atlas` holds:

- **pieces**: polygons in the domain's ``(u1, u2)``, sorted by decreasing bounding-box size (the level-of-detail
  order: a page draws a prefix of them, then the rest as it has time, and regions below a pixel as a dot).
  A straight partition (``plane`` engine) has one piece per region; curved cells (``curved`` engine) have one
  piece per trapezoid, its arcs sampled, and a cell is the union of its trapezoids.
- per **region** (activation region, or connected cell where boundaries are curved): the code as a tree of
  differences (:class:`CodeTree`: each region's code is its BFS parent's with a few digits changed, so codes
  of 10^6 regions of 1800 bits stay a few bytes per region and decode exactly), the affine output map in
  ``(u1, u2)``, area, vertex count, number of neighbours;
- **views**: groupings of the regions, each with a colouring so that neighbouring groups differ: the regions
  after each layer or block (components of neighbours with equal code prefixes: the truncated network's code
  is a prefix of the code, :func:`~regioncount._views.truncations`), the activation regions, the linear
  regions, and with ``decision`` the decision regions (a second geometry: the cells of the decision network);
- level sets of output 0 (:func:`~regioncount._views.level_segments`, straight partitions only);
- for curved cells, their boundaries as segments ``outline (S, 2, 2)`` (arcs sampled,
  :meth:`~regioncount.results.Cells.boundary_polylines`): a piece's own outline would show the trapezoids' walls.

Nothing here is approximate about which region a point is in or what its code is: codes, maps and counts are
the partition's own. The drawn arcs of curved cells are sampled (the counts and codes are not).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._errors import CurvedBoundaryError, MemoryCapError, RegionCountError
from ._views import (
    domain_info,
    level_segments,
    level_values,
    truncations as _truncations,
)
from ._views._source import _check_piecewise, _check_plane_domain, _input_bbox
from .networks import check_domain, lower, walk_widths
from .networks._ops import code_length, op_code_length
from .results import Cells, Partition
from .results._partition import _components

#: Exact partitions above this many regions (curved: trapezoids) are refused.
DEFAULT_MAX_REGIONS = 2_000_000
#: Level sets are computed for partitions up to this many regions.
LEVEL_REGIONS = 300_000
#: Code prefixes (the layer slider) are computed where regions x code length stays below this many bytes
#: (the codes are held as one byte per digit while they are compared).
PREFIX_BYTES = 400_000_000
#: Outputs whose affine maps are kept per region (the panel lists them).
MAX_OUTPUTS = 16
#: Arc samples per side of a curved trapezoid.
ARC_SAMPLES = 10


@dataclasses.dataclass(frozen=True, eq=False)
class Pieces:
    """Polygons ``vertices (V, 2)`` / ``offsets (P+1,)`` in ``(u1, u2)``, each a piece of region ``region (P,)``,
    in level-of-detail order (decreasing bounding-box diagonal ``size (P,)``)."""

    vertices: np.ndarray
    offsets: np.ndarray
    region: np.ndarray
    size: np.ndarray

    @property
    def n(self) -> int:
        return int(self.offsets.shape[0] - 1)


@dataclasses.dataclass(frozen=True, eq=False)
class CodeTree:
    """Codes of ``R`` regions as differences along a spanning forest of the region graph.

    ``parent (R,)``: the region whose code a region's code is written against (-1: the all-zero code);
    parents come before children in ``order``. Region ``r``'s differences are ``pos[off[r]:off[r+1]]`` (code
    positions) with the values ``val[...]`` there. :meth:`code` decodes one region exactly."""

    parent: np.ndarray
    off: np.ndarray
    pos: np.ndarray
    val: np.ndarray
    length: int

    def code(self, r: int) -> np.ndarray:
        """The code ``(length,)`` int of region ``r``."""
        chain = []
        while r >= 0:
            chain.append(r)
            r = int(self.parent[r])
        out = np.zeros(self.length, np.int64)
        for k in reversed(chain):
            out[self.pos[self.off[k] : self.off[k + 1]]] = self.val[self.off[k] : self.off[k + 1]]
        return out


@dataclasses.dataclass(frozen=True, eq=False)
class View:
    """A grouping of the regions: ``group (R,)`` (None: each region its own group), ``colour (G,)`` colour index
    per group (neighbouring groups differ), ``count`` groups."""

    key: str
    label: str
    count: int
    group: np.ndarray | None
    colour: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)
class DecisionLayer:
    """The cells of the decision network (argmax of the logits) as ``pieces``, with ``classes (R_d,)`` and the
    decision region ``labels (R_d,)`` (contiguous) of each cell, the class boundary ``(S, 2, 2)``."""

    pieces: Pieces
    classes: np.ndarray
    labels: np.ndarray
    count: int
    n_classes: int
    boundary: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)
class Atlas:
    """Everything an atlas page draws and shows (module docstring). Region ``r`` is region ``r`` of
    ``partition`` (straight) or cell ``r`` of ``cells`` (curved)."""

    summary: dict
    domain: object
    pieces: Pieces
    codes: CodeTree
    code_groups: list[tuple[str, int, int]]
    maps: np.ndarray
    areas: np.ndarray
    n_vertices: np.ndarray
    neighbours: np.ndarray
    views: list[View]
    layer_views: int
    levels: np.ndarray
    level_segments: np.ndarray
    decision: DecisionLayer | None
    outline: np.ndarray | None = None
    partition: Partition | None = None
    cells: Cells | None = None

    @property
    def n_regions(self) -> int:
        return int(self.areas.shape[0])

    def locate(self, points) -> np.ndarray:
        """Region of each point ``(n, 2)`` in ``(u1, u2)`` -> ``(n,)`` (-1 outside the domain)."""
        if self.partition is not None:
            return self.partition.locate(points)
        assert self.cells is not None
        return self.cells.locate(points)


# ----------------------------------------------------------------------------------------------------
# colouring


def colour_graph(n: int, edges: np.ndarray, seed: int = 0) -> np.ndarray:
    """A proper colouring ``(n,)`` (colour indices from 0) of the graph on ``0..n-1`` with ``edges (E, 2)``.

    Jones and Plassmann (1993), "A parallel graph coloring heuristic": every node gets a random priority;
    each round, every uncoloured node whose priority beats all its uncoloured neighbours takes the smallest
    colour none of its coloured neighbours has. Vectorised over nodes (NumPy), a few dozen rounds for 10^6
    regions; at most ``max degree + 1`` colours (a few more than the smallest-last greedy colouring of
    :func:`regioncount.plotting.greedy_colouring`, which runs a Python loop per node). Deterministic.
    """
    E = np.asarray(edges, np.int64).reshape(-1, 2)
    E = E[E[:, 0] != E[:, 1]]
    colour = np.full(n, -1, np.int64)
    if n == 0:
        return colour
    both = np.concatenate([E, E[:, ::-1]])
    both = both[np.argsort(both[:, 0], kind="stable")]
    src, dst = both[:, 0], both[:, 1]
    prio = np.random.default_rng(seed).permutation(n)
    while True:
        todo = colour < 0
        if not todo.any():
            return colour
        # a node is chosen when no uncoloured neighbour has a higher priority
        live = todo[src] & todo[dst]
        beaten = np.zeros(n, bool)
        beaten[src[live & (prio[dst] > prio[src])]] = True
        pick = todo & ~beaten
        # colours already taken around each chosen node, as a bit mask (colours beyond 62 are rare: fall back)
        sel = pick[src] & (colour[dst] >= 0)
        c = colour[dst[sel]]
        small = c < 62
        mask = np.zeros(n, np.int64)
        np.bitwise_or.at(mask, src[sel][small], np.left_shift(1, c[small]))
        free = ~mask & (mask + 1)  # lowest zero bit
        new = np.log2(free[pick].astype(np.float64)).astype(np.int64)
        colour[pick] = new
        big = np.flatnonzero(pick)[new >= 62]
        for v in big:  # a node with more than 62 coloured neighbours: the smallest colour free around it
            taken = set(colour[dst[src == v]].tolist())
            colour[v] = next(k for k in range(n + 1) if k not in taken)


def _grouped(n: int, edges: np.ndarray, same: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Contiguous labels ``(n,)`` of the components of ``edges[same]`` and the edges between groups."""
    lab = _components(n, edges[same])
    lab = np.unique(lab, return_inverse=True)[1].reshape(-1)
    Eg = lab[edges[~same]]
    Eg = Eg[Eg[:, 0] != Eg[:, 1]]
    return lab, (np.unique(np.sort(Eg, axis=1), axis=0) if Eg.size else np.zeros((0, 2), np.int64))


# ----------------------------------------------------------------------------------------------------
# codes


def _code_rows_fn(part: Partition | None, cells: Cells | None):
    if part is not None:
        return part.code_rows
    assert cells is not None
    cc = np.asarray(cells.cell_codes)
    return lambda idx: cc[idx].astype(np.int32)


def code_tree(n: int, edges: np.ndarray, rows, length: int, chunk: int = 8192) -> CodeTree:
    """The :class:`CodeTree` of ``n`` regions with neighbour pairs ``edges (E, 2)``; ``rows(idx)`` returns the
    codes ``(len(idx), length)`` of regions ``idx``. A BFS forest of the region graph (neighbours' codes differ
    in few digits: those of the boundaries between them)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import breadth_first_order

    E = np.asarray(edges, np.int64).reshape(-1, 2)
    G = coo_matrix((np.ones(E.shape[0], np.int8), (E[:, 0], E[:, 1])), shape=(n, n)).tocsr()
    parent = np.full(n, -1, np.int64)
    seen = np.zeros(n, bool)
    order_parts = []
    start = 0
    while True:
        rest = np.flatnonzero(~seen[start:])
        if rest.size == 0:
            break
        root = start + int(rest[0])
        order, pred = breadth_first_order(G, root, directed=False, return_predecessors=True)
        seen[order] = True
        parent[order[1:]] = pred[order[1:]]
        order_parts.append(order)
        start = root + 1
    pos_parts, val_parts, cnt = [], [], np.zeros(n, np.int64)
    for s in range(0, n, chunk):
        idx = np.arange(s, min(n, s + chunk))
        A = rows(idx)
        p = parent[idx]
        B = np.zeros_like(A)
        has = p >= 0
        if has.any():
            B[has] = rows(p[has])
        r, c = np.nonzero(A != B)
        cnt[idx] = np.bincount(r, minlength=idx.size)
        pos_parts.append(c.astype(np.int64))
        val_parts.append(A[r, c].astype(np.int64))
    off = np.zeros(n + 1, np.int64)
    np.cumsum(cnt, out=off[1:])
    pos = np.concatenate(pos_parts) if pos_parts else np.zeros(0, np.int64)
    val = np.concatenate(val_parts) if val_parts else np.zeros(0, np.int64)
    return CodeTree(parent, off, pos, val, int(length))


def _byte_codes(rows, n: int, length: int, chunk: int = 8192) -> np.ndarray | None:
    """All codes ``(n, length)`` as uint8, built in chunks (never the whole int32 array); None when a digit
    does not fit in a byte."""
    out = np.empty((n, length), np.uint8)
    for s in range(0, n, chunk):
        block = rows(np.arange(s, min(n, s + chunk)))
        if block.size and (block.min() < 0 or block.max() > 255):
            return None
        out[s : s + block.shape[0]] = block
    return out


def code_groups(net) -> list[tuple[str, int, int]]:
    """``(label, start, end)`` of each op's entries in the code, labelled by the layer or block it belongs to
    (the truncation whose code first covers it) and the op's kind."""
    program = lower(net)
    ends = [(label, code_length(lower(sub))) for label, sub in _truncations(net)]
    out: list[tuple[str, int, int]] = []
    at = 0
    for op, w, _ in walk_widths(program):
        k = op_code_length(op, w, program.tokens)
        if k == 0:
            continue
        kind = op.label
        end = at + k
        label = next((lab for lab, e in ends if e >= end), "network")
        out.append((f"{label}: {kind}", at, end))
        at = end
    if at != code_length(program):
        raise RegionCountError("internal: the code groups do not cover the code")
    return out


# ----------------------------------------------------------------------------------------------------
# geometry


def _sorted_pieces(vertices: np.ndarray, offsets: np.ndarray, region: np.ndarray) -> Pieces:
    """Pieces in decreasing order of bounding-box diagonal (the level-of-detail order)."""
    n = offsets.shape[0] - 1
    reg_v = np.repeat(np.arange(n), np.diff(offsets))
    lo = np.full((n, 2), np.inf)
    hi = np.full((n, 2), -np.inf)
    np.minimum.at(lo, reg_v, vertices)
    np.maximum.at(hi, reg_v, vertices)
    size = np.hypot(*(hi - lo).T)
    order = np.argsort(-size, kind="stable")
    counts = np.diff(offsets)[order]
    new_off = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=new_off[1:])
    take = np.repeat(offsets[:-1][order] - new_off[:-1], counts) + np.arange(new_off[-1])
    return Pieces(vertices[take], new_off, np.asarray(region)[order].astype(np.int64), size[order])


def _partition_pieces(part: Partition) -> Pieces:
    return _sorted_pieces(np.asarray(part.vertices), np.asarray(part.offsets), np.arange(part.n_regions))


def _cell_pieces(cells: Cells) -> Pieces:
    from ._views import trapezoid_polygons

    P = trapezoid_polygons(cells, samples=ARC_SAMPLES)  # (N, 2 s, 2)
    N, k = P.shape[0], P.shape[1]
    return _sorted_pieces(P.reshape(-1, 2), np.arange(N + 1) * k, cells.cell_of)


def _polyline_segments(lines: list[np.ndarray]) -> np.ndarray:
    """Consecutive point pairs ``(S, 2, 2)`` of polylines ``(k_i, 2)``."""
    segs = [np.stack([ln[:-1], ln[1:]], axis=1) for ln in lines if len(ln) > 1]
    return np.concatenate(segs) if segs else np.zeros((0, 2, 2))


def _maps_in_domain(cells: Cells) -> np.ndarray:
    """The cells' output maps ``(n_cells, out, 3)`` rewritten from normalised ``u'`` to ``u = c + h u'``."""
    assert cells.maps is not None
    M = np.asarray(cells.maps)[cells._cell_rep]
    c, h = cells.centre, cells.half
    a, b = M[..., 0] / h[0], M[..., 1] / h[1]
    return np.stack([a, b, M[..., 2] - a * c[0] - b * c[1]], -1)


# ----------------------------------------------------------------------------------------------------
# the atlas


def atlas_data(
    net,
    domain,
    *,
    decision: bool = False,
    layers: bool = True,
    levels: int = 12,
    max_regions: int | None = DEFAULT_MAX_REGIONS,
    progress=None,
) -> Atlas:
    """The :class:`Atlas` of ``net`` on a 2D ``domain`` (a 2D :class:`Box` or a :class:`Slice`), exactly.

    The ``plane`` engine where boundaries are straight, else the ``curved`` engine (conic arcs); more than
    ``max_regions`` regions (trapezoids for curved cells) raise :class:`RegionCountError`, as do boundaries
    of degree above 2 (no exact 2D partition exists here; an atlas is never sampled). ``progress(done,
    total)``: called by the engine, then for the four steps after it. ``decision``: add the
    decision regions (argmax of the logits; straight partitions). ``layers``: the regions after each layer or
    block (the layer slider). ``levels``: level sets of output 0.
    """
    from .engines._plane import partition_plane

    program = lower(net)
    _check_piecewise(program)
    _check_plane_domain(program, domain)
    check_domain(net, *_input_bbox(domain))
    part: Partition | None = None
    cells: Cells | None = None
    dec: DecisionLayer | None = None
    try:
        if decision:
            from ._views import decision_view

            dv = decision_view(net, domain, max_regions=max_regions)
            part = dv.base
            dlab = np.unique(dv.labels, return_inverse=True)[1].reshape(-1)
            dec = DecisionLayer(
                _partition_pieces(dv.cells), dv.classes, dlab, dv.decision_regions, dv.n_classes, dv.boundary
            )
        else:
            try:
                part = partition_plane(net, domain, max_regions=max_regions, progress=progress)
            except CurvedBoundaryError:
                from .engines._curved import partition_curved

                cells = partition_curved(net, domain, max_traps=max_regions, progress=progress)
    except MemoryCapError as e:
        raise MemoryCapError(
            f"the exact partition passed {max_regions:,} regions, the most an atlas is made of ({e}); shrink the "
            "domain or raise the cap"
        ) from None
    except CurvedBoundaryError as e:
        if decision:
            raise RegionCountError(f"decision regions need a straight partition: {e}") from None
        raise

    if part is not None:
        R = part.n_regions
        pieces = _partition_pieces(part)
        E = np.asarray(part.adjacency())
        maps = np.asarray(part.maps)
        areas = np.asarray(part.areas)
        n_vertices = np.diff(part.offsets)
        lin = part.linear_region_labels() if part.maps.shape[1] else None
        C = part.code_length
    else:
        assert cells is not None
        R = cells.n_cells
        pieces = _cell_pieces(cells)
        E = np.asarray(cells.adjacency)
        maps = _maps_in_domain(cells) if cells.maps is not None else np.zeros((R, 0, 3))
        areas = np.asarray(cells.cell_area)
        n_vertices = np.zeros(R, np.int64)  # bounded by arcs: no vertex count
        lin = cells.linear_region_labels()
        C = int(np.asarray(cells.codes).shape[1])

    def stage(k: int) -> None:  # after the partition: code tree, views, level sets (a progress bar's steps)
        if progress is not None:
            progress(k, 4)

    stage(0)
    rows = _code_rows_fn(part, cells)
    tree = code_tree(R, E, rows, C)
    stage(1)
    neighbours = np.bincount(E.ravel(), minlength=R) if E.size else np.zeros(R, np.int64)
    edges_all = E if E.size else np.zeros((0, 2), np.int64)

    # views: each layer's regions (code-prefix components), then activation, linear and decision regions
    views: list[View] = []
    groups = code_groups(net)
    trunc = _truncations(net) if layers else _truncations(net)[-1:]
    ends = [code_length(lower(sub)) for _, sub in trunc]
    notes = []
    small = _byte_codes(rows, R, C) if len(trunc) > 1 and R * C <= PREFIX_BYTES else None
    if small is not None:
        from .results._cells import _row_ids

        prev = None
        done = 0
        for (label, _), end in zip(trunc[:-1], ends[:-1]):
            ids = _row_ids(small[:, done:end], prev)
            prev, done = ids, end
            same = ids[edges_all[:, 0]] == ids[edges_all[:, 1]]
            lab, Eg = _grouped(R, edges_all, same)
            n_g = int(lab.max(initial=-1) + 1)
            views.append(View(f"layer{len(views)}", f"after {label}", n_g, lab, colour_graph(n_g, Eg)))
        del small
    elif len(trunc) > 1:
        notes.append("the layer slider is off: codes too long for this many regions")
    layer_views = len(views)
    last_label = trunc[-1][0]
    stage(2)
    views.append(View("activation", f"after {last_label}", R, None, colour_graph(R, edges_all)))
    lin_count = None
    if lin is not None:
        same = lin[edges_all[:, 0]] == lin[edges_all[:, 1]]
        lab, Eg = _grouped(R, edges_all, same)
        lin_count = int(lab.max(initial=-1) + 1)
        views.append(View("linear", "linear regions", lin_count, lab, colour_graph(lin_count, Eg)))

    stage(3)
    # level sets of output 0 (straight partitions: output affine on each convex region)
    lv = np.zeros(0)
    segs = np.zeros((0, 2, 2))
    if part is not None and part.maps.shape[1] and levels > 0 and R <= LEVEL_REGIONS:
        from ._views import RegionSource, output_range

        lo, hi = output_range(RegionSource(net, domain, partition=part))
        lv = level_values(lo, hi, levels)
        if lv.size:
            segs = np.concatenate([level_segments(part, float(v)) for v in lv])
    elif levels > 0:
        notes.append(
            "no level sets: curved cells"
            if part is None
            else f"no level sets above {LEVEL_REGIONS:,} regions"
            if R > LEVEL_REGIONS
            else "no level sets: the network has no output"
        )

    stage(4)
    from ._count import region_kind

    summary = {
        "regions": R,
        "linear_regions": lin_count,
        "engine": "plane" if part is not None else "curved",
        "exact": True if part is not None else bool(cells.exact),  # type: ignore[union-attr]
        "kind": region_kind(net),
        "code_length": C,
        "outputs": int(maps.shape[1]),
        "pieces": pieces.n,
        "per_layer": [{"layer": v.label.removeprefix("after "), "regions": v.count} for v in views[:layer_views]],
        **domain_info(domain),
    }
    if cells is not None:
        summary["codes"] = cells.n_codes
        summary["trapezoids"] = cells.n_traps
    if dec is not None:
        summary["decision_regions"] = dec.count
        summary["decision_cells"] = dec.pieces.n
    if notes:
        summary["notes"] = notes
    return Atlas(
        summary=summary,
        domain=domain,
        pieces=pieces,
        codes=tree,
        code_groups=groups,
        maps=maps[:, :MAX_OUTPUTS],
        areas=areas,
        n_vertices=n_vertices,
        neighbours=neighbours,
        views=views,
        layer_views=layer_views,
        levels=lv,
        level_segments=segs,
        decision=dec,
        outline=None if cells is None else _polyline_segments(cells.boundary_polylines(n=ARC_SAMPLES)),
        partition=part,
        cells=cells,
    )
