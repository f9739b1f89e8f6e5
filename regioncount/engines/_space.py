"""The exact ``space`` engine: activation regions of a network on a box in R^q, q >= 3, or on a
``k``-dimensional affine slice, ``k >= 3`` (DESIGN §2-§3; the higher-dimensional sibling of ``plane``).

Every region is a convex polytope in the domain's normalised parameters ``u in [-1, 1]^k`` carrying the
affine map from ``(u, 1)`` to the current activations (``(k+1, T, d)``: every token entry). Each op of the
:class:`~regioncount.networks.Program` splits every region by its boundaries, as the plane engine does:

- ReLU: one hyperplane per unit; per op-start parent the crossing units are found (bounding-ball test,
  then the vertices), and the op runs in rounds: round ``t`` splits every descendant of a parent by that
  parent's ``t``-th crossing unit, all parents at once.
- GroupMax (maxout) and hardmax attention: the argmax cells of ``k`` affine functions, by clipping a copy of
  the region per piece ``r`` with ``f_r >= f_j`` (ties to the lower index, like ``argmax``). Attention scores
  must be affine on the region (the first block, constant queries, the compiled constructions): where
  the quadratic parts of competing keys differ, :class:`CurvedBoundaryError` is raised.

Representation (no LP anywhere). A polytope is its vertex list; each vertex carries a bitmask of the
region's constraint slots (hyperplanes: box sides and cuts) it lies on. Splitting by a hyperplane takes
the vertex signs; a new vertex appears on every edge whose ends have strictly opposite signs. Two
vertices span an edge exactly when no third vertex lies on every constraint the two share (the face the
shared constraints cut out then has just these two vertices), which is combinatorial and holds for
degenerate polytopes too (vertices on more than ``k`` hyperplanes, duplicate or concurrent planes).
Arrays are padded NumPy, vectorised across regions; Python loops run over ops, rounds and units.

Exactness (DESIGN §2). Whether a region exists is decided by signs only: a split is made when some vertex
is strictly positive and some strictly negative, a clip kills a cell when no vertex is strictly positive.
No volume or distance threshold decides anything. A float64 sign ``s = w . v + w0`` is trusted only when
``|s|`` exceeds a bound on its error, made of three parts:

- the evaluation's rounding, ``gamma_(k+2) (|w| . |v| + |w0|)`` (Higham's ``gamma_n = n u / (1 - n u)``);
- the plane's coefficient error: the engine carries, per activation entry and over all regions, bounds on
  the l1 error and size of the float maps through every op (standard forward error analysis of sums of
  products: Affine, ReLU masks, maxout selection, residual sums, hardmax scores and outputs);
- the vertex's distance to the exact vertex (where the exact planes it lies on meet), bounded when the
  vertex is made from its residuals in those planes and the smallest singular value of their normals
  (:func:`_vertex_error`); ill-conditioned vertices get an infinite bound.

and at least ``SNAP`` (1e-12) of the plane's size on the domain. Below the bound the sign is decided in
exact rational arithmetic (:class:`_Exact`): the region's code fixes every map of the float64 network, the
vertex is the exact solution of the constraints it lies on, and the hyperplane is evaluated there with
``fractions.Fraction`` on the float64 weights (every float64 is an exact binary fraction). So concurrent
planes, planes through vertices and duplicate or dead units are decided exactly, neither crashing nor
inventing regions. Caveats, stated plainly: the bounds assume IEEE float64 with round-to-nearest in NumPy
and BLAS (any summation order; fused multiply-adds only help); for ``k >= 4`` (and degenerate vertices)
the singular-value bound uses LAPACK's symmetric eigensolver with an assumed, not proven, backward error;
for hardmax attention, score differences are affine only when the float quadratic parts agree bitwise
(the rational path re-checks this exactly where it runs), and tied keys are averaged when their scores
agree within ``SNAP``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from .. import _tolerances as tol
from .._domain import AffineSlice, Box, Slice
from .._errors import CurvedBoundaryError, DomainError, MemoryCapError
from .._magnitude import check_magnitudes
from .._predicates import EPS, gamma
from ..networks import check_domain, lower, walk_widths
from ..networks._ops import Affine, Attention, GroupMax, Program, Residual
from ..results._polytopes import Polytopes
from ._exact import ExactMap, ExactReplay
from ._protocol import Kernels

#: Relative margin (of a hyperplane's size on the domain) under which a float64 sign is never trusted, on
#: top of the rounding-error bound: a hedge, it only sends more signs to rational arithmetic.
SNAP = tol.SPACE_SNAP
#: Unit roundoff of float64.
_U = EPS
#: Higham's gamma_n = n u / (1 - n u), rounded up (:func:`regioncount._predicates.gamma`).
_gamma = gamma


#: Float64 values a chunked temporary may hold.
_CHUNK = 1 << 20
#: Bits per incidence word.
_WB = 64


def _popcount(a: np.ndarray) -> np.ndarray:
    return np.bitwise_count(a).sum(axis=-1, dtype=np.int64)


def _bit(slot: np.ndarray, W: int) -> np.ndarray:
    """Incidence masks ``(n, W)`` with only bit ``slot`` set."""
    out = np.zeros((slot.shape[0], W), np.uint64)
    out[np.arange(slot.shape[0]), slot // _WB] = np.left_shift(np.uint64(1), (slot % _WB).astype(np.uint64))
    return out


# ----------------------------------------------------------------------------------------------------
# region store


class _Store:
    """Padded polytopes: vertices ``V (cap, M, k)`` (slots from ``nv`` on repeat vertex 0), incidence
    ``inc (cap, M, W)`` over the region's constraint slots, slot ids ``fid (cap, F)`` (``2 id + side``,
    -1 empty), slot planes ``fpl (cap, F, k+1)`` (``>= 0`` on the region), slot counts ``nf``, enclosing
    balls, the op-start parent ``anc`` and per-op columns ``extra``."""

    def __init__(self, k: int):
        self.k = k
        self.n = 0
        self.V = np.zeros((0, 1, k + 1))  # coordinates, then a bound on the distance to the exact vertex
        self.inc = np.zeros((0, 1, 1), np.uint64)
        self.nv = np.zeros(0, np.int64)
        self.fid = np.zeros((0, 1), np.int64)
        self.fpl = np.zeros((0, 1, k + 2))  # plane, then a bound on the l1 error of its coefficients
        self.nf = np.zeros(0, np.int64)
        self.cen = np.zeros((0, k))
        self.rad = np.zeros(0)
        self.anc = np.zeros(0, np.int64)
        self.extra: dict[str, np.ndarray] = {}
        self.cap_check: Callable[[int], None] = lambda n: None

    _ROW = ("V", "inc", "nv", "fid", "fpl", "nf", "cen", "rad", "anc")

    @property
    def M(self) -> int:
        return self.V.shape[1]

    @property
    def F(self) -> int:
        return self.fid.shape[1]

    @property
    def W(self) -> int:
        return self.inc.shape[2]

    def reset_parents(self):
        self.anc = np.arange(self.V.shape[0])
        self.extra = {}

    def add_extra(self, name: str, arr: np.ndarray):
        full = np.zeros((self.V.shape[0],) + arr.shape[1:], arr.dtype)
        full[: arr.shape[0]] = arr
        self.extra[name] = full

    def sort_by_parent(self):
        order = np.argsort(self.anc[: self.n], kind="stable")
        for name in self._ROW:
            a = getattr(self, name)
            a[: self.n] = a[: self.n][order]
        for a in self.extra.values():
            a[: self.n] = a[: self.n][order]

    def _shape(self, M: int, F: int):
        """Widen the vertex and slot axes to at least ``M`` and ``F`` (with slack: every round adds a slot,
        and :meth:`compact` trims the axes again at the end of each op)."""
        cap = self.V.shape[0]
        if M > self.M:
            M = max(M, self.M + 4)
            V = np.empty((cap, M, self.k + 1))
            V[:, : self.M] = self.V
            V[:, self.M :] = self.V[:, :1]
            inc = np.zeros((cap, M, self.W), np.uint64)
            inc[:, : self.M] = self.inc
            inc[:, self.M :] = self.inc[:, :1]
            self.V, self.inc = V, inc
        if F > self.F:
            F = max(F, self.F + 8)
        W = -(-F // _WB)
        if W > self.W:
            inc = np.zeros(self.inc.shape[:2] + (W,), np.uint64)
            inc[..., : self.W] = self.inc
            self.inc = inc
        if F > self.F:
            F = max(F, self.F + 8)
            fid = np.full((cap, F), -1, np.int64)
            fid[:, : self.F] = self.fid
            fpl = np.zeros((cap, F, self.k + 2))
            fpl[:, : self.F] = self.fpl
            self.fid, self.fpl = fid, fpl

    def write(self, rows, P: _Poly):
        self._shape(P.V.shape[1], P.fid.shape[1])
        M, F, W = P.V.shape[1], P.fid.shape[1], P.inc.shape[2]
        self.V[rows, :M] = P.V
        self.V[rows, M:] = P.V[:, :1]
        self.inc[rows, :M, :W] = P.inc
        self.inc[rows, :M, W:] = 0
        self.inc[rows, M:] = self.inc[rows, :1]
        self.nv[rows] = P.nv
        self.fid[rows, :F] = P.fid
        self.fid[rows, F:] = -1
        self.fpl[rows, :F] = P.fpl
        self.fpl[rows, F:] = 0
        self.nf[rows] = P.nf
        self.cen[rows], self.rad[rows] = _balls(P.V, P.nv)

    def append(self, P: _Poly, src_rows) -> np.ndarray:
        m = P.V.shape[0]
        need = self.n + m
        self.cap_check(need)
        cap = self.V.shape[0]
        if need > cap:
            new = max(need, cap + cap // 2, 64)
            for name in self._ROW:
                setattr(self, name, _grow(getattr(self, name), new))
            for key, v in self.extra.items():
                self.extra[key] = _grow(v, new)
        rows = np.arange(self.n, need)
        self.write(rows, P)
        self.anc[rows] = self.anc[src_rows]
        for v in self.extra.values():
            v[rows] = v[src_rows]
        self.n = need
        return rows

    def take(self, rows) -> _Poly:
        return _Poly(self.V[rows], self.inc[rows], self.nv[rows], self.fid[rows], self.fpl[rows], self.nf[rows])

    def compact(self):
        """Drop constraint slots that lie on fewer than ``k`` vertices (they bound no facet) and shrink the
        padded axes; keeps memory per region proportional to its actual size."""
        n, k = self.n, self.k
        if n == 0:
            return
        M = int(self.nv[:n].max())
        newF = 0
        step = max(1, _CHUNK // max(1, self.M * self.F))
        keeps = []
        for lo in range(0, n, step):
            sl = slice(lo, min(n, lo + step))
            bits = _unpack(self.inc[sl], self.F)  # (b, M, F) bool
            valid = np.arange(self.M) < self.nv[sl, None]
            cnt = (bits & valid[:, :, None]).sum(axis=1)
            keep = (cnt >= k) & (self.fid[sl] >= 0)
            keeps.append(keep)
            newF = max(newF, int(keep.sum(axis=1).max(initial=0)))
        F2 = max(newF, 1)
        W2 = -(-F2 // _WB)
        inc = np.zeros((self.V.shape[0], M, W2), np.uint64)
        fid = np.full((self.V.shape[0], F2), -1, np.int64)
        fpl = np.zeros((self.V.shape[0], F2, k + 2))
        for keep, lo in zip(keeps, range(0, n, step), strict=True):
            hi = min(n, lo + step)
            bits = _unpack(self.inc[lo:hi, :M], self.F)
            rank = np.cumsum(keep, axis=1) - 1
            r, s = np.nonzero(keep)
            nb = np.zeros((hi - lo, M, F2), bool)
            nb[r, :, rank[r, s]] = bits[r, :, s]
            inc[lo:hi] = _pack(nb, W2)
            fid[lo + r, rank[r, s]] = self.fid[lo + r, s]
            fpl[lo + r, rank[r, s]] = self.fpl[lo + r, s]
            self.nf[lo:hi] = keep.sum(axis=1)
        self.V = self.V[:, :M].copy()
        self.inc, self.fid, self.fpl = inc, fid, fpl


def _unpack(inc: np.ndarray, F: int) -> np.ndarray:
    """Incidence words ``(..., W)`` -> bool ``(..., F)``."""
    b = np.unpackbits(inc.view(np.uint8).reshape(inc.shape[:-1] + (8 * inc.shape[-1],)), axis=-1, bitorder="little")
    return b[..., :F].astype(bool)


def _pack(bits: np.ndarray, W: int) -> np.ndarray:
    """Bool ``(..., F)`` -> incidence words ``(..., W)``."""
    F = bits.shape[-1]
    pad = np.zeros(bits.shape[:-1] + (W * _WB,), bool)
    pad[..., :F] = bits
    return np.packbits(pad, axis=-1, bitorder="little").view(np.uint64).reshape(bits.shape[:-1] + (W,))


def _grow(a: np.ndarray, cap: int) -> np.ndarray:
    out = np.zeros((cap,) + a.shape[1:], a.dtype)
    out[: a.shape[0]] = a
    return out


def _balls(V: np.ndarray, nv: np.ndarray):
    """Vertex mean ``(n, k)`` (an interior point) and the radius of a ball around it that holds the polytope
    and its exact vertices (``V (n, M, k+1)``: coordinates and each vertex's error bound)."""
    M = V.shape[1]
    X = V[..., :-1]
    ctr = (X.sum(axis=1) - (M - nv)[:, None] * X[:, 0]) / nv[:, None]
    rad = np.max(np.sqrt(np.sum((X - ctr[:, None]) ** 2, axis=-1)) + V[..., -1], axis=1)
    return ctr, rad * (1 + 1e-12)


@dataclasses.dataclass
class _Poly:
    """A batch of padded polytopes (the store's row layout, without balls and parents)."""

    V: np.ndarray
    inc: np.ndarray
    nv: np.ndarray
    fid: np.ndarray
    fpl: np.ndarray
    nf: np.ndarray

    def select(self, m) -> _Poly:
        return _Poly(self.V[m], self.inc[m], self.nv[m], self.fid[m], self.fpl[m], self.nf[m])

    def assign(self, m, P: _Poly):
        self.widen(P.V.shape[1], P.fid.shape[1])
        P = P.widened(self.V.shape[1], self.fid.shape[1])
        self.V[m], self.inc[m], self.nv[m], self.fid[m], self.fpl[m], self.nf[m] = (
            P.V,
            P.inc,
            P.nv,
            P.fid,
            P.fpl,
            P.nf,
        )

    def widened(self, M: int, F: int) -> _Poly:
        P = _Poly(self.V, self.inc, self.nv, self.fid, self.fpl, self.nf)
        P.widen(M, F)
        return P

    def widen(self, M: int, F: int):
        n, M0, k = self.V.shape
        if M > M0:
            V = np.empty((n, M, k))
            V[:, :M0] = self.V
            V[:, M0:] = self.V[:, :1]
            inc = np.empty((n, M, self.inc.shape[2]), np.uint64)
            inc[:, :M0] = self.inc
            inc[:, M0:] = self.inc[:, :1]
            self.V, self.inc = V, inc
        W = -(-F // _WB)
        if W > self.inc.shape[2]:
            inc = np.zeros(self.inc.shape[:2] + (W,), np.uint64)
            inc[..., : self.inc.shape[2]] = self.inc
            self.inc = inc
        F0 = self.fid.shape[1]
        if F > F0:
            fid = np.full((n, F), -1, np.int64)
            fid[:, :F0] = self.fid
            fpl = np.zeros((n, F, self.fpl.shape[2]))
            fpl[:, :F0] = self.fpl
            self.fid, self.fpl = fid, fpl


# ----------------------------------------------------------------------------------------------------
# the cut kernel


def _cut(P: _Poly, s: np.ndarray, sg: np.ndarray, w: np.ndarray, fid: np.ndarray, sides=(1, -1)) -> list[_Poly]:
    """The parts ``side * (w . u + w0) >= 0`` of polytopes ``P`` that the hyperplanes ``w (n, k+2)`` (plane and
    coefficient error bound) cross (some vertex strictly on each side); ``s, sg (n, M)`` vertex values and
    exact signs, ``fid (n,)`` the hyperplane's id (``2 id``; the negative side gets ``2 id + 1``).

    A new vertex is made on every edge with strictly opposite end signs: vertices ``a, b`` span an edge
    when no third vertex lies on all the slots they share. It lies on those slots and on the new one, and
    gets a bound on its distance to the exact vertex (:func:`_vertex_error`).
    """
    n, M, k1 = P.V.shape
    k = k1 - 1
    valid = np.arange(M) < P.nv[:, None]
    pos, neg = (sg > 0) & valid, (sg < 0) & valid
    slot = P.nf.copy()
    Fn = int(slot.max(initial=0)) + 1
    P = P.widened(M, Fn)
    W = P.inc.shape[2]
    # candidate edges: (region, positive vertex a, negative vertex b) sharing >= k-1 slots
    r, a, b = np.nonzero(pos[:, :, None] & neg[:, None, :])
    com = P.inc[r, a] & P.inc[r, b]
    ok = _popcount(com) >= k - 1
    r, a, b, com = r[ok], a[ok], b[ok], com[ok]
    edge = np.ones(r.size, bool)
    step = max(1, _CHUNK // max(1, M * W))
    for lo in range(0, r.size, step):
        sl = slice(lo, lo + step)
        rr, cc = r[sl], com[sl]
        on = np.all((P.inc[rr] & cc[:, None, :]) == cc[:, None, :], axis=-1) & valid[rr]
        on[np.arange(rr.size), a[sl]] = False
        on[np.arange(rr.size), b[sl]] = False
        edge[sl] = ~on.any(axis=1)
    r, a, b, com = r[edge], a[edge], b[edge], com[edge]
    t = s[r, a] / (s[r, a] - s[r, b])
    # the coordinates only: column k (the vertex error bound, inf where it overflowed) is recomputed below
    X = P.V[r, a].copy()
    X[:, :k] += t[:, None] * (P.V[r, b, :k] - P.V[r, a, :k])
    newbit = _bit(slot, W)
    Xinc = com | newbit[r]
    planes = P.fpl[r]
    planes[np.arange(r.size), slot[r]] = w[r]
    X[:, k] = _vertex_error(X[:, :k], _unpack(Xinc, planes.shape[1]), planes)
    zero = (sg == 0) & valid
    inc0 = np.where(zero[:, :, None], P.inc | newbit[:, None, :], P.inc)
    out = []
    for side in sides:
        keep = (sg * side >= 0) & valid
        kr, kv = np.nonzero(keep)
        rid = np.concatenate([kr, r])
        order = np.argsort(rid, kind="stable")
        rid = rid[order]
        Vall = np.concatenate([P.V[kr, kv], X])[order]
        Iall = np.concatenate([inc0[kr, kv], Xinc])[order]
        cnt = np.bincount(rid, minlength=n)
        Mo = int(cnt.max(initial=1))
        pos_in = np.arange(rid.size) - (np.cumsum(cnt) - cnt)[rid]
        Vo = np.empty((n, Mo, k1))
        Io = np.zeros((n, Mo, W), np.uint64)
        Vo[rid, pos_in] = Vall
        Io[rid, pos_in] = Iall
        pr, pc = np.nonzero(np.arange(Mo) >= cnt[:, None])
        Vo[pr, pc] = Vo[pr, 0]
        Io[pr, pc] = Io[pr, 0]
        fidn = P.fid.copy()
        fpln = P.fpl.copy()
        fidn[np.arange(n), slot] = fid + (side < 0)
        fpln[np.arange(n), slot, : k + 1] = side * w[:, : k + 1]
        fpln[np.arange(n), slot, k + 1] = w[:, k + 1]
        out.append(_Poly(Vo, Io, cnt, fidn, fpln, slot + 1))
    return out


def _vertex_error(X: np.ndarray, tight: np.ndarray, planes: np.ndarray) -> np.ndarray:
    """A bound on ``|x - x*|_2`` for float vertices ``X (n, k)``, where ``x*`` is the exact vertex: the point on
    which the exact hyperplanes of the ``tight (n, F)`` slots meet (``planes (n, F, k+2)``: float planes and
    bounds ``e_i`` on the l1 error of their coefficients). For any ``k`` tight slots with exact normals ``A*``,
    ``A* (x - x*) = rho`` where ``rho_i`` is the exact plane at ``x``, so ``|x - x*| <= |rho| / sigma_min(A*)``;
    ``|rho_i| <= |fl(a_i . x + b_i)| + gamma_{k+2} (|a_i| . |x| + |b_i|) + e_i max(1, |x|_inf)`` and
    ``sigma_min(A*) >= sigma_min(A) - |E|_F``. For k = 3, ``sigma_min(A) >= |det A| / |A|_F^2`` (the product
    of the singular values is ``|det A|``) with the determinant's rounding bound subtracted; for k >= 4, and
    where the first ``k`` tight slots are (numerically) dependent, the smallest eigenvalue of ``A^T A`` over
    all tight slots, less a rounding allowance of ``gamma_(2F+4k+8) |A|_F^2`` for forming and solving it (the
    allowance is the assumed backward error of LAPACK's symmetric eigensolver, not a proven constant).
    ``inf`` where no positive lower bound results (then every sign at that vertex is decided exactly)."""
    n, k = X.shape
    if n == 0:
        return np.zeros(0)
    first = np.argsort(~tight, axis=1, kind="stable")[:, :k]
    rows = np.take_along_axis(planes, first[..., None], axis=1)  # (n, k, k+2)
    A, b, e = rows[..., :k], rows[..., k], rows[..., k + 1]
    big = np.maximum(1.0, np.abs(X).max(axis=1))
    val = np.einsum("nfk,nk->nf", A, X) + b
    rho = np.abs(val) + _gamma(k + 2) * (np.einsum("nfk,nk->nf", np.abs(A), np.abs(X)) + np.abs(b)) + e * big[:, None]
    rho = np.sqrt((rho**2).sum(axis=1)) * (1 + 1e-12)
    out = np.full(n, np.inf)
    if k == 3:
        # the cofactor expansion: a sum of 6 products of 3 factors, off by at most gamma_5 times the sum of
        # |products| (the permanent of |A|, at most the product of the row sums)
        det = (
            A[:, 0, 0] * (A[:, 1, 1] * A[:, 2, 2] - A[:, 1, 2] * A[:, 2, 1])
            - A[:, 0, 1] * (A[:, 1, 0] * A[:, 2, 2] - A[:, 1, 2] * A[:, 2, 0])
            + A[:, 0, 2] * (A[:, 1, 0] * A[:, 2, 1] - A[:, 1, 1] * A[:, 2, 0])
        )
        det_err = _gamma(5) * np.prod(np.abs(A).sum(axis=2), axis=1)
        fro = np.sqrt((A**2).sum(axis=(1, 2)))
        smin = (np.abs(det) - det_err) / np.maximum(fro, 1e-300) ** 2 * (1 - 1e-12)
        smin -= np.sqrt((e**2).sum(axis=1)) * (1 + 1e-12)
    else:
        smin = np.zeros(n)  # k >= 4: always the eigenvalue bound below
    ok = smin > 0
    out[ok] = rho[ok] / smin[ok]
    bad = np.flatnonzero(~ok & ((tight.sum(axis=1) > k) | (k > 3)))
    if bad.size:
        Wl = np.where(tight[bad, :, None], planes[bad, :, :k], 0.0)
        b2 = np.where(tight[bad], planes[bad, :, k], 0.0)
        e2 = np.where(tight[bad], planes[bad, :, k + 1], 0.0)
        Xb = X[bad]
        val = np.einsum("nfk,nk->nf", Wl, Xb) + b2
        r2 = np.abs(val) + _gamma(k + 2) * (np.einsum("nfk,nk->nf", np.abs(Wl), np.abs(Xb)) + np.abs(b2))
        r2 = np.sqrt(((r2 + e2 * big[bad, None]) ** 2).sum(axis=1)) * (1 + 1e-12)
        G = np.einsum("nfi,nfj->nij", Wl, Wl)
        lam = np.linalg.eigvalsh(G)[:, 0] - _gamma(2 * tight.shape[1] + 4 * k + 8) * (Wl**2).sum(axis=(1, 2))
        sm = np.sqrt(np.maximum(lam, 0.0)) - np.sqrt((e2**2).sum(axis=1)) * (1 + 1e-12)
        good = sm > 0
        out[bad[good]] = r2[good] / sm[good]
    return out


# ----------------------------------------------------------------------------------------------------
# constraint registry and exact decisions


@dataclasses.dataclass
class _Family:
    """Ids ``base .. base + size`` name hyperplanes of one op: ``kind`` "box", "relu" (offset
    ``parent * D + unit``) or "argmax" (offset ``(parent * U + unit) * P + pair``, pair of pieces ``a < b``
    with index ``b (b - 1) / 2 + a``, side 0 meaning ``f_b - f_a >= 0``)."""

    base: int
    size: int
    kind: str
    split: int  # index of the splitting op (ReLU, GroupMax, Attention) among the program's
    D: int = 0
    U: int = 0
    P: int = 0
    k: int = 0


def _pair_index(a, b):
    return b * (b - 1) // 2 + a


def _unpair(p: int) -> tuple[int, int]:
    b = int((1 + (1 + 8 * p) ** 0.5) // 2)
    while b * (b - 1) // 2 > p:
        b -= 1
    while (b + 1) * b // 2 <= p:
        b += 1
    return p - b * (b - 1) // 2, b


def _frac_array(a: np.ndarray) -> np.ndarray:
    out = np.empty(a.shape, dtype=object)
    flat = out.reshape(-1)
    for i, v in enumerate(np.asarray(a, dtype=np.float64).reshape(-1).tolist()):
        flat[i] = Fraction(v)
    return out


class _Exact:
    """Exact rational re-evaluation of the network on one region, from its activation code.

    ``maps(code_rows, split)`` gives the exact input maps ``(k+1, T, d)`` (object arrays of Fractions) of
    splitting op ``split`` on the region whose codes for the earlier splitting ops are ``code_rows``
    (one row per op, in the block layouts). The domain's input map ``x = x0 + V (c + h u)`` is taken
    exactly from the float64 ``x0, V, lo, hi``."""

    def __init__(self, program: Program, x0, V, lo, hi):
        self.program = program
        k = V.shape[1]
        c = [(Fraction(a) + Fraction(b)) / 2 for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
        h = [(Fraction(b) - Fraction(a)) / 2 for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
        Vf, x0f = _frac_array(V), _frac_array(x0)
        A = np.empty((k + 1, program.input_dim), dtype=object)
        for i in range(k):
            A[i] = Vf[:, i] * h[i]
        A[k] = x0f + Vf @ np.array(c, dtype=object)
        T = program.tokens
        self.A0 = np.stack([A] * T, axis=1)  # (k+1, T, q)
        self._w: dict[int, tuple] = {}
        # the one exact interpreter of codes (its kernels, memoised by code prefix), built on first use
        self._replay: ExactReplay | None = None
        self._split_leaf: list[int] = []

    def _weights(self, op):
        """An attention op's weights as Fractions (for the exact argmax pieces of its scores)."""
        key = id(op)
        if key not in self._w:
            self._w[key] = (op, tuple(_frac_array(x) for x in (op.Wq, op.Wk, op.Wv, op.Wo)))
        return self._w[key][1]

    def output(self, code_rows: list) -> np.ndarray:
        """The exact maps ``(k+1, T, d_out)`` after every op, on the region with code ``code_rows``."""
        from ..networks._interpret import ExactProgram

        flat = [np.unpackbits(r[None], axis=1, count=w)[0] if kd == "bits" else np.asarray(r) for kd, w, r in code_rows]
        code = np.concatenate(flat) if flat else np.zeros(0, np.int64)
        return ExactProgram(self.program, ExactMap.of_fractions(self.A0)).maps(code).fractions()

    def maps(self, code_rows: list, split: int):
        if self._replay is None:
            self._replay = ExactReplay(self.program, ExactMap.of_fractions(self.A0))
            r = self._replay
            self._split_leaf = [leaf for leaf in sorted(r.leaf_pos) if r.ins[r.leaf_pos[leaf]][3]]
        rows = []
        for kind, width, row in code_rows[:split]:
            rows.append(np.unpackbits(row[None], axis=1, count=width)[0] if kind == "bits" else np.asarray(row))
        return self._replay.maps_at(rows, self._split_leaf[split]).fractions()


def _solve_exact(rows: list[list[Fraction]], k: int):
    """The point ``u`` with ``row[:k] . u + row[k] = 0`` for every row (rows of rank ``k``), or None."""
    M = [list(r) for r in rows]
    piv_cols, r0 = [], 0
    for c in range(k):
        p = next((i for i in range(r0, len(M)) if M[i][c] != 0), None)
        if p is None:
            continue
        M[r0], M[p] = M[p], M[r0]
        inv = 1 / M[r0][c]
        M[r0] = [v * inv for v in M[r0]]
        for i in range(len(M)):
            if i != r0 and M[i][c] != 0:
                f = M[i][c]
                M[i] = [a - f * b for a, b in zip(M[i], M[r0], strict=True)]
        piv_cols.append(c)
        r0 += 1
    if r0 < k:
        return None
    if any(M[i][k] != 0 for i in range(r0, len(M))):
        return None  # inconsistent: the vertex's constraints do not meet (cannot happen with exact signs)
    u = [Fraction(0)] * k
    for i, c in enumerate(piv_cols):
        u[c] = -M[i][k]
    return u


# ----------------------------------------------------------------------------------------------------
# maps


def _affine(A: np.ndarray, op: Affine) -> np.ndarray:
    W, b = op.W, op.b
    R = A.shape[0]
    out = np.empty(A.shape[:3] + (W.shape[0],))
    step = max(1, _CHUNK // max(1, A[0].size, out[0].size))
    for lo in range(0, R, step):
        x = A[lo : lo + step]
        out[lo : lo + step] = (x.reshape(-1, x.shape[-1]) @ W.T).reshape(x.shape[:-1] + (W.shape[0],))
    out[:, -1] += b if b.ndim == 2 else b[None, :]
    return out


def _same_units(F, quad, act) -> np.ndarray:
    """For each query ``u`` of ``F (R0, U, k+1, T)``: the smallest ``v`` with bitwise the same scores and keys."""
    U = F.shape[1]
    rep = np.arange(U)
    seen: dict[tuple, list[int]] = {}
    for u in range(U):
        key = tuple(hash(np.ascontiguousarray(a[:, u]).tobytes()) for a in (F, quad, act))
        for v in seen.get(key, []):
            if all(np.array_equal(a[:, u], a[:, v]) for a in (F, quad, act)):
                rep[u] = v
                break
        else:
            seen.setdefault(key, []).append(u)
    return rep


# ----------------------------------------------------------------------------------------------------
# the engine


class _Engine:
    #: bounds, over every region, on the l1 error and l1 size of each entry's map coefficients ``(T, d)``
    #: (set by partition_space, then by each op; see run)
    E: np.ndarray
    hb: np.ndarray

    def __init__(self, program: Program, st: _Store, exact: _Exact, progress, max_regions):
        self.program = program
        self.st = st
        self.k = st.k
        self.exact = exact
        self.progress = progress
        self.max_regions = max_regions
        self.total = len(walk_widths(program))
        self.done = 0
        self.blocks: list = []
        self.families: list[_Family] = [_Family(0, 2 * st.k, "box", -1)]
        self.next_id = 2 * st.k
        self.split_index = 0
        self.exact_calls = 0
        self._cache: dict = {}
        self._ops = [op for op, _, _ in walk_widths(program) if op.key != "affine"]
        st.cap_check = self.cap_check

    def cap_check(self, n: int):
        if self.max_regions is not None and n > self.max_regions:
            raise MemoryCapError(
                f"the partition passed max_regions={self.max_regions} regions; raise the cap, shrink the "
                "domain, or count with --method sample"
            )

    def family(self, size: int, kind: str, **kw) -> _Family:
        f = _Family(self.next_id, int(size), kind, self.split_index, **kw)
        self.next_id += int(size)
        self.families.append(f)
        return f

    # -- exact signs ---------------------------------------------------------------------------------

    def _exact_function(self, par: int, fid: int) -> list[Fraction]:
        """The exact affine function (``k+1`` Fractions) of slot id ``fid`` on regions of parent ``par``."""
        key = ("f", par, int(fid))
        if key not in self._cache:
            self._cache[key] = self._exact_function_uncached(par, fid)
        return self._cache[key]

    def _exact_function_uncached(self, par: int, fid: int) -> list[Fraction]:
        k = self.k
        ident, side = divmod(int(fid), 2)
        fam = next(f for f in reversed(self.families) if f.base <= ident)
        off = ident - fam.base
        if fam.kind == "box":
            axis, upper = divmod(off, 2)
            w = [Fraction(0)] * (k + 1)
            w[axis] = Fraction(-1 if upper else 1)
            w[k] = Fraction(1)
            return w
        A = self._exact_maps(par, fam.split)
        c1, T, d = A.shape
        if fam.kind == "relu":
            j = off % fam.D
            w = A[:, j // d, j % d]
        else:
            u = (off // fam.P) % fam.U
            a, b = _unpair(off % fam.P)
            key = ("p", par, fam.split, u)
            if key not in self._cache:
                self._cache[key] = self._exact_pieces(A, fam, u)
            F = self._cache[key]
            w = F[:, b] - F[:, a]
        return [-v for v in w] if side else list(w)

    def _exact_pieces(self, A, fam: _Family, u: int):
        """Exact pieces ``(k+1, kk)`` of argmax unit ``u`` of the family's op."""
        op = self._ops[fam.split]
        c1, T, d = A.shape
        if isinstance(op, GroupMax):
            n = d // op.k
            t, i = divmod(u, n)
            return A[:, t, i * op.k : (i + 1) * op.k]
        h, i = divmod(u, T)
        Wq, Wk, _, _ = self.exact._weights(op)
        Q = np.einsum("ctd,de->cte", A, Wq[h])
        K = np.einsum("ctd,de->cte", A, Wk[h])
        k = c1 - 1
        out = np.empty((c1, T), dtype=object)
        for j in range(T):
            S = np.einsum("ae,be->ab", Q[:, i, :], K[:, j, :])  # (k+1, k+1)
            if j == 0:
                S0 = S
            elif np.any(S[:k, :k] + S[:k, :k].T != S0[:k, :k] + S0[:k, :k].T):
                raise CurvedBoundaryError(
                    f"hardmax attention (head {h}, query {i}): in exact arithmetic the score difference of keys 0 "
                    f"and {j} is quadratic (a curved boundary below float64 resolution); use --method line or sample"
                )
            out[:k, j] = S[:k, k] + S[k, :k]
            out[k, j] = S[k, k]
        return out

    def _exact_maps(self, par: int, split: int):
        key = (par, split)
        if key not in self._cache:
            rows = [(kind, w, arr[par]) for kind, w, arr in self.blocks]
            self._cache[key] = self.exact.maps(rows, split)
        return self._cache[key]

    def exact_signs(self, par, inc, fid, plane_fid) -> np.ndarray:
        """Exact signs of the hyperplanes ``plane_fid (n,)`` at the vertices given by incidence ``inc (n, W)``
        over slot ids ``fid (n, F)``, on regions whose op-start parent is ``par (n,)``."""
        k = self.k
        out = np.zeros(par.shape[0], np.int8)
        Fs = fid.shape[1]
        bits = _unpack(inc, Fs)
        for i in range(par.shape[0]):
            p = int(par[i])
            rows = [self._exact_function(p, f) for f in fid[i][bits[i]] if f >= 0]
            u = _solve_exact(rows, k)
            if u is None:
                raise ArithmeticError("a vertex's constraints do not determine a point")  # pragma: no cover
            w = self._exact_function(p, int(plane_fid[i]))
            v = sum((w[j] * u[j] for j in range(k)), w[k])
            out[i] = (v > 0) - (v < 0)
        self.exact_calls += par.shape[0]
        return out

    def signs(self, P: _Poly, par, w, plane_fid):
        """Vertex values ``(n, M)`` and exact signs of hyperplanes ``w (n, k+2)`` (plane, coefficient error
        bound) on polytopes ``P``. A float value is trusted when it exceeds its error bound: rounding of the
        evaluation, the plane's coefficient error, and the vertex's distance to the exact vertex times the
        plane's gradient (and at least ``SNAP`` of the plane's size); the rest are decided exactly."""
        k = self.k
        X, verr = P.V[..., :k], P.V[..., k]
        wl, w0, werr = w[:, :k], w[:, k], w[:, k + 1]
        s = np.einsum("nmk,nk->nm", X, wl) + w0[:, None]
        big = np.maximum(1.0, np.abs(X).max(axis=2))
        tol = (
            _gamma(k + 2) * (np.einsum("nmk,nk->nm", np.abs(X), np.abs(wl)) + np.abs(w0)[:, None])
            + werr[:, None] * big
            + (np.sqrt((wl**2).sum(axis=1)) + werr)[:, None] * verr
        ) * (1 + 1e-12)
        tol = np.maximum(tol, SNAP * np.abs(w[:, : k + 1]).sum(axis=1)[:, None])
        sg = (s > tol).astype(np.int8) - (s < -tol).astype(np.int8)
        valid = np.arange(P.V.shape[1]) < P.nv[:, None]
        amb_r, amb_v = np.nonzero((np.abs(s) <= tol) & valid)
        if amb_r.size:
            # decide each distinct vertex once (padding repeats vertex 0, which is decided already)
            sg[amb_r, amb_v] = self.exact_signs(par[amb_r], P.inc[amb_r, amb_v], P.fid[amb_r], plane_fid[amb_r])
            # keep the float value only where it has the exact sign (it places new vertices on edges);
            # elsewhere a tiny value of the exact sign puts the crossing at that vertex, to float precision
            e, f = sg[amb_r, amb_v], s[amb_r, amb_v]
            s[amb_r, amb_v] = np.where(np.sign(f) == e, f, e * 1e-300)
        sg[~valid] = sg[:, :1].repeat(P.V.shape[1], axis=1)[~valid]
        return s, sg

    def _tick(self):
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)

    # -- driver --------------------------------------------------------------------------------------

    def run(self, ops, A):
        """Apply ``ops`` to maps ``A``; ``self.E`` and ``self.hb`` (``(T, d)`` each) follow along: bounds, over
        every region, on the l1 error of each entry's map coefficients and on their l1 size (standard forward
        error analysis: an n-term sum of products is off by at most gamma_n times the sum of |terms|)."""
        chain = np.arange(self.st.n)
        for op in ops:
            A, par = KERNELS.lookup(op)(self, op, A)
            if par is not None:
                chain = chain[par]
        return A, chain

    # -- ReLU ----------------------------------------------------------------------------------------

    def _margin(self, scale, werr):
        """What a ball test adds to ``|grad| rad``: coefficient error, rounding, and the SNAP hedge."""
        return (werr + (_gamma(self.k + 2) + SNAP) * scale) * (1 + 1e-9)

    def _sides(self, Af: np.ndarray, fam: _Family, werr: np.ndarray):
        """Per parent and unit: does the unit take strictly positive (pos) / negative (neg) values on it?"""
        st = self.st
        R0, c1, D = Af.shape
        pos = np.empty((R0, D), bool)
        neg = np.empty((R0, D), bool)
        scale = np.abs(Af).sum(axis=1)
        sc = np.einsum("rk,rkd->rd", st.cen[:R0], Af[:, :-1]) + Af[:, -1]
        grad = np.sqrt((Af[:, :-1] ** 2).sum(axis=1)) + werr[None, :]
        reach = grad * st.rad[:R0, None] * (1 + 1e-9) + self._margin(scale, werr[None, :])
        pos[:], neg[:] = sc > reach, sc < -reach
        p, j = np.nonzero(~(pos | neg))
        step = max(1, _CHUNK // max(1, st.M * c1))
        for lo in range(0, p.size, step):
            pp, jj = p[lo : lo + step], j[lo : lo + step]
            P = st.take(pp)
            w = np.concatenate([Af[pp, :, jj], werr[jj, None]], axis=1)
            _, sg = self.signs(P, pp, w, 2 * (fam.base + pp * D + jj))
            pos[pp, jj] = np.any(sg > 0, axis=1)
            neg[pp, jj] = np.any(sg < 0, axis=1)
        return pos, neg

    def relu(self, A: np.ndarray):
        st = self.st
        R0, c1, T, d = A.shape
        D = T * d
        Af = A.reshape(R0, c1, D)
        fam = self.family(R0 * D, "relu", D=D)
        werr = self.E.reshape(D)
        pos, neg = self._sides(Af, fam, werr)
        cross = pos & neg
        st.add_extra("bits", np.packbits(pos & ~neg, axis=1))
        pp, jj = np.nonzero(cross)
        cnt = np.bincount(pp, minlength=R0)
        first = np.cumsum(cnt) - cnt
        rounds = max(1, int(cnt.max(initial=1)))
        t = 0
        while True:
            anc = st.anc[: st.n]
            cand = np.flatnonzero(cnt[anc] > t)
            if cand.size == 0:
                break
            par = anc[cand]
            j = jj[first[par] + t]
            w = np.concatenate([Af[par, :, j], werr[j, None]], axis=1)
            self._relu_round(cand, par, w, j, 2 * (fam.base + par * D + j))
            t += 1
            if self.progress is not None:  # within the op: one round per crossing unit (a long op shows)
                self.progress(self.done + t / rounds, self.total)
        st.sort_by_parent()
        par = st.anc[: st.n]
        bits = st.extra["bits"][: st.n].copy()
        mask = np.unpackbits(bits, axis=1, count=D).reshape(-1, 1, T, d)
        return A[par] * mask, ("bits", D, bits)

    def _relu_round(self, cand, par, w, j, fid):
        st = self.st
        k = self.k
        sc = np.einsum("nk,nk->n", st.cen[cand], w[:, :k]) + w[:, k]
        grad = np.sqrt((w[:, :k] ** 2).sum(axis=1)) + w[:, k + 1]
        reach = grad * st.rad[cand] * (1 + 1e-9) + self._margin(np.abs(w[:, : k + 1]).sum(axis=1), w[:, k + 1])
        one = sc > reach
        near = np.flatnonzero(np.abs(sc) <= reach)
        step = max(1, _CHUNK // max(1, st.M * (k + 1)))
        for lo in range(0, near.size, step):
            nr = near[lo : lo + step]
            rows = cand[nr]
            P = st.take(rows)
            s, sg = self.signs(P, par[nr], w[nr], fid[nr])
            haspos = np.any(sg > 0, axis=1)
            split = haspos & np.any(sg < 0, axis=1)
            one[nr[haspos]] = True
            idx = np.flatnonzero(split)
            if idx.size:
                Pp, Pm = _cut(P.select(idx), s[idx], sg[idx], w[nr[idx]], fid[nr[idx]])
                st.write(rows[idx], Pp)
                # the negative part copies the row's bits before this round sets the positive side's
                st.append(Pm, rows[idx])
        on = np.flatnonzero(one)
        jo = j[on]
        st.extra["bits"][cand[on], jo >> 3] |= (1 << (7 - (jo & 7))).astype(np.uint8)

    # -- argmax cells --------------------------------------------------------------------------------

    def _argmax_unit(self, u: int, F_u: np.ndarray, act_u: np.ndarray, fam: _Family, eF, hF):
        """Split every region into the argmax cells of its parent's pieces ``F_u (R0, k+1, kk)`` (allowed
        pieces ``act_u (R0, kk)``; ``eF, hF (kk,)`` bounds on the pieces' coefficient errors and sizes) and
        write each region's winner into digit column ``u``."""
        st = self.st
        # l1 error bound of f_a - f_b for every pair: both errors and the subtraction's rounding
        pair_err = eF[:, None] + eF[None, :] + _U * (hF[:, None] + hF[None, :])
        n = st.n
        anc = st.anc[:n]
        Fa = F_u[anc]
        # regions where one piece beats every other on the whole ball need no geometry
        sc = np.einsum("nk,nkj->nj", st.cen[:n], Fa[:, :-1]) + Fa[:, -1]
        sc = np.where(act_u[anc], sc, -np.inf)
        r0 = np.argmax(sc, axis=1)
        g = np.take_along_axis(Fa, r0[:, None, None], axis=2) - Fa  # (n, k+1, kk)
        low = np.einsum("nk,nkj->nj", st.cen[:n], g[:, :-1]) + g[:, -1]
        ge = pair_err[r0]  # (n, kk)
        low -= (np.sqrt((g[:, :-1] ** 2).sum(axis=1)) + ge) * st.rad[:n, None] * (1 + 1e-9)
        low -= self._margin(np.abs(g).sum(axis=1), ge)
        beat = (low > 0) | ~act_u[anc]
        beat[np.arange(n), r0] = True
        settled = np.all(beat, axis=1)
        col = st.extra["digits"]
        col[np.flatnonzero(settled), u] = r0[settled]
        cand = np.flatnonzero(~settled)
        step = max(1, 4096 // F_u.shape[2])
        for lo in range(0, cand.size, step):
            self._argmax_cells(cand[lo : lo + step], u, F_u, act_u, fam, pair_err)

    def _argmax_cells(self, cand, u, F_u, act_u, fam: _Family, pair_err):
        st = self.st
        kk = F_u.shape[2]
        par_c = st.anc[cand]
        owner = np.repeat(np.arange(cand.size), kk)
        r = np.tile(np.arange(kk), cand.size)
        keep = act_u[par_c].reshape(-1)
        owner, r = owner[keep], r[keep]
        P = st.take(cand[owner])
        for m in range(1, kk):
            j = (r + m) % kk
            pj = par_c[owner]
            live = np.flatnonzero(act_u[pj, j])
            alive = np.ones(owner.size, bool)
            if live.size:
                rl, jl, pl = r[live], j[live], pj[live]
                g = np.concatenate([F_u[pl, :, rl] - F_u[pl, :, jl], pair_err[rl, jl, None]], axis=1)  # f_r - f_j
                a, b = np.minimum(rl, jl), np.maximum(rl, jl)
                # side 0 of a pair's id is f_b - f_a >= 0, so r's cell is on side (r < j)
                fidk = 2 * (fam.base + (pl * fam.U + u) * fam.P + _pair_index(a, b)) + (rl < jl)
                Pl = P.select(live)
                s, sg = self.signs(Pl, pl, g, fidk)
                haspos = np.any(sg > 0, axis=1)
                hasneg = np.any(sg < 0, axis=1)
                allzero = ~haspos & ~hasneg
                al = np.where(allzero, jl > rl, haspos)  # an identical piece: the lower index wins
                alive[live] = al
                clip = np.flatnonzero(al & hasneg)
                if clip.size:
                    (Pc,) = _cut(Pl.select(clip), s[clip], sg[clip], g[clip], fidk[clip], sides=(1,))
                    P.assign(live[clip], Pc)
            keepm = np.flatnonzero(alive)
            P, owner, r = P.select(keepm), owner[keepm], r[keepm]
        first = np.ones(owner.size, bool)
        first[1:] = owner[1:] != owner[:-1]
        rows = cand[owner[first]]
        st.write(rows, P.select(first))
        st.extra["digits"][rows, u] = r[first]
        if (~first).any():
            new = st.append(P.select(~first), cand[owner[~first]])
            st.extra["digits"][new, u] = r[~first]

    def groupmax(self, A: np.ndarray, kk: int):
        st = self.st
        R0, c1, T, d = A.shape
        n = d // kk
        U = T * n
        F = A.reshape(R0, c1, U, kk).transpose(0, 2, 1, 3)  # (R0, U, k+1, kk)
        fam = self.family(R0 * U * (kk * (kk - 1) // 2), "argmax", U=U, P=kk * (kk - 1) // 2, k=kk)
        act = np.ones((R0, kk), bool)
        st.add_extra("digits", np.zeros((R0, U), np.int32))
        eF, hF = self.E.reshape(U, kk), self.hb.reshape(U, kk)
        for u in range(U):
            self._argmax_unit(u, F[:, u], act, fam, eF[u], hF[u])
        self.E, self.hb = eF.max(axis=1).reshape(T, n), hF.max(axis=1).reshape(T, n)
        st.sort_by_parent()
        dig = st.extra["digits"][: st.n].astype(np.int64)
        anc = st.anc[: st.n]
        Fg = A.reshape(R0, c1, T, n, kk)[anc]
        out = np.take_along_axis(Fg, dig.reshape(-1, 1, T, n, 1), axis=-1)[..., 0]
        return out, ("digits", U, dig.astype(np.uint8 if kk <= 256 else np.int32))

    # -- hardmax attention ---------------------------------------------------------------------------

    def attention(self, A: np.ndarray, op: Attention):
        st = self.st
        R0, c1, T, d = A.shape
        k = c1 - 1
        H = op.heads
        allowed = np.tril(np.ones((T, T), bool)) if op.causal else np.ones((T, T), bool)
        U = H * T
        F = np.zeros((R0, U, c1, T))
        quad = np.zeros((R0, U, k, k, T))
        VO = np.zeros((H, R0, c1, T, d))
        # error bounds (see run): of the scores' affine parts per query and key, and of the outputs
        eF, hF = np.zeros((U, T)), np.zeros((U, T))
        E_att, hb_att = np.zeros(d), np.zeros(d)

        def lin(E: np.ndarray, hb: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            aW = np.abs(W)
            e = E @ aW + _gamma(W.shape[0] + 1) * (hb @ aW)
            return e, hb @ aW + e

        for h in range(H):
            eQ, hQ = lin(self.E, self.hb, op.Wq[h])
            eK, hK = lin(self.E, self.hb, op.Wk[h])
            dk = op.Wq[h].shape[1]
            ef = 2 * (eQ @ hK.T + hQ @ eK.T + eQ @ eK.T) + 2 * _gamma(2 * dk + 2) * (hQ @ hK.T)
            eF[h * T : (h + 1) * T], hF[h * T : (h + 1) * T] = ef, 2 * hQ @ hK.T + ef
            eV, hV = lin(*lin(self.E, self.hb, op.Wv[h]), op.Wo[h])
            E_att += eV.max(axis=0) + (T + 2 + H) * _U * hV.max(axis=0)
            hb_att += hV.max(axis=0)
            Q = A @ op.Wq[h]  # (R0, c1, T, dk)
            K = A @ op.Wk[h]
            VO[h] = (A @ op.Wv[h]) @ op.Wo[h]
            C = np.einsum("raie,rbje->rijab", Q, K)  # (R0, T, T, c1, c1)
            u = slice(h * T, (h + 1) * T)
            F[:, u, :k] = (C[..., :k, k] + C[..., k, :k]).transpose(0, 1, 3, 2)
            F[:, u, k] = C[..., k, k]
            qq = C[..., :k, :k]
            quad[:, u] = (qq + np.swapaxes(qq, -1, -2)).transpose(0, 1, 3, 4, 2)
        act = np.broadcast_to(np.tile(allowed, (H, 1))[None], (R0, U, T)).copy()
        ref = np.argmax(act, axis=-1)
        qref = np.take_along_axis(quad, ref[:, :, None, None, None], -1)
        if np.any(act[:, :, None, None, :] & (quad != qref)):
            rr, uu = np.nonzero(np.any(act[:, :, None, None, :] & (quad != qref), axis=(2, 3, 4)))
            raise CurvedBoundaryError(
                f"hardmax attention (head {int(uu[0]) // T}, query {int(uu[0]) % T}): the score differences are "
                "quadratic (curved boundaries) on this domain, and the space engine only splits along hyperplanes; "
                "use --method line (exact along segments) or --method sample"
            )
        rep = _same_units(F, quad, act)
        fam = self.family(R0 * U * (T * (T - 1) // 2), "argmax", U=U, P=T * (T - 1) // 2, k=T)
        st.add_extra("digits", np.zeros((R0, U), np.int32))
        for uq in range(U):
            if rep[uq] == uq:
                self._argmax_unit(uq, F[:, uq], act[:, uq], fam, eF[uq], hF[uq])
        st.extra["digits"][: st.n] = st.extra["digits"][: st.n][:, rep]
        st.sort_by_parent()
        dig = st.extra["digits"][: st.n].astype(np.int64)
        anc = st.anc[: st.n]
        R = st.n
        out = np.zeros((R, c1, T, d))
        done: dict[tuple, np.ndarray] = {}  # (head, query class): queries with equal scores share outputs
        for h in range(H):
            VOt = np.ascontiguousarray(VO[h].transpose(0, 2, 1, 3))  # (R0, T, c1, d)
            for i in range(T):
                uq = h * T + i
                key = (h, int(rep[uq]))
                if key not in done:
                    # keys whose score equals the winner's identically are tied: hardmax averages them
                    Fp = F[anc, uq]  # (R, c1, T)
                    Fw = np.take_along_axis(Fp, dig[:, uq, None, None], axis=-1)
                    tol = SNAP * (np.abs(Fp).sum(axis=1) + np.abs(Fw).sum(axis=1))
                    tied = act[anc, uq] & np.all(np.abs(Fp - Fw) <= tol[:, None, :], axis=1)
                    val = VOt[anc, dig[:, uq]]  # (R, c1, d): the winner's value
                    many = np.flatnonzero(tied.sum(axis=1) > 1)
                    if many.size:
                        wts = tied[many] / tied[many].sum(axis=1, keepdims=True)
                        val[many] = np.einsum("rj,rjcd->rcd", wts, VOt[anc[many]])
                    done[key] = val
                out[:, :, i, :] += done[key]
        self.E = np.broadcast_to(E_att, (T, d)).copy()
        self.hb = np.broadcast_to(hb_att + E_att, (T, d)).copy()
        return out, ("digits", U, dig.astype(np.uint8 if T <= 256 else np.int32))


# ----------------------------------------------------------------------------------------------------
# the op kernels (the space engine's row of the op protocol): ``kernel(eng, op, A) -> (A, par)``, ``par`` the
# parent of each region at entry (None: no region was split)

KERNELS = Kernels("space")


@KERNELS.register("residual")
def _residual_op(eng: _Engine, op: Residual, A: np.ndarray):
    E0, hb0 = eng.E, eng.hb
    A_b, par = eng.run(op.body, A)
    A = A[par] + A_b
    eng.E = E0 + eng.E + _U * (hb0 + eng.hb)
    eng.hb = hb0 + eng.hb + eng.E
    return A, par


@KERNELS.register("affine")
def _affine_op(eng: _Engine, op: Affine, A: np.ndarray):
    A = _affine(A, op)
    aW = np.abs(op.W).T
    bb = np.abs(op.b) if op.b.ndim == 2 else np.abs(op.b)[None, :]
    eng.E = eng.E @ aW + _gamma(op.W.shape[1] + 1) * (eng.hb @ aW + bb)
    eng.hb = eng.hb @ aW + bb + eng.E
    eng._tick()
    return A, None


def _splitter(split: Callable[[_Engine, Any, np.ndarray], tuple[np.ndarray, tuple]]):
    """A kernel from ``split(eng, op, A) -> (A, code block)``, which splits every region (each is a parent)."""

    def kernel(eng: _Engine, op, A: np.ndarray):
        eng.st.reset_parents()
        eng._cache = {}
        A, block = split(eng, op, A)
        par = eng.st.anc[: eng.st.n].copy()
        eng.blocks = [(kind, w, arr[par]) for kind, w, arr in eng.blocks] + [block]
        eng.split_index += 1
        eng.st.compact()
        eng._tick()
        return A, par

    return kernel


KERNELS.register("relu")(_splitter(lambda eng, op, A: eng.relu(A)))
KERNELS.register("groupmax")(_splitter(lambda eng, op, A: eng.groupmax(A, op.k)))
KERNELS.register("attention/hardmax")(_splitter(lambda eng, op, A: eng.attention(A, op)))


# ----------------------------------------------------------------------------------------------------
# public entry point


def _frame(program: Program, domain):
    """``(x0, V, lo, hi)`` of the domain's input map ``x = x0 + V v``, ``v in [lo, hi]`` (``k >= 3`` dims)."""
    q = program.input_dim
    if isinstance(domain, Slice):
        raise DomainError("a 2D slice is the plane engine's domain (partition_plane), not the space engine's")
    if isinstance(domain, Box):
        if domain.dim != q:
            raise DomainError(f"the box is {domain.dim}D but the network takes {q} inputs: give an AffineSlice")
    elif isinstance(domain, AffineSlice):
        if domain.x0.shape[0] != q:
            raise DomainError(f"the slice lives in R^{domain.x0.shape[0]} but the network takes {q} inputs")
    else:
        raise DomainError("the space engine needs a Box or an AffineSlice")
    if domain.dim < 3:
        raise DomainError(
            f"the space engine partitions domains of dimension >= 3 (got {domain.dim}): use the plane or line engine"
        )
    x0, V = domain.input_map()
    return (
        np.asarray(x0, float),
        np.asarray(V, float),
        np.asarray(domain.param_lo, float),
        np.asarray(domain.param_hi, float),
    )


def _cube(k: int) -> _Store:
    st = _Store(k)
    corners = np.array(np.meshgrid(*[[-1.0, 1.0]] * k, indexing="ij")).reshape(k, -1).T  # (2^k, k)
    n = corners.shape[0]
    F = 2 * k
    W = -(-F // _WB)
    bits = np.zeros((n, F), bool)
    bits[:, 0::2] = corners < 0
    bits[:, 1::2] = corners > 0
    st.V = np.concatenate([corners, np.zeros((n, 1))], axis=1)[None]  # the corners are exact
    st.inc = _pack(bits, W)[None]
    st.nv = np.array([n])
    st.fid = (2 * np.arange(F))[None].astype(np.int64)
    fpl = np.zeros((F, k + 2))  # exact planes: error column 0
    fpl[0::2, :k] = np.eye(k)
    fpl[1::2, :k] = -np.eye(k)
    fpl[:, k] = 1.0
    st.fpl = fpl[None]
    st.nf = np.array([F])
    st.cen, st.rad = _balls(st.V, st.nv)
    st.anc = np.zeros(1, np.int64)
    st.n = 1
    return st


def partition_space(
    net,
    domain,
    *,
    max_regions: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Polytopes:
    """Exact partition of a box in R^q (q >= 3) or an :class:`AffineSlice` of dimension >= 3 into the
    activation regions of ``net`` (an MLP, Maxout, hardmax Transformer whose score differences are affine
    on the regions, or a lowered :class:`Program`); see the module docstring for what "exact" means here.

    ``max_regions``: raise :class:`MemoryCapError` once the partition would exceed it. ``progress(done,
    total)`` is called after each op. Raises :class:`CurvedBoundaryError` where a hardmax boundary is
    curved or for ReLU attention, :class:`NotPiecewiseError` for softmax attention, :class:`DomainError`
    for a wrong domain.

    Examples
    --------
    Four ReLU units whose planes ``x = 0``, ``y = 0``, ``z = 0``, ``x + y + z = 1/2`` are in general position
    with every vertex inside the cube: ``1 + 4 + 6 + 4 = 15`` regions (Zaslavsky 1975):

    >>> import regioncount as rc
    >>> W = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, -1.0, -1.0]]
    >>> net = rc.MLP((W, [[1.0, 2.0, 3.0, 4.0]]), ([0.0, 0.0, 0.0, 0.5], [0.0]))
    >>> solid = rc.partition_space(net, rc.Box(-1, 1, 3))
    >>> solid.n_regions, solid.linear_regions(), rc.BOUNDS["zaslavsky"](n=4, n0=3)
    (15, 15, 15)
    >>> round(float(solid.volumes.sum()), 9)
    8.0
    """
    program = lower(net)
    check_magnitudes(program, domain, values=True)  # refuse magnitudes whose float bounds could overflow
    x0, V, lo, hi = _frame(program, domain)
    c, h = (lo + hi) / 2, (hi - lo) / 2
    xc = x0 + V @ c
    spread = np.abs(V) @ h
    check_domain(net, xc - spread, xc + spread)
    k = V.shape[1]
    T = program.tokens
    A = np.zeros((1, k + 1, T, program.input_dim))
    A[0, :k] = (V * h).T[:, None, :]
    A[0, k] = xc
    st = _cube(k)
    eng = _Engine(program, st, _Exact(program, x0, V, lo, hi), progress, max_regions)
    # the float input maps against the exact x = x0 + V (c + h u): c, h, V h and x0 + V c each round
    q = program.input_dim
    size = np.abs(V) @ (np.abs(c) + np.abs(h)) + np.abs(x0)
    eng.E = np.broadcast_to(_gamma(2 * k + 6) * size, (T, q)).copy()
    eng.hb = np.broadcast_to(np.abs(A[0]).sum(axis=0)[0] + eng.E[0], (T, q)).copy()
    A, _ = eng.run(program.ops, A)
    st = eng.st
    n = st.n
    valid = np.arange(st.M) < st.nv[:n, None]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(st.nv[:n], out=offsets[1:])
    verts = c + h * st.V[:n][valid][:, :k]
    inc = st.inc[:n][valid]
    Mn = A[:, :, program.out_token, :].transpose(0, 2, 1)  # (R, out, k+1) in normalised u
    maps = np.empty_like(Mn)
    maps[..., :k] = Mn[..., :k] / h
    maps[..., k] = Mn[..., k] - (Mn[..., :k] * (c / h)).sum(axis=-1)
    fpl = st.fpl[:n, :, : k + 1].copy()
    planes = np.empty_like(fpl)
    planes[..., :k] = fpl[..., :k] / h
    planes[..., k] = fpl[..., k] - (fpl[..., :k] * (c / h)).sum(axis=-1)
    return Polytopes(
        domain,
        verts,
        offsets,
        maps,
        eng.blocks,
        incidence=inc,
        facet_ids=st.fid[:n].copy(),
        facet_planes=planes,
        exact_decisions=eng.exact_calls,
        program=program,
    )
