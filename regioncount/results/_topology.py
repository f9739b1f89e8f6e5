"""Topology of decision regions (DESIGN §12): Betti numbers read off an exact partition.

A decision region D is an open set: the interior of the union of the closed cells of one connected class
component (cells joined across shared edges / facets of positive measure, :func:`decision_labels`).

- **2D** (:class:`Partition`). b0(D) = 1 by construction. b1(D), its holes, is the number of bounded
  components of R^2 \\ D (Alexander duality), and for a connected open planar set each component C of the
  complement contributes exactly one connected piece ∂C of ∂D, so **b1(D) = (components of ∂D) − 1**. ∂D is
  assembled from the partition's boundary pieces: the overlap of two cells' edges on one line (so a
  T-junction splits the longer edge), and the cells' edges on the box's sides. Pieces are joined where their
  endpoints coincide, which also joins two boundary circles that touch at one point (a pinch), as the
  topology requires. The **decision boundary** Γ (pieces between cells of different classes) is a planar
  graph: b0(Γ) its components, b1(Γ) = E − V + b0 its independent cycles.
- **3D** (:class:`Polytopes`). b0(D) = 1; b2(D), its cavities, is the number of bounded components of
  R^3 \\ D: complement cells joined across facets, a component being unbounded when one of its cells has a
  vertex on the box's boundary. b1 (tunnels) comes from the Euler characteristic: the closure M of D is a
  3-manifold with boundary, so chi(D) = chi(M) = chi(∂M)/2, and b1 = b0 + b2 − chi. chi(∂M) = V − E + F of its
  boundary surface: the overlaps of facets of D's cells with facets of other cells, and D's facets on the box,
  with every edge split at the piece vertices lying on it (T-junctions). Where an edge of that surface is not
  shared by exactly two pieces (a pinched, non-manifold boundary, for which chi(M) = chi(∂M)/2 fails) b1 is
  None.

Tolerance (topology only, never counts): two piece endpoints are one point when they lie within 1e-9 of
the domain's diameter; pieces shorter than the partition's adjacency margin are dropped, as in
:meth:`Partition.adjacency`; in 3D, facet overlaps of area below 1e-12 (normalised coordinates) are no piece. 3D: complement cells that touch only along an edge or at a point (a non-generic
contact) are not joined, so such a contact can add a cavity.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._decision import decision_labels
from ._partition import Partition, _components, _line_tags, _searchsorted_grouped

#: Piece endpoints within this fraction of the domain's diameter are one point.
SNAP = 1e-9


@dataclasses.dataclass(frozen=True, eq=False)
class Topology:
    """Betti numbers of the decision regions of one exact partition.

    ``labels (R,)``: the decision region of each cell (its smallest member); ``region_ids (D,)``: the
    labels present, ascending; per region ``region_class``, ``b0``, ``b1`` (-1 where unknown: a pinched boundary in 3D), ``b2`` (3D only,
    else None) and ``area`` (volume in 3D), each ``(D,)``; ``boundary_b0`` / ``boundary_b1``: components and
    independent cycles of the decision boundary (2D; None in 3D); ``hole_points (H, 2)``: one point inside
    each hole (2D), of region ``hole_region (H,)`` (an index into ``region_ids``); ``hole_outlines``: the
    segments ``(S_h, 2, 2)`` of each hole's boundary, for drawing."""

    dimension: int
    labels: np.ndarray
    region_ids: np.ndarray
    region_class: np.ndarray
    b0: np.ndarray
    b1: np.ndarray | None
    b2: np.ndarray | None
    area: np.ndarray
    boundary_b0: int | None
    boundary_b1: int | None
    hole_points: np.ndarray
    hole_region: np.ndarray
    hole_outlines: tuple[np.ndarray, ...] = ()

    def per_class(self) -> dict[str, dict]:
        """``{class: {"b0": components, "b1": holes, "b2": cavities}}`` of the union of that class's regions
        (the regions of one class are disjoint open sets, so their Betti numbers add)."""
        out: dict[str, dict] = {}
        for c in np.unique(self.region_class):
            sel = self.region_class == c
            out[str(int(c))] = {
                "b0": int(sel.sum()),
                "b1": None if self.b1 is None or (self.b1[sel] < 0).any() else int(self.b1[sel].sum()),
                "b2": None if self.b2 is None else int(self.b2[sel].sum()),
            }
        return out

    def as_dict(self) -> dict:
        """JSON-ready: per region, per class, totals and the decision boundary's Betti numbers."""
        regions = []
        for i, lab in enumerate(self.region_ids.tolist()):
            row = {
                "region": i,
                "cell": int(lab),
                "class": int(self.region_class[i]),
                "b0": int(self.b0[i]),
                "b1": None if self.b1 is None or self.b1[i] < 0 else int(self.b1[i]),
                ("volume" if self.dimension == 3 else "area"): float(self.area[i]),
            }
            if self.b2 is not None:
                row["b2"] = int(self.b2[i])
            regions.append(row)
        out = {
            "dimension": self.dimension,
            "decision_regions": int(self.region_ids.size),
            "holes": None if self.b1 is None or (self.b1 < 0).any() else int(self.b1.sum()),
            "per_class": self.per_class(),
            "regions": regions,
            "boundary": {"b0": self.boundary_b0, "b1": self.boundary_b1},
        }
        if self.b2 is not None:
            out["cavities"] = int(self.b2.sum())
        if self.dimension == 2:
            out["hole_points"] = self.hole_points.tolist()
        return out


