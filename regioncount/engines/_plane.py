"""The exact 2D ``plane`` engine (DESIGN §3): split convex polygons op by op.

Every region is a convex polygon in the domain's parameters ``(u1, u2)`` carrying the affine map from
``(u1, u2, 1)`` to the current activations (``(3, T, d)``: every token entry). Each op of the
:class:`~regioncount.networks.Program` splits every region by its boundaries and updates codes and maps:

- ReLU: one line per unit. The pre-activation maps of all units are computed once per region at the
  start of the op (its "parent"); the regions a parent is split into inherit its row. A disc test
  (value at an interior point against gradient times radius) finds the units whose line may cross a
  parent; their vertices settle it. The op then runs in rounds: round ``t`` splits every descendant of a
  parent by that parent's ``t``-th crossing line, all parents at once (the order of the lines does not
  change the arrangement). Only regions whose own disc meets the line have their vertices evaluated.
- GroupMax (maxout): per unit, the cells of an argmax of ``k`` affine functions, obtained by clipping
  each region with the halfplanes ``f_r >= f_j`` (ties go to the lower index, like ``argmax``).
- hardmax attention: per head and query, the argmax cells of the scores over the keys. Scores are
  products of affine maps, so a score difference is quadratic in ``u``; where the quadratic parts of
  the competing keys coincide (within a relative tolerance) the boundaries are lines and are split
  exactly, otherwise :class:`~regioncount._errors.CurvedBoundaryError` is raised.
- Affine maps every region's map; after a ReLU it works per parent (one product) plus a rank-1
  correction per child and crossing unit that is on. Residual keeps a copy of the maps.

Geometry and combinatorics are NumPy (float64), vectorised across regions; Python loops run over ops,
rounds and units, never over regions. Work happens in normalised coordinates ``u' in [-1, 1]^2`` (the
domain rectangle's centre and half-widths), which keeps every tolerance relative. Once a partition holds
more than ``BATCH`` regions at a top-level op boundary, the remaining ops run on row batches one after
the other, which bounds the working memory (maps are ``3 T d`` floats per region).

Polygons live in a padded store ``(capacity, M, 2)``; slots beyond a polygon's vertex count repeat its
first vertex (and the last slot is always such padding), so shoelace sums and sign tests need no masks.
Every edge carries an integer tag naming the line (op, unit, parent) that created it; the two sides of
a cut get the same tag, which lets :meth:`Partition.adjacency` group edges exactly instead of by
floating-point line keys.

Tolerances: a vertex value ``|s| <= SNAP * scale + NOISE * bound`` counts as on the line, where
``scale`` is the largest coefficient norm of that unit's map over the regions and ``bound`` an a-priori
bound on the unit's magnitude (covers rounding in long sums). A split whose smaller side has relative
area below ``area_tol`` is not made (the sliver is not a region).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from .._domain import Box, Slice
from .._errors import CurvedBoundaryError, DomainError, MemoryCapError, NotPiecewiseError
from .._memory import check_rss
from ..networks import check_domain, lower, walk_widths
from ..networks._ops import Affine, Attention, GroupMax, Program, ReLU, Residual
from ..results._partition import Partition

SNAP = 1e-11
NOISE = 1e-13
CURV_TOL = 1e-9
#: Number of float64 values a chunked temporary may hold.
_CHUNK = 1 << 18
#: Edge tags 0..3 are the domain's sides; tags of cuts start here.
_FIRST_TAG = 4
#: Regions per batch once a partition grows past it (bounds the engine's working memory).
BATCH = 1 << 15


# ----------------------------------------------------------------------------------------------------
# polygon kernels (vectorised over a batch of padded polygons)


def _eval(V: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Values of the affine maps ``w (N, 3)`` at the vertices ``V (N, M, 2)`` -> ``(N, M)``."""
    return V[..., 0] * w[:, 0, None] + V[..., 1] * w[:, 1, None] + w[:, 2, None]


def _signs(s: np.ndarray, tol) -> np.ndarray:
    """-1, 0, +1 per vertex value, with ``|s| <= tol`` snapped to 0 (``tol`` broadcasts against ``s``)."""
    return (s > tol).astype(np.int8) - (s < -tol).astype(np.int8)


def _areas(V: np.ndarray) -> np.ndarray:
    """Signed (counter-clockwise positive) areas of padded polygons ``(N, M, 2)`` -> ``(N,)``.

    Coordinates are taken relative to the first vertex, so tiny polygons keep their relative accuracy."""
    x = V[..., 0] - V[:, :1, 0]
    y = V[..., 1] - V[:, :1, 1]
    return 0.5 * np.sum(x[:, :-1] * y[:, 1:] - x[:, 1:] * y[:, :-1], axis=1)


def _discs(V: np.ndarray, nv: np.ndarray):
    """Vertex mean ``(N, 2)`` (an interior point) and the radius ``(N,)`` of the disc around it that holds
    the polygon."""
    M = V.shape[1]
    ctr = (V.sum(axis=1) - (M - nv)[:, None] * V[:, 0]) / nv[:, None]
    rad = np.sqrt(np.max(np.sum((V - ctr[:, None]) ** 2, axis=-1), axis=1))
    return ctr, rad


def _cut(V, nv, s, sg, tag, newtag, sides=(1, -1)):
    """The parts ``side * s >= 0`` of padded polygons, for each side in ``sides``.

    ``V (N, M, 2)``, counts ``nv``, vertex values ``s`` and snapped signs ``sg`` ``(N, M)``, edge tags
    ``(N, M)`` (tag ``j`` is the edge from vertex ``j`` to ``j+1``), ``newtag (N,)`` for the cut. Each part
    keeps its vertices on that side (in order) and gains the crossing points of the edges whose ends have
    strictly opposite signs; an edge keeps its tag, the new edge along the cut gets ``newtag``. A crossing
    point is interpolated from the positive end towards the negative one, so two polygons sharing an edge
    compute bitwise the same point. Returns a list of ``(V (N, Mo, 2), counts (N,), tags (N, Mo))``.
    """
    N, M = sg.shape
    E = M - 1  # the last slot is always padding
    ga, gb = sg[:, :E], sg[:, 1:]
    cross = (ga * gb) < 0
    # flat indices: (N, E) for edge masks, (N, M) for vertex arrays
    fc = np.flatnonzero(cross)
    ri = fc // E
    fa = fc + ri  # start vertex of each crossing edge, in (N, M)
    Vf, sf, gf, tf = V.reshape(-1, 2), s.reshape(-1), sg.reshape(-1), tag.reshape(-1)
    pos_first = (gf[fa] > 0)[:, None]
    Pa, Pb = Vf[fa], Vf[fa + 1]
    sa, sb = sf[fa][:, None], sf[fa + 1][:, None]
    Pp, Pm = np.where(pos_first, Pa, Pb), np.where(pos_first, Pb, Pa)
    sp, sm = np.where(pos_first, sa, sb), np.where(pos_first, sb, sa)
    X = Pp + (sp / (sp - sm)) * (Pm - Pp)
    g_next = gf[fa + 1]
    valid = np.arange(E) < nv[:, None]
    out = []
    for side in sides:
        sd = np.int8(side)
        ev = valid & (ga * sd >= 0)
        cnt = ev.astype(np.int64) + cross
        off = (np.cumsum(cnt, axis=1) - cnt).reshape(-1)
        n_out = cnt.sum(axis=1)
        Mo = int(n_out.max(initial=0)) + 1
        Vo = np.empty((N * Mo, 2))
        To = np.full(N * Mo, -1, np.int64)
        fv = np.flatnonzero(ev)
        vi = fv // E
        fm = fv + vi
        dest = vi * Mo + off[fv]
        Vo[dest] = Vf[fm]
        # a vertex on the cut whose next vertex is on the other side starts the new edge
        starts_cut = (gf[fm] == 0) & (gf[fm + 1] * sd < 0)
        To[dest] = np.where(starts_cut, newtag[vi], tf[fm])
        dest = ri * Mo + off[fc] + ev.reshape(-1)[fc]
        Vo[dest] = X
        To[dest] = np.where(g_next * sd < 0, newtag[ri], tf[fa])
        Vo = Vo.reshape(N, Mo, 2)
        pr, pc = np.nonzero(np.arange(Mo) >= n_out[:, None])
        Vo[pr, pc] = Vo[pr, 0]  # padding repeats the first vertex
        out.append((Vo, n_out, To.reshape(N, Mo)))
    return out


