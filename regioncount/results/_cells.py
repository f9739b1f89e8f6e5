"""Curvilinear cells of a 2D partition (DESIGN §2 "curved cells"): the result of the curved engine.

The partition is held as trapezoids (``x in [xa, xb]``, ``y`` between two branches of lines or conics, in
the engine's normalised coordinates ``u' in [-1, 1]^2``; ``u = centre + half * u'``), each with its code
and output map. Cells are derived from them:

- two trapezoids are *adjacent* when they share a vertical wall or a boundary arc (same arc id) over a
  length of positive length. A certified partition (:mod:`regioncount.engines._curved_exact`) brings its
  adjacency decided exactly; for the float engine's partition it is derived here, with walls shorter than
  ``WALL_TOL`` not connecting (a threshold: such a partition says ``exact: false``);
- a **cell** is a connected component of trapezoids of one code under adjacency: a maximal connected
  open set of one code (``regions``); one code can own several cells (``codes`` counts distinct codes);
- **linear regions** merge adjacent cells whose affine output maps are equal: exactly equal rational maps
  in a certified partition, maps that agree to relative 1e-9 otherwise, as in
  :meth:`~regioncount.results._partition.Partition.linear_region_labels`.

Areas integrate ``upper(x) - lower(x)`` over each trapezoid by Gauss–Legendre quadrature in ``theta`` with
``x = (a + b)/2 - (b - a)/2 cos(theta)``, which absorbs the square-root behaviour of a conic branch at a
vertical tangent (the only place a branch is not smooth is a slab end); intervals whose 12- and 24-point
results differ by more than 1e-15 are halved, and the remaining difference is reported as
``area_error`` (a bound in practice, not a proof; areas are reported, they decide nothing).
"""

from __future__ import annotations

import functools

import numpy as np

from . import _arcs as cn
from ._partition import _components, _searchsorted_grouped

#: Float partitions only: walls shorter than this (normalised units) do not connect trapezoids.
WALL_TOL = 1e-10


@functools.cache
def _gl(n: int):
    x, w = np.polynomial.legendre.leggauss(n)
    return (x + 1) * np.pi / 2, w * np.pi / 2  # nodes and weights on [0, pi]


def _g(traps, side: str, idx=None):
    """The trapezoids' higher-degree branches on one side (``"L"`` or ``"U"``), or None."""
    G = getattr(traps, side + "g", None)
    return G if G is None or idx is None else G[idx]


def _height(traps, x):
    return cn.arc_y(traps.Uc, traps.Uk, _g(traps, "U"), x) - cn.arc_y(traps.Lc, traps.Lk, _g(traps, "L"), x)


def _quad(traps, idx, a, b, n):
    th, w = _gl(n)
    x = (a + b)[:, None] / 2 - (b - a)[:, None] / 2 * np.cos(th)[None, :]
    sub = traps.take(idx)
    hgt = cn.arc_y(sub.Uc, sub.Uk, _g(sub, "U"), x) - cn.arc_y(sub.Lc, sub.Lk, _g(sub, "L"), x)
    return ((b - a) / 2) * np.sum(np.maximum(hgt, 0.0) * np.sin(th) * w, axis=1)


def trap_areas(traps, max_rounds: int = 40) -> tuple[np.ndarray, float]:
    """Areas ``(N,)`` of the trapezoids (normalised units) and the summed unresolved quadrature difference."""
    N = traps.n
    areas = np.zeros(N)
    idx = np.arange(N)
    a, b = traps.xa.copy(), traps.xb.copy()
    err = 0.0
    for rnd in range(max_rounds):
        if idx.size == 0:
            break
        q1 = _quad(traps, idx, a, b, 12)
        q2 = _quad(traps, idx, a, b, 24)
        bad = np.abs(q2 - q1) > 1e-15 * np.maximum(1.0, np.abs(q2))
        if rnd == max_rounds - 1:
            bad[:] = False
            err += float(np.abs(q2 - q1).sum())
        np.add.at(areas, idx[~bad], q2[~bad])
        m = (a + b) / 2
        idx, a, b = (
            np.concatenate([idx[bad], idx[bad]]),
            np.concatenate([a[bad], m[bad]]),
            np.concatenate([m[bad], b[bad]]),
        )
    return areas, err


