"""A 2D partition into activation regions: convex polygons with codes and affine maps.

Geometry and combinatorics are NumPy (and shapely/networkx only where asked for). Memory is linear in
the number of regions: vertices are one flat ``(V_total, 2)`` array with ``offsets (R+1,)``; codes are
kept compact (ReLU bits packed eight to a byte, argmax digits one byte each) and expanded to int32
only on request.
"""

from __future__ import annotations

import functools
import os
import tempfile

import numpy as np

from .. import _tolerances as tol
from ..networks._ops import op_codes
from ._graph import (
    _components as _components,  # re-exported: every result type labels components
    n_labels,
)

#: Default node limit of :meth:`Partition.to_networkx`.
MAX_GRAPH_NODES = 200_000


def _owned(a, dtype) -> np.ndarray:
    """A read-only C-contiguous copy of ``a``."""
    out = np.array(a, dtype=dtype, order="C", copy=True)
    out.setflags(write=False)
    return out


def _adopted(a, dtype) -> np.ndarray:
    """A read-only view of ``a`` (a copy only where a dtype or layout change needs one)."""
    out = np.ascontiguousarray(a, dtype=dtype).view()
    out.setflags(write=False)
    return out


class Partition:
    """Activation regions of a network on a 2D domain (Serra et al. 2018), as convex polygons.

    Coordinates are the domain's parameters ``(u1, u2)`` (for a :class:`Box` the inputs themselves).

    - ``vertices (V_total, 2)`` float64 and ``offsets (R+1,)``: region ``r`` is
      ``vertices[offsets[r]:offsets[r+1]]``, counter-clockwise;
    - ``maps (R, out, 3)``: the network output on region ``r`` is ``maps[r] @ [u1, u2, 1]``;
    - ``areas (R,)``; ``codes (R, C)`` int32 in :func:`~regioncount.engines._forward.forward_codes`' layout;
    - ``edge_tags (V_total,)`` optional: an integer naming the line that carries the edge starting at each
      vertex (the ``plane`` engine sets it; both sides of a cut share it). Without it :meth:`adjacency`
      groups edges by their supporting line with a tolerance;
    - ``vertex_error (V_total,)`` optional: a distance within which each exact vertex lies (the plane engine
      computes in float64 and bounds its error).

    ``codes`` may be given as an integer array ``(R, C)`` or as blocks ``(kind, width, array)`` in code
    order: ``"bits"`` packed with ``np.packbits(..., axis=1)``, or ``"digits"`` ``(R, width)`` integers.

    Every array a partition holds or returns is read-only (writing raises ``ValueError``) and its public
    attributes cannot be rebound, so its cached derived data (expanded codes, adjacency, the shapely tree)
    cannot go stale. By default the arrays are copied; ``copy=False`` adopts arrays the caller hands over
    and never writes again (an engine's freshly built output) as read-only views, without the copy.
    """

    def __init__(
        self,
        domain,
        vertices,
        offsets,
        maps,
        areas,
        codes,
        *,
        edge_tags=None,
        vertex_error=None,
        stats: dict | None = None,
        copy: bool = True,
        program=None,
        engine_maps=None,
    ):
        own = _owned if copy else _adopted
        self.domain = domain
        self.vertices = own(vertices, np.float64).reshape(-1, 2)
        self.offsets = own(offsets, np.int64)
        self.maps = own(maps, np.float64)
        self.areas = own(areas, np.float64)
        R = self.offsets.shape[0] - 1
        if self.offsets[-1] != self.vertices.shape[0] or self.maps.shape[0] != R or self.areas.shape != (R,):
            raise ValueError("vertices, offsets, maps and areas do not describe the same number of regions")
        if isinstance(codes, (list, tuple)):
            self._blocks = [(str(k), int(w), own(a, None)) for k, w, a in codes]
        else:
            c = np.asarray(codes)
            self._blocks = [("digits", c.shape[1], own(c.reshape(R, -1), None))]
        for _, _, a in self._blocks:
            if a.shape[0] != R:
                raise ValueError("every code block needs one row per region")
        self.edge_tags = None if edge_tags is None else own(edge_tags, np.int64)
        #: optional ``(V_total,)``: each exact vertex lies within this distance of its float one (plane engine)
        self.vertex_error = None if vertex_error is None else own(vertex_error, np.float64)
        #: engine statistics (the plane engine: sign tests, exact fallbacks, assumed identities, smallest area)
        self.stats: dict = dict(stats or {})
        lo = np.asarray(domain.param_lo, dtype=np.float64)
        hi = np.asarray(domain.param_hi, dtype=np.float64)
        self._lo, self._hi = lo, hi
        self._adjacency: np.ndarray | None = None
        #: the lowered network (:class:`~regioncount.networks.Program`) the engine partitioned, or None: with it,
        #: linear regions are decided exactly (:mod:`._linear`)
        self.program = program
        # optional ``(F (R, 3, out), E (out,) or (R, out))``: the engine's float output maps in the domain's
        # normalised coordinates ``u = c + h u'`` and a rigorous bound on every coefficient's distance from the
        # exact map there (the plane engine's op bounds). Exact maps are equal in ``u'`` iff they are equal in
        # ``u`` (an invertible affine change of coordinates), so the linear-region merge filters with these
        # instead of re-composing every region's map from its code.
        self._engine_maps = engine_maps
        self._linear: np.ndarray | None = None
        self._sealed = True

    def __setattr__(self, name, value):
        # the arrays are read-only and derived data is cached; rebinding an attribute would leave the caches
        # describing another partition, so public attributes are fixed once __init__ has run
        if getattr(self, "_sealed", False) and not name.startswith("_"):
            raise AttributeError(f"Partition.{name} cannot be reassigned: build a new Partition")
        object.__setattr__(self, name, value)

    # -- basics --------------------------------------------------------------------------------------

    @property
    def n_regions(self) -> int:
        """Number of activation regions (Serra et al. 2018): distinct codes of positive area."""
        return int(self.offsets.shape[0] - 1)

    def __len__(self) -> int:
        return self.n_regions

    # -- the result protocol (results/_protocol.py) ------------------------------------------------------

    @property
    def regions(self) -> int:
        return self.n_regions

    @property
    def exact(self) -> bool:
        """No attention identity was assumed from equal floats (every other decision is exact)."""
        return self.stats.get("assumed", 0) == 0

    @property
    def region_codes(self) -> np.ndarray:
        """The codes the network's ops record (a piecewise-linear op's piece per entry); :attr:`codes` is the
        code of the lowered program the engine ran (the same array for every other op)."""
        return op_codes(self.program, self.codes) if self.program is not None else self.codes

    @property
    def witnesses(self) -> np.ndarray:
        """``(R, 2)`` the area centroid of each (convex) region."""
        return self.centroids()

    @property
    def code_length(self) -> int:
        return sum(w for _, w, _ in self._blocks)

    def code_rows(self, index) -> np.ndarray:
        """Codes of the regions ``index`` (int array or slice) as int32 ``(n, C)``, without expanding all rows."""
        return block_code_rows(self._blocks, index, self.n_regions)

    @functools.cached_property
    def codes(self) -> np.ndarray:
        """``(R, C)`` int32 activation codes, expanded (4 bytes per entry) and cached on first access."""
        out = self.code_rows(slice(None))
        out.setflags(write=False)
        return out

    def code_bytes(self) -> np.ndarray:
        """Compact ``(R, nbytes)`` uint8 rows: equal rows <=> equal codes (for hashing and dedup)."""
        parts = [np.ascontiguousarray(a).view(np.uint8).reshape(self.n_regions, -1) for _, _, a in self._blocks]
        return np.concatenate(parts, axis=1) if parts else np.zeros((self.n_regions, 0), np.uint8)

    def polygon(self, i: int) -> np.ndarray:
        """Vertices ``(V_i, 2)`` of region ``i``, counter-clockwise."""
        return self.vertices[self.offsets[i] : self.offsets[i + 1]]

    @property
    def nbytes(self) -> int:
        """Bytes held by the partition's arrays (codes in compact form)."""
        arrs = [self.vertices, self.offsets, self.maps, self.areas] + [a for _, _, a in self._blocks]
        if self.edge_tags is not None:
            arrs.append(self.edge_tags)
        return int(sum(a.nbytes for a in arrs))

    def centroids(self) -> np.ndarray:
        """Area centroids ``(R, 2)`` (interior points of the convex regions)."""
        reg = self._region_of_vertex()
        # relative to each region's first vertex, so small regions keep their accuracy
        origin = self.vertices[self.offsets[:-1]]
        P = self.vertices - origin[reg]
        Q = P[self._next_vertex()]
        cr = P[:, 0] * Q[:, 1] - Q[:, 0] * P[:, 1]
        a = np.bincount(reg, cr, minlength=self.n_regions) / 2
        cx = np.bincount(reg, (P[:, 0] + Q[:, 0]) * cr, minlength=self.n_regions)
        cy = np.bincount(reg, (P[:, 1] + Q[:, 1]) * cr, minlength=self.n_regions)
        return origin + np.stack([cx, cy], axis=1) / (6 * a[:, None])

    def _region_of_vertex(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_regions), np.diff(self.offsets))

    def _next_vertex(self) -> np.ndarray:
        idx = np.arange(self.vertices.shape[0]) + 1
        ends = self.offsets[1:] - 1
        idx[ends] = self.offsets[:-1]
        return idx

    # -- neighbours ----------------------------------------------------------------------------------

    def adjacency(self) -> np.ndarray:
        """Neighbour pairs ``(E, 2)`` int64, ``i < j``, sorted: regions whose boundaries share a segment of
        positive length (more than 1e-9 of the domain's diameter).

        Edges are grouped by their supporting line (exactly by ``edge_tags`` when present, else by a
        tolerant sort on angle and offset); on each line the edges of the two sides are matched by a
        sorted sweep, so an edge subdivided differently on the two sides is still matched. O(V log V).
        """
        if self._adjacency is None:
            self._adjacency = self._find_adjacency()
            self._adjacency.setflags(write=False)
        return self._adjacency

    def _find_adjacency(self, among: np.ndarray | None = None) -> np.ndarray:
        """Neighbour pairs (as :meth:`adjacency`); with ``among (R,)`` bool, only pairs of regions it marks (the
        edges of the others are never matched)."""
        if self.n_regions < 2:
            return np.zeros((0, 2), np.int64)
        reg = self._region_of_vertex()
        nxt = self._next_vertex()
        tags = self.edge_tags
        sel = None if among is None else np.flatnonzero(among[reg])
        if sel is not None:  # the edges of the marked regions only
            reg, nxt = reg[sel], nxt[sel]
            tags = None if tags is None else tags[sel]
        P = self.vertices if sel is None else self.vertices[sel]
        Q = self.vertices[nxt]
        d = Q - P
        length = np.hypot(d[:, 0], d[:, 1])
        diam = float(np.hypot(*(self._hi - self._lo)))
        # with engine tags, edges on one line are grouped exactly and only float noise in their ends needs
        # a margin (slivers far below 1e-9 of the domain are regions, with neighbours); without tags, edges
        # are grouped by their lines with a tolerance and the margin stays at that scale
        eps = (tol.ADJACENCY_TAGGED if self.edge_tags is not None else tol.ADJACENCY_UNTAGGED) * diam
        keep = length > eps
        P, Q, d, length, reg = P[keep], Q[keep], d[keep], length[keep], reg[keep]
        tags = tags[keep] if tags is not None else _line_tags(P, Q, d, length, diam)
        # group the edges by line (a stable sort: within a line, edges keep their order); each line's direction
        # is that of its longest edge, the first of them in that order where several are equally long
        order = np.argsort(tags, kind="stable")
        tg = tags[order]
        start = np.ones(tg.size, bool)
        start[1:] = tg[1:] != tg[:-1]
        gid = np.cumsum(start) - 1
        ls = length[order]
        gmax = np.maximum.reduceat(ls, np.flatnonzero(start))
        cand = np.flatnonzero(ls == gmax[gid])
        first_c = np.ones(cand.size, bool)
        first_c[1:] = gid[cand[1:]] != gid[cand[:-1]]
        lead = order[cand[first_c]]
        u = d[lead] / length[lead, None]
        ug = u[gid]
        Ps, Qs, rs = P[order], Q[order], reg[order]
        a = Ps[:, 0] * ug[:, 0] + Ps[:, 1] * ug[:, 1]
        b = Qs[:, 0] * ug[:, 0] + Qs[:, 1] * ug[:, 1]
        fwd = b > a
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        # the two sides of a line run in opposite directions (every polygon is counter-clockwise)
        F = np.flatnonzero(fwd)
        B = np.flatnonzero(~fwd)
        if F.size == 0 or B.size == 0:
            return np.zeros((0, 2), np.int64)
        # every value compared below, ranked once (equal floats, equal ranks): a line and a rank make one
        # integer key, so the grouped searches are plain searches on sorted integers
        q_lo, q_hi = lo[F] + eps, hi[F] - eps
        rank, n_vals = _dense_ranks(np.concatenate([lo[B], hi[B], q_lo, q_hi]))
        nb, nf, span = B.size, F.size, np.int64(n_vals)
        rb_lo, rb_hi, rq_lo, rq_hi = rank[:nb], rank[nb : 2 * nb], rank[2 * nb : 2 * nb + nf], rank[2 * nb + nf :]
        kb = gid[B] * span + rb_lo
        ob = np.argsort(kb, kind="stable")
        B = B[ob]
        kb_lo = kb[ob]
        # first: how many of the line's edges end at or before the query's start (sorted on their own: intervals
        # on one side are disjoint, so this also indexes them in order of their starts)
        kb_hi = np.sort(gid[B] * span + rb_hi[ob])
        first = np.searchsorted(kb_hi, gid[F] * span + rq_lo, "right")
        last = np.searchsorted(kb_lo, gid[F] * span + rq_hi, "left")
        cnt = np.maximum(last - first, 0)
        fi = np.repeat(F, cnt)
        bj = B[np.repeat(first - np.cumsum(cnt) + cnt, cnt) + np.arange(cnt.sum())]
        overlap = np.minimum(hi[fi], hi[bj]) - np.maximum(lo[fi], lo[bj])
        ok = (overlap > eps) & (rs[fi] != rs[bj])
        i, j = rs[fi][ok], rs[bj][ok]
        if i.size == 0:
            return np.zeros((0, 2), np.int64)
        key = np.sort((np.minimum(i, j).astype(np.int64) << 32) | np.maximum(i, j))
        key = key[np.r_[True, key[1:] != key[:-1]]]
        return np.stack([key >> 32, key & 0xFFFFFFFF], axis=1)

    @property
    def linear_exact(self) -> bool:
        """Whether :meth:`linear_region_labels` decides in exact arithmetic (the partition carries its program)."""
        return self.program is not None

    def linear_region_labels(self, rtol: float | None = None) -> np.ndarray:
        """Label ``(R,)`` (smallest member) of the linear region (Montúfar et al. 2014) of each activation
        region: neighbours whose output maps are equal in exact arithmetic are merged (:mod:`._linear`: a
        float comparison where its rigorous bound decides, rational arithmetic otherwise).

        ``rtol`` (a float), or a partition built without its program, uses the float rule instead: maps equal
        within ``rtol`` (default 1e-9) of their size on the domain; :attr:`linear_exact` then says False."""
        R = self.n_regions
        if rtol is None and self.program is not None:
            if self._linear is None:
                from ._linear import linear_labels

                x0, V = self.domain.input_map()
                fm = None
                if self._engine_maps is not None:
                    F, Eb = self._engine_maps
                    fm = (F, np.broadcast_to(Eb, (R, F.shape[2])))
                E = self._candidate_pairs(fm) if fm is not None and self._adjacency is None else self.adjacency()
                # codes are expanded only for the pairs the float filter leaves to exact arithmetic
                lab = linear_labels(R, E, self.program, self.code_rows, x0, V, self.stats, fm) if E.size else None
                lab = np.arange(R) if lab is None else lab
                lab.setflags(write=False)
                self._linear = lab
            return self._linear
        E = self.adjacency()
        if E.size == 0:
            return np.arange(R)
        Mn = normalised_maps(self.maps, self._lo, self._hi)
        return _components(R, E[maps_agree(Mn[E[:, 0]], Mn[E[:, 1]], 1e-9 if rtol is None else rtol)])

    def _candidate_pairs(self, fm) -> np.ndarray:
        """The neighbour pairs whose exact output maps can be equal (:func:`~._linear.candidate_pairs`), from the
        engine's float maps ``fm = (F, E)``: one facet search over the regions that share a label of either grid
        with another. All neighbour pairs where the bounds are unusable."""
        from ._linear import candidate_pairs

        def find(offer):
            among = offer[0][1].copy()
            for _, m in offer[1:]:
                among |= m
            return self._find_adjacency(among)

        F, E = fm
        pairs = candidate_pairs(F, E, find)
        return self.adjacency() if pairs is None else pairs

    def linear_regions(self, rtol: float | None = None) -> int:
        """Number of linear regions (Montúfar et al. 2014); never more than :attr:`n_regions`."""
        return n_labels(self.linear_region_labels(rtol))

    # -- exports -------------------------------------------------------------------------------------

    def code_strings(self, index=None) -> list[str]:
        """Codes as strings: digits joined (``"0110..."``), or dot-separated when a digit exceeds 9."""
        rows = self.code_rows(slice(None) if index is None else index)
        if rows.size and rows.max() > 9:
            return [".".join(map(str, r)) for r in rows.tolist()]
        return ["".join(map(str, r)) for r in rows.tolist()]

    def to_networkx(self, max_nodes: int = MAX_GRAPH_NODES):
        """The region graph as a ``networkx.Graph``: node ``i`` carries ``area`` and ``code`` (string);
        edges are :meth:`adjacency`. Refuses partitions above ``max_nodes`` regions."""
        import networkx as nx

        if self.n_regions > max_nodes:
            raise ValueError(
                f"the partition has {self.n_regions} regions, more than max_nodes={max_nodes}: a networkx graph "
                "of that size is slow and large; use Partition.adjacency() (an (E, 2) array) or raise max_nodes"
            )
        G = nx.Graph()
        codes = self.code_strings()
        G.add_nodes_from(
            (i, {"area": float(a), "code": c}) for i, (a, c) in enumerate(zip(self.areas, codes, strict=True))
        )
        G.add_edges_from(map(tuple, self.adjacency().tolist()))
        return G

    def write_graphml(self, path, max_nodes: int = MAX_GRAPH_NODES) -> None:
        """Write the region graph to GraphML: the file is written whole or not at all."""
        import networkx as nx

        G = self.to_networkx(max_nodes=max_nodes)
        path = os.fspath(path)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".graphml", dir=os.path.dirname(os.path.abspath(path)))
        try:
            with os.fdopen(fd, "wb") as f:
                nx.write_graphml(G, f)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def to_shapely(self) -> np.ndarray:
        """Regions as an object array ``(R,)`` of shapely Polygons."""
        import shapely

        ring = self._region_of_vertex()
        rings = shapely.linearrings(self.vertices, indices=ring)
        return shapely.polygons(rings)

    @functools.cached_property
    def _tree(self):
        import shapely

        return shapely.STRtree(self.to_shapely())

    def locate(self, points) -> np.ndarray:
        """Region index of each point ``(N, 2)`` -> ``(N,)`` int64; -1 outside every region. A point on a
        shared boundary gets one of the regions that contain it."""
        import shapely

        pts = shapely.points(np.asarray(points, dtype=np.float64).reshape(-1, 2))
        out = np.full(len(pts), -1, np.int64)
        qi, ti = self._tree.query(pts, predicate="intersects")
        out[qi] = ti
        qi, ti = self._tree.query(pts, predicate="within")
        out[qi] = ti
        return out

    def __repr__(self) -> str:
        return f"Partition({self.n_regions} regions, {self.vertices.shape[0]} vertices, code length {self.code_length})"


