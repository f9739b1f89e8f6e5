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

Exactness (docs/design.md §3): no tolerance decides whether a region exists. Every map column carries a
rigorous bound on the distance of its float coefficients from the exact ones (``_exact``), every vertex a
radius that holds the exact vertex (the intersection of the exact lines of its two edges), and every sign
test is decided by its float value only where that value is farther from zero than its error bound. The
rest are decided exactly in integer arithmetic from the float lines where those are exact (``eb == 0``:
dyadic constructions), and otherwise by recomputing the lines exactly from the network's weights and the
region's code (``_exact_lines``). A split is made whenever the exact signs at a polygon's vertices differ,
however small a part it leaves; a vertex exactly on a line creates no new vertex.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from .._domain import Box, Slice
from .._errors import (
    CertificateError,
    CurvedBoundaryError,
    DomainError,
    InexactError,
    MemoryCapError,
    NotPiecewiseError,
)
from .._memory import check_rss
from ..networks import check_domain, lower, walk_widths
from ..networks._ops import Affine, Attention, GroupMax, Program, ReLU, Residual
from ..results._partition import Partition
from ._exact import (
    EPS,
    INEXACT_G,
    TINY,
    ZERO_G,
    ExactMap,
    ExactReplay,
    affine_bounds,
    column_granularity,
    exact_affine,
    exact_frame_error,
    exact_scores,
    finite_or_raise,
    gamma,
    int_intersection,
    intersection,
    sum_bounds,
    vertex_sign,
)

#: relative tolerance of the tag aliasing of coincident argmax boundary lines (adjacency only, never counts)
ALIAS_TOL = 1e-9
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


def _eval_bound(V: np.ndarray, R: np.ndarray, w: np.ndarray, e: np.ndarray):
    """Values of lines ``w (N, 3)`` (coefficient error ``e (N,)``) at vertices ``V (N, M, 2)`` (exact vertex
    within ``R (N, M)``) and a bound ``(N, M)`` on the distance of each value from the exact one: rounding
    of the three-term sum, the coefficients' error and the vertex's displacement."""
    s = _eval(V, w)
    aw = np.abs(w)
    ax, ay = np.abs(V[..., 0]), np.abs(V[..., 1])
    d = gamma(3) * (ax * aw[:, 0, None] + ay * aw[:, 1, None] + aw[:, 2, None])
    d += e[:, None] * (1.0 + ax + ay + 2.0 * R)
    d += (aw[:, 0, None] + aw[:, 1, None]) * R
    # an exactly zero bound (exact line and vertex, and an exact sum) stays zero: it proves s == 0
    return s, np.where(d > 0, d * (1.0 + 16 * EPS) + TINY, 0.0)


def _float_signs(s: np.ndarray, d: np.ndarray) -> np.ndarray:
    """+1 / -1 where the value is farther than its bound from zero, 0 where it is exactly zero (``d == 0``),
    and 2 where the float value cannot decide."""
    sg = np.where(s > d, 1, np.where(s < -d, -1, 2)).astype(np.int8)
    sg[(d == 0) & (s == 0)] = 0
    return sg


def _areas(V: np.ndarray) -> np.ndarray:
    """Signed (counter-clockwise positive) areas of padded polygons ``(N, M, 2)`` -> ``(N,)``.

    Coordinates are taken relative to the first vertex, so tiny polygons keep their relative accuracy."""
    x = V[..., 0] - V[:, :1, 0]
    y = V[..., 1] - V[:, :1, 1]
    return 0.5 * np.sum(x[:, :-1] * y[:, 1:] - x[:, 1:] * y[:, :-1], axis=1)


def _discs(V: np.ndarray, nv: np.ndarray, R: np.ndarray):
    """Vertex mean ``(N, 2)`` (an interior point) and the radius ``(N,)`` of the disc around it that holds
    the exact polygon (each exact vertex lies within ``R`` of its float one)."""
    M = V.shape[1]
    ctr = (V.sum(axis=1) - (M - nv)[:, None] * V[:, 0]) / nv[:, None]
    rad = np.max(np.sqrt(np.sum((V - ctr[:, None]) ** 2, axis=-1)) + R, axis=1) * (1 + 1e-12)
    return ctr, rad


