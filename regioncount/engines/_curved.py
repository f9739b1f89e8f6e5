"""The float curved 2D engine (DESIGN §2 "curved cells", §3 ``curved``): vertical decomposition into
trapezoids bounded by conic arcs, vectorised in NumPy float64 (not exact: see below).

Inside any activation region of a hardmax Transformer every token state is affine in the slice
coordinates ``u = (x, y)``, so a new boundary inside a region is a curve of degree <= 2: a FFN ReLU gives a
line, a hardmax comparison ``S_ij = S_ij'`` a conic (each score is a product of two affine maps). The
engine keeps the partition as *trapezoids*: ``x in (a, b)``, ``y`` between a lower and an upper boundary
arc, each arc one branch (lower or upper root in ``y``) of a line or conic, or a side of the domain. Each
trapezoid carries the affine maps ``(3, T, d)`` from ``(x, y, 1)`` to every token entry and its code.

Splitting a trapezoid by a conic ``Q``: cut it vertically at every ``x`` in ``(a, b)`` where ``Q`` may meet
the lower or upper arc (real roots of the resultants in ``y``, degree <= 4), where ``Q(x, .)`` has a double
root (vertical tangents, the crossing of a line pair) and, for a curve linear in ``y``, its pole. In each
sub-slab the branches of ``Q`` are disjoint graphs that stay between the arcs; they are found at the mid
``x`` by solving a quadratic in ``y`` and stack the sub-slab into 1-3 trapezoids. A trapezoid that ``Q``
does not enter is not cut at all. The sign of ``Q`` on a piece is read from ``dQ/dy`` at the branch below
or above it (not from a value near the curve), so thin pieces get the right side. Cells are formed
afterwards (:mod:`regioncount.results._cells`): trapezoids of one code that share a wall or an arc.

Hardmax heads are decided per query by a tournament: the champion (the argmax at the trapezoid's witness
point) is compared with every other allowed key in index order, splitting by ``S_champion - S_key``; where
the key wins it becomes the champion. Keys whose score maps are identical on a region tie (averaged, like
``forward_codes``). ReLU attention is split exactly by its score signs when its input is affine (its first
attention op); its output is cubic, so any boundary after it has degree >= 3 and the engine stops.

What is exact and what is float: this engine decides with float64 root finding and thresholds, so its
partitions never claim ``exact`` (``Cells.exact`` is False). Roots are companion eigenvalues refined by
Newton; a near-double root pair (closer than 1e-6) is one tangency, refined as a root of the derivative.
Cut points closer than 1e-11 (normalised units) are merged, and a branch root within 1e-12 of an arc at the
sub-slab's mid ``x`` counts as on the arc. After each split the engine checks the arc order at both ends and
the quarter points of every sub-slab (to 1e-9 across the arcs); any violation is counted in
``order_violations``. The certified engine (:mod:`._curved_exact`, exact algebraic predicates) replaces it
by default on partitions of up to ``CERTIFY_TRAPS`` trapezoids (:func:`partition_curved`).

Work is in normalised coordinates ``u' in [-1, 1]^2`` (domain centre and half-widths). NumPy, vectorised
across trapezoids; Python loops run over ops, units and keys only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import overload

import numpy as np

from .._errors import CurvedBoundaryError, MemoryCapError
from ..networks import check_domain, lower, walk_widths
from ..networks._ops import Affine, Attention, GroupMax, Program, ReLU, Residual, code_length, max_code_digit
from . import _conic as cn
from ._plane import _frame  # one input frame and domain check for both exact 2D engines
from ._protocol import Kernels, refuse_unsupported
from ._traps import Traps, _code_dtype

#: Partitions of at most this many trapezoids are recomputed by the certified engine by default (it costs
#: about 1-3 ms per trapezoid in Python; benchmarks/README.md).
CERTIFY_TRAPS = 2000
#: Float engine only (its partitions say ``exact: false``): cut points closer than this are one cut.
CUT_MERGE = 1e-11
#: A root of Q within this of an arc at a sub-slab's mid x lies on the arc (tangent or coincident).
ON_ARC = 1e-12
#: Tolerance of the arc-order check after each split.
ORDER_TOL = 1e-9
#: Relative size below which two score maps are identical (a hardmax tie).
TIE_RTOL = 1e-12
#: Arc ids 0 and 1 are the bottom and top sides of the domain.
_FIRST_ID = 2

_BOTTOM = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 1.0])  # y + 1 = 0
_TOP = np.array([0.0, 0.0, 0.0, 0.0, 1.0, -1.0])  # y - 1 = 0


def unit_square() -> Traps:
    one = np.ones(1)
    return Traps(
        -one,
        one.copy(),
        _BOTTOM[None].copy(),
        # a curve linear in y with dQ/dy > 0 has its other root at -inf: its finite root is the upper one
        np.ones(1, np.int8),
        np.zeros(1, np.int64),
        _TOP[None].copy(),
        np.ones(1, np.int8),
        np.ones(1, np.int64),
        -one,
        one.copy(),
    )


def _best_sign(Q: np.ndarray, x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Sign of ``Q`` on vertical chords ``x, y in (lo, hi)`` where it has no root inside: read where ``|Q|``
    is largest among three interior points."""
    ys = np.stack([lo + 0.25 * (hi - lo), (lo + hi) / 2, hi - 0.25 * (hi - lo)], 1)
    v = cn.value(Q[:, None, :], x[:, None], ys)
    pick = np.take_along_axis(v, np.argmax(np.abs(v), axis=1)[:, None], 1)[:, 0]
    return np.sign(pick).astype(np.int8)