def _range_pairs(gkey, glo, ghi, qkey, qlo, qhi):
    """For sorted groups of disjoint intervals ``(gkey, glo, ghi)`` (sorted by key then lo) and query
    intervals, all pairs ``(query, data)`` with the same key whose intervals overlap (open)."""
    start = _searchsorted_grouped(gkey, ghi, qkey, qlo, "right")
    end = _searchsorted_grouped(gkey, glo, qkey, qhi, "left")
    cnt = np.maximum(end - start, 0)
    qi = np.repeat(np.arange(qkey.size), cnt)
    off = np.repeat(start - np.cumsum(cnt) + cnt, cnt) + np.arange(qi.size)
    return qi, off


def _row_ids(codes: np.ndarray, prefix: np.ndarray | None = None) -> np.ndarray:
    """Index ``(N,)`` of each row of ``codes (N, C)`` among the distinct rows (exact: rows compared as bytes,
    one byte per entry when every entry fits). ``prefix (N,)``: ids of the columns before ``codes`` (rows are
    then distinct where the pair (prefix id, row) is), so that the ids of growing prefixes cost one pass
    over the new columns each."""
    if codes.shape[1] == 0:
        return np.zeros(codes.shape[0], np.int64) if prefix is None else prefix
    c = codes
    if c.size and c.min() >= 0 and c.max() < 256:
        c = c.astype(np.uint8)
    c = np.ascontiguousarray(c).view(np.uint8).reshape(c.shape[0], -1)
    if prefix is not None:
        c = np.concatenate([np.ascontiguousarray(prefix, np.int64).view(np.uint8).reshape(-1, 8), c], axis=1)
    v = c.view(np.dtype((np.void, c.shape[1]))).reshape(-1)
    return np.unique(v, return_inverse=True)[1].reshape(-1).astype(np.int64)