def _cut(V, nv, s, sg, tag, newtag, d, R, sides=(1, -1)):
    """The parts ``side * s >= 0`` of padded polygons, for each side in ``sides``.

    ``V (N, M, 2)``, counts ``nv``, vertex values ``s``, exact signs ``sg``, value bounds ``d`` and vertex
    radii ``R`` ``(N, M)``, edge tags ``(N, M)`` (tag ``j`` is the edge from vertex ``j`` to ``j+1``), ``newtag
    (N,)`` for the cut. Each part keeps its vertices on that side (in order) and gains the crossing points of
    the edges whose ends have strictly opposite signs; an edge keeps its tag, the new edge along the cut gets
    ``newtag``. A crossing point is interpolated from the positive end towards the negative one, so two
    polygons sharing an edge compute bitwise the same point; its radius bounds the distance to the exact
    crossing (the error of both end values, the ends' radii and rounding). Where an end's float value does
    not have its exact sign the interpolation is meaningless: such points get radius inf and are listed in
    ``bad`` (indices into the crossing list) with their two lines' tags, for the caller to place exactly.
    Returns ``(parts, bad_info)``: a list of ``(V (N, Mo, 2), counts (N,), tags (N, Mo), radii (N, Mo),
    crossing slots (N, Mo) -1 or crossing index)`` and ``(edge tags, cut tags, rows)`` of the crossings.
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
    df, Rf = d.reshape(-1), R.reshape(-1)
    pos_first = gf[fa] > 0
    pf = pos_first[:, None]
    Pa, Pb = Vf[fa], Vf[fa + 1]
    sa, sb = sf[fa], sf[fa + 1]
    Pp, Pm = np.where(pf, Pa, Pb), np.where(pf, Pb, Pa)
    sp, sm = np.where(pos_first, sa, sb), np.where(pos_first, sb, sa)
    dp, dm = np.where(pos_first, df[fa], df[fa + 1]), np.where(pos_first, df[fa + 1], df[fa])
    rp, rm = np.where(pos_first, Rf[fa], Rf[fa + 1]), np.where(pos_first, Rf[fa + 1], Rf[fa])
    a, b = sp, -sm
    good = (a > dp) & (b > dm)
    with np.errstate(all="ignore"):  # where good is False these are meaningless, and replaced
        X = Pp + (a / (a + b))[:, None] * (Pm - Pp)
        # (a dm + b dp) / ((a + b) (a + b - dp - dm)), as ratios: no underflow or overflow at any scale
        S = a + b
        rest = S - dp - dm
        dt = (a / S) * (dm / rest) + (b / S) * (dp / rest) + 4 * EPS
        L = np.sqrt(np.sum((Pm - Pp) ** 2, axis=1))
        rX = np.maximum(rp, rm) + dt * (L + rp + rm) + 8 * EPS * (np.abs(Pp).sum(axis=1) + np.abs(Pm).sum(axis=1))
        rX = np.where(good, rX * (1 + 1e-12) + TINY, np.inf)
    X[~good] = 0.0
    bad = np.flatnonzero(~good)
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
        Ro = np.zeros(N * Mo)
        Co = np.full(N * Mo, -1, np.int64)
        fv = np.flatnonzero(ev)
        vi = fv // E
        fm = fv + vi
        dest = vi * Mo + off[fv]
        Vo[dest] = Vf[fm]
        Ro[dest] = Rf[fm]
        # a vertex on the cut whose next vertex is on the other side starts the new edge
        starts_cut = (gf[fm] == 0) & (gf[fm + 1] * sd < 0)
        To[dest] = np.where(starts_cut, newtag[vi], tf[fm])
        dest = ri * Mo + off[fc] + ev.reshape(-1)[fc]
        Vo[dest] = X
        Ro[dest] = rX
        Co[dest] = np.arange(fc.size)
        To[dest] = np.where(g_next * sd < 0, newtag[ri], tf[fa])
        Vo = Vo.reshape(N, Mo, 2)
        Ro = Ro.reshape(N, Mo)
        pr, pc = np.nonzero(np.arange(Mo) >= n_out[:, None])
        Vo[pr, pc] = Vo[pr, 0]  # padding repeats the first vertex
        Ro[pr, pc] = Ro[pr, 0]
        out.append((Vo, n_out, To.reshape(N, Mo), Ro, Co.reshape(N, Mo)))
    return out, (tf[fa][bad], newtag[ri][bad], bad)


# ----------------------------------------------------------------------------------------------------
# growable region store


class _Store:
    """Padded polygons ``V (cap, M, 2)`` (slots from ``nv`` on repeat the first vertex; the last slot is
    always padding), counts ``nv``, edge tags, enclosing discs, the op-start parent ``anc`` and per-op
    columns (``extra``), all growing together."""

    def __init__(self, V, nv, tag, cap_check):
        self.V, self.nv, self.tag = V, nv, tag
        self.R = np.zeros(V.shape[:2])  # radius around each float vertex that holds the exact one
        self.cen, self.rad = _discs(V, nv, self.R)
        self.n = V.shape[0]
        self.anc = np.arange(self.V.shape[0])
        self.extra: dict[str, np.ndarray] = {}
        self.cap_check = cap_check

    def subset(self, lo: int, hi: int) -> _Store:
        """A new store holding copies of rows ``lo:hi``."""
        st = _Store.__new__(_Store)
        st.V, st.nv, st.tag = self.V[lo:hi].copy(), self.nv[lo:hi].copy(), self.tag[lo:hi].copy()
        st.R = self.R[lo:hi].copy()
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
        for name in ("V", "nv", "tag", "R", "cen", "rad", "anc"):
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
        R = np.empty((cap, M))
        R[:, : self.M] = self.R
        R[:, self.M :] = self.R[:, :1]
        self.V, self.tag, self.R = V, tag, R

    def _write(self, rows, Vc, nvc, tagc, Rc):
        Mc = Vc.shape[1]
        self._widen(Mc)
        self.V[rows, :Mc] = Vc
        self.tag[rows, :Mc] = tagc
        self.R[rows, :Mc] = Rc
        if Mc < self.M:
            self.V[rows, Mc:] = Vc[:, :1]
            self.tag[rows, Mc:] = -1
            self.R[rows, Mc:] = Rc[:, :1]
        self.nv[rows] = nvc
        self.cen[rows], self.rad[rows] = _discs(Vc, nvc, Rc)

    def set_rows(self, rows, Vc, nvc, tagc, Rc):
        """Replace the polygons in ``rows`` (their parent and per-op columns stay)."""
        self._write(rows, Vc, nvc, tagc, Rc)

    def append(self, Vc, nvc, tagc, Rc, src_rows) -> np.ndarray:
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
            self.R = _grow(self.R, new)
            self.cen = _grow(self.cen, new)
            self.rad = _grow(self.rad, new)
            self.anc = _grow(self.anc, new)
            for k, v in self.extra.items():
                self.extra[k] = _grow(v, new)
        rows = slice(self.n, need)
        self._write(rows, Vc, nvc, tagc, Rc)
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


@dataclasses.dataclass(frozen=True)
class _Bounds:
    """Per map column ``(T, d)``, over every region: ``hb`` bounds the 1-norm of the three coefficients (so
    ``|h|`` on ``[-1, 1]^2``), ``eb`` their distance from the exact coefficients, ``ge`` their granularity
    while exact (see ``_exact``). ``same_u``: the ``u`` coefficients of every token are identical, as exact
    values (the embedding gives every token the same ``E x``; token-wise ops keep it)."""

    hb: np.ndarray
    eb: np.ndarray
    ge: np.ndarray
    same_u: bool = False
    #: bound on ``|a1| + |a2|`` alone (the ``u`` coefficients): 0 proves a column constant on the domain
    hu: np.ndarray | None = None

    def u_bound(self) -> np.ndarray:
        return self.hb if self.hu is None else self.hu

    def check_finite(self):
        finite_or_raise(self.hb, self.eb)


def _affine(A, op: Affine, bd: _Bounds):
    """``H @ W.T + b`` on every region's map; returns the maps ``(R, 3, T, d_out)`` and their bounds."""
    W, b = op.W, op.b
    if isinstance(A, _Tokens):
        A = A.full()
    bb = b if b.ndim == 2 else b[None, :]
    hb_out, eb_out, ge_out = affine_bounds(bd.hb, bd.eb, bd.ge, W, b)
    T, d_out = bd.hb.shape[0], W.shape[0]
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
    bd_out = _Bounds(hb_out, eb_out, ge_out, bd.same_u, bd.u_bound() @ np.abs(W).T)
    bd_out.check_finite()
    return out, bd_out


# ----------------------------------------------------------------------------------------------------
# the engine