def _slope(Q: np.ndarray, x, y) -> np.ndarray:
    """``|dy/dx| = |Q_x / Q_y|`` of the curves ``Q`` at points on them (inf at vertical tangents)."""
    qx = 2 * Q[:, 0] * x + Q[:, 1] * y + Q[:, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.abs(qx / cn.dy(Q, x, y))
    return np.where(np.isnan(slope), np.inf, slope)


def split_traps(t: Traps, Q: np.ndarray, next_id: int):
    """Split trapezoids ``t`` (``n``) by conics ``Q (n, 6)`` (one per trapezoid).

    Returns ``(pieces, src, sign, next_id, violations)``: the pieces (a trapezoid ``Q`` does not enter is
    its own single piece), the row of ``t`` each came from ``(m,)``, the sign of ``Q`` on each ``(m,)``
    (0 where ``Q`` vanishes identically), the next free arc id and the number of failed order checks.
    """
    n = t.n
    Qn, f = cn.normalise(Q)
    a, b = t.xa, t.xb
    disc = cn.discriminant(Qn)
    pole = np.where((Qn[:, 2] == 0)[:, None], Qn[:, [4, 1]], np.array([[1.0, 0.0]]))
    polys = np.concatenate(
        [
            np.pad(disc, ((0, 0), (0, 2))),
            np.pad(pole, ((0, 0), (0, 3))),
            cn.resultant(Qn, t.Lc),
            cn.resultant(Qn, t.Uc),
        ]
    )
    lo4, hi4 = np.tile(a, 4), np.tile(b, 4)
    R, _ = cn.real_roots(polys, lo4 + CUT_MERGE, hi4 - CUT_MERGE)
    cuts = np.sort(np.concatenate([R[i * n : (i + 1) * n] for i in range(4)], axis=1), axis=1)  # (n, 16)
    # merge cut points closer than CUT_MERGE (keep the first of a run)
    prev = np.concatenate([a[:, None], cuts[:, :-1]], axis=1)
    prev = np.fmax.accumulate(np.where(np.isfinite(prev), prev, -np.inf), axis=1)
    cuts = np.where(cuts - prev > CUT_MERGE, cuts, np.nan)
    cuts = np.sort(cuts, axis=1)
    B = np.concatenate([a[:, None], cuts, np.full((n, 1), np.nan)], axis=1)
    nb = 1 + np.count_nonzero(np.isfinite(cuts), axis=1)  # sub-slabs per row
    B[np.arange(n), nb] = b
    # flatten sub-slabs
    K = B.shape[1] - 1
    valid = np.arange(K)[None, :] < nb[:, None]
    rr, jj = np.nonzero(valid)
    x0, x1 = B[rr, jj], B[rr, jj + 1]
    xm = (x0 + x1) / 2
    Lm = cn.branch_y(t.Lc[rr], t.Lk[rr], xm)
    Um = cn.branch_y(t.Uc[rr], t.Uk[rr], xm)
    Qs = Qn[rr]
    r0, r1 = cn.y_roots(Qs, xm)
    in0 = (r0 > Lm + ON_ARC) & (r0 < Um - ON_ARC)
    in1 = (r1 > Lm + ON_ARC) & (r1 < Um - ON_ARC)
    touch = in0 & in1 & (r1 - r0 <= ON_ARC)  # a double root: Q touches zero without changing sign
    in0 &= ~touch
    in1 &= ~touch
    anyin = in0 | in1
    # the sign off the branches, per sub-slab: a vertical line (or a vertical component of a line pair) of
    # Q lies on a cut, where it flips the sign between sub-slabs without a root in y
    sub_sign = (f[rr] * _best_sign(Qs, xm, Lm, Um)).astype(np.int8)
    smin = np.full(n, 2, np.int8)
    smax = np.full(n, -2, np.int8)
    np.minimum.at(smin, rr, np.where(anyin, 2, sub_sign).astype(np.int8))
    np.maximum.at(smax, rr, np.where(anyin, -2, sub_sign).astype(np.int8))
    row_split = np.zeros(n, bool)
    np.logical_or.at(row_split, rr, anyin)
    row_split |= (smin < smax) & (smin > -2)
    # rows Q does not enter: one piece, sign read in the widest sub-slab
    width = x1 - x0
    order = np.lexsort((-width, rr))
    first = np.ones(rr.size, bool)
    first[1:] = rr[order][1:] != rr[order][:-1]
    widest = order[first]  # one sub-slab per row, rows in order
    keep_rows = np.flatnonzero(~row_split)
    sign_keep = sub_sign[widest[keep_rows]]
    kept = t.take(keep_rows)
    # rows Q enters: every sub-slab becomes 1-3 stacked pieces
    sel = row_split[rr]
    rr, x0, x1, xm, Lm, Um = rr[sel], x0[sel], x1[sel], xm[sel], Lm[sel], Um[sel]
    r0, r1, in0, in1, sign_none = r0[sel], r1[sel], in0[sel], in1[sel], sub_sign[sel]
    m = rr.size
    ids0 = next_id + 2 * np.arange(m)
    ids1 = ids0 + 1
    next_id += 2 * m
    fq = f[rr]
    with np.errstate(invalid="ignore"):
        # sign of Q just above each root (used only where the root is inside, hence finite)
        s0 = np.sign(np.nan_to_num(fq * cn.dy(Qn[rr], xm, np.where(in0, r0, 0.0)))).astype(np.int8)
        s1 = np.sign(np.nan_to_num(fq * cn.dy(Qn[rr], xm, np.where(in1, r1, 0.0)))).astype(np.int8)
    k0 = np.zeros(m, np.int8)
    k1 = np.ones(m, np.int8)
    Qc = Qn[rr]
    L = (t.Lc[rr], t.Lk[rr], t.Lid[rr])
    U = (t.Uc[rr], t.Uk[rr], t.Uid[rr])
    R0 = (Qc, k0, ids0)
    R1 = (Qc, k1, ids1)

    def pick(mask, A, Bv):
        return tuple(np.where(mask[:, None] if x.ndim == 2 else mask, x, y) for x, y in zip(A, Bv))

    # piece 0: L .. first inside root (or U)
    up0 = pick(in0, R0, pick(in1, R1, U))
    sg0 = np.where(in0, -s0, np.where(in1, -s1, sign_none))
    # piece 1: first inside root .. next inside root (or U)
    has1 = in0 | in1
    lo1 = pick(in0, R0, R1)
    up1 = pick(in0 & in1, R1, U)
    sg1 = np.where(in0, s0, s1)
    # piece 2: root 1 .. U when both roots are inside
    has2 = in0 & in1
    specs = [(np.ones(m, bool), L, up0, sg0), (has1, lo1, up1, sg1), (has2, R1, U, s1)]
    parts, srcs, signs = [kept], [keep_rows], [sign_keep]
    violations = 0
    for mask, lo_, up_, sg in specs:
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            continue
        lc, lk, lid = (x[idx] for x in lo_)
        uc, uk, uid = (x[idx] for x in up_)
        xa, xb = x0[idx], x1[idx]
        ymin, _ = cn.branch_range(lc, lk, xa, xb)
        _, ymax = cn.branch_range(uc, uk, xa, xb)
        p = rr[idx]
        ylo = np.maximum(t.ylo[p], ymin - 1e-12 * (1 + np.abs(ymin)))
        yhi = np.minimum(t.yhi[p], ymax + 1e-12 * (1 + np.abs(ymax)))
        parts.append(Traps(xa, xb, lc, lk, lid, uc, uk, uid, ylo, yhi))
        srcs.append(p)
        signs.append(sg[idx].astype(np.int8))
        # order check: lower <= upper at the ends and quarter points, to ORDER_TOL in the normal direction
        # (a cut x known to rounding moves a steep arc's y by its slope times that)
        for s in (0.0, 0.25, 0.75, 1.0):
            xs = xa + s * (xb - xa)
            yl, yu = cn.branch_y(lc, lk, xs), cn.branch_y(uc, uk, xs)
            tol = ORDER_TOL * (1 + _slope(lc, xs, yl) + _slope(uc, xs, yu))
            violations += int(np.count_nonzero(~(yu - yl >= -tol)))
    # roots outside at the mid x must not be well inside at the quarter points
    for s in (0.25, 0.75):
        xs = x0 + s * (x1 - x0)
        Lq = cn.branch_y(L[0], L[1], xs)
        Uq = cn.branch_y(U[0], U[1], xs)
        q0, q1 = cn.y_roots(Qc, xs)
        for r, inside in ((q0, in0), (q1, in1)):
            deep = (r > Lq + ORDER_TOL) & (r < Uq - ORDER_TOL)
            violations += int(np.count_nonzero(deep & ~inside))
    pieces = Traps.concat(parts)
    return pieces, np.concatenate(srcs), np.concatenate(signs), next_id, violations


# ----------------------------------------------------------------------------------------------------
# the engine


def _line_conic(z: np.ndarray) -> np.ndarray:
    """Affine maps ``z (n, 3)`` (coefficients of x, y, 1) as conics ``(n, 6)``."""
    Q = np.zeros((z.shape[0], 6))
    Q[:, 3], Q[:, 4], Q[:, 5] = z[:, 0], z[:, 1], z[:, 2]
    return Q


def _last_axis_matmul(A: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``A @ W`` on the last axis of ``A (..., d)`` as one 2D product (a stacked product would loop over the
    leading axes in small pieces)."""
    return (np.ascontiguousarray(A).reshape(-1, A.shape[-1]) @ W).reshape(A.shape[:-1] + (W.shape[1],))


def _product_conic(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``sum_e q_e(u) k_e(u)`` for affine maps ``q, k (n, 3, e)`` -> conics ``(n, 6)``."""
    d = lambda i, j: np.einsum("ne,ne->n", q[:, i], k[:, j])  # noqa: E731
    return np.stack([d(0, 0), d(0, 1) + d(1, 0), d(1, 1), d(0, 2) + d(2, 0), d(1, 2) + d(2, 1), d(2, 2)], axis=1)


def _score_conics(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Every query-key score ``S_ij(u) = sum_e Q_ie(u) K_je(u)`` as conics: ``Q, K (n, 3, T, e)`` affine maps
    -> ``(n, T, T, 6)``, from one product per trapezoid of its ``(3T, e)`` query and key coefficients."""
    n, _, T, e = Q.shape
    G = np.ascontiguousarray(Q).reshape(n, 3 * T, e) @ np.ascontiguousarray(K).reshape(n, 3 * T, e).transpose(0, 2, 1)
    P = G.reshape(n, 3, T, 3, T).transpose(1, 3, 0, 2, 4)  # P[c, c2, n, i, j] = <Q_i[c], K_j[c2]>
    return np.stack([P[0, 0], P[0, 1] + P[1, 0], P[1, 1], P[0, 2] + P[2, 0], P[1, 2] + P[2, 1], P[2, 2]], axis=-1)


class _Buf:
    """A growable array whose first axis follows the trapezoids: ``a`` is the live view ``(n, ...)``;
    rows are only ever appended (the first piece of a split trapezoid keeps its row)."""

    def __init__(self, a: np.ndarray):
        self.data = np.ascontiguousarray(a)
        self.n = a.shape[0]
        self.refs = 1

    @property
    def a(self) -> np.ndarray:
        return self.data[: self.n]

    def whole(self) -> np.ndarray:
        """The live rows as the buffer itself where it has no spare rows (a view would keep the buffer alive
        after it grows), else as a view."""
        return self.data if self.data.shape[0] == self.n else self.a

    def append_rows(self, src: np.ndarray):
        need = self.n + src.size
        if need > self.data.shape[0]:
            cap = max(need, self.data.shape[0] * 3 // 2, 64)
            data = np.empty((cap,) + self.data.shape[1:], self.data.dtype)
            data[: self.n] = self.data[: self.n]
            self.data = data
        self.data[self.n : need] = self.data[src]
        self.n = need


_TRAP_FIELDS = tuple(f.name for f in dataclasses.fields(Traps) if f.name not in ("Lg", "Ug"))  # conic arcs only


class _Engine:
    """Trapezoids and every array that follows them (maps, codes, per-op state), split op by op."""

    def __init__(self, program: Program, max_traps: int | None, progress):
        self.program = program
        self.bufs: list[_Buf] = []
        sq = unit_square()
        self.tb = {name: self.reg(getattr(sq, name)) for name in _TRAP_FIELDS}
        # the whole code in one buffer (each op writes its columns): one row copy per appended trapezoid
        self.code = self.reg(np.zeros((1, code_length(program)), _code_dtype(max_code_digit(program))))
        self.code_at = 0
        self.next_id = _FIRST_ID
        self.violations = 0
        self.max_traps = max_traps
        self.progress = progress
        self.total = len(walk_widths(program))
        self.done = 0
        self.cubic = False
        self.ties = self.reg(np.zeros(1, np.int64))
        self.appended_from = np.zeros(0, np.int64)  # parents of the trapezoids the last split appended

    @overload
    def reg(self, a: np.ndarray) -> _Buf: ...
    @overload
    def reg(self, a: None) -> None: ...
    def reg(self, a: np.ndarray | None) -> _Buf | None:
        """Make ``a (N, ...)`` follow the trapezoids; an array already registered (a residual's input is
        also its body's first input) shares its buffer. Never modify a registered array in place unless it
        is yours alone."""
        if a is None:
            return None
        for b in self.bufs:
            if b.data is a and b.n == a.shape[0]:
                b.refs += 1
                return b
        b = _Buf(a)
        self.bufs.append(b)
        return b

    def unreg(self, *bufs):
        for b in bufs:
            if b is not None:
                b.refs -= 1
                if b.refs == 0:
                    self.bufs.remove(b)

    @property
    def t(self) -> Traps:
        return Traps(**{name: b.a for name, b in self.tb.items()})

    @property
    def n(self) -> int:
        return self.tb["xa"].n

    def split(self, Q: np.ndarray, active: np.ndarray) -> np.ndarray:
        """Split every active trapezoid by its conic ``Q (N, 6)``; every registered array follows. Returns
        the sign of ``Q`` on each trapezoid afterwards ``(N',)`` (0 on inactive rows)."""
        act = np.flatnonzero(active)
        return self.split_rows(act, Q[act])

    def split_rows(self, act: np.ndarray, Qa: np.ndarray) -> np.ndarray:
        """:meth:`split` for the trapezoids ``act`` only, with their conics ``Qa (len(act), 6)``."""
        t = self.t
        N = t.n
        sign = np.zeros(N, np.int8)
        self.appended_from = np.zeros(0, np.int64)
        if act.size == 0:
            return sign
        s = cn.interval_sign(Qa, t.xa[act], t.xb[act], t.ylo[act], t.yhi[act])
        sign[act] = s
        cand = act[s == 0]
        if cand.size == 0:
            return sign
        pieces, src, sg, self.next_id, v = split_traps(t.take(cand), Qa[s == 0], self.next_id)
        self.violations += v
        # the first piece of each candidate takes its row, the others are appended
        firsts = np.ones(src.size, bool)
        order = np.argsort(src, kind="stable")
        fs = np.ones(src.size, bool)
        fs[1:] = src[order][1:] != src[order][:-1]
        firsts[order] = fs
        extra = np.flatnonzero(~firsts)
        if self.max_traps is not None and N + extra.size > self.max_traps:
            raise MemoryCapError(f"the curved partition passed {self.max_traps:,} trapezoids")
        gsrc = cand[src]
        for b in self.bufs:
            b.append_rows(gsrc[extra])
        rows_first = np.flatnonzero(firsts)
        place = np.concatenate([gsrc[rows_first], N + np.arange(extra.size)])
        from_piece = np.concatenate([rows_first, extra])
        for name, b in self.tb.items():
            b.a[place] = getattr(pieces, name)[from_piece]
        sign = np.concatenate([sign, sign[gsrc[extra]]])
        sign[place] = sg[from_piece]
        self.appended_from = gsrc[extra]
        return sign

    def follow(self, a: np.ndarray) -> np.ndarray:
        """``a (N_before, ...)``, a per-trapezoid array of the caller's from before the last split, extended
        to the trapezoids after it (appended pieces copy their parent's row)."""
        return np.concatenate([a, a[self.appended_from]])

    def _tick(self):
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)

    def _code_columns(self, width: int, at: int | None = None) -> np.ndarray:
        """The live view of ``width`` code columns from ``at``; without ``at``, the op's next ``width`` columns
        (claimed in op order, so the layout is that of ``forward_codes``)."""
        if at is None:
            at, self.code_at = self.code_at, self.code_at + width
        return self.code.a[:, at : at + width]

    def _need_affine(self, A, what: str):
        if A is None:
            raise CurvedBoundaryError(
                f"{what} after a ReLU-attention op: its boundaries have degree above 2 (the attention output is "
                "a cubic spline, Lai, Lim, Liu 2024), which the exact 2D engine cannot split; use --method line "
                "(exact along segments) or --method sample"
            )

    def run(self, ops, A):
        """Apply ``ops`` to the maps ``A (N, 3, T, d)`` (None once they are no longer affine)."""
        for op in ops:
            hold, A = [A], None  # the kernel owns the maps (it pops them): they can be freed as they grow
            A = KERNELS.lookup(op)(self, op, hold)
        return A

    def relu(self, hold: list):
        Z = hold.pop()
        N, _, T, w = Z.shape
        t = self.t
        # every unit at once on the bounding boxes: an affine map's range there is exact up to rounding
        cx, cy = (t.xa + t.xb) / 2, (t.ylo + t.yhi) / 2
        rx, ry = (t.xb - t.xa) / 2, (t.yhi - t.ylo) / 2
        Zf = Z.reshape(N, 3, T * w)
        mid = Zf[:, 0] * cx[:, None] + Zf[:, 1] * cy[:, None] + Zf[:, 2]
        a0, a1 = np.abs(Zf[:, 0]), np.abs(Zf[:, 1])
        rad = a0 * rx[:, None] + a1 * ry[:, None]
        margin = 1e-12 * (a0 + a1 + np.abs(Zf[:, 2]) + rad)  # no (N, 3, T w) temporary
        del a0, a1
        bZ = self.reg(Z)
        del Z, Zf
        off = self.code_at
        self._code_columns(T * w)[:] = mid > rad + margin
        # undecided (unit, trapezoid) pairs; pieces inherit their parent's flags (a decided sign stays)
        und = self.reg(np.abs(mid) <= rad + margin)
        del mid, rad, margin
        for tok in range(T):
            for j in range(w):
                col = tok * w + j
                rows = np.flatnonzero(und.a[:, col])
                if rows.size == 0:
                    continue
                n0 = self.n
                sign = self.split_rows(rows, _line_conic(bZ.a[rows, :, tok, j]))
                rows = np.concatenate([rows, np.arange(n0, self.n)])  # appended pieces came from `rows`
                self._code_columns(T * w, off)[rows, col] = sign[rows] > 0
        self.unreg(bZ, und)
        return bZ.a * self._code_columns(T * w, off).reshape(-1, 1, T, w)

    def group_max(self, hold: list, k: int):
        Z = hold.pop()
        N, _, T, w = Z.shape
        n = w // k
        bZ = self.reg(Z)
        del Z
        off = self.code_at
        self._code_columns(T * n)
        out = self.reg(np.zeros((N, 3, T, n)))
        for tok in range(T):
            for u in range(n):
                x, y = self.t.witness()
                F = bZ.a[:, :, tok, u * k : (u + 1) * k]
                val = F[:, 0] * x[:, None] + F[:, 1] * y[:, None] + F[:, 2]
                champ = self.reg(np.argmax(val, axis=1))
                for r in range(k):
                    F = bZ.a[:, :, tok, u * k : (u + 1) * k]
                    c = champ.a
                    diff = F[np.arange(c.size), :, c] - F[:, :, r]
                    ident = np.all(np.abs(diff) <= TIE_RTOL * np.abs(F).sum(axis=(1, 2))[:, None], axis=1)
                    act = (c != r) & ~ident
                    sign = self.split(_line_conic(diff), act)
                    act, ident = self.follow(act), self.follow(ident)
                    c = champ.a
                    c[:] = np.where((act & (sign < 0)) | (ident & (r < c)), r, c)
                F = bZ.a[:, :, tok, u * k : (u + 1) * k]
                self._code_columns(T * n, off)[:, tok * n + u] = champ.a
                out.a[:, :, tok, u] = F[np.arange(self.n), :, champ.a]
                self.unreg(champ)
        self.unreg(bZ, out)
        return out.a

    def hardmax(self, hold: list, op: Attention):
        A = hold.pop()
        N, _, T, d = A.shape
        H = op.heads
        bA = self.reg(A)
        del A
        off = self.code_at
        self._code_columns(H * T)
        # the winning keys of every head and query; the value rows are gathered once the op's partition is
        # final, so that no value or query/key map has to follow the splits
        bwin = self.reg(np.zeros((N, H, T, T), bool))
        for h in range(H):
            # every score of the head at once (the queries' tournaments then split the trapezoids in turn)
            a = bA.a
            bSall = self.reg(_score_conics(_last_axis_matmul(a, op.Wq[h]), _last_axis_matmul(a, op.Wk[h])))
            del a
            for i in range(T):
                keys = np.arange(i + 1) if op.causal else np.arange(T)
                bS = self.reg(bSall.a[:, i, keys])
                x, y = self.t.witness()
                champ = self.reg(np.argmax(cn.value(bS.a, x[:, None], y[:, None]), axis=1))
                tie = self.reg(np.zeros(bS.a.shape[:2], bool))
                tie.a[np.arange(self.n), champ.a] = True
                for j in range(keys.size):
                    S, c = bS.a, champ.a
                    Sc = S[np.arange(c.size), c]
                    diff = Sc - S[:, j]
                    scale = np.abs(Sc).sum(axis=1) + np.abs(S[:, j]).sum(axis=1)
                    ident = np.all(np.abs(diff) <= TIE_RTOL * scale[:, None], axis=1) & (c != j)
                    act = (c != j) & ~ident
                    del S, Sc, diff, scale
                    sign = self.split(bS.a[np.arange(c.size), c] - bS.a[:, j], act)
                    act, ident = self.follow(act), self.follow(ident)
                    win = act & (sign < 0)
                    champ.a[win] = j
                    tie.a[win] = False
                    tie.a[win, j] = True
                    tie.a[ident, j] = True
                tw = tie.a
                self._code_columns(H * T, off)[:, h * T + i] = np.argmax(tw, axis=1)
                self.ties.a[:] += tw.sum(axis=1) > 1
                bwin.a[:, h, i, : keys.size] = tw
                self.unreg(bS, champ, tie)
            self.unreg(bSall)
        a, win = bA.a, bwin.a
        self.unreg(bA, bwin)
        out = np.zeros((a.shape[0], 3, T, d))
        for h in range(H):
            VO = _last_axis_matmul(_last_axis_matmul(a, op.Wv[h]), op.Wo[h])  # (N, 3, T, d)
            for i in range(T):
                keys = np.arange(i + 1) if op.causal else np.arange(T)
                tw = win[:, h, i, : keys.size]
                # one winner: copy its value row; tied keys (identical score maps) are averaged
                nt = tw.sum(axis=1)
                one = np.flatnonzero(nt == 1)
                out[one, :, i, :] += VO[one, :, keys[np.argmax(tw[one], axis=1)], :]
                many = np.flatnonzero(nt > 1)
                if many.size:
                    wts = tw[many] / nt[many, None]
                    out[many, :, i, :] += np.einsum("nk,nckd->ncd", wts, VO[many][:, :, keys, :])
        return out

    def relu_attention(self, hold: list, op: Attention):
        A = hold.pop()
        N, _, T, d = A.shape
        H = op.heads
        bA = self.reg(A)
        del A
        off = self.code_at
        self._code_columns(H * T * T)
        for h in range(H):
            for i in range(T):
                for j in range(i + 1 if op.causal else T):
                    a = bA.a
                    S = _product_conic(_last_axis_matmul(a[:, :, i], op.Wq[h]), _last_axis_matmul(a[:, :, j], op.Wk[h]))
                    sign = self.split(S, np.ones(self.n, bool))
                    self._code_columns(H * T * T, off)[:, (h * T + i) * T + j] = sign > 0
        self.unreg(bA)
        self.cubic = True
        return None


# ----------------------------------------------------------------------------------------------------
# one kernel per op (the op protocol, :mod:`._protocol`): each takes the engine, the op and a list holding
# the maps, which it pops (it owns them, so no caller keeps a stale copy alive as they grow) and returns
# the maps after the op


KERNELS = Kernels("curved")


@KERNELS.register("affine")
def _affine(eng: _Engine, op: Affine, hold: list):
    A = hold.pop()
    if A is not None:
        A = _last_axis_matmul(A, op.W.T)
        A[:, 2] += op.b
    eng._tick()
    return A


def _splitting(eng: _Engine, hold: list, what: str, apply):
    """A splitting op: its input maps must still be affine; ``apply`` empties ``hold`` (the op owns them)."""
    eng._need_affine(hold[0], what)
    out = apply(hold)
    eng._tick()
    return out


@KERNELS.register("relu")
def _relu(eng: _Engine, op: ReLU, hold: list):
    return _splitting(eng, hold, "a ReLU", eng.relu)


@KERNELS.register("groupmax")
def _group_max(eng: _Engine, op: GroupMax, hold: list):
    return _splitting(eng, hold, "a maxout unit", lambda hold: eng.group_max(hold, op.k))


@KERNELS.register("attention/hardmax", "attention/relu")
def _attention(eng: _Engine, op: Attention, hold: list):
    split = eng.hardmax if op.sigma == "hardmax" else eng.relu_attention
    return _splitting(eng, hold, "an attention op", lambda hold: split(hold, op))


@KERNELS.register("residual")
def _residual(eng: _Engine, op: Residual, hold: list):
    base = eng.reg(hold.pop())  # the body reads the registered array, which follows the splits
    B = eng.run(op.body, None if base is None else base.whole())
    eng.unreg(base)
    return None if (B is None or base is None) else base.a + B


# ----------------------------------------------------------------------------------------------------
# public entry point


def partition_curved(
    net,
    domain,
    *,
    max_traps: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    snapshots: tuple[int, ...] = (),
    certified: bool | None = None,
):
    """Partition of a 2D domain into the connected cells of ``net`` (hardmax Transformers at any
    depth; ReLU attention up to its first attention op; MLPs and Maxout networks too, more slowly than the
    ``plane`` engine). Returns a :class:`~regioncount.results._cells.Cells`.

    ``certified``: True runs the certified engine (:mod:`._curved_exact`, exact algebraic predicates;
    ImportError without python-flint); False the float engine of this module only (``exact: false``);
    None (default) runs the float engine and, where python-flint is installed and the partition has at
    most ``CERTIFY_TRAPS`` trapezoids, replaces it by the certified one
    (whose counts are the claim, ``exact: true``). Otherwise the float partition is returned with
    ``exact: false``.

    ``domain``: a 2D :class:`Box` for a 2-input network or a :class:`Slice`. ``max_traps`` bounds the number
    of trapezoids (:class:`MemoryCapError` past it). ``progress(done_ops, total_ops)`` is called per op.
    ``snapshots``: counts ``k`` of top-level ops after which the output map of the program truncated there
    (its last op, the readout, applied to the output token) is recorded in ``Cells.prefix_maps[k]``: the
    cells of every truncation of a Transformer come from one run (:meth:`Cells.truncated_counts`).
    Raises :class:`CurvedBoundaryError` where a boundary has degree above 2 (after a ReLU-attention op),
    :class:`NotPiecewiseError` for softmax attention.
    """
    from ..results._cells import Cells

    if certified:
        from ._curved_exact import partition_curved_exact

        return partition_curved_exact(net, domain, max_traps=max_traps, snapshots=snapshots)
    program = lower(net)
    refuse_unsupported("curved", (op for op, _, _ in walk_widths(program)))
    if certified is None:
        from . import _algebraic
        from ._curved_exact import wall_degree_bound

        if wall_degree_bound(program) > 2:
            # walls of degree >= 3 (past a ReLU-attention op): only the certified engine splits them
            if not _algebraic.HAVE_FLINT:
                raise CurvedBoundaryError(
                    "this network's cell walls have degree above 2 (after a ReLU-attention op); the certified "
                    "curved engine splits them and needs python-flint: pip install 'regioncount[exact]' "
                    "(or use --method line or --method sample)"
                )
            from ._curved_exact import partition_curved_exact

            return partition_curved_exact(net, domain, max_traps=max_traps, snapshots=snapshots)
    x0n, Vn, c, h, xlo, xhi = _frame(program, domain)
    check_domain(net, xlo, xhi)
    T = program.tokens
    A = np.zeros((1, 3, T, program.input_dim))
    A[0, 0] = Vn[:, 0]
    A[0, 1] = Vn[:, 1]
    A[0, 2] = x0n
    eng = _Engine(program, max_traps, progress)
    readout = program.ops[-1]
    snaps: dict[int, _Buf | None] = {}
    for k, op in enumerate(program.ops):
        A = eng.run((op,), A)
        if k + 1 in snapshots and k + 1 < len(program.ops):
            if A is None or not readout.is_affine:
                snaps[k + 1] = None
            else:
                y = A[:, :, program.out_token, :] @ readout.W.T
                y[:, 2] += readout.b if readout.b.ndim == 1 else readout.b[program.out_token]
                snaps[k + 1] = eng.reg(y)
    t = eng.t.take(slice(None))
    codes = eng.code.a
    maps = None if A is None else A[:, :, program.out_token, :].transpose(0, 2, 1).copy()  # (N, out, 3) in u'
    if certified is None and t.n <= CERTIFY_TRAPS:
        from . import _algebraic

        if _algebraic.HAVE_FLINT:
            from ._curved_exact import partition_curved_exact

            return partition_curved_exact(net, domain, max_traps=max_traps, snapshots=snapshots)
    return Cells(
        domain=domain,
        traps=t,
        codes=codes,
        maps=maps,
        centre=c,
        half=h,
        order_violations=eng.violations,
        ties=int(np.count_nonzero(eng.ties.a)),
        kind="spline" if eng.cubic else "linear",
        prefix_maps={k: None if b is None else b.a.transpose(0, 2, 1).copy() for k, b in snaps.items()},
        code_map=program.code_map,
    )