def edge_pieces(part: Partition) -> tuple[np.ndarray, np.ndarray]:
    """Every piece of every cell's boundary: ``cells (S, 2)`` (the two cells on either side; -1: outside the
    domain) and ``segments (S, 2, 2)``. Interior pieces are the overlaps of two cells' edges on one line
    (grouped exactly by the plane engine's edge tags where present), so each endpoint is a vertex of one of
    the two cells; the pieces on the domain's sides carry -1."""
    R = part.n_regions
    P = part.vertices
    Q = P[part._next_vertex()]
    reg = part._region_of_vertex()
    lo_d, hi_d = part._lo, part._hi
    diam = float(np.hypot(*(hi_d - lo_d)))
    d = Q - P
    length = np.hypot(d[:, 0], d[:, 1])
    eps = (1e-13 if part.edge_tags is not None else 1e-9) * diam
    keep = length > eps
    side_tol = SNAP * diam
    on_side = np.zeros(P.shape[0], bool)
    for ax in (0, 1):
        for v in (lo_d[ax], hi_d[ax]):
            on_side |= (np.abs(P[:, ax] - v) <= side_tol) & (np.abs(Q[:, ax] - v) <= side_tol)
    outer = keep & on_side
    inner = keep & ~on_side
    cells_o = np.stack([reg[outer], np.full(int(outer.sum()), -1)], axis=1)
    segs_o = np.stack([P[outer], Q[outer]], axis=1)
    if R < 2 or not inner.any():
        return cells_o.astype(np.int64), segs_o
    P, Q, d, length, reg = P[inner], Q[inner], d[inner], length[inner], reg[inner]
    tags = part.edge_tags[inner] if part.edge_tags is not None else _line_tags(P, Q, d, length, diam)
    order = np.lexsort((-length, tags))
    tg = tags[order]
    start = np.ones(tg.size, bool)
    start[1:] = tg[1:] != tg[:-1]
    gid = np.cumsum(start) - 1
    lead = order[start]
    u = d[lead] / length[lead, None]
    ug = u[gid]
    Ps, Qs, rs = P[order], Q[order], reg[order]
    a = np.sum(Ps * ug, axis=1)
    b = np.sum(Qs * ug, axis=1)
    fwd = b > a
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    F = np.flatnonzero(fwd)
    B = np.flatnonzero(~fwd)
    if F.size == 0 or B.size == 0:
        return cells_o.astype(np.int64), segs_o
    B = B[np.lexsort((lo[B], gid[B]))]
    first = _searchsorted_grouped(gid[B], hi[B], gid[F], lo[F] + eps, "right")
    last = _searchsorted_grouped(gid[B], lo[B], gid[F], hi[F] - eps, "left")
    cnt = np.maximum(last - first, 0)
    fi = np.repeat(F, cnt)
    bj = B[np.repeat(first - np.cumsum(cnt) + cnt, cnt) + np.arange(cnt.sum())]
    t0 = np.maximum(lo[fi], lo[bj])
    t1 = np.minimum(hi[fi], hi[bj])
    ok = (t1 - t0 > eps) & (rs[fi] != rs[bj])
    fi, bj, t0, t1 = fi[ok], bj[ok], t0[ok], t1[ok]
    uf = ug[fi]
    X0 = Ps[fi] + (t0 - a[fi])[:, None] * uf
    X1 = Ps[fi] + (t1 - a[fi])[:, None] * uf
    cells_i = np.stack([rs[fi], rs[bj]], axis=1)
    return (
        np.concatenate([cells_o, cells_i]).astype(np.int64),
        np.concatenate([segs_o, np.stack([X0, X1], axis=1)]),
    )