@dataclasses.dataclass
class _Piece:
    """A finished batch of regions, flattened: normalised vertices, counts, edge tags, areas, output maps
    ``(R, 3, out)`` in normalised coordinates, and code blocks."""

    verts: np.ndarray
    nv: np.ndarray
    tags: np.ndarray
    rad: np.ndarray
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
    set (maps are ``3 T d`` floats per region) stays bounded while finished regions are kept flat.

    It keeps a table of the lines its cuts were made along (tag -> float coefficients and their error), so
    that a sign its float test cannot decide is decided exactly at the vertex where two of them meet."""

    def __init__(self, program: Program, st: _Store, progress, max_regions, batch: int):
        self.program = program
        self.total = len(walk_widths(program))
        self.st = st
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
        # the lines of the domain's sides (u2 = -1, u1 = 1, u2 = 1, u1 = -1), exact
        sides = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, -1.0], [0.0, 1.0, -1.0], [1.0, 0.0, 1.0]])
        self._lines: list = [(np.arange(4), sides, np.zeros(4))]
        self._table = None
        self.n_predicates = 0  # vertex sign tests
        self.n_exact = 0  # of which decided in exact arithmetic
        self.n_assumed = 0  # attention identities taken from equal floats (not proven)
        # per op that cuts: the tags it allocated, its leaf position and its parents' codes, so that the exact
        # line of any tag can be recomputed from the weights (see _exact_line)
        self.records: list[dict] = []
        self._rec_starts: list[int] = []
        self.pos = 0  # leaf position of the op being run
        self.M0 = None  # the exact input map (an ExactMap), set by partition_plane
        self._exact_cache: dict = {}
        self._replay = None
        self._after_relu = None

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

    # -- the line table and exact decisions ---------------------------------------------------------

    def register(self, tags, w, e):
        """Record that the cuts with ``tags`` were made along lines ``w (n, 3)`` with coefficient error ``e``."""
        if len(tags):
            self._lines.append((np.asarray(tags, np.int64), np.asarray(w, np.float64), np.asarray(e, np.float64)))
            self._table = None

    def _lookup(self, tags):
        """Float coefficients ``(n, 3)`` and error ``(n,)`` of the lines with ``tags``. A tag recorded with two
        different lines (aliased boundaries that are not bitwise the same line) gets error inf."""
        if self._table is None:
            t = np.concatenate([a for a, _, _ in self._lines])
            w = np.concatenate([b for _, b, _ in self._lines])
            e = np.concatenate([c for _, _, c in self._lines])
            order = np.argsort(t, kind="stable")
            t, w, e = t[order], w[order], e[order]
            first = np.r_[True, t[1:] != t[:-1]]
            idx = np.cumsum(first) - 1
            ut = t[first]
            uw = w[first]
            ue = np.zeros(ut.size)
            np.maximum.at(ue, idx, e)
            differs = np.any(w != uw[idx], axis=1)
            ue[idx[differs]] = np.inf
            self._lines = [(ut, uw, ue)]
            self._table = (ut, uw, ue)
        ut, uw, ue = self._table
        k = np.searchsorted(ut, tags)
        k = np.minimum(k, ut.size - 1)
        if not np.all(ut[k] == tags):
            raise RuntimeError("internal error: an edge's line is missing from the line table")
        return uw[k], ue[k]

    def _refuse(self, what: str):
        raise InexactError(
            f"the plane engine could not decide {what} exactly: the float64 error bounds of this network's maps "
            "are too wide there and its lines are not exact binary fractions; use --method line or --method sample "
            "(lower bound)"
        )

    def decide(self, sg, tags, nv, w, e, wtag):
        """Replace the undecided signs (2) in ``sg (n, M)`` by exact ones. ``tags (n, M)`` are the polygons'
        edge tags, ``nv (n,)`` their vertex counts, ``w (n, 3)``, ``e (n,)`` and ``wtag (n,)`` the line being
        tested (its float coefficients, their error, its tag)."""
        self.n_predicates += int(np.sum(np.arange(sg.shape[1]) < nv[:, None]))
        check_rss()
        unk = sg == 2
        if not unk.any():
            return sg
        M = sg.shape[1]
        valid = np.arange(M) < nv[:, None]
        rr, jj = np.nonzero(unk & valid)
        prev = np.where(jj == 0, nv[rr] - 1, jj - 1)
        t1, t2 = tags[rr, prev], tags[rr, jj]
        l1, e1 = self._lookup(t1)
        l2, e2 = self._lookup(t2)
        self.n_exact += rr.size
        lo_t, hi_t = np.minimum(t1, t2), np.maximum(t1, t2)
        out = np.empty(rr.size, np.int8)
        # where the three float lines are exact, the float lines themselves decide (one test per distinct
        # vertex and line: a vertex is shared by the polygons around it)
        cheap = (e1 == 0) & (e2 == 0) & (e[rr] == 0)
        idx = np.flatnonzero(cheap)
        if idx.size:
            keys = np.concatenate([lo_t[idx, None], hi_t[idx, None], w[rr[idx]].view(np.int64)], axis=1)
            _, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
            vals = np.array([vertex_sign(l1[idx[f]], l2[idx[f]], w[rr[idx[f]]]) for f in first], np.int8)
            out[idx] = vals[inv.ravel()]
        idx = np.flatnonzero(~cheap)
        if idx.size:
            # lines recomputed exactly from the weights; a tag names a line, not a side, so each row's sign is
            # turned to its own float line's orientation
            t3 = wtag[rr[idx]]
            keys = np.stack([lo_t[idx], hi_t[idx], t3], axis=1)
            uk, inv = np.unique(keys, axis=0, return_inverse=True)
            vals = self._exact_vertex_signs(uk[:, 0], uk[:, 1], uk[:, 2])
            u3, i3 = np.unique(t3, return_inverse=True)
            ref = np.array([self._exact_direction(c) for c in u3.tolist()])[i3.ravel()]
            orient = np.sign(np.sum(ref * w[rr[idx]], axis=1)).astype(np.int8)
            v = vals[inv.ravel()]
            if np.any((orient == 0) & (v != 0)):
                raise RuntimeError("internal error: a tested line has no orientation against its exact line")
            out[idx] = v * orient
        sg[rr, jj] = out
        # padding slots repeat vertex 0
        pr, pc = np.nonzero(unk & ~valid)
        sg[pr, pc] = sg[pr, 0]
        return sg

    def _exact_point(self, ta, tb):
        """Float points ``(n, 2)`` nearest the exact intersections of the lines tagged ``ta`` and ``tb``, and the
        radius ``(n,)`` that holds each exact point."""
        l1, e1 = self._lookup(ta)
        l2, e2 = self._lookup(tb)
        P = np.empty((ta.size, 2))
        for n in range(ta.size):
            if e1[n] == 0 and e2[n] == 0:
                P[n] = intersection(l1[n], l2[n])
            else:
                P[n] = int_intersection(self._exact_line(int(ta[n])), self._exact_line(int(tb[n])))
        return P, np.sqrt(np.sum(P**2, axis=1)) * (2 * EPS) + TINY

    def record(self, kind: str, start: int, count: int, **info):
        """Note that tags ``start .. start + count - 1`` belong to an op of ``kind`` at the current leaf, whose
        parents have the codes in ``self.blocks``."""
        self.records.append(
            dict(kind=kind, start=start, end=start + count, leaf=self.pos, blocks=list(self.blocks), **info)
        )
        self._rec_starts.append(start)

    def _exact_maps(self, rec: dict, p: int, before: int = 0):
        """Exact maps of parent ``p`` of ``rec`` at the start of the leaf ``before`` leaves before its op."""
        key = (id(rec), p, before)
        hit = self._exact_cache.get(key)
        if hit is None:
            check_rss()  # exact maps and lines are cached: measured where the cache grows
            rows = []
            for kind, w, arr in rec["blocks"]:
                row = arr[p]
                rows.append(np.unpackbits(row, count=w) if kind == "bits" else row)
            hit = self.replay().maps_at(rows, rec["leaf"] - before)
            self._exact_cache[key] = hit
        return hit

    def replay(self) -> ExactReplay:
        if self._replay is None:
            self._replay = ExactReplay(self.program, self.M0)
        return self._replay

    def _exact_line(self, tag: int) -> tuple[int, int, int]:
        """The exact line (integers, up to a positive factor) that the cuts with ``tag`` were made along,
        recomputed from the network's weights and the code of the parent that was cut."""
        if tag < _FIRST_TAG:
            return ((0, 1, 1), (1, 0, -1), (0, 1, -1), (1, 0, 1))[tag]
        key = ("line", tag)
        if key in self._exact_cache:
            return self._exact_cache[key]
        i = bisect.bisect_right(self._rec_starts, tag) - 1
        rec = self.records[i]
        if not rec["start"] <= tag < rec["end"]:
            raise RuntimeError("internal error: a tag belongs to no op")
        off = tag - rec["start"]
        if rec["kind"] == "relu":
            p, j = divmod(off, rec["D"])
            prev = self.replay().affine_before(rec["leaf"])
            if prev is None:
                M = self._exact_maps(rec, p)
                line = tuple(int(v) for v in M.N.reshape(3, -1)[:, j])
            else:
                # the ReLU reads an affine op: only unit j's column of it is needed, not the whole product
                M = self._exact_maps(rec, p, before=1)
                t, jj = divmod(j, prev.W.shape[0])
                col = _token_column(M, prev, t, jj)
                line = tuple(int(v) for v in col.N[:, 0, 0])
        else:
            pair, p = divmod(off, rec["R0"])
            b = int((1 + np.sqrt(1 + 8 * pair)) // 2)
            while b * (b - 1) // 2 > pair:
                b -= 1
            while (b + 1) * b // 2 <= pair:
                b += 1
            a = pair - b * (b - 1) // 2
            prev = self.replay().affine_before(rec["leaf"]) if rec["kind"] == "groupmax" else None
            if prev is not None:
                # the group max reads an affine op: only pieces a and b of unit u are needed
                k, u = rec["k"], rec["u"]
                M = self._exact_maps(rec, p, before=1)
                d = prev.W.shape[0]
                cols = []
                for piece in (a, b):
                    t, jj = divmod(u * k + piece, d)
                    cols.append(_token_column(M, prev, t, jj))
                diff = cols[0] + ExactMap(-cols[1].N, cols[1].s)
                line = tuple(int(v) for v in diff.N[:, 0, 0])
            elif rec["kind"] == "groupmax":
                M = self._exact_maps(rec, p)
                k, u = rec["k"], rec["u"]
                N = M.N.reshape(3, -1, k)[:, u]
                line = tuple(int(x) - int(y) for x, y in zip(N[:, a], N[:, b], strict=True))
            else:  # attention: query u = h T + i, keys a and b
                M = self._exact_maps(rec, p)
                op, T, u = rec["op"], rec["T"], rec["u"]
                h, i = divmod(u, T)
                skey = ("scores", id(rec), p, h)
                hit = self._exact_cache.get(skey)
                if hit is None:
                    hit = exact_scores(M, op.Wq[h], op.Wk[h])
                    self._exact_cache[skey] = hit
                F, Q2, _ = hit
                if any(Q2[c, i, a] != Q2[c, i, b] for c in range(3)):
                    self._refuse("an attention boundary that is curved in exact arithmetic")
                line = tuple(int(F[c, i, a]) - int(F[c, i, b]) for c in range(3))
        self._exact_cache[key] = line
        return line

    def _exact_lines(self, tags: np.ndarray) -> np.ndarray:
        """Exact lines ``(n, 3)`` (an object array of ints) of ``tags``."""
        ut, inv = np.unique(tags, return_inverse=True)
        table = np.empty((ut.size, 3), dtype=object)
        for i, t in enumerate(ut.tolist()):
            table[i] = self._exact_line(t)
        return table[inv.ravel()]

    def _exact_vertex_signs(self, ta, tb, tc) -> np.ndarray:
        """Exact signs ``(n,)`` of the lines ``tc`` at the vertices where lines ``ta`` and ``tb`` meet
        (vectorised over Python ints: ``l_c . (l_a x l_b)`` times the sign of the cross product's last entry)."""
        L = self._exact_lines(np.concatenate([ta, tb, tc]))
        n = ta.size
        (a1, b1, c1), (a2, b2, c2), (a3, b3, c3) = (L[k * n : (k + 1) * n].T for k in range(3))
        Z = a1 * b2 - b1 * a2
        if np.any(Z == 0):
            raise ZeroDivisionError("internal error: a vertex between parallel lines")
        v = a3 * (b1 * c2 - c1 * b2) + b3 * (c1 * a2 - a1 * c2) + c3 * Z
        sv = (v > 0).astype(np.int8) - (v < 0).astype(np.int8)
        return np.where((Z > 0).astype(bool), sv, -sv).astype(np.int8)

    def _exact_direction(self, tag: int) -> np.ndarray:
        """The exact line of ``tag`` scaled to unit max-norm, as floats (only its orientation is used)."""
        key = ("dir", tag)
        hit = self._exact_cache.get(key)
        if hit is None:
            line = self._exact_line(tag)
            scale = max(abs(v) for v in line) or 1
            hit = np.array([float(Fraction(v, scale)) for v in line])
            self._exact_cache[key] = hit
        return hit

    def cut(self, V, nv, s, sg, tag, newtag, d, R, sides=(1, -1)):
        """:func:`_cut`, with the crossings whose float interpolation is meaningless placed exactly."""
        parts, (ta, tb, bad) = _cut(V, nv, s, sg, tag, newtag, d, R, sides)
        if bad.size:
            P, rP = self._exact_point(ta, tb)
            for Vo, no, _t, Ro, Co in parts:
                hit = np.isin(Co, bad)
                k = np.searchsorted(bad, Co[hit])
                Vo[hit] = P[k]
                Ro[hit] = rP[k]
                pr = np.flatnonzero(hit[:, 0])
                if pr.size:  # padding repeats the first vertex
                    pad = np.arange(Vo.shape[1]) >= no[pr, None]
                    rows, cols = np.nonzero(pad)
                    Vo[pr[rows], cols] = Vo[pr[rows], 0]
                    Ro[pr[rows], cols] = Ro[pr[rows], 0]
        return [(Vo, no, To, Ro) for Vo, no, To, Ro, _c in parts]

    # -- driver --------------------------------------------------------------------------------------

    def solve(self, ops, A, bd, span: float, start: int = 0) -> list[_Piece]:
        """Apply the top-level ``ops`` (whose first leaf is leaf ``start`` of the program) to the current
        store, advancing progress by ``span`` leaf ops."""
        leaves = [_leaves(op) for op in ops]
        unit = span / max(1, sum(leaves))
        for k, op in enumerate(ops):
            if self.st.n > self.batch and _splits(ops[k:]):
                return self._batched(ops[k:], A, bd, unit * sum(leaves[k:]), start + sum(leaves[:k]))
            self._step = unit
            self.pos = start + sum(leaves[:k])
            A, bd, _ = self.run([op], A, bd)
        return [self._finish(A)]

    def _batched(self, ops, A, bd, span: float, start: int) -> list[_Piece]:
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
            pieces += self.solve(ops, _take_rows(A, lo, hi), bd, span / nb, start)
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
            st.R[:R][valid],
            _areas(st.V[:R]),
            np.ascontiguousarray(A[:, :, self.program.out_token, :]),
            [(kind, w, a.copy()) for kind, w, a in self.blocks],
        )
        self.finished += R
        self.st = None
        return piece

    def run(self, ops, A, bd):
        """Apply ``ops``; returns maps, bounds and the parent of each region at entry."""
        chain = np.arange(self.st.n)
        for op in ops:
            if isinstance(op, Residual):
                A_in, bd_in = _materialise(A), bd
                A_b, bd_b, par = self.run(op.body, A_in, bd)
                same = par.size == A_in.shape[0] and np.array_equal(par, np.arange(par.size))
                if isinstance(A_b, _Tokens):
                    A = A_in.copy() if same else A_in[par]
                    A_b.add_to(A)  # x + y == y + x exactly
                elif same:
                    A = _materialise(A_b) + A_in  # no region split: no gather
                else:
                    A = A_in[par]  # a fresh array: add in place (x + y == y + x exactly)
                    A += _materialise(A_b)
                hb, eb, ge = sum_bounds(bd_in.hb, bd_in.eb, bd_in.ge, bd_b.hb, bd_b.eb, bd_b.ge)
                bd = _Bounds(hb, eb, ge, bd_in.same_u and bd_b.same_u, bd_in.u_bound() + bd_b.u_bound())
                bd.check_finite()
            else:
                A, bd, new, par = self.leaf(op, A, bd)
                self.pos += 1
                if par is not None:
                    self.blocks = [(kind, w, arr[par]) for kind, w, arr in self.blocks]
                self.blocks += new
                self._tick()
            if par is not None:
                chain = chain[par]
        return A, bd, chain

    def leaf(self, op, A, bd):
        if isinstance(op, Affine):
            # an affine op that reads a ReLU's output directly: which of its outputs are exactly zero on a region
            # follows from the region's bits (see groupmax)
            self._after_relu = op if isinstance(A, _Masked) else None
            A, bd = _affine(A, op, bd)
            return A, bd, [], None
        self.st.reset_parents()
        A = _materialise(A)
        if isinstance(op, ReLU):
            A_new, block = self.relu(A, bd)
            bd = dataclasses.replace(bd, same_u=False)
        elif isinstance(op, GroupMax):
            A_new, block, bd = self.groupmax(A, bd, op.k)
        elif isinstance(op, Attention):
            A_new, block, bd = self.attention(A, bd, op)
        else:
            raise TypeError(f"unknown op {type(op).__name__}")
        self._after_relu = None
        par = self.st.anc[: self.st.n].copy()
        return A_new, bd, [block], par

    # -- ReLU ----------------------------------------------------------------------------------------

    def relu(self, A: np.ndarray, bd: _Bounds):
        st = self.st
        R0, _, T, d = A.shape
        D = T * d
        Af = A.reshape(R0, 3, D)
        err = bd.eb.reshape(D)
        pos, neg = self._sides(Af, err, bd.hb.reshape(D))
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
        self.record("relu", tag0, R0 * D, D=D)
        t = since = 0
        while True:
            anc, own = st.anc[: st.n], st.extra["own"][: st.n]
            cand = np.flatnonzero(cnt[own] > t)
            if cand.size == 0:
                break
            par = anc[cand]
            j = jj[first[own[cand]] + t]
            made = self._relu_round(cand, Af[par, :, j], err[j], j, tag0 + par * D + j)
            t += 1
            since += 1
            if since >= 4 and cand.size > 8 * max(made, 1):
                cnt, first, jj = self._reown(Af, err, cnt, first, jj, t)
                t = since = 0
        st.sort_by_parent()
        bits = st.extra["bits"][: st.n]
        return _Masked(A, st.anc[: st.n].copy(), bits, pos & ~neg, cross), ("bits", D, bits)

    def _classify(self, rows, w, e):
        """For polygons ``rows`` and lines ``w (n, 3)`` (error ``e (n,)``): may the line be positive / negative
        somewhere on the exact polygon? A disc test settles most pairs; the rest are evaluated at the vertices,
        an undecided vertex counting as both."""
        st = self.st
        sc, reach = _disc_reach(st.cen[rows], st.rad[rows], w, e)
        pos, neg = sc > -reach, sc < reach
        amb = np.flatnonzero(pos & neg)
        if amb.size:
            ra = rows[amb]
            s, dv = _eval_bound(st.V[ra], st.R[ra], w[amb], e[amb])
            sg = _float_signs(s, dv)
            pos[amb] = np.any((sg == 1) | (sg == 2), axis=1)
            neg[amb] = np.any((sg == -1) | (sg == 2), axis=1)
        return pos, neg

    def _sides(self, Af: np.ndarray, err: np.ndarray, hb: np.ndarray):
        """Per parent and unit: may the unit take values > 0 (pos) and < 0 (neg) on the exact polygon?

        A disc test (value at an interior point against the gradient times the radius, with every error
        bound added) settles most pairs; the vertices are evaluated only for the pairs whose line may pass
        through the polygon, an undecided vertex counting as both signs (the rounds then decide it exactly).
        """
        st = self.st
        R0, _, D = Af.shape
        pos = np.empty((R0, D), bool)
        neg = np.empty((R0, D), bool)
        amb_p, amb_j = [], []
        # |c| <= 1 for every centre (they lie in the square), so the rounding of the value at the centre and
        # the error of its coefficients are bounded per unit
        k0 = (gamma(3) * hb + 3 * err) * (1 + 1e-9) + TINY  # hb bounds |a1| + |a2| + |a0|
        step = max(1, _CHUNK // max(1, 4 * D))
        for lo in range(0, R0, step):
            sl = slice(lo, min(R0, lo + step))
            ctr, rad = st.cen[sl], st.rad[sl]
            a = Af[sl]
            sc = a[:, 0] * ctr[:, :1] + a[:, 1] * ctr[:, 1:] + a[:, 2]
            reach = np.hypot(a[:, 0], a[:, 1])
            reach += 2 * err
            reach *= rad[:, None] * (1 + 16 * EPS)
            reach += k0
            p = sc > reach
            n = sc < -reach
            pos[sl], neg[sl] = p, n
            p, j = np.nonzero(~(p | n))
            amb_p.append(p + lo)
            amb_j.append(j)
        p, j = np.concatenate(amb_p), np.concatenate(amb_j)
        step = max(1, _CHUNK // (8 * st.M))
        for lo in range(0, p.size, step):
            q, k = p[lo : lo + step], j[lo : lo + step]
            s, dv = _eval_bound(st.V[q], st.R[q], Af[q, :, k], err[k])
            sg = _float_signs(s, dv)
            pos[q, k] = np.any((sg == 1) | (sg == 2), axis=1)
            neg[q, k] = np.any((sg == -1) | (sg == 2), axis=1)
        return pos, neg

    def _relu_round(self, cand, w, e, j, newtag):
        """Split the regions ``cand`` by the lines ``w (n, 3)`` (unit ``j (n,)``, coefficient error ``e (n,)``)."""
        st = self.st
        # disc test first: only regions whose enclosing disc meets the line need their vertices
        sc, reach = _disc_reach(st.cen[cand], st.rad[cand], w, e)
        one = sc > reach
        near = np.flatnonzero(np.abs(sc) <= reach)
        rows_n = cand[near]
        # only as many slots as the widest of these polygons needs (the rest repeat the first vertex)
        Mloc = int(st.nv[rows_n].max(initial=2)) + 1
        V, Rv = st.V[rows_n, :Mloc], st.R[rows_n, :Mloc]
        tg_n = st.tag[rows_n, :Mloc]
        nv_n = st.nv[rows_n]
        wn, en = w[near], e[near]
        s, dv = _eval_bound(V, Rv, wn, en)
        sg = self.decide(_float_signs(s, dv), tg_n, nv_n, wn, en, newtag[near])
        haspos = np.any(sg > 0, axis=1)
        split = haspos & np.any(sg < 0, axis=1)
        one[near[haspos & ~split]] = True
        idx = np.flatnonzero(split)
        if idx.size:
            rows = rows_n[idx]
            nt = newtag[near[idx]]
            self.register(nt, wn[idx], en[idx])
            (Vp, np_, tp, Rp), (Vm, nm, tm, Rm) = self.cut(
                V[idx], nv_n[idx], s[idx], sg[idx], tg_n[idx], nt, dv[idx], Rv[idx]
            )
            one[near[idx]] = True
            st.set_rows(rows, Vp, np_, tp, Rp)
            st.append(Vm, nm, tm, Rm, rows)
        on = np.flatnonzero(one)
        jo = j[on]
        st.extra["bits"][cand[on], jo >> 3] |= (1 << (7 - (jo & 7))).astype(np.uint8)
        return int(idx.size)

    def _reown(self, Af, err, cnt, first, jj, t: int):
        """Make every region the owner of the units left (from position ``t``) in its owner's list that
        may cross it; set the bits of those it lies on the positive side of. Returns the new lists
        ``(cnt, first, jj)`` per region."""
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
            pos, neg = self._classify(rs, Af[anc[rs], :, js], err[js])
            keep[lo : lo + step] = pos & neg
            on = np.flatnonzero(pos & ~neg)
            # a region has several pairs here, maybe in one byte: accumulate unbuffered
            np.bitwise_or.at(st.extra["bits"], (rs[on], js[on] >> 3), (1 << (7 - (js[on] & 7))).astype(np.uint8))
        cnt = np.bincount(r[keep], minlength=n)
        st.extra["own"][:n] = np.arange(n)
        return cnt, np.cumsum(cnt) - cnt, j[keep]

    # -- argmax cells (maxout units, hardmax heads) ----------------------------------------------------

    def _argmax_start(self, F: np.ndarray, E: np.ndarray, active: np.ndarray) -> np.ndarray:
        """Winner per parent and unit where it is provably the argmax on the whole polygon, else -1.

        ``F (R0, U, 3, k)`` affine pieces, ``E (R0 or 1, U, k)`` their coefficient errors, ``active (R0, U, k)``.
        """
        st = self.st
        R0, U, _, k = F.shape
        win = np.full((R0, U), -1, np.int64)
        step = max(1, _CHUNK // max(1, 4 * st.M * U * k))
        for lo in range(0, R0, step):
            sl = slice(lo, min(R0, lo + step))
            V, Rv = st.V[sl], st.R[sl]
            El = E[sl] if E.shape[0] > 1 else E
            Fs, act = F[sl], active[sl]
            # (n, M, U, k) values at vertices and their bounds, and the values at an interior point
            vals = np.einsum("nmc,nuck->nmuk", np.concatenate([V, np.ones(V.shape[:2] + (1,))], -1), Fs)
            aF = np.abs(Fs)
            aV = np.abs(V)
            bnd = gamma(3) * np.einsum("nmc,nuck->nmuk", np.concatenate([aV, np.ones(V.shape[:2] + (1,))], -1), aF)
            bnd += El[:, None] * (1.0 + aV.sum(axis=2) + 2 * Rv)[:, :, None, None]
            bnd += (aF[:, None, :, 0] + aF[:, None, :, 1]) * Rv[:, :, None, None]
            ctr = vals.mean(axis=1)
            ctr = np.where(act, ctr, -np.inf)
            r = np.argmax(ctr, axis=-1)
            vr = np.take_along_axis(vals, r[:, None, :, None], -1)
            br = np.take_along_axis(bnd, r[:, None, :, None], -1)
            diff = vr - vals
            dd = (br + bnd + EPS * np.abs(diff)) * (1 + 16 * EPS) + TINY
            lower = np.arange(k) < r[..., None]
            ok = np.all(diff >= dd, axis=1) & (~lower | np.any(diff > dd, axis=1))
            ok |= ~act
            ok[np.arange(ok.shape[0])[:, None], np.arange(U)[None, :], r] = True
            win[sl] = np.where(np.all(ok, axis=-1), r, -1)
        return win

    @staticmethod
    def _beaten(cen, rad, F, E, act) -> np.ndarray:
        """``(n, k)``: piece ``r`` provably loses, on the whole disc ``(cen (n, 2), rad (n,))`` that holds a
        polygon, to the first allowed piece ``j`` it is clipped against in :meth:`_argmax_unit` (``F (n, 3, k)``,
        errors ``E`` and ``act (n, k)``). That clip is then the first one its cell meets and leaves no vertex
        on the positive side, so the cell dies there, untouched: dropping it before any geometry changes
        nothing, not even the width of the polygon store."""
        n, _, k = F.shape
        if k < 2 or n == 0:
            return np.zeros((n, k), bool)
        # clip order of piece r: j = r + 1, r + 2, ... (mod k); the first allowed one
        js = (np.arange(k)[:, None] + np.arange(1, k)) % k  # (k, k - 1)
        a = act[:, js]  # (n, k, k - 1)
        j = js[np.arange(k), np.argmax(a, axis=2)]  # (n, k)
        Fj = np.take_along_axis(F, np.broadcast_to(j[:, None, :], F.shape), axis=2)
        g = Fj - F  # f_j - f_r, (n, 3, k)
        eg = E + np.take_along_axis(E, j, axis=1) + 2 * EPS * np.abs(g).max(axis=1)
        sc, reach = _disc_reach(cen[:, None, :], rad[:, None], g.transpose(0, 2, 1), eg)
        return np.any(a, axis=2) & (sc > reach)

    def _argmax_unit(self, u: int, F_u, E_u, act_u, win_u, R0: int):
        """Split every region whose op-start parent has no proven winner for unit ``u`` into argmax cells.

        ``F_u (R0, 3, k)``, ``E_u (R0 or 1, k)``, ``act_u (R0, k)`` bool, ``win_u (R0,)``.
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
        self.record(self._argmax_kind, base, R0 * k * (k - 1) // 2, R0=R0, u=u, k=k, **self._argmax_info)
        El = np.broadcast_to(E_u, (R0, k)) if E_u.shape[0] == 1 else E_u
        keep = act_u[par] & ~self._beaten(st.cen[cand], st.rad[cand], F_u[par], El[par], act_u[par])
        owner = np.repeat(np.arange(Rc), k)
        r = np.tile(np.arange(k), Rc)
        keep = keep.reshape(-1)
        owner, r = owner[keep], r[keep]
        V = st.V[cand][owner]
        Rv = st.R[cand][owner]
        nv = st.nv[cand][owner]
        tg = st.tag[cand][owner]
        canon = _line_classes(F_u, np.unique(par), k)
        for m in range(1, k):
            j = (r + m) % k
            pj = par[owner]
            fr, fj = F_u[pj, :, r], F_u[pj, :, j]
            g = fr - fj
            # the rounding error of the subtraction, exactly (Knuth's TwoSum)
            bv = g - fr
            err = np.abs((fr - (g - bv)) + (-fj - bv))
            eg = El[pj, r] + El[pj, j] + err.max(axis=1)
            a, b = np.minimum(r, j), np.maximum(r, j)
            newtag = base + canon[pj, b * (b - 1) // 2 + a] * R0 + pj
            s, dv = _eval_bound(V, Rv, g, eg)
            sg = _float_signs(s, dv)
            inact = ~act_u[pj, j]
            sg[inact] = 1
            und = np.flatnonzero(np.any(sg == 2, axis=1))
            if und.size:
                sg[und] = self.decide(sg[und], tg[und], nv[und], g[und], eg[und], newtag[und])
            haspos = np.any(sg > 0, axis=1)
            hasneg = np.any(sg < 0, axis=1)
            allzero = ~haspos & ~hasneg
            alive = np.where(allzero, j > r, haspos)
            clip = alive & hasneg
            if clip.any():
                # registered as f_a - f_b for the pair a < b its tag names: the two clips of one pair agree
                self.register(newtag[clip], np.where((r < j)[clip, None], g[clip], -g[clip]), eg[clip])
                ((Vc, nc, tc, Rcut),) = self.cut(
                    V[clip], nv[clip], s[clip], sg[clip], tg[clip], newtag[clip], dv[clip], Rv[clip], sides=(1,)
                )
                Mn = max(V.shape[1], Vc.shape[1])
                V, tg, Rv = _pad(V, Mn), _pad_tags(tg, Mn), _pad_r(Rv, Mn)
                Vc, tc, Rcut = _pad(Vc, Mn), _pad_tags(tc, Mn), _pad_r(Rcut, Mn)
                V[clip], nv[clip], tg[clip], Rv[clip] = Vc, nc, tc, Rcut
            V, Rv, nv, tg, owner, r = V[alive], Rv[alive], nv[alive], tg[alive], owner[alive], r[alive]
        # first cell of each owner replaces it; the others are appended
        first = np.ones(owner.size, bool)
        first[1:] = owner[1:] != owner[:-1]
        if np.unique(owner).size != Rc:
            raise RuntimeError("internal error: an argmax split left a region without a cell")
        rows = cand[owner[first]]
        st.set_rows(rows, V[first], nv[first], tg[first], Rv[first])
        digits = st.extra["digits"]
        digits[rows, u] = r[first]
        if (~first).any():
            new = st.append(V[~first], nv[~first], tg[~first], Rv[~first], cand[owner[~first]])
            st.extra["digits"][new, u] = r[~first]

    # -- GroupMax ------------------------------------------------------------------------------------

    def _exact_zeros(self, R0: int, T: int, d: int):
        """``(R0, T d)`` bool or None: the entries of the current maps that are exactly zero on each parent,
        where they come from an affine op that read a ReLU's output directly: output ``j`` is exactly zero on a
        region when its bias is 0 and every input it reads with a nonzero weight is off there."""
        op = getattr(self, "_after_relu", None)
        if op is None or not self.blocks or self.blocks[-1][0] != "bits":
            return None
        _, width, bits = self.blocks[-1]
        if bits.shape[0] != R0 or width != T * op.W.shape[1]:
            return None
        on = np.unpackbits(bits, axis=1, count=width).reshape(R0, T, -1).astype(np.float32)
        reads = (op.W != 0).astype(np.float32)  # (d_out, d_in)
        hits = on @ reads.T  # (R0, T, d_out): how many inputs that are on each output reads
        bias = op.b if op.b.ndim == 2 else np.broadcast_to(op.b, (T, op.b.shape[0]))
        return ((hits == 0) & (bias == 0)[None]).reshape(R0, T * d)

    def groupmax(self, A: np.ndarray, bd: _Bounds, k: int):
        st = self.st
        R0, _, T, d = A.shape
        n = d // k
        U = T * n
        F = A.reshape(R0, 3, U, k).transpose(0, 2, 1, 3)  # (R0, U, 3, k)
        E = bd.eb.reshape(1, U, k)
        zero = self._exact_zeros(R0, T, d)
        if zero is not None:
            # pieces that are exactly zero on a parent (a max pool over units the ReLU before it switched off)
            # carry no error there, so their ties are decided by the floats, not by exact arithmetic
            E = np.where(zero.reshape(R0, U, k), 0.0, E)
        act = np.ones((R0, U, k), bool)
        self._argmax_kind, self._argmax_info = "groupmax", {}
        win = self._argmax_start(F, E, act)
        dt = np.uint8 if k <= 256 else np.int32
        st.add_extra("digits", np.maximum(win, 0).astype(dt))
        for u in np.flatnonzero(np.any(win < 0, axis=0)):
            self._argmax_unit(int(u), F[:, u], E[:, u], act[:, u], win[:, u], R0)
        st.sort_by_parent()
        digits = st.extra["digits"][: st.n]
        anc = st.anc[: st.n]
        Fg = A.reshape(R0, 3, T, n, k)[anc]
        out = np.take_along_axis(Fg, digits.astype(np.int64).reshape(-1, 1, T, n, 1), axis=-1)[..., 0]
        bd_out = _Bounds(
            bd.hb.reshape(T, n, k).max(axis=-1),
            bd.eb.reshape(T, n, k).max(axis=-1),
            bd.ge.reshape(T, n, k).min(axis=-1),
            hu=bd.u_bound().reshape(T, n, k).max(axis=-1),
        )
        return out, ("digits", U, digits.copy()), bd_out

    # -- hardmax attention ---------------------------------------------------------------------------

    def attention(self, A: np.ndarray, bd: _Bounds, op: Attention):
        st = self.st
        R0, _, T, d = A.shape
        H = op.heads
        allowed = np.tril(np.ones((T, T), bool)) if op.causal else np.ones((T, T), bool)
        U = H * T
        F = np.zeros((R0, U, 3, T))  # affine part of the scores of query (h, i) over keys
        quad = np.zeros((R0, U, 3, T))  # quadratic part: u1^2, u1 u2, u2^2
        eF = np.zeros((1, U, T))  # bound on the error of every coefficient of F and quad
        flat = np.zeros((1, U, T), bool)  # quad is exactly zero (query or key constant on the domain)
        mF = np.zeros((1, U, T))  # bound on the 1-norm of those coefficients
        VO = np.zeros((H, R0, 3, T, d))
        heads_bd = []
        for h in range(H):
            Wq, Wk, Wv, Wo = op.Wq[h], op.Wk[h], op.Wv[h], op.Wo[h]
            Q = A @ Wq  # (R0, 3, T, dk)
            K = A @ Wk
            VO[h] = (A @ Wv) @ Wo
            dk = Wq.shape[1]
            qa, qe, qg = affine_bounds(bd.hb, bd.eb, bd.ge, Wq.T, np.zeros(dk))
            ka, ke, kg = affine_bounds(bd.hb, bd.eb, bd.ge, Wk.T, np.zeros(dk))
            va, ve, vg = affine_bounds(bd.hb, bd.eb, bd.ge, Wv.T, np.zeros(Wv.shape[1]))
            oa, oe, og = affine_bounds(va, ve, vg, Wo.T, np.zeros(d))
            heads_bd.append(
                (oa.max(axis=0), oe.max(axis=0), og.min(axis=0), (bd.u_bound() @ np.abs(Wv) @ np.abs(Wo)).max(axis=0))
            )
            # scores whose query or key has no u coefficients at all have no quadratic part, exactly
            flat[0, h * T : (h + 1) * T] = (bd.u_bound() @ np.abs(Wq)) @ (bd.u_bound() @ np.abs(Wk)).T == 0
            C = np.einsum("raie,rbje->rijab", Q, K)  # (R0, T, T, 3, 3)
            sa = qa @ ka.T  # (T, T): bound on the 1-norm of the coefficients of S_ij
            err = 2 * (qe @ (ka + ke).T + qa @ ke.T) + gamma(2 * dk + 1) * sa + TINY
            both = (qg[:, None, :] < ZERO_G) & (kg[None, :, :] < ZERO_G)
            g = np.where(both, qg[:, None, :] + kg[None, :, :], ZERO_G).min(axis=2, initial=ZERO_G)
            exact = (qe.max(axis=1)[:, None] == 0) & (ke.max(axis=1)[None, :] == 0)
            exact &= (qg.min(axis=1)[:, None] > INEXACT_G) & (kg.min(axis=1)[None, :] > INEXACT_G)
            exact &= sa < np.ldexp(1.0, np.clip(53 + g, -1074, 1023))
            exact |= sa == 0
            u = slice(h * T, (h + 1) * T)
            F[:, u] = np.stack([C[..., 0, 2] + C[..., 2, 0], C[..., 1, 2] + C[..., 2, 1], C[..., 2, 2]], axis=2)
            quad[:, u] = np.stack([C[..., 0, 0], C[..., 0, 1] + C[..., 1, 0], C[..., 1, 1]], axis=2)
            eF[0, u] = np.where(exact, 0.0, err)
            mF[0, u] = sa
        finite_or_raise(eF, mF, what="the attention scores")
        act = np.broadcast_to(np.tile(allowed, (H, 1))[None], (R0, U, T)).copy()
        # Queries whose scores, error bounds and allowed keys are identical on every parent (e.g. a head
        # whose query does not depend on the token) make identical decisions: only the first of each
        # class is decided, the others copy its digit column (every later split copies rows whole).
        rep = _same_units(F, quad, eF, mF, act)
        first = np.flatnonzero(rep == np.arange(U))
        Fr, quad_r, act_r = F[:, first], quad[:, first], act[:, first]
        eF_r, mF_r = eF[:, first], mF[:, first]
        if not bd.same_u and not np.all(flat[:, first] | ~np.any(act_r, axis=0, keepdims=True)):
            self._check_curvature(Fr, quad_r, eF_r, mF_r, act_r, first, flat[:, first])
        act[:, first] = act_r
        act = act[:, rep]
        win = self._argmax_start(Fr, eF_r, act_r)
        self._argmax_kind, self._argmax_info = "attention", {"op": op, "T": T}
        dt = np.uint8 if T <= 256 else np.int32
        col = np.searchsorted(first, rep)  # column of each query's class in Fr, win
        st.add_extra("digits", np.maximum(win, 0).astype(dt)[:, col])
        for u in np.flatnonzero(np.any(win < 0, axis=0)[col]):
            k = int(col[u])
            if rep[u] == u:
                self._argmax_unit(int(u), Fr[:, k], eF_r[:, k], act_r[:, k], win[:, k], R0)
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
        hb_o, eb_o, ge_o, hu_o = np.zeros(d), np.zeros(d), np.full(d, ZERO_G), np.zeros(d)
        for h in range(H):
            done: dict[int, np.ndarray] = {}
            averaged = False
            for c, i in enumerate(firsts):
                u = h * T + i
                if rep[u] not in done:
                    # A region's head output depends only on its parent and its winner: build it once per
                    # (parent, winner) and look it up per region.
                    G = np.empty((T, R0, 3, d))
                    for j in range(T):
                        # keys whose score equals the winner's identically are tied: hardmax averages them
                        no_quad = bd.same_u or bool(np.all(flat[0, u]))
                        tied = act[:, u] & self._identical_scores(F[:, u], quad[:, u], j, eF[0, u], no_quad)
                        averaged |= bool(np.any(tied.sum(axis=1) > 1))
                        with np.errstate(invalid="ignore", divide="ignore"):  # j not allowed: never a winner
                            wts = tied / tied.sum(axis=1, keepdims=True)
                        G[j] = np.einsum("rj,rcjd->rcd", wts, VO[h])
                    done[rep[u]] = G.reshape(T * R0, 3, d)
                parts[c] += np.take(done[rep[u]], digits[:, u] * R0 + anc, axis=0)
            oa, oe, og, ou = heads_bd[h]
            if averaged:  # a mean of tied value rows: rounding, and no granularity to speak of
                oe = oe + gamma(T + 2) * oa + TINY
                og = np.full(d, INEXACT_G)
            hb_o, eb_o, ge_o = sum_bounds(hb_o, eb_o, ge_o, oa, oe, og)
            hu_o = hu_o + ou
        bd_out = _Bounds(
            *(np.broadcast_to(x, (T, d)).copy() for x in (hb_o, eb_o, ge_o)), hu=np.broadcast_to(hu_o, (T, d)).copy()
        )
        bd_out.check_finite()
        return _Tokens(parts, cls), ("digits", U, st.extra["digits"][: st.n].copy()), bd_out

    def _identical_scores(self, Fu, qu, j: int, e, same_u: bool) -> np.ndarray:
        """``(R0, T)``: is key ``i``'s score polynomial identical to key ``j``'s (``Fu, qu (R0, 3, T)``, errors
        ``e (T,)``)? Decided by the bounds where they can; equal floats whose bounds are not zero are taken
        as equal and counted in ``n_assumed``; unequal floats within their bounds are refused."""
        dF = np.abs(Fu - Fu[:, :, j, None])
        bound = (e + e[j]) * (1 + 16 * EPS) + TINY + EPS * dF
        differ = np.any(dF > bound, axis=1)
        same_f = np.all(dF == 0, axis=1)
        if not same_u:
            dQ = np.abs(qu - qu[:, :, j, None])
            differ |= np.any(dQ > (e + e[j]) * (1 + 16 * EPS) + TINY + EPS * dQ, axis=1)
            same_f &= np.all(dQ == 0, axis=1)
        proven = same_f & (e == 0) & (e[j] == 0)
        unsure = ~differ & ~proven
        if np.any(unsure & ~same_f):
            self._refuse("whether two attention keys tie")
        self.n_assumed += int(np.sum(unsure & same_f & (np.arange(Fu.shape[2]) != j)))
        return ~differ

    def _check_curvature(self, F, quad, eF, mF, act, units, flat):
        """Where the competing keys' quadratic parts differ, drop keys provably beaten on the whole
        polygon; if curved rivals remain, the boundary is a quadric: refuse. ``units[u]`` is the query
        index (h T + i) of column ``u``."""
        st = self.st
        R0, U, _, T = F.shape
        ref = np.argmax(act, axis=-1)  # first allowed key
        qref = np.take_along_axis(quad, ref[:, :, None, None], -1)
        eref = np.take_along_axis(np.broadcast_to(eF, act.shape), ref[:, :, None], -1)
        dq = np.abs(quad - qref)
        bound = (eF[:, :, None, :] + eref[:, :, :, None]) * (1 + 16 * EPS) + TINY + EPS * dq
        certain = np.any(dq > bound, axis=2)
        equal_f = np.all(dq == 0, axis=2)
        flat_ref = np.take_along_axis(np.broadcast_to(flat, act.shape), ref[:, :, None], -1)
        proven_equal = (equal_f & (eF == 0) & (eref == 0)) | (flat & flat_ref)
        unsure = act & ~certain & ~proven_equal
        if np.any(unsure & ~equal_f):
            self._refuse("whether an attention boundary is straight")
        self.n_assumed += int(np.sum(unsure))
        curved = np.any(act & certain, axis=-1)  # (R0, U)
        if not curved.any():
            return
        rr, uu = np.nonzero(curved)
        V, Rv = st.V[rr], st.R[rr]
        rmax = Rv.max(axis=1)
        lo, hi = V.min(axis=1) - rmax[:, None], V.max(axis=1) + rmax[:, None]  # boxes holding the exact polygons
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
        # lower bound of S_best - S_j over the polygon: the affine part at the vertices (moved by at most the
        # gradient times the vertex radius) plus an interval bound of the quadric, less every error bound
        dF = np.take_along_axis(F[rr, uu], best[:, None, None], -1) - F[rr, uu]  # (n, 3, T)
        dlin = np.take_along_axis(lin, best[:, None, None], -1) - lin
        dlin_low = dlin.min(axis=1) - (np.abs(dF[:, 0]) + np.abs(dF[:, 1])) * rmax[:, None]
        dq_ = np.take_along_axis(q, best[:, None, None], -1) - q  # (n, 3, T)
        terms = _interval_products(lo, hi)  # (n, 3, 2): ranges of u1^2, u1 u2, u2^2
        qlow = np.sum(np.minimum(dq_ * terms[:, :, :1], dq_ * terms[:, :, 1:]), axis=1)
        scale = (1 + np.abs(lo).max(axis=1) + np.abs(hi).max(axis=1))[:, None] ** 2
        e_n = eF[0, uu]  # (n, T)
        e_b = np.take_along_axis(e_n, best[:, None], 1)
        m_n = mF[0, uu]
        m_b = np.take_along_axis(m_n, best[:, None], 1)
        slack = (6 * (e_n + e_b) + gamma(16) * (m_n + m_b)) * scale + TINY
        beaten = a & (dlin_low + qlow > slack)
        act[rr, uu] = a & ~beaten
        qbest = np.take_along_axis(q, best[:, None, None], -1)
        eq = eF[0, uu][:, None, :] + e_b[:, None, :]
        rival = act[rr, uu] & np.any(np.abs(q - qbest) > eq * (1 + 16 * EPS) + TINY + EPS * np.abs(q - qbest), axis=1)
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
    same = np.all(np.abs(n[:, :, :, None] - n[:, :, None, :]) <= ALIAS_TOL, axis=1)
    same |= np.all(np.abs(n[:, :, :, None] + n[:, :, None, :]) <= ALIAS_TOL, axis=1)
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


def _token_column(M, op: Affine, t: int, j: int):
    """Output ``j`` of the affine ``op`` on token ``t`` of the exact maps ``M``: an ExactMap ``(3, 1, 1)``."""
    b = op.b[t : t + 1] if op.b.ndim == 2 else op.b
    return exact_affine(ExactMap(M.N[:, t : t + 1, :], M.s), op.W, b, rows=np.array([j]))


def _pad_r(R: np.ndarray, M: int) -> np.ndarray:
    if R.shape[1] >= M:
        return R
    out = np.empty((R.shape[0], M))
    out[:, : R.shape[1]] = R
    out[:, R.shape[1] :] = R[:, :1]
    return out


def _disc_reach(cen, rad, w, e):
    """Value of lines ``w (..., 3)`` (coefficient error ``e``) at disc centres ``cen (..., 2)`` and how far the
    exact line can reach from it over the disc of radius ``rad``: the line is positive on the whole exact
    polygon inside the disc where ``value > reach``, negative where ``value < -reach``."""
    w0, w1, w2 = w[..., 0], w[..., 1], w[..., 2]
    c0, c1 = cen[..., 0], cen[..., 1]
    sc = c0 * w0 + c1 * w1 + w2
    reach = gamma(3) * (np.abs(c0 * w0) + np.abs(c1 * w1) + np.abs(w2)) + e * (1 + np.abs(c0) + np.abs(c1))
    reach += (np.hypot(w0, w1) * (1 + 4 * EPS) + 2 * e) * rad
    reach *= 1 + 16 * EPS
    reach += TINY
    return sc, reach


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
                f"the exact 2D engines need a 2D domain: a 2D box for a 2-input network, or a Slice for a "
                f"{q}-input one (got a {domain.dim}D box)"
            )
    else:
        raise DomainError("the exact 2D engines need a 2D Box or a Slice")
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
    max_regions: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Partition:
    """Exact partition of a 2D domain into the activation regions of ``net`` (docs/design.md §3 ``plane``).

    ``net``: an MLP, Maxout, hardmax Transformer or lowered :class:`Program`. ``domain``: a 2D
    :class:`Box` for a 2-input network, or a :class:`Slice` (required when the input dimension is not 2).
    ``max_regions``: raise :class:`MemoryCapError` once the partition would exceed it.
    ``progress(done_ops, total_ops)`` is called after each op.

    Every region of positive area is found, however small: signs are decided exactly (see the module
    docstring). ``Partition.stats`` reports the number of vertex sign tests, how many needed exact arithmetic,
    and how many attention identities (ties, straight boundaries) were taken from bitwise-equal floats whose
    error bounds are not zero (``assumed``: 0 means every decision was proven).

    Raises :class:`CurvedBoundaryError` where a hardmax boundary is a quadric or for ReLU attention,
    :class:`NotPiecewiseError` for softmax attention, :class:`DomainError` for a wrong domain, and
    :class:`InexactError` where float64 overflows or a sign can be decided neither by its bound nor exactly.
    """
    program = lower(net)
    _check_ops(program)
    x0n, Vn, c, h, xlo, xhi = _frame(program, domain)
    check_domain(net, xlo, xhi)
    T = program.tokens
    q = program.input_dim
    A = np.zeros((1, 3, T, q))
    A[0, 0] = Vn[:, 0]
    A[0, 1] = Vn[:, 1]
    A[0, 2] = x0n
    hb = np.broadcast_to(np.abs(Vn).sum(axis=1) + np.abs(x0n), (T, q)).copy()
    x0, V = domain.input_map()
    lo, hi = np.asarray(domain.param_lo, float), np.asarray(domain.param_hi, float)
    ce = [(Fraction(lo[k]) + Fraction(hi[k])) / 2 for k in range(2)]
    he = [(Fraction(hi[k]) - Fraction(lo[k])) / 2 for k in range(2)]
    e0 = exact_frame_error(x0n, Vn, np.asarray(x0, float), np.asarray(V, float), ce, he)
    ge0 = np.broadcast_to(column_granularity(A[0], 0), (T, q)).copy() if e0 == 0 else np.full((T, q), INEXACT_G)
    hu = np.broadcast_to(np.abs(Vn).sum(axis=1), (T, q)).copy()
    bd = _Bounds(hb, np.full((T, q), e0), ge0, same_u=True, hu=hu)
    bd.check_finite()
    square = np.array([[[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0]]])
    st = _Store(square, np.array([4]), np.array([[0, 1, 2, 3, -1]], np.int64), None)
    eng = _Engine(program, st, progress, max_regions, BATCH)
    M0 = np.empty((3, T, q), dtype=object)
    for i in range(q):
        for k in range(2):
            M0[k, :, i] = Fraction(V[i, k]) * he[k]
        M0[2, :, i] = Fraction(x0[i]) + sum(Fraction(V[i, k]) * ce[k] for k in range(2))
    eng.M0 = ExactMap.of_fractions(M0)
    with np.errstate(over="raise", invalid="raise"):
        try:
            pieces = eng.solve(program.ops, A, bd, float(eng.total))
        except FloatingPointError as exc:
            raise InexactError(
                "float64 overflow: the network's values exceed the range of float64 on this domain, so no exact "
                "count can be made; rescale the network's weights or shrink the domain"
            ) from exc
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
    rad = np.concatenate([p.rad for p in pieces]) * float(np.max(h)) + 4 * EPS * float(np.max(np.abs(c) + h))
    stats = {
        "predicates": eng.n_predicates,
        "exact_predicates": eng.n_exact,
        "assumed": eng.n_assumed,
        "min_area": float(areas.min()) if areas.size else None,
    }
    part = Partition(
        domain, verts, offsets, maps, areas, blocks, edge_tags=tags, vertex_error=rad, stats=stats, copy=False
    )
    if os.environ.get("REGIONCOUNT_CERTIFY_ALL"):
        # a debugging aid: every exact partition certifies itself (the test suite is run once this way)
        from ..results._certify import certify

        cert = certify(part, net)
        if not cert["passed"]:
            raise CertificateError(f"the certificate failed: {cert['checks']}")
    return part