# ----------------------------------------------------------------------------------------------------
# growable region store


class _Store:
    """Padded polygons ``V (cap, M, 2)`` (slots from ``nv`` on repeat the first vertex; the last slot is
    always padding), counts ``nv``, edge tags, enclosing discs, the op-start parent ``anc`` and per-op
    columns (``extra``), all growing together."""

    def __init__(self, V, nv, tag, cap_check):
        self.V, self.nv, self.tag = V, nv, tag
        self.cen, self.rad = _discs(V, nv)
        self.n = V.shape[0]
        self.anc = np.arange(self.V.shape[0])
        self.extra: dict[str, np.ndarray] = {}
        self.cap_check = cap_check

    def subset(self, lo: int, hi: int) -> _Store:
        """A new store holding copies of rows ``lo:hi``."""
        st = _Store.__new__(_Store)
        st.V, st.nv, st.tag = self.V[lo:hi].copy(), self.nv[lo:hi].copy(), self.tag[lo:hi].copy()
        st.cen, st.rad = self.cen[lo:hi].copy(), self.rad[lo:hi].copy()
        st.n = hi - lo
        st.anc = np.arange(st.n)
        st.extra = {}
        st.cap_check = self.cap_check
        return st

    @property
    def M(self) -> int:
        return self.V.shape[1]

    def reset_parents(self):
        self.anc = np.arange(self.V.shape[0])
        self.extra = {}

    def sort_by_parent(self):
        """Reorder the regions so that the descendants of each op-start parent are contiguous, in parent
        order: later ops then work on parents in chunks that map to contiguous runs of regions."""
        n = self.n
        order = np.argsort(self.anc[:n], kind="stable")
        for name in ("V", "nv", "tag", "cen", "rad", "anc"):
            a = getattr(self, name)
            a[:n] = a[:n][order]
        for a in self.extra.values():
            a[:n] = a[:n][order]

    def _widen(self, M: int):
        if M <= self.M:
            return
        cap = self.V.shape[0]
        V = np.empty((cap, M, 2))
        V[:, : self.M] = self.V
        V[:, self.M :] = self.V[:, :1]
        tag = np.full((cap, M), -1, np.int64)
        tag[:, : self.M] = self.tag
        self.V, self.tag = V, tag

    def _write(self, rows, Vc, nvc, tagc):
        Mc = Vc.shape[1]
        self._widen(Mc)
        self.V[rows, :Mc] = Vc
        self.tag[rows, :Mc] = tagc
        if Mc < self.M:
            self.V[rows, Mc:] = Vc[:, :1]
            self.tag[rows, Mc:] = -1
        self.nv[rows] = nvc
        self.cen[rows], self.rad[rows] = _discs(Vc, nvc)

    def set_rows(self, rows, Vc, nvc, tagc):
        """Replace the polygons in ``rows`` (their parent and per-op columns stay)."""
        self._write(rows, Vc, nvc, tagc)

    def append(self, Vc, nvc, tagc, src_rows) -> np.ndarray:
        """Append polygons whose parent (and per-op columns) are copied from ``src_rows``; returns their rows."""
        m = Vc.shape[0]
        self.cap_check(self.n + m)
        need = self.n + m
        cap = self.V.shape[0]
        if need > cap:
            new = max(need, cap + cap // 2, 64)
            self.V = _grow(self.V, new)
            self.nv = _grow(self.nv, new)
            self.tag = _grow(self.tag, new)
            self.cen = _grow(self.cen, new)
            self.rad = _grow(self.rad, new)
            self.anc = _grow(self.anc, new)
            for k, v in self.extra.items():
                self.extra[k] = _grow(v, new)
        rows = slice(self.n, need)
        self._write(rows, Vc, nvc, tagc)
        self.anc[rows] = self.anc[src_rows]
        for v in self.extra.values():
            v[rows] = v[src_rows]
        self.n = need
        return np.arange(need - m, need)

    def add_extra(self, name: str, arr: np.ndarray):
        cap = self.V.shape[0]
        full = np.zeros((cap,) + arr.shape[1:], arr.dtype)
        full[: arr.shape[0]] = arr
        self.extra[name] = full


def _grow(a: np.ndarray, cap: int) -> np.ndarray:
    out = np.zeros((cap,) + a.shape[1:], a.dtype)
    out[: a.shape[0]] = a
    return out


# ----------------------------------------------------------------------------------------------------
# maps


@dataclasses.dataclass
class _Masked:
    """ReLU output kept lazy: row ``r`` is ``base[parent[r]] * bits[r]`` (``(3, T, d)``), never materialised
    for all regions at once. ``fixed (R0, T d)`` is the mask every descendant of a parent shares (units
    that do not cross it), ``cross (R0, T d)`` the units whose bit varies among its descendants."""

    base: np.ndarray  # (R0, 3, T, d)
    parent: np.ndarray  # (R,)
    bits: np.ndarray  # (R, ceil(T d / 8)) packed
    fixed: np.ndarray  # (R0, T d) bool
    cross: np.ndarray  # (R0, T d) bool

    def rows(self, sl) -> np.ndarray:
        R0, _, T, d = self.base.shape
        m = np.unpackbits(self.bits[sl], axis=1, count=T * d).reshape(-1, 1, T, d)
        return self.base[self.parent[sl]] * m

    @property
    def n(self) -> int:
        return self.parent.shape[0]

    def varying(self) -> tuple[np.ndarray, np.ndarray]:
        """Pairs ``(r, j)`` (sorted by ``r``) where unit ``j`` crosses the parent of ``r`` and is on in ``r``."""
        pp, jj = np.nonzero(self.cross)
        cnt = np.bincount(pp, minlength=self.cross.shape[0])
        first = np.cumsum(cnt) - cnt
        c = cnt[self.parent]
        r = np.repeat(np.arange(self.n), c)
        k = np.repeat(first[self.parent] - np.cumsum(c) + c, c) + np.arange(r.size)
        j = jj[k]
        on = (self.bits[r, j >> 3] >> (7 - (j & 7)).astype(np.uint8)) & 1
        on = on.astype(bool)
        return r[on], j[on]


@dataclasses.dataclass
class _Tokens:
    """Maps whose token slices repeat, kept unexpanded: token ``i`` of every row is ``parts[cls[i]]``
    (``(R, 3, d)`` each). Attention makes them when several query tokens get the same output."""

    parts: list
    cls: list

    def full(self) -> np.ndarray:
        R, _, d = self.parts[0].shape
        out = np.empty((R, 3, len(self.cls), d))
        for i, c in enumerate(self.cls):
            out[:, :, i, :] = self.parts[c]
        return out

    def add_to(self, out: np.ndarray):
        """``out += self``, token by token (the same sums as adding the expanded maps)."""
        for i, c in enumerate(self.cls):
            out[:, :, i, :] += self.parts[c]


def _materialise(A) -> np.ndarray:
    if isinstance(A, _Masked):
        return A.rows(slice(None))
    if isinstance(A, _Tokens):
        return A.full()
    return A


def _coef_bound(A: np.ndarray) -> np.ndarray:
    """max over regions of ``|a1| + |a2| + |a0|`` per entry ``(T, d)``: bounds ``|h|`` on ``[-1, 1]^2``."""
    out = np.zeros(A.shape[2:])
    step = max(1, _CHUNK // max(1, A[0].size if A.shape[0] else 1))
    for lo in range(0, A.shape[0], step):
        X = np.abs(A[lo : lo + step])
        np.maximum(out, (X[:, 0] + X[:, 1] + X[:, 2]).max(axis=0), out=out)
    return out


def _matmul_rows(X: np.ndarray, W: np.ndarray, out: np.ndarray):
    """``out = X @ W.T`` over the last axis, in row chunks (X ``(R, ...)``)."""
    R = X.shape[0]
    step = max(1, _CHUNK // max(1, X[0].size if R else 1, out[0].size if R else 1))
    for lo in range(0, R, step):
        x = X[lo : lo + step]
        out[lo : lo + step] = (x.reshape(-1, x.shape[-1]) @ W.T).reshape(x.shape[:-1] + (W.shape[0],))


def _affine(A, op: Affine, hb: np.ndarray):
    """``H @ W.T + b`` on every region's map; returns the maps ``(R, 3, T, d_out)`` and the magnitude bound."""
    W, b = op.W, op.b
    if isinstance(A, _Tokens):
        A = A.full()
    bb = b if b.ndim == 2 else b[None, :]
    hb_out = hb @ np.abs(W).T + np.abs(bb)
    T, d_out = hb.shape[0], W.shape[0]
    if not isinstance(A, _Masked):
        out = np.empty(A.shape[:3] + (d_out,))
        _matmul_rows(A, W, out)
    elif A.base.shape[0] <= 16:
        # few parents with many children each: per parent and token, (children x d) bits @ (d x 3 d_out)
        R0, _, _, d = A.base.shape
        out = np.empty((A.n, 3, T, d_out))
        step = max(1, _CHUNK // max(1, T * d, 3 * T * d_out))
        for p in range(R0):
            B = (A.base[p, :, :, :, None] * W.T[None, None]).transpose(1, 2, 0, 3).reshape(T, d, 3 * d_out)
            rows = np.flatnonzero(A.parent == p)
            for lo in range(0, rows.size, step):
                rs = rows[lo : lo + step]
                m = np.unpackbits(A.bits[rs], axis=1, count=T * d).reshape(rs.size, T, d).astype(np.float64)
                for t in range(T):
                    out[rs, :, t, :] = (m[:, t] @ B[t]).reshape(-1, 3, d_out)
    else:
        R0, _, _, d = A.base.shape
        r, j = A.varying()
        if r.size * 8 < A.n * T * d:
            # Children differ from their parent's shared mask only on the parent's crossing units: one
            # product per parent, then a rank-1 correction per (child, crossing unit that is on).
            # parents are sorted (see _Store.sort_by_parent): a chunk of parents is a run of children
            out = np.empty((A.n, 3, T, d_out))
            step = max(1, _CHUNK // (3 * T * max(d, d_out)))
            cuts = np.searchsorted(A.parent, np.arange(0, R0 + step, step))
            for k, plo in enumerate(range(0, R0, step)):
                x = A.base[plo : plo + step] * A.fixed[plo : plo + step].reshape(-1, 1, T, d)
                P0 = (x.reshape(-1, d) @ W.T).reshape(x.shape[:-1] + (d_out,))
                lo, hi = cuts[k], cuts[k + 1]
                idx = A.parent[lo:hi] - plo
                if idx.size == P0.shape[0] and np.array_equal(idx, np.arange(idx.size)):
                    out[lo:hi] = P0  # no parent split in this chunk: a plain copy, no gather
                else:
                    out[lo:hi] = P0[idx]
            t, dj = j // d, j % d
            key = r * T + t
            new = np.r_[True, key[1:] != key[:-1]]
            rank = np.arange(key.size) - np.flatnonzero(new)[np.cumsum(new) - 1]
            order = np.argsort(rank, kind="stable")
            bounds = np.searchsorted(rank[order], np.arange(int(rank.max(initial=-1)) + 2))
            a = A.base[A.parent[r], :, t, dj]  # (pairs, 3)
            WT = np.ascontiguousarray(W.T)
            out2 = out.reshape(-1, d_out)  # row (child * 3 + c) * T + token
            step = max(1, (_CHUNK // 4) // (3 * d_out))
            # pairs of equal rank belong to distinct (child, token): plain fancy += is safe
            for k in range(bounds.size - 1):
                for lo in range(bounds[k], bounds[k + 1], step):
                    sel = order[lo : min(lo + step, bounds[k + 1])]
                    flat = ((r[sel, None] * 3 + np.arange(3)) * T + t[sel, None]).ravel()
                    out2[flat] += (a[sel][:, :, None] * WT[dj[sel]][:, None, :]).reshape(-1, d_out)
        else:
            out = np.empty((A.n, 3, T, d_out))
            step = max(1, _CHUNK // max(1, 3 * T * max(d, d_out)))
            for lo in range(0, A.n, step):
                x = A.rows(slice(lo, lo + step))
                out[lo : lo + step] = (x.reshape(-1, d) @ W.T).reshape(x.shape[:-1] + (d_out,))
    out[:, 2] += bb
    return out, hb_out


# ----------------------------------------------------------------------------------------------------
# the engine


@dataclasses.dataclass
class _Piece:
    """A finished batch of regions, flattened: normalised vertices, counts, edge tags, areas, output maps
    ``(R, 3, out)`` in normalised coordinates, and code blocks."""

    verts: np.ndarray
    nv: np.ndarray
    tags: np.ndarray
    areas: np.ndarray
    maps: np.ndarray
    blocks: list


def _leaves(op) -> int:
    return sum(_leaves(o) for o in op.body) if isinstance(op, Residual) else 1


def _splits(ops) -> bool:
    return any(_splits(o.body) if isinstance(o, Residual) else not isinstance(o, Affine) for o in ops)


def _take_rows(A, lo: int, hi: int):
    """Rows ``lo:hi`` of the maps (a lazy ReLU output keeps only the parents those rows need)."""
    if isinstance(A, _Tokens):
        return _Tokens([p[lo:hi] for p in A.parts], A.cls)
    if not isinstance(A, _Masked):
        return A[lo:hi]
    plo, phi = int(A.parent[lo]), int(A.parent[hi - 1]) + 1
    return _Masked(A.base[plo:phi], A.parent[lo:hi] - plo, A.bits[lo:hi], A.fixed[plo:phi], A.cross[plo:phi])


class _Engine:
    """Applies a program's ops to a store of regions. Once a store holds more than ``batch`` regions at a
    top-level op boundary, the rest of the program runs on row batches one after the other, so the working
    set (maps are ``3 T d`` floats per region) stays bounded while finished regions are kept flat."""

    def __init__(self, program: Program, st: _Store, area_atol: float, progress, max_regions, batch: int):
        self.program = program
        self.total = len(walk_widths(program))
        self.st = st
        self.area_atol = area_atol
        self.blocks: list = []
        self.progress = progress
        self.max_regions = max_regions
        self.batch = batch
        self.next_tag = _FIRST_TAG
        self.finished = 0  # regions in finished pieces
        self.pending = 0  # regions in batches not yet started
        self._pos = 0.0  # progress, in leaf ops
        self._step = 1.0
        self._shown = 0
        st.cap_check = self.cap_check

    def take_tags(self, count: int) -> int:
        base = self.next_tag
        self.next_tag += int(count)
        return base

    def cap_check(self, n_current: int):
        check_rss()  # measured, where the store is about to grow
        if self.max_regions is not None and self.finished + self.pending + n_current > self.max_regions:
            raise MemoryCapError(
                f"the partition passed max_regions={self.max_regions} regions; raise the cap, shrink the "
                "domain, or count with --method sample"
            )

    def _tick(self):
        self._pos += self._step
        shown = int(np.floor(self._pos + 1e-9))
        if self.progress is not None and shown > self._shown:
            self._shown = shown
            self.progress(shown, self.total)

    # -- driver --------------------------------------------------------------------------------------

    def solve(self, ops, A, hb, span: float) -> list[_Piece]:
        """Apply the top-level ``ops`` to the current store (advancing progress by ``span`` leaf ops)."""
        leaves = [_leaves(op) for op in ops]
        unit = span / max(1, sum(leaves))
        for k, op in enumerate(ops):
            if self.st.n > self.batch and _splits(ops[k:]):
                return self._batched(ops[k:], A, hb, unit * sum(leaves[k:]))
            self._step = unit
            A, hb, _ = self.run([op], A, hb)
        return [self._finish(A)]

    def _batched(self, ops, A, hb, span: float) -> list[_Piece]:
        st, blocks = self.st, self.blocks
        n = st.n
        nb = -(-n // self.batch)
        cuts = np.linspace(0, n, nb + 1).astype(np.int64)
        self.pending += n
        pieces: list[_Piece] = []
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
            self.pending -= hi - lo
            self.st = st.subset(lo, hi)
            self.blocks = [(kind, w, a[lo:hi]) for kind, w, a in blocks]
            pieces += self.solve(ops, _take_rows(A, lo, hi), hb, span / nb)
        return pieces

    def _finish(self, A) -> _Piece:
        st = self.st
        R = st.n
        A = _materialise(A)
        nv = st.nv[:R].copy()
        valid = np.arange(st.M) < nv[:, None]
        piece = _Piece(
            st.V[:R][valid],
            nv,
            st.tag[:R][valid],
            _areas(st.V[:R]),
            np.ascontiguousarray(A[:, :, self.program.out_token, :]),
            [(kind, w, a.copy()) for kind, w, a in self.blocks],
        )
        self.finished += R
        self.st = None
        return piece

    def run(self, ops, A, hb):
        """Apply ``ops``; returns maps, magnitude bound and the parent of each region at entry."""
        chain = np.arange(self.st.n)
        for op in ops:
            if isinstance(op, Residual):
                A_in, hb_in = _materialise(A), hb
                A_b, hb_b, par = self.run(op.body, A_in, hb)
                same = par.size == A_in.shape[0] and np.array_equal(par, np.arange(par.size))
                if isinstance(A_b, _Tokens):
                    A = A_in.copy() if same else A_in[par]
                    A_b.add_to(A)  # x + y == y + x exactly
                elif same:
                    A = _materialise(A_b) + A_in  # no region split: no gather
                else:
                    A = A_in[par]  # a fresh array: add in place (x + y == y + x exactly)
                    A += _materialise(A_b)
                hb = hb_in + hb_b
            else:
                A, hb, new, par = self.leaf(op, A, hb)
                if par is not None:
                    self.blocks = [(kind, w, arr[par]) for kind, w, arr in self.blocks]
                self.blocks += new
                self._tick()
            if par is not None:
                chain = chain[par]
        return A, hb, chain

    def leaf(self, op, A, hb):
        if isinstance(op, Affine):
            A, hb = _affine(A, op, hb)
            return A, hb, [], None
        self.st.reset_parents()
        A = _materialise(A)
        if isinstance(op, ReLU):
            A_new, block = self.relu(A, hb)
        elif isinstance(op, GroupMax):
            A_new, block, hb = self.groupmax(A, hb, op.k)
        elif isinstance(op, Attention):
            A_new, block, hb = self.attention(A, hb, op)
        else:
            raise TypeError(f"unknown op {type(op).__name__}")
        par = self.st.anc[: self.st.n].copy()
        return A_new, hb, [block], par

    # -- ReLU ----------------------------------------------------------------------------------------

    def relu(self, A: np.ndarray, hb: np.ndarray):
        st = self.st
        R0, _, T, d = A.shape
        D = T * d
        Af = A.reshape(R0, 3, D)
        tol = SNAP * _coef_bound(A).reshape(D) + NOISE * hb.reshape(D)
        pos, neg = self._sides(Af, tol)
        cross = pos & neg
        st.add_extra("bits", np.packbits(pos & ~neg, axis=1))
        # Each parent's crossing units, in rounds: round t splits every descendant of a parent by that
        # parent's t-th crossing unit. The order of the lines does not change the arrangement, and a round
        # is one vectorised step over all parents (not one per unit). The lists belong to an "owner":
        # first the op-start parent; when rounds test many more regions than they split (a parent crossed
        # by many lines, as the box is by the first layer), every region becomes the owner of the units
        # left in its list that cross it, so later rounds only visit regions with work left.
        pp, jj = np.nonzero(cross)
        cnt = np.bincount(pp, minlength=R0)
        first = np.cumsum(cnt) - cnt
        st.add_extra("own", np.arange(R0))
        tag0 = self.take_tags(R0 * D)
        t = since = 0
        while True:
            anc, own = st.anc[: st.n], st.extra["own"][: st.n]
            cand = np.flatnonzero(cnt[own] > t)
            if cand.size == 0:
                break
            par = anc[cand]
            j = jj[first[own[cand]] + t]
            made = self._relu_round(cand, Af[par, :, j], tol[j], j, tag0 + par * D + j)
            t += 1
            since += 1
            if since >= 4 and cand.size > 8 * max(made, 1):
                cnt, first, jj = self._reown(Af, tol, cnt, first, jj, t)
                t = since = 0
        st.sort_by_parent()
        bits = st.extra["bits"][: st.n]
        return _Masked(A, st.anc[: st.n].copy(), bits, pos & ~neg, cross), ("bits", D, bits)

    def _sides(self, Af: np.ndarray, tol: np.ndarray):
        """Per parent and unit: does the unit take values > tol (pos) and < -tol (neg) on the polygon?

        A disc test (value at an interior point, gradient times the polygon's radius) settles most pairs;
        the vertices are evaluated only for the pairs whose line may pass through the polygon.
        """
        st = self.st
        R0, _, D = Af.shape
        pos = np.empty((R0, D), bool)
        neg = np.empty((R0, D), bool)
        amb_p, amb_j = [], []
        step = max(1, _CHUNK // max(1, 4 * D))
        for lo in range(0, R0, step):
            sl = slice(lo, min(R0, lo + step))
            ctr, rad = st.cen[sl], st.rad[sl]
            a = Af[sl]
            sc = a[:, 0] * ctr[:, :1] + a[:, 1] * ctr[:, 1:] + a[:, 2]
            reach = np.sqrt(a[:, 0] ** 2 + a[:, 1] ** 2)
            reach *= rad[:, None] * (1 + 1e-9)
            reach += tol
            p = sc > reach
            n = sc < -reach
            pos[sl], neg[sl] = p, n
            p, j = np.nonzero(~(p | n))
            amb_p.append(p + lo)
            amb_j.append(j)
        p, j = np.concatenate(amb_p), np.concatenate(amb_j)
        step = max(1, _CHUNK // (4 * st.M))
        for lo in range(0, p.size, step):
            q, k = p[lo : lo + step], j[lo : lo + step]
            s = _eval(st.V[q], Af[q, :, k])
            pos[q, k] = np.any(s > tol[k, None], axis=1)
            neg[q, k] = np.any(s < -tol[k, None], axis=1)
        return pos, neg

    def _relu_round(self, cand, w, tol, j, newtag):
        """Split the regions ``cand`` by the lines ``w (n, 3)`` (unit ``j (n,)``, tolerance ``tol (n,)``)."""
        st = self.st
        # disc test first: only regions whose enclosing disc meets the line need their vertices
        sc = st.cen[cand, 0] * w[:, 0] + st.cen[cand, 1] * w[:, 1] + w[:, 2]
        reach = np.sqrt(w[:, 0] ** 2 + w[:, 1] ** 2) * st.rad[cand] * (1 + 1e-9) + tol
        one = sc > reach
        near = np.flatnonzero(np.abs(sc) <= reach)
        rows_n = cand[near]
        # only as many slots as the widest of these polygons needs (the rest repeat the first vertex)
        Mloc = int(st.nv[rows_n].max(initial=2)) + 1
        V = st.V[rows_n, :Mloc]
        s = _eval(V, w[near])
        sg = _signs(s, tol[near, None])
        haspos = np.any(sg > 0, axis=1)
        split = haspos & np.any(sg < 0, axis=1)
        one[near[haspos & ~split]] = True
        idx = np.flatnonzero(split)
        if idx.size:
            rows = rows_n[idx]
            nv, tg = st.nv[rows], st.tag[rows][:, :Mloc]
            (Vp, np_, tp), (Vm, nm, tm) = _cut(V[idx], nv, s[idx], sg[idx], tg, newtag[near[idx]])
            ap, am = _areas(Vp), _areas(Vm)
            ok = np.minimum(ap, am) >= self.area_atol
            # a sliver is not a region: keep the polygon whole, on its larger side
            one[near[idx[ok | (ap >= am)]]] = True
            if ok.any():
                rows_ok = rows[ok]
                st.set_rows(rows_ok, Vp[ok], np_[ok], tp[ok])
                st.append(Vm[ok], nm[ok], tm[ok], rows_ok)
        on = np.flatnonzero(one)
        jo = j[on]
        st.extra["bits"][cand[on], jo >> 3] |= (1 << (7 - (jo & 7))).astype(np.uint8)
        return int(ok.sum()) if idx.size else 0

    def _reown(self, Af, tol, cnt, first, jj, t: int):
        """Make every region the owner of the units left (from position ``t``) in its owner's list that
        cross it; set the bits of the others. Returns the new lists ``(cnt, first, jj)`` per region."""
        st = self.st
        n = st.n
        own, anc = st.extra["own"][:n], st.anc[:n]
        rem = np.maximum(cnt[own] - t, 0)
        r = np.repeat(np.arange(n), rem)
        k = np.repeat(first[own] + t - np.cumsum(rem) + rem, rem) + np.arange(r.size)
        j = jj[k]
        keep = np.zeros(r.size, bool)
        step = max(1, _CHUNK // (2 * st.M))
        for lo in range(0, r.size, step):
            rs, js = r[lo : lo + step], j[lo : lo + step]
            w = Af[anc[rs], :, js]
            sc = st.cen[rs, 0] * w[:, 0] + st.cen[rs, 1] * w[:, 1] + w[:, 2]
            reach = np.sqrt(w[:, 0] ** 2 + w[:, 1] ** 2) * st.rad[rs] * (1 + 1e-9) + tol[js]
            pos, neg = sc > reach, sc < -reach
            amb = np.flatnonzero(~(pos | neg))
            if amb.size:
                sv = _eval(st.V[rs[amb]], w[amb])
                pos[amb] = np.any(sv > tol[js[amb], None], axis=1)
                neg[amb] = np.any(sv < -tol[js[amb], None], axis=1)
            keep[lo : lo + step] = pos & neg
            on = np.flatnonzero(pos & ~neg)
            # a region has several pairs here, maybe in one byte: accumulate unbuffered
            np.bitwise_or.at(st.extra["bits"], (rs[on], js[on] >> 3), (1 << (7 - (js[on] & 7))).astype(np.uint8))
        cnt = np.bincount(r[keep], minlength=n)
        st.extra["own"][:n] = np.arange(n)
        return cnt, np.cumsum(cnt) - cnt, j[keep]

    # -- argmax cells (maxout units, hardmax heads) ----------------------------------------------------

    def _argmax_start(self, F: np.ndarray, tol: np.ndarray, active: np.ndarray) -> np.ndarray:
        """Winner per parent and unit where it is the argmax on the whole polygon, else -1.

        ``F (R0, U, 3, k)`` affine pieces, ``tol (R0 or 1, U, k)``, ``active (R0, U, k)`` bool.
        """
        st = self.st
        R0, U, _, k = F.shape
        win = np.full((R0, U), -1, np.int64)
        step = max(1, _CHUNK // max(1, st.M * U * k))
        for lo in range(0, R0, step):
            sl = slice(lo, min(R0, lo + step))
            V = st.V[sl]
            tl = tol[sl] if tol.shape[0] > 1 else tol
            Fs, act = F[sl], active[sl]
            # (n, M, U, k) values at vertices, and at an interior point (vertex mean)
            vals = np.einsum("nmc,nuck->nmuk", np.concatenate([V, np.ones(V.shape[:2] + (1,))], -1), Fs)
            ctr = vals.mean(axis=1)
            ctr = np.where(act, ctr, -np.inf)
            top = ctr.max(axis=-1, keepdims=True)
            near = act & (ctr >= top - 2 * tl)
            r = np.argmax(near, axis=-1)
            vr = np.take_along_axis(vals, r[:, None, :, None], -1)
            tr = np.take_along_axis(np.broadcast_to(tl, act.shape), r[..., None], -1)
            diff = vr - vals
            pt = tr + tl
            lower = np.arange(k) < r[..., None]
            ok = np.all(diff >= -pt[:, None], axis=1) & (~lower | np.any(diff > pt[:, None], axis=1))
            ok |= ~act
            win[sl] = np.where(np.all(ok, axis=-1), r, -1)
        return win

    @staticmethod
    def _beaten(cen, rad, F, tl, act) -> np.ndarray:
        """``(n, k)``: piece ``r`` loses by more than twice the clip tolerance ``tl_r + tl_j``, on the whole
        disc ``(cen (n, 2), rad (n,))`` that holds a polygon, to the first allowed piece ``j`` it is clipped
        against in :meth:`_argmax_unit` (``F (n, 3, k)``, ``tl, act (n, k)``).

        That clip is then the first one its cell meets and leaves no vertex on the positive side (the margin
        dwarfs rounding), so the cell dies there, untouched: dropping it before any geometry changes
        nothing, not even the width of the polygon store."""
        n, _, k = F.shape
        if k < 2 or n == 0:
            return np.zeros((n, k), bool)
        # clip order of piece r: j = r + 1, r + 2, ... (mod k); the first allowed one
        js = (np.arange(k)[:, None] + np.arange(1, k)) % k  # (k, k - 1)
        a = act[:, js]  # (n, k, k - 1)
        j = js[np.arange(k), np.argmax(a, axis=2)]  # (n, k)
        g = np.take_along_axis(F, np.broadcast_to(j[:, None, :], F.shape), axis=2) - F  # f_j - f_r, (n, 3, k)
        low = g[:, 0] * cen[:, :1] + g[:, 1] * cen[:, 1:] + g[:, 2]
        low -= np.sqrt(g[:, 0] ** 2 + g[:, 1] ** 2) * rad[:, None] * (1 + 1e-9)
        return np.any(a, axis=2) & (low > 2 * (tl + np.take_along_axis(tl, j, axis=1)))

    def _argmax_unit(self, u: int, F_u, tol_u, act_u, win_u, R0: int):
        """Split every region whose op-start parent has no single winner for unit ``u`` into argmax cells.

        ``F_u (R0, 3, k)``, ``tol_u (R0 or 1, k)``, ``act_u (R0, k)`` bool, ``win_u (R0,)``.
        """
        st = self.st
        k = F_u.shape[2]
        anc = st.anc[: st.n]
        cand = np.flatnonzero(win_u[anc] < 0)
        if cand.size == 0:
            return
        Rc = cand.size
        par = anc[cand]
        base = self.take_tags(R0 * k * (k - 1) // 2)
        tl = np.broadcast_to(tol_u, (R0, k)) if tol_u.shape[0] == 1 else tol_u
        Vc = st.V[cand]
        keep = act_u[par] & ~self._beaten(st.cen[cand], st.rad[cand], F_u[par], tl[par], act_u[par])
        owner = np.repeat(np.arange(Rc), k)
        r = np.tile(np.arange(k), Rc)
        keep = keep.reshape(-1)
        owner, r = owner[keep], r[keep]
        V = Vc[owner]
        nv = st.nv[cand][owner]
        tg = st.tag[cand][owner]
        canon = _line_classes(F_u, np.unique(par), k)
        for m in range(1, k):
            j = (r + m) % k
            pj = par[owner]
            g = F_u[pj, :, r] - F_u[pj, :, j]
            s = _eval(V, g)
            sg = _signs(s, (tl[pj, r] + tl[pj, j])[:, None])
            sg[~act_u[pj, j]] = 1
            haspos = np.any(sg > 0, axis=1)
            hasneg = np.any(sg < 0, axis=1)
            allzero = ~haspos & ~hasneg
            alive = np.where(allzero, j > r, haspos)
            clip = alive & hasneg
            if clip.any():
                a, b = np.minimum(r, j)[clip], np.maximum(r, j)[clip]
                pair = canon[pj[clip], b * (b - 1) // 2 + a]
                newtag = base + pair * R0 + pj[clip]
                ((Vc, nc, tc),) = _cut(V[clip], nv[clip], s[clip], sg[clip], tg[clip], newtag, sides=(1,))
                Mn = max(V.shape[1], Vc.shape[1])
                V, tg = _pad(V, Mn), _pad_tags(tg, Mn)
                Vc, tc = _pad(Vc, Mn), _pad_tags(tc, Mn)
                V[clip], nv[clip], tg[clip] = Vc, nc, tc
            V, nv, tg, owner, r = V[alive], nv[alive], tg[alive], owner[alive], r[alive]
        big = _areas(V) >= self.area_atol
        V, nv, tg, owner, r = V[big], nv[big], tg[big], owner[big], r[big]
        # first cell of each owner replaces it; the others are appended
        first = np.ones(owner.size, bool)
        first[1:] = owner[1:] != owner[:-1]
        rows = cand[owner[first]]
        st.set_rows(rows, V[first], nv[first], tg[first])
        digits = st.extra["digits"]
        digits[rows, u] = r[first]
        if (~first).any():
            new = st.append(V[~first], nv[~first], tg[~first], cand[owner[~first]])
            st.extra["digits"][new, u] = r[~first]
        lost = np.setdiff1d(np.arange(Rc), owner[first])
        if lost.size:
            # every cell of a region was a sliver: keep it whole with the winner at its vertex mean
            rows = cand[lost]
            Vl = st.V[rows]
            ctr = Vl.mean(axis=1)
            vals = np.einsum("nc,nck->nk", np.concatenate([ctr, np.ones((rows.size, 1))], 1), F_u[anc[rows]])
            vals = np.where(act_u[anc[rows]], vals, -np.inf)
            st.extra["digits"][rows, u] = np.argmax(vals, axis=1)

    # -- GroupMax ------------------------------------------------------------------------------------

    def groupmax(self, A: np.ndarray, hb: np.ndarray, k: int):
        st = self.st
        R0, _, T, d = A.shape
        n = d // k
        U = T * n
        F = A.reshape(R0, 3, U, k).transpose(0, 2, 1, 3)  # (R0, U, 3, k)
        tol = (SNAP * _coef_bound(A) + NOISE * hb).reshape(1, U, k)
        act = np.ones((R0, U, k), bool)
        win = self._argmax_start(F, tol, act)
        dt = np.uint8 if k <= 256 else np.int32
        st.add_extra("digits", np.maximum(win, 0).astype(dt))
        for u in np.flatnonzero(np.any(win < 0, axis=0)):
            self._argmax_unit(int(u), F[:, u], tol[:, u], act[:, u], win[:, u], R0)
        st.sort_by_parent()
        digits = st.extra["digits"][: st.n]
        anc = st.anc[: st.n]
        Fg = A.reshape(R0, 3, T, n, k)[anc]
        out = np.take_along_axis(Fg, digits.astype(np.int64).reshape(-1, 1, T, n, 1), axis=-1)[..., 0]
        hb_out = hb.reshape(T, n, k).max(axis=-1)
        return out, ("digits", U, digits.copy()), hb_out

    # -- hardmax attention ---------------------------------------------------------------------------

    def attention(self, A: np.ndarray, hb: np.ndarray, op: Attention):
        st = self.st
        R0, _, T, d = A.shape
        H = op.heads
        allowed = np.tril(np.ones((T, T), bool)) if op.causal else np.ones((T, T), bool)
        U = H * T
        F = np.zeros((R0, U, 3, T))  # affine part of the scores of query (h, i) over keys
        quad = np.zeros((R0, U, 3, T))  # quadratic part: u1^2, u1 u2, u2^2
        tol = np.zeros((1, U, T))
        ctol = np.zeros((1, U, T))
        VO = np.zeros((H, R0, 3, T, d))
        hb_out = np.zeros((T, d))
        for h in range(H):
            Q = A @ op.Wq[h]  # (R0, 3, T, dk)
            K = A @ op.Wk[h]
            VO[h] = (A @ op.Wv[h]) @ op.Wo[h]
            C = np.einsum("raie,rbje->rijab", Q, K)  # (R0, T, T, 3, 3)
            qb, kb = _coef_bound(Q), _coef_bound(K)  # (T, dk)
            qa, ka = hb @ np.abs(op.Wq[h]), hb @ np.abs(op.Wk[h])
            sb = qb @ kb.T  # (T, T): bound on |S_ij| over the domain
            sa = qa @ ka.T
            u = slice(h * T, (h + 1) * T)
            F[:, u] = np.stack([C[..., 0, 2] + C[..., 2, 0], C[..., 1, 2] + C[..., 2, 1], C[..., 2, 2]], axis=2)
            quad[:, u] = np.stack([C[..., 0, 0], C[..., 0, 1] + C[..., 1, 0], C[..., 1, 1]], axis=2)
            tol[0, u] = SNAP * sb + NOISE * sa
            ctol[0, u] = CURV_TOL * sb + NOISE * sa
            hb_out += (hb @ np.abs(op.Wv[h])).max(axis=0) @ np.abs(op.Wo[h])
        act = np.broadcast_to(np.tile(allowed, (H, 1))[None], (R0, U, T)).copy()
        # Queries whose scores, tolerances and allowed keys are identical on every parent (e.g. a head
        # whose query does not depend on the token) make identical decisions: only the first of each
        # class is decided, the others copy its digit column (every later split copies rows whole).
        rep = _same_units(F, quad, tol, ctol, act)
        first = np.flatnonzero(rep == np.arange(U))
        Fr, quad_r, act_r = F[:, first], quad[:, first], act[:, first]
        tol_r, ctol_r = tol[:, first], ctol[:, first]
        self._check_curvature(Fr, quad_r, tol_r, ctol_r, act_r, first)
        act[:, first] = act_r
        act = act[:, rep]
        win = self._argmax_start(Fr, tol_r, act_r)
        dt = np.uint8 if T <= 256 else np.int32
        col = np.searchsorted(first, rep)  # column of each query's class in Fr, win
        st.add_extra("digits", np.maximum(win, 0).astype(dt)[:, col])
        for u in np.flatnonzero(np.any(win < 0, axis=0)[col]):
            k = int(col[u])
            if rep[u] == u:
                self._argmax_unit(int(u), Fr[:, k], tol_r[:, k], act_r[:, k], win[:, k], R0)
            else:
                self.take_tags(R0 * T * (T - 1) // 2)  # the tags its cuts would have had: none are made
        st.sort_by_parent()
        st.extra["digits"][: st.n] = st.extra["digits"][: st.n][:, rep]
        digits = st.extra["digits"][: st.n].astype(np.int64)
        anc = st.anc[: st.n]
        R = st.n
        # query tokens whose every head falls in the same classes get the same output, summed in the same
        # order: it is computed once, for the first of them, and kept unexpanded (see _Tokens)
        sig: dict[tuple, int] = {}
        cls = [sig.setdefault(tuple(rep[h * T + i] for h in range(H)), len(sig)) for i in range(T)]
        firsts = [cls.index(c) for c in range(len(sig))]
        parts = [np.zeros((R, 3, d)) for _ in firsts]
        for h in range(H):
            done: dict[int, np.ndarray] = {}
            for c, i in enumerate(firsts):
                u = h * T + i
                if rep[u] not in done:
                    # A region's head output depends only on its parent and its winner: build it once per
                    # (parent, winner) and look it up per region.
                    G = np.empty((T, R0, 3, d))
                    for j in range(T):
                        # keys whose score equals the winner's identically are tied: hardmax averages them
                        dF = np.abs(F[:, u] - F[:, u, :, j, None])
                        dQ = np.abs(quad[:, u] - quad[:, u, :, j, None])
                        tied = act[:, u] & np.all(dF <= 2 * tol[0, u], axis=1) & np.all(dQ <= 2 * ctol[0, u], axis=1)
                        with np.errstate(invalid="ignore", divide="ignore"):  # j not allowed: never a winner
                            wts = tied / tied.sum(axis=1, keepdims=True)
                        G[j] = np.einsum("rj,rcjd->rcd", wts, VO[h])
                    done[rep[u]] = G.reshape(T * R0, 3, d)
                parts[c] += np.take(done[rep[u]], digits[:, u] * R0 + anc, axis=0)
        return _Tokens(parts, cls), ("digits", U, st.extra["digits"][: st.n].copy()), hb_out

    def _check_curvature(self, F, quad, tol, ctol, act, units):
        """Where the competing keys' quadratic parts differ, drop keys provably beaten on the whole
        polygon; if curved rivals remain, the boundary is a quadric: refuse. ``units[u]`` is the query
        index (h T + i) of column ``u``."""
        st = self.st
        R0, U, _, T = F.shape
        ref = np.argmax(act, axis=-1)  # first allowed key
        qref = np.take_along_axis(quad, ref[:, :, None, None], -1)
        curved = np.any(act & np.any(np.abs(quad - qref) > ctol[:, :, None], axis=2), axis=-1)  # (R0, U)
        if not curved.any():
            return
        rr, uu = np.nonzero(curved)
        V = st.V[rr]
        lo, hi = V.min(axis=1), V.max(axis=1)  # bounding boxes (n, 2)
        Vh = np.concatenate([V, np.ones(V.shape[:2] + (1,))], -1)
        lin = np.einsum("nmc,ncj->nmj", Vh, F[rr, uu])  # (n, M, T)
        q = quad[rr, uu]  # (n, 3, T)
        x, y = V[..., 0], V[..., 1]
        qv = (
            (x * x)[..., None] * q[:, None, 0] + (x * y)[..., None] * q[:, None, 1] + (y * y)[..., None] * q[:, None, 2]
        )
        ctr_val = (lin + qv).mean(axis=1)
        a = act[rr, uu]
        best = np.argmax(np.where(a, ctr_val, -np.inf), axis=1)
        # lower bound of S_best - S_j over the polygon: affine part at vertices + interval bound of the quadric
        dlin = np.take_along_axis(lin, best[:, None, None], -1) - lin
        dq = np.take_along_axis(q, best[:, None, None], -1) - q  # (n, 3, T)
        terms = _interval_products(lo, hi)  # (n, 3, 2): ranges of u1^2, u1 u2, u2^2
        qlow = np.sum(np.minimum(dq * terms[:, :, :1], dq * terms[:, :, 1:]), axis=1)
        lower = dlin.min(axis=1) + qlow
        beaten = a & (lower > 2 * tol[0, uu])
        act[rr, uu] = a & ~beaten
        qbest = np.take_along_axis(q, best[:, None, None], -1)
        rival = act[rr, uu] & np.any(np.abs(q - qbest) > ctol[0, uu][:, None], axis=1)
        if rival.any():
            n = int(np.flatnonzero(rival.any(axis=1))[0])
            u = int(units[uu[n]])
            j = int(np.flatnonzero(rival[n])[0])
            raise CurvedBoundaryError(
                f"hardmax attention (head {u // T}, query {u % T}): the boundary between keys {int(best[n])} and "
                f"{j} is curved (a quadric) on this domain, and the plane engine only splits along lines; "
                "use --method line (exact along segments) or --method sample"
            )


def _same_units(F, quad, tol, ctol, act) -> np.ndarray:
    """For each query ``u`` of ``F, quad (R0, U, 3, T)``, ``tol, ctol (1, U, T)``, ``act (R0, U, T)``: the
    smallest ``v`` whose scores, tolerances and allowed keys equal ``u``'s exactly on every parent."""
    U = F.shape[1]
    rep = np.arange(U)
    arrays = (F, quad, tol, ctol, act)
    seen: dict[tuple, list[int]] = {}
    for u in range(U):
        # a hash of the bytes finds the candidates; equality is then checked exactly
        key = tuple(hash(np.ascontiguousarray(a[:, u]).tobytes()) for a in arrays)
        for v in seen.get(key, []):
            if all(np.array_equal(a[:, u], a[:, v]) for a in arrays):
                rep[u] = v
                break
        else:
            seen.setdefault(key, []).append(u)
    return rep


def _line_classes(F: np.ndarray, parents: np.ndarray, k: int) -> np.ndarray:
    """For each parent and pair ``a < b`` of the pieces ``F (R0, 3, k)`` (pair index ``b (b-1)/2 + a``),
    the smallest pair index whose line ``f_a = f_b`` is the same line (within 1e-9 of the domain's size).

    Degenerate argmaxes have coincident boundary lines (with one-dimensional heads every difference line of
    a query is ``q(u) = 0``); both sides of such a boundary must carry one edge tag. Returns ``(R0, P)``.
    """
    P = k * (k - 1) // 2
    b = np.array([bb for bb in range(k) for _ in range(bb)], dtype=np.int64)
    a = np.array([aa for bb in range(k) for aa in range(bb)], dtype=np.int64)
    canon = np.tile(np.arange(P), (F.shape[0], 1))
    if P < 2 or parents.size == 0:
        return canon
    g = F[parents][:, :, a] - F[parents][:, :, b]  # (n, 3, P)
    norm = np.hypot(g[:, 0], g[:, 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.where(norm[:, None] > 0, g / norm[:, None], np.nan)
    same = np.all(np.abs(n[:, :, :, None] - n[:, :, None, :]) <= 1e-9, axis=1)
    same |= np.all(np.abs(n[:, :, :, None] + n[:, :, None, :]) <= 1e-9, axis=1)
    same |= np.eye(P, dtype=bool)
    canon[parents] = np.argmax(same, axis=2)
    return canon


def _interval_products(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Ranges of ``u1^2, u1 u2, u2^2`` over boxes ``[lo, hi]`` (``(n, 2)`` each) -> ``(n, 3, 2)``."""

    def sq(a, b):
        m = np.where((a <= 0) & (b >= 0), 0.0, np.minimum(a * a, b * b))
        return m, np.maximum(a * a, b * b)

    s1 = sq(lo[:, 0], hi[:, 0])
    s2 = sq(lo[:, 1], hi[:, 1])
    p = np.stack([lo[:, 0] * lo[:, 1], lo[:, 0] * hi[:, 1], hi[:, 0] * lo[:, 1], hi[:, 0] * hi[:, 1]])
    s12 = (p.min(axis=0), p.max(axis=0))
    return np.stack([np.stack(s1, -1), np.stack(s12, -1), np.stack(s2, -1)], axis=1)


def _pad(V: np.ndarray, M: int) -> np.ndarray:
    if V.shape[1] >= M:
        return V
    out = np.empty((V.shape[0], M, 2))
    out[:, : V.shape[1]] = V
    out[:, V.shape[1] :] = V[:, :1]
    return out


def _pad_tags(t: np.ndarray, M: int) -> np.ndarray:
    if t.shape[1] >= M:
        return t
    out = np.full((t.shape[0], M), -1, np.int64)
    out[:, : t.shape[1]] = t
    return out


# ----------------------------------------------------------------------------------------------------
# public entry point


def _frame(program: Program, domain):
    """Input map in normalised coordinates: ``x = x0 + V (c + h u')``; returns ``(x0', V', c, h)``."""
    q = program.input_dim
    if q < 2:
        raise DomainError("the network takes 1 input, so it has no 2D domain: use --method line")
    if isinstance(domain, Slice):
        if domain.x0.shape[0] != q:
            raise DomainError(f"the slice lives in R^{domain.x0.shape[0]} but the network takes {q} inputs")
    elif isinstance(domain, Box):
        if domain.dim != 2 or q != 2:
            raise DomainError(
                f"the plane engine needs a 2D domain: a 2D box for a 2-input network, or a Slice for a "
                f"{q}-input one (got a {domain.dim}D box)"
            )
    else:
        raise DomainError("the plane engine needs a 2D Box or a Slice")
    x0, V = domain.input_map()
    lo, hi = np.asarray(domain.param_lo, float), np.asarray(domain.param_hi, float)
    c, h = (lo + hi) / 2, (hi - lo) / 2
    corners = np.array([[lo[0], lo[1]], [hi[0], lo[1]], [hi[0], hi[1]], [lo[0], hi[1]]])
    X = x0 + corners @ V.T
    return x0 + V @ c, V * h, c, h, X.min(axis=0), X.max(axis=0)


def _check_ops(program: Program):
    for op, _, _ in walk_widths(program):
        if isinstance(op, Attention) and op.sigma == "softmax":
            raise NotPiecewiseError(
                "softmax attention is smooth: the network is not piecewise, so it has no regions to count "
                "(hardmax attention is its λ → ∞ limit)"
            )
        if isinstance(op, Attention) and op.sigma == "relu":
            raise CurvedBoundaryError(
                "ReLU attention is not piecewise linear: its cells are spline pieces bounded by algebraic "
                "curves (Lai, Lim, Liu 2024), which the plane engine cannot split; use --method line or --method sample"
            )


def partition_plane(
    net,
    domain,
    *,
    area_tol: float = 1e-12,
    max_regions: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Partition:
    """Exact partition of a 2D domain into the activation regions of ``net`` (DESIGN §3 ``plane``).

    ``net``: an MLP, Maxout, hardmax Transformer or lowered :class:`Program`. ``domain``: a 2D
    :class:`Box` for a 2-input network, or a :class:`Slice` (required when the input dimension is not 2).
    ``area_tol``: slivers with area below ``area_tol`` times the domain's area are not regions.
    ``max_regions``: raise :class:`MemoryCapError` once the partition would exceed it.
    ``progress(done_ops, total_ops)`` is called after each op.

    Raises :class:`CurvedBoundaryError` where a hardmax boundary is a quadric or for ReLU attention,
    :class:`NotPiecewiseError` for softmax attention, :class:`DomainError` for a wrong domain.
    """
    program = lower(net)
    _check_ops(program)
    x0n, Vn, c, h, xlo, xhi = _frame(program, domain)
    check_domain(net, xlo, xhi)
    if not area_tol >= 0:
        raise ValueError(f"area_tol must be >= 0, got {area_tol}")
    T = program.tokens
    A = np.zeros((1, 3, T, program.input_dim))
    A[0, 0] = Vn[:, 0]
    A[0, 1] = Vn[:, 1]
    A[0, 2] = x0n
    hb = np.broadcast_to(np.abs(Vn).sum(axis=1) + np.abs(x0n), (T, program.input_dim)).copy()
    square = np.array([[[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0]]])
    st = _Store(square, np.array([4]), np.array([[0, 1, 2, 3, -1]], np.int64), None)
    eng = _Engine(program, st, 4.0 * area_tol, progress, max_regions, BATCH)
    pieces = eng.solve(program.ops, A, hb, float(eng.total))
    nv = np.concatenate([p.nv for p in pieces])
    offsets = np.zeros(nv.size + 1, np.int64)
    np.cumsum(nv, out=offsets[1:])
    verts = c + h * np.concatenate([p.verts for p in pieces])
    tags = np.concatenate([p.tags for p in pieces])
    areas = np.concatenate([p.areas for p in pieces]) * (h[0] * h[1])
    Mn = np.concatenate([p.maps for p in pieces]).transpose(0, 2, 1)  # (R, out, 3) in u'
    maps = np.empty_like(Mn)
    maps[..., 0] = Mn[..., 0] / h[0]
    maps[..., 1] = Mn[..., 1] / h[1]
    maps[..., 2] = Mn[..., 2] - Mn[..., 0] * c[0] / h[0] - Mn[..., 1] * c[1] / h[1]
    blocks = [
        (kind, w, np.concatenate([p.blocks[i][2] for p in pieces])) for i, (kind, w, _) in enumerate(pieces[0].blocks)
    ]
    return Partition(domain, verts, offsets, maps, areas, blocks, edge_tags=tags)