def normalised_maps(maps: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Affine maps ``(R, out, 3)`` in ``(u1, u2, 1)`` rewritten on the rectangle ``[lo, hi]`` mapped to
    ``[-1, 1]^2``, where coefficient sizes compare fairly."""
    c, h = (lo + hi) / 2, (hi - lo) / 2
    M = maps
    return np.stack([M[..., 0] * h[0], M[..., 1] * h[1], M[..., 2] + M[..., 0] * c[0] + M[..., 1] * c[1]], -1)


def maps_agree(Ma: np.ndarray, Mb: np.ndarray, rtol: float = 1e-9) -> np.ndarray:
    """``(E,)`` bool: normalised maps ``Ma[e]`` and ``Mb[e]`` (``(E, out, 3)``) are the same affine map,
    within ``rtol`` of the larger one's size (the rule that merges activation regions into linear regions)."""
    if not Ma.shape[1]:
        return np.ones(Ma.shape[0], bool)
    size = np.maximum(np.abs(Ma).sum(axis=-1).max(axis=-1), np.abs(Mb).sum(axis=-1).max(axis=-1))
    return np.abs(Ma - Mb).sum(axis=-1).max(axis=-1) <= rtol * size


def _dense_ranks(x: np.ndarray) -> tuple[np.ndarray, int]:
    """Ranks ``(n,)`` int64 of the values ``x`` among their distinct values (equal values, equal ranks; as the
    inverse of ``np.unique``) and the number of distinct values."""
    if x.size == 0:
        return np.zeros(0, np.int64), 0
    order = np.argsort(x)
    xs = x[order]
    new = np.empty(x.size, np.int64)
    new[0] = 0
    np.not_equal(xs[1:], xs[:-1], out=new[1:], casting="unsafe")
    np.cumsum(new, out=new)
    rank = np.empty(x.size, np.int64)
    rank[order] = new
    return rank, int(new[-1]) + 1


def _searchsorted_grouped(gk, gv, qk, qv, side: str) -> np.ndarray:
    """Insertion points of queries ``(qk, qv)`` into data sorted by ``(gk, gv)`` (lexicographic)."""
    n = gk.shape[0]
    keys = np.concatenate([gk, qk])
    vals = np.concatenate([gv, qv])
    is_q = np.concatenate([np.zeros(n, bool), np.ones(qk.shape[0], bool)])
    # 'left': a query sorts before equal data; 'right': after
    pri = is_q if side == "right" else ~is_q
    order = np.lexsort((pri, vals, keys))
    q_sorted = is_q[order]
    data_before = np.cumsum(~q_sorted) - (~q_sorted)
    out = np.empty(qk.shape[0], np.int64)
    out[order[q_sorted] - n] = data_before[q_sorted]
    return out


def _clusters(x: np.ndarray, tol: float) -> np.ndarray:
    """Labels of sorted ``x``: a new cluster wherever the gap exceeds ``tol``."""
    lab = np.zeros(x.shape[0], np.int64)
    if x.size:
        lab[1:] = np.cumsum(np.diff(x) > tol)
    return lab


def _line_tags(P, Q, d, length, diam: float) -> np.ndarray:
    """Integer tags grouping edges by supporting line (angle within 1e-8 rad, offset within 1e-9 diam)."""
    theta = np.mod(np.arctan2(d[:, 1], d[:, 0]), np.pi)
    tol_t = tol.ADJACENCY_ANGLE
    # angles near pi are the same lines as angles near 0
    theta = np.where(theta > np.pi - tol_t, theta - np.pi, theta)
    o = np.argsort(theta, kind="stable")
    lab_sorted = _clusters(theta[o], tol_t)
    lab_t = np.empty(theta.size, np.int64)
    lab_t[o] = lab_sorted
    # offset along the cluster's common normal (the angle of its first member)
    start = np.ones(theta.size, bool)
    start[1:] = lab_sorted[1:] != lab_sorted[:-1]
    th = theta[o][start][lab_t]
    nrm = np.stack([-np.sin(th), np.cos(th)], axis=1)
    rho = np.sum((P + Q) / 2 * nrm, axis=1)
    o = np.lexsort((rho, lab_t))
    lab = np.empty(rho.size, np.int64)
    brk = np.ones(rho.size, bool)
    brk[1:] = (lab_t[o][1:] != lab_t[o][:-1]) | (np.diff(rho[o]) > tol.ADJACENCY_UNTAGGED * diam)
    lab[o] = np.cumsum(brk) - 1
    return lab


def block_code_rows(blocks, index, n_regions: int) -> np.ndarray:
    """Rows ``index`` of codes stored as blocks ``(kind, width, array)`` (packed ``"bits"`` or ``"digits"``),
    expanded to int32 ``(n, C)``; shared by every result type that stores codes this way."""
    parts = []
    for kind, w, a in blocks:
        rows = np.atleast_2d(a[index])
        parts.append(np.unpackbits(rows, axis=1, count=w).astype(np.int32) if kind == "bits" else rows.astype(np.int32))
    n = parts[0].shape[0] if parts else len(np.arange(n_regions)[index])
    return np.concatenate(parts, axis=1) if parts else np.zeros((n, 0), np.int32)