class Cells:
    """Connected cells of a network on a 2D domain, bounded by segments and conic arcs.

    ``traps``: the trapezoids (:class:`~regioncount.engines._traps.Traps`, normalised coordinates);
    ``codes (N, C)`` integers per trapezoid (layout of ``forward_codes``; int8 where every entry fits);
    ``maps (N, out, 3)`` the output map on each in normalised coordinates, or None (ReLU attention: spline
    pieces, no affine maps); ``centre, half (2,)``: ``u = centre + half * u'``. ``order_violations``: failed
    arc-order checks of the engine (0 when every split was consistent). ``kind``: ``"linear"`` or ``"spline"``.
    ``certified``: the partition was decided by exact predicates (``exact``); then ``adjacency = (E, n_walls)``
    is its exact trapezoid adjacency (wall pairs first), ``map_keys`` per trapezoid a hashable exact output
    map (linear regions by equality), ``degree`` the largest degree of a curve that split a trapezoid and
    ``rational_witness`` per trapezoid an exact interior point ``(Fraction, Fraction)`` in domain units;
    ``exact_traps`` the certified engine's own trapezoids (algebraic ends, exact arcs), for its certificate;
    ``prefix_keys[k]`` beside ``prefix_maps[k]``: the truncations' exact output maps, hashable.
    ``poly_keys`` (certified spline pieces, ReLU attention): per trapezoid its exact output polynomials,
    hashable, so that :meth:`polynomial_pieces` merges neighbours with one polynomial.
    """

    def __init__(
        self,
        domain,
        traps,
        codes,
        maps,
        centre,
        half,
        order_violations=0,
        ties=0,
        kind="linear",
        prefix_maps=None,
        *,
        adjacency=None,
        certified: bool = False,
        map_keys=None,
        degree: int | None = None,
        rational_witness=None,
        exact_traps=None,
        prefix_keys=None,
        code_map=None,
        poly_keys=None,
    ):
        self.domain = domain
        self.traps = traps
        self.codes = codes
        self.maps = maps
        self.centre = np.asarray(centre, float)
        self.half = np.asarray(half, float)
        self.order_violations = int(order_violations)
        self.ties = int(ties)
        self.kind = kind
        self.prefix_maps = dict(prefix_maps or {})
        self.certified = bool(certified)
        self.map_keys = map_keys
        self.degree = degree
        self.rational_witness = rational_witness
        self.exact_traps = exact_traps
        #: the lowered program's :class:`~regioncount.networks.CodeMap` (None: its code is the ops' own)
        self.code_map = code_map
        self.prefix_keys = dict(prefix_keys or {})
        self.poly_keys = poly_keys
        if adjacency is not None:
            E, self._n_walls = adjacency
            self.__dict__["trap_adjacency"] = np.asarray(E, np.int64).reshape(-1, 2)

    # -- trapezoid level -----------------------------------------------------------------------------

    @property
    def n_traps(self) -> int:
        return self.traps.n

    @functools.cached_property
    def code_ids(self) -> np.ndarray:
        """Distinct-code index of each trapezoid ``(N,)``."""
        return _row_ids(self.codes)

    @functools.cached_property
    def trap_adjacency(self) -> np.ndarray:
        """Pairs ``(m, 2)`` of trapezoids sharing a wall (length > ``WALL_TOL``) or an arc (positive length)."""
        t = self.traps
        # walls: right wall of i at xb_i against left walls of j at xa_j == xb_i
        llo, lhi = t.lower_y(t.xa), t.upper_y(t.xa)
        rlo, rhi = t.lower_y(t.xb), t.upper_y(t.xb)
        # walls no longer than WALL_TOL never connect; dropping them first keeps the rest disjoint and
        # sorted alike by both ends (a degenerate wall can be inverted by an ulp)
        o = np.flatnonzero(lhi - llo > WALL_TOL)
        o = o[np.lexsort((lhi[o], llo[o], t.xa[o]))]
        q = np.flatnonzero(rhi - rlo > WALL_TOL)
        qi, k = _range_pairs(t.xa[o], llo[o], lhi[o], t.xb[q], rlo[q] + WALL_TOL, rhi[q] - WALL_TOL)
        qi, j = q[qi], o[k]
        ov = np.minimum(rhi[qi], lhi[j]) - np.maximum(rlo[qi], llo[j])
        walls = np.stack([qi, j], 1)[ov > WALL_TOL]
        # arcs: upper arc of i against lower arcs of j with the same id, overlapping in x
        o = np.lexsort((t.xb, t.xa, t.Lid))
        qi, k = _range_pairs(t.Lid[o], t.xa[o], t.xb[o], t.Uid, t.xa, t.xb)
        j = o[k]
        ov = np.minimum(t.xb[qi], t.xb[j]) - np.maximum(t.xa[qi], t.xa[j])
        arcs = np.stack([qi, j], 1)[ov > 0]
        self._n_walls = walls.shape[0]
        return np.concatenate([walls, arcs]).astype(np.int64)

    @functools.cached_property
    def _areas(self):
        return trap_areas(self.traps)

    @property
    def trap_area(self) -> np.ndarray:
        """Area of each trapezoid in the domain's units ``(N,)``."""
        return self._areas[0] * float(self.half[0] * self.half[1])

    @property
    def area_error(self) -> float:
        """Quadrature difference left unresolved (domain units); 0 when every integral converged."""
        return self._areas[1] * float(self.half[0] * self.half[1])

    # -- cells ---------------------------------------------------------------------------------------

    @functools.cached_property
    def cell_of(self) -> np.ndarray:
        """Cell index ``(N,)`` of each trapezoid, cells numbered ``0 .. n_cells - 1``."""
        E = self.trap_adjacency
        ids = self.code_ids
        same = E[ids[E[:, 0]] == ids[E[:, 1]]]
        lab = _components(self.n_traps, same)
        return np.unique(lab, return_inverse=True)[1].reshape(-1)

    @property
    def n_cells(self) -> int:
        """Connected cells: maximal connected open sets of one code."""
        return int(self.cell_of.max(initial=-1) + 1)

    @property
    def regions(self) -> int:
        return self.n_cells

    @property
    def n_codes(self) -> int:
        """Distinct codes (one code may own several cells)."""
        return int(self.code_ids.max(initial=-1) + 1)

    @functools.cached_property
    def cell_area(self) -> np.ndarray:
        return np.bincount(self.cell_of, weights=self.trap_area, minlength=self.n_cells)

    @functools.cached_property
    def _cell_rep(self) -> np.ndarray:
        """The largest trapezoid of each cell."""
        o = np.lexsort((-self.trap_area, self.cell_of))
        first = np.ones(o.size, bool)
        first[1:] = self.cell_of[o][1:] != self.cell_of[o][:-1]
        return o[first]

    @property
    def cell_codes(self) -> np.ndarray:
        """Code of each cell ``(n_cells, C)``, the dtype of ``codes``."""
        return self.codes[self._cell_rep]

    @property
    def witness(self) -> np.ndarray:
        """An interior point of each cell ``(n_cells, 2)`` in domain coordinates (the middle of the mid
        chord of its largest trapezoid; for a certified partition its exact interior point, rounded)."""
        if self.rational_witness is not None:
            return np.array([[float(v) for v in self.rational_witness[r]] for r in self._cell_rep]).reshape(-1, 2)
        x, y = self.traps.take(self._cell_rep).witness()
        return self.centre + self.half * np.stack([x, y], 1)

    # the result protocol (results/_protocol.py): per cell, not per trapezoid
    @property
    def region_codes(self) -> np.ndarray:
        """:attr:`cell_codes` as the network's ops record them (a piecewise-linear op's piece per entry)."""
        return self.cell_codes if self.code_map is None else self.code_map.to_ops(self.cell_codes)

    witnesses = witness

    @functools.cached_property
    def adjacency(self) -> np.ndarray:
        """Pairs ``(m, 2)`` (``a < b``) of cells sharing a boundary arc or segment of positive length."""
        E = self.cell_of[self.trap_adjacency]
        E = E[E[:, 0] != E[:, 1]]
        if E.size == 0:
            return np.zeros((0, 2), np.int64)
        return np.unique(np.sort(E, axis=1), axis=0)

    def linear_region_labels(self, rtol: float = 1e-9) -> np.ndarray | None:
        """Linear region of each cell (Montúfar et al. 2014): adjacent cells whose affine output maps agree
        within ``rtol`` are merged. None for spline pieces (ReLU attention has no affine maps)."""
        if self.maps is None:
            return None
        E = self.adjacency
        rep = self._cell_rep
        if self.map_keys is not None:
            keys = [self.map_keys[r] for r in rep]
            same = np.array([keys[a] == keys[b] for a, b in E], bool).reshape(-1)
            lab = _components(self.n_cells, E[same] if E.size else E)
            return np.unique(lab, return_inverse=True)[1].reshape(-1)
        M = self.maps[rep]
        if E.size == 0 or M.shape[1] == 0:
            return np.arange(self.n_cells) if M.shape[1] else np.zeros(self.n_cells, np.int64)
        size = np.abs(M).sum(axis=-1).max(axis=-1)
        diff = np.abs(M[E[:, 0]] - M[E[:, 1]]).sum(axis=-1).max(axis=-1)
        same = diff <= rtol * np.maximum(size[E[:, 0]], size[E[:, 1]])
        lab = _components(self.n_cells, E[same])
        return np.unique(lab, return_inverse=True)[1].reshape(-1)

    def polynomial_piece_labels(self) -> np.ndarray | None:
        """Maximal pieces of one polynomial (certified spline pieces only, else None): adjacent cells whose exact
        output polynomials are equal are merged. The spline analogue of linear regions, never called so."""
        if self.poly_keys is None:
            return None
        E = self.adjacency
        keys = [self.poly_keys[r] for r in self._cell_rep]
        same = np.array([keys[a] == keys[b] for a, b in E], bool).reshape(-1)
        lab = _components(self.n_cells, E[same] if E.size else E)
        return np.unique(lab, return_inverse=True)[1].reshape(-1)

    def polynomial_pieces(self) -> int | None:
        lab = self.polynomial_piece_labels()
        return None if lab is None else int(lab.max(initial=-1) + 1)

    def linear_regions(self, rtol: float = 1e-9) -> int | None:
        lab = self.linear_region_labels(rtol)
        return None if lab is None else int(lab.max(initial=-1) + 1)

    def _prefix_ids(self, code_length: int) -> np.ndarray:
        """Distinct-code ids of the code prefixes ``codes[:, :code_length]``, built on the longest shorter
        prefix asked for before (a scan asks for every depth in turn)."""
        cache = self.__dict__.setdefault("_prefix_cache", {})
        if code_length not in cache:
            done = max((k for k in cache if k < code_length), default=0)
            cache[code_length] = _row_ids(self.codes[:, done:code_length], cache.get(done))
        return cache[code_length]

    def truncated_counts(self, code_length: int, maps: np.ndarray | None = None, rtol: float = 1e-9) -> dict:
        """Counts of the network truncated to the ops that write the first ``code_length`` code entries (a
        Transformer's first blocks): its partition is coarser than this one, so its cells are the connected
        components of trapezoids with equal code prefixes. ``maps (N, out, 3)``: the truncation's output
        maps (``prefix_maps``), for its linear regions (None: not computed)."""
        ids = self._prefix_ids(code_length)
        E = self.trap_adjacency
        lab = _components(self.n_traps, E[ids[E[:, 0]] == ids[E[:, 1]]])
        cell = np.unique(lab, return_inverse=True)[1].reshape(-1)
        n = int(cell.max(initial=-1) + 1)
        out = {"regions": n, "codes": int(ids.max(initial=-1) + 1), "linear_regions": None}
        keys = next((self.prefix_keys.get(k) for k, m in self.prefix_maps.items() if m is maps), None)
        if maps is not None and keys is not None:
            # a certified partition's truncation: merge exactly equal maps
            Ec = cell[E]
            keep = Ec[:, 0] != Ec[:, 1]
            pairs = E[keep]
            same = np.array([keys[a] == keys[b] for a, b in pairs], bool).reshape(-1)
            lin = _components(n, Ec[keep][same])
            out["linear_regions"] = int(np.unique(lin).size)
        elif maps is not None:
            Ec = cell[E]
            keep = Ec[:, 0] != Ec[:, 1]
            M0, M1 = maps[E[keep, 0]], maps[E[keep, 1]]
            size = np.maximum(np.abs(M0).sum(axis=-1).max(axis=-1), np.abs(M1).sum(axis=-1).max(axis=-1))
            same = np.abs(M0 - M1).sum(axis=-1).max(axis=-1) <= rtol * size
            lin = _components(n, Ec[keep][same])
            out["linear_regions"] = int(np.unique(lin).size)
        return out

    @property
    def exact(self) -> bool:
        """True when the partition was decided by exact predicates (the certified engine). The float
        engine's partition decides with thresholds and is never exact (its arc-order checks only flag
        inconsistencies: ``order_violations``)."""
        return self.certified

    # -- queries -------------------------------------------------------------------------------------

    def locate_traps(self, points) -> np.ndarray:
        """Trapezoid holding each point ``(n, 2)`` (domain coordinates) -> ``(n,)``, -1 outside the domain."""
        P = (np.asarray(points, float).reshape(-1, 2) - self.centre) / self.half
        out = np.full(P.shape[0], -1, np.int64)
        t = self.traps
        xs, inv = np.unique(P[:, 0], return_inverse=True)
        order = np.argsort(inv, kind="stable")
        bounds = np.searchsorted(inv[order], np.arange(xs.size + 1))
        for k, x in enumerate(xs):
            cand = np.flatnonzero((t.xa <= x) & ((x < t.xb) | ((t.xb == x) & (x >= 1.0))))
            if cand.size == 0:
                continue
            lo = cn.arc_y(t.Lc[cand], t.Lk[cand], _g(t, "L", cand), x)
            hi = cn.arc_y(t.Uc[cand], t.Uk[cand], _g(t, "U", cand), x)
            o = np.argsort(lo)
            pts = order[bounds[k] : bounds[k + 1]]
            y = P[pts, 1]
            i = np.searchsorted(lo[o], y, side="right") - 1
            ok = (i >= 0) & (y <= hi[o][np.maximum(i, 0)])
            out[pts[ok]] = cand[o][i[ok]]
        return out

    def locate(self, points) -> np.ndarray:
        """Cell holding each point ``(n, 2)`` -> ``(n,)``, -1 outside the domain."""
        tr = self.locate_traps(points)
        return np.where(tr >= 0, self.cell_of[np.maximum(tr, 0)], -1)

    def boundary_polylines(self, n: int = 24) -> list[np.ndarray]:
        """Polylines ``(k, 2)`` (domain coordinates) of every boundary piece between two different cells:
        conic arcs sampled at ``n`` Chebyshev-spaced points, vertical walls as segments."""
        t = self.traps
        E = self.trap_adjacency
        c = self.cell_of
        arc = np.arange(E.shape[0]) >= self._n_walls
        diff = c[E[:, 0]] != c[E[:, 1]]
        E, arc = E[diff], arc[diff]
        out = []
        i, j = E[:, 0], E[:, 1]
        # arcs
        ia, ja = i[arc], j[arc]
        a = np.maximum(t.xa[ia], t.xa[ja])
        b = np.minimum(t.xb[ia], t.xb[ja])
        th = np.linspace(0, np.pi, n)
        X = (a + b)[:, None] / 2 - (b - a)[:, None] / 2 * np.cos(th)
        Y = cn.arc_y(t.Uc[ia], t.Uk[ia], _g(t, "U", ia), X)
        for x, y in zip(X, Y):
            out.append(self.centre + self.half * np.stack([x, y], 1))
        # walls
        iw, jw = i[~arc], j[~arc]
        x = t.xb[iw]
        lo = np.maximum(
            cn.arc_y(t.Lc[iw], t.Lk[iw], _g(t, "L", iw), x), cn.arc_y(t.Lc[jw], t.Lk[jw], _g(t, "L", jw), x)
        )
        hi = np.minimum(
            cn.arc_y(t.Uc[iw], t.Uk[iw], _g(t, "U", iw), x), cn.arc_y(t.Uc[jw], t.Uk[jw], _g(t, "U", jw), x)
        )
        for xx, l, h in zip(x, lo, hi):
            out.append(self.centre + self.half * np.array([[xx, l], [xx, h]]))
        return out

    def summary(self) -> dict:
        """JSON-ready counts: ``regions`` (connected cells), ``codes``, ``linear_regions``, ``exact``, ..."""
        return {
            "regions": self.n_cells,
            "codes": self.n_codes,
            "linear_regions": self.linear_regions(),
            "trapezoids": self.n_traps,
            "exact": bool(self.exact),
            "largest_degree": self.degree,
            "polynomial_pieces": self.polynomial_pieces(),
            "order_violations": self.order_violations,
            "area_error": self.area_error,
            "ties": self.ties,
            "cells": "connected cells bounded by segments and conic arcs"
            if not self.degree or self.degree <= 2
            else "connected spline pieces bounded by arcs of algebraic curves",
            "predicates": "exact (algebraic)" if self.certified else "float64 with thresholds",
        }

    def __repr__(self) -> str:
        return f"Cells({self.n_cells} cells, {self.n_codes} codes, {self.n_traps} trapezoids)"