def snap_points(X: np.ndarray, tol: float) -> np.ndarray:
    """Labels ``(N,)`` joining points ``X (N, 2)`` that lie within ``tol`` of each other (transitively)."""
    import shapely

    if X.shape[0] == 0:
        return np.zeros(0, np.int64)
    pts = shapely.points(X)
    tree = shapely.STRtree(pts)
    i, j = tree.query(pts, predicate="dwithin", distance=tol)
    E = np.stack([i, j], axis=1)
    E = E[E[:, 0] != E[:, 1]]
    lab = _components(X.shape[0], E)
    return np.unique(lab, return_inverse=True)[1].reshape(-1)


def _graph_components(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nodes present ``(V,)`` and their component labels ``(V,)`` of the graph with ``edges (m, 2)``."""
    nodes, inv = np.unique(edges.reshape(-1), return_inverse=True)
    lab = _components(nodes.size, inv.reshape(-1, 2))
    return nodes, lab


def topology(part, classes) -> Topology:
    """Betti numbers of the decision regions of an exact partition (:class:`Partition` or
    :class:`Polytopes` of dimension 3) whose cells carry ``classes (R,)`` (see module docstring)."""
    cls = np.asarray(classes, dtype=np.int64).reshape(-1)
    if isinstance(part, Partition):
        return _topology_2d(part, cls)
    if getattr(part, "k", None) == 3:
        return _topology_3d(part, cls)
    raise ValueError("topology needs a 2D partition or a 3D partition into polytopes")


def _region_table(labels: np.ndarray, cls: np.ndarray, measure: np.ndarray):
    ids, inv = np.unique(labels, return_inverse=True)
    inv = inv.reshape(-1)
    area = np.bincount(inv, measure, minlength=ids.size)
    return ids, inv, cls[ids], area


def _topology_2d(part: Partition, cls: np.ndarray) -> Topology:
    lab = decision_labels(part, cls)
    ids, inv, rcls, area = _region_table(lab, cls, part.areas)
    D = ids.size
    cells, segs = edge_pieces(part)
    diam = float(np.hypot(*(part._hi - part._lo)))
    node = snap_points(segs.reshape(-1, 2), SNAP * diam).reshape(-1, 2)
    ra = inv[cells[:, 0]]
    rb = np.where(cells[:, 1] >= 0, inv[np.maximum(cells[:, 1], 0)], -1)
    cross = ra != rb  # pieces on the boundary of a decision region
    # boundary graph of each region: nodes (region, point), joined by that region's pieces
    own = np.concatenate([ra[cross], rb[cross]])
    pn = np.concatenate([node[cross], node[cross]])
    keep = own >= 0
    own, pn = own[keep], pn[keep]
    n_nodes = int(node.max(initial=-1)) + 1
    key = own[:, None] * n_nodes + pn  # (m, 2) region-local node ids
    gnodes, glab = _graph_components(key)
    comp_region = gnodes // max(n_nodes, 1)
    # components of ∂D per region: distinct component labels among that region's nodes
    pairs = np.unique(np.stack([comp_region, glab], axis=1), axis=0)
    n_comp = np.bincount(pairs[:, 0], minlength=D)
    b1 = np.maximum(n_comp - 1, 0)
    # the decision boundary: pieces between cells of different classes, inside the domain
    inside = cells[:, 1] >= 0
    gamma = inside & (cls[cells[:, 0]] != cls[np.maximum(cells[:, 1], 0)])
    ge = node[gamma]
    ge = ge[ge[:, 0] != ge[:, 1]]
    if ge.size:
        ge = np.unique(np.sort(ge, axis=1), axis=0)
        gn, gl = _graph_components(ge)
        bb0 = int(np.unique(gl).size)
        bb1 = int(ge.shape[0] - gn.size + bb0)
    else:
        bb0 = bb1 = 0
    # a point inside each hole: the largest cell across the hole's boundary component
    hole_pts, hole_reg, outlines = [], [], []
    comp_of_key = dict(zip(gnodes.tolist(), glab.tolist(), strict=True))
    for r in np.flatnonzero(b1 > 0):
        sel_pieces = np.flatnonzero(cross & ((ra == r) | (rb == r)))
        comp = np.array([comp_of_key[r * n_nodes + int(node[p, 0])] for p in sel_pieces])
        outside_piece = cells[sel_pieces, 1] < 0
        comps = np.unique(comp)
        # the outer component touches the domain's sides; otherwise it is the one spanning the widest box
        if outside_piece.any():
            outer = int(comp[outside_piece][0])
        else:
            ext = [np.ptp(segs[sel_pieces[comp == c]].reshape(-1, 2), axis=0).sum() for c in comps]
            outer = int(comps[int(np.argmax(ext))])
        for c in comps:
            if c == outer:
                continue
            ps = sel_pieces[comp == c]
            other = np.where(ra[ps] == r, cells[ps, 1], cells[ps, 0])
            best = other[np.argmax(part.areas[other])]
            hole_pts.append(part.centroids()[best])
            hole_reg.append(r)
            outlines.append(segs[ps])
    return Topology(
        dimension=2,
        labels=lab,
        region_ids=ids,
        region_class=rcls,
        b0=np.ones(D, np.int64),
        b1=b1.astype(np.int64),
        b2=None,
        area=area,
        boundary_b0=bb0,
        boundary_b1=bb1,
        hole_points=np.array(hole_pts, dtype=np.float64).reshape(-1, 2),
        hole_region=np.array(hole_reg, dtype=np.int64),
        hole_outlines=tuple(outlines),
    )


def _topology_3d(poly, cls: np.ndarray) -> Topology:
    lab = decision_labels(poly, cls)
    ids, inv, rcls, vol = _region_table(lab, cls, poly.volumes)
    D = ids.size
    E = poly.adjacency()
    # cells with a vertex on the box's boundary belong to the unbounded complement component
    X = poly.vertices
    diam = float(np.linalg.norm(poly._hi - poly._lo))
    tol = SNAP * diam
    on = np.any((np.abs(X - poly._lo) <= tol) | (np.abs(X - poly._hi) <= tol), axis=1)
    touches = np.zeros(poly.n_regions, bool)
    np.logical_or.at(touches, poly._region_of_vertex(), on)
    b2 = np.zeros(D, np.int64)
    R = poly.n_regions
    ext = R  # one extra node: the outside of the box
    tie = np.stack([np.flatnonzero(touches), np.full(int(touches.sum()), ext)], axis=1)
    for r in range(D):
        mine = inv == r
        Er = E[~mine[E[:, 0]] & ~mine[E[:, 1]]] if E.size else np.zeros((0, 2), np.int64)
        Tr = tie[~mine[tie[:, 0]]]
        comp = _components(R + 1, np.concatenate([Er, Tr]))
        roots = np.unique(comp[np.flatnonzero(~mine)])
        b2[r] = int(np.sum(roots != comp[ext]))
    chi = _boundary_euler_3d(poly, inv)
    # the closure M of D is a 3-manifold with boundary: chi(D) = chi(M) = chi(dM) / 2 and b1 = b0 + b2 - chi
    b1 = np.array([-1 if c is None else int(1 + b2[r] - c // 2) for r, c in enumerate(chi)], np.int64)
    return Topology(
        dimension=3,
        labels=lab,
        region_ids=ids,
        region_class=rcls,
        b0=np.ones(D, np.int64),
        b1=b1,
        b2=b2,
        area=vol,
        boundary_b0=None,
        boundary_b1=None,
        hole_points=np.zeros((0, 2)),
        hole_region=np.zeros(0, np.int64),
    )


def _facets_3d(poly):
    """Every facet of every cell, in normalised coordinates: ``(region, hyperplane id, side, loop (m, 3), centroid,
    unit normal, e1, e2)``, each loop ordered around its centroid in the plane's basis ``(e1, e2)``: the facets
    of :meth:`Polytopes._facets_3d` (the ones its volumes sum over), in slot order."""
    r, s, X, on, _, n, cf, e1, e2, _, _, order = poly._facets_3d()
    cnt = on.sum(axis=1)
    f = poly.facet_ids[r, s]
    out = []
    for t in np.argsort(np.ravel_multi_index((r, s), poly.facet_ids.shape), kind="stable"):
        loop = X[t][order[t][: cnt[t]]]
        out.append((int(r[t]), int(f[t]) // 2, int(f[t]) % 2, loop, cf[t], n[t], e1[t], e2[t]))
    return out


def _boundary_euler_3d(poly, inv: np.ndarray) -> list[int | None]:
    """Euler characteristic V - E + F of the boundary surface of each decision region (``inv (R,)``: region of
    each cell), from the pieces of facets between a region's cells and other cells or the box. A piece is the
    overlap of the two cells' facets on their common plane; edges are split at every piece vertex lying on them
    (T-junctions), so the pieces form a proper complex. None where an edge of the surface is not shared by
    exactly two pieces (a pinched, non-manifold boundary, where chi(M) = chi(dM) / 2 does not hold)."""
    import shapely

    D = int(inv.max(initial=-1)) + 1
    facets = _facets_3d(poly)
    k = poly.k
    by_plane: dict[int, list[int]] = {}
    for t, f in enumerate(facets):
        by_plane.setdefault(f[1], []).append(t)
    E = poly.adjacency()
    nb = {(int(a), int(b)) for a, b in E.tolist()}
    pieces: list[tuple[int, np.ndarray]] = []  # (region, loop)
    area_tol = 1e-12
    for r, h, side, P, c, _n, e1, e2 in facets:
        if h < 2 * k:  # a side of the box
            pieces.append((int(inv[r]), P))
            continue
        if side != 0:
            continue
        for u in by_plane.get(h, ()):
            r2, _, side2, P2 = facets[u][:4]
            if side2 == side or inv[r2] == inv[r] or (min(r, r2), max(r, r2)) not in nb:
                continue
            A = shapely.Polygon(np.stack([(P - c) @ e1, (P - c) @ e2], 1))
            B = shapely.Polygon(np.stack([(P2 - c) @ e1, (P2 - c) @ e2], 1))
            g = A.intersection(B)
            if g.geom_type != "Polygon" or g.area <= area_tol:
                continue
            uv = np.asarray(g.exterior.coords)[:-1]
            loop = c + uv[:, :1] * e1 + uv[:, 1:] * e2
            pieces.append((int(inv[r]), loop))
            pieces.append((int(inv[r2]), loop))
    tol = SNAP * float(np.linalg.norm(np.full(k, 2.0)))
    out: list[int | None] = []
    for d in range(D):
        loops = [L for reg, L in pieces if reg == d]
        if not loops:
            out.append(None)
            continue
        pts = np.concatenate(loops)
        ids = _snap_3d(pts, tol)
        V = np.unique(ids).size
        starts = np.cumsum([0] + [len(L) for L in loops])
        uniq_pts = np.zeros((int(ids.max()) + 1, 3))
        uniq_pts[ids] = pts
        used = np.unique(ids)
        edges: dict[tuple[int, int], int] = {}
        for i in range(len(loops)):
            ring = ids[starts[i] : starts[i + 1]]
            ring = ring[np.r_[True, ring[1:] != ring[:-1]]]
            if ring.size > 1 and ring[0] == ring[-1]:
                ring = ring[:-1]
            for a, b in zip(ring, np.roll(ring, -1), strict=True):
                # the piece vertices strictly inside this edge split it
                pa, pb = uniq_pts[a], uniq_pts[b]
                d_ab = pb - pa
                L2 = float(d_ab @ d_ab)
                q = uniq_pts[used]
                tpar = (q - pa) @ d_ab / L2
                dist = np.linalg.norm(q - pa - tpar[:, None] * d_ab, axis=1)
                inner = (tpar > 0) & (tpar < 1) & (dist <= tol) & (used != a) & (used != b)
                chain = [int(a), *used[inner][np.argsort(tpar[inner])].tolist(), int(b)]
                for x, y in zip(chain[:-1], chain[1:], strict=True):
                    e = (min(x, y), max(x, y))
                    edges[e] = edges.get(e, 0) + 1
        if any(cnt != 2 for cnt in edges.values()):
            out.append(None)
            continue
        out.append(V - len(edges) + len(loops))
    return out


def _snap_3d(X: np.ndarray, tol: float) -> np.ndarray:
    """Labels ``(N,)`` joining points of ``X (N, 3)`` within ``tol`` of each other (a hash grid of cell
    ``tol``: near points fall in neighbouring cells)."""
    cell = np.floor(X / tol).astype(np.int64)
    grid: dict[tuple[int, int, int], list[int]] = {}
    for i, key in enumerate(map(tuple, cell.tolist())):
        grid.setdefault(key, []).append(i)
    pairs = []
    offs = [(a, b, c) for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1)]
    for i, (x, y, z) in enumerate(cell.tolist()):
        for a, b, c in offs:
            for j in grid.get((x + a, y + b, z + c), ()):
                if j > i and np.linalg.norm(X[i] - X[j]) <= tol:
                    pairs.append((i, j))
    lab = _components(X.shape[0], np.array(pairs, np.int64).reshape(-1, 2))
    return np.unique(lab, return_inverse=True)[1].reshape(-1)
