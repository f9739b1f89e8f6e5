"""The line engine's exact walk for ReLU / Maxout programs: float64 signs with rigorous error bounds, exact
rational replay where they cannot decide (see the package docstring)."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
from fractions import Fraction

import numpy as np

from ..._domain import Segment
from ..._errors import RegionCountError
from ..._predicates import EPS, ETA, dyadic, gamma, rescale
from ...networks._ops import Affine, Program, Residual
from .._exact import ExactMap, ExactReplay
from .._protocol import op_key, support
from ._float import _chunked

# ---------------------------------------------------------------------------------------------------
# the exact walk for ReLU / Maxout programs (affine state, affine comparisons)
#
# Every interval carries its state in the global t, ``H (n, 2, T, d)`` (coefficients of 1 and t), with a
# rigorous bound on its error against the exact (real) state of the float64 network on that interval,
# anywhere on t in [0, 1]: ``E[r] * er[i] + eb[i]`` for unit i (one scale per interval, per-unit factors
# per op, so carrying it costs no second matrix product). Every break is a number the exact network
# defines: the root of comparison ``col`` of op ``op`` on the interval's state there; it is kept as a
# float, an error bound, and that identity, from which exact integer arithmetic recovers it (the code
# prefix of either neighbouring interval before ``op`` gives the exact state). A comparison is affine on an interval, so its sign at the two ends
# settles everything: a strict sign change is one root inside, otherwise its sign is constant (zero when
# it vanishes at both ends: identically zero). Roots of one interval are ordered by their floats where
# their error intervals are apart and in exact arithmetic where they overlap (equal roots then give one
# break). No length, distance or relative size decides whether a piece exists.

_U = EPS  # unit roundoff of float64
_TINY = ETA  # smallest subnormal: a product that underflows loses at most this much (the one underflow rule)
_gamma = gamma  # Higham's gamma_n, rounded up (regioncount._predicates)


class FloatRangeError(RegionCountError):
    """Float64 intermediate values of the walk overflow: the engine stops instead of guessing."""


def _finite(*arrays) -> None:
    for a in arrays:
        if not np.all(np.isfinite(a)):
            raise FloatRangeError(
                "float64 overflow: an intermediate value of the network on this segment exceeds 1.8e308, so the "
                "line engine cannot bound its rounding; rescale the weights (the count is scale-free) or shorten "
                "the segment"
            )


_dyadic = dyadic
_rescale = rescale


class _Exact:
    """Exact replay of the program on one interval's code: the state an op sees as integers times a
    power of two (``(M (2, T, d) object, e)``: coefficients of 1 and t are ``M * 2^-e``). The maps come from
    the one exact interpreter of codes (:class:`~regioncount.engines._exact.ExactReplay` on the
    :mod:`~regioncount.networks._interpret` kernels), memoised by code prefix; nothing is rounded."""

    def __init__(self, program: Program, seg: Segment):
        self.program = program
        T, q = program.tokens, program.input_dim
        a = [Fraction(v) for v in np.asarray(seg.a, dtype=np.float64).tolist()]
        b = [Fraction(v) for v in np.asarray(seg.b, dtype=np.float64).tolist()]
        M0 = np.empty((2, T, q), dtype=object)  # the interpreter's order: the t coefficient, then the constant
        for t in range(T):
            M0[0, t] = [y - x for x, y in zip(a, b, strict=True)]
            M0[1, t] = a
        self.M0 = ExactMap.of_fractions(M0)
        self._replay: ExactReplay | None = None  # built on first use: attention walks never ask

    def state(self, codes: list, row: int, leaf: int) -> tuple[np.ndarray, int]:
        """The exact input ``(M (2, T, d), e)`` of leaf op number ``leaf`` on interval ``row`` of ``codes``."""
        if self._replay is None:
            self._replay = ExactReplay(self.program, self.M0)
        M = self._replay.maps_at([c[row] for c in codes[: self._code_ops[leaf]]], leaf)
        if M.s.denominator & (M.s.denominator - 1):
            raise ArithmeticError("internal error: a ReLU/Maxout state whose scale is not a power of two")
        N = M.N[::-1] * M.s.numerator if M.s.numerator != 1 else M.N[::-1]
        return N, M.s.denominator.bit_length() - 1

    def bind(self, code_ops: list[int]) -> None:
        """``code_ops[leaf]``: how many code-writing ops come before leaf op ``leaf``."""
        self._code_ops = code_ops


@dataclasses.dataclass
class _AState:
    """Intervals of the exact walk. ``lo, hi`` floats with error bounds ``dlo, dhi`` and break ids
    ``ilo, ihi`` (-1: t = 0, -2: t = 1, else a row of the break table); ``H (n, 2, T, d)`` the state's
    coefficients of 1 and t; ``E (n,)`` scales the walk's per-unit error bound (see ``_Walk.er``)."""

    lo: np.ndarray
    hi: np.ndarray
    dlo: np.ndarray
    dhi: np.ndarray
    ilo: np.ndarray
    ihi: np.ndarray
    H: np.ndarray
    E: np.ndarray
    stack: list
    codes: list

    def take(self, parent: np.ndarray) -> None:
        self.H, self.E = self.H[parent], self.E[parent]
        self.stack = [(X[parent], Y[parent]) for X, Y in self.stack]
        self.codes = [c[parent] for c in self.codes]

    def part(self, i: int, j: int) -> _AState:
        lo, hi, dlo, dhi, ilo, ihi, H, E = (
            a[i:j] for a in (self.lo, self.hi, self.dlo, self.dhi, self.ilo, self.ihi, self.H, self.E)
        )
        return _AState(
            lo,
            hi,
            dlo,
            dhi,
            ilo,
            ihi,
            H,
            E,
            [(X[i:j], Y[i:j]) for X, Y in self.stack],
            [c[i:j] for c in self.codes],
        )

    def join(self, parts: list[_AState]) -> None:
        cat = lambda xs: np.concatenate(xs, axis=0)
        for name in ("lo", "hi", "dlo", "dhi", "ilo", "ihi", "H", "E"):
            setattr(self, name, cat([getattr(q, name) for q in parts]))
        self.stack = [(cat([s[0] for s in ss]), cat([s[1] for s in ss])) for ss in zip(*(q.stack for q in parts))]
        self.codes = [cat(list(cs)) for cs in zip(*(q.codes for q in parts))]


class _Walk:
    """The exact walk of a ReLU / Maxout program along a segment; counts its predicates."""

    def __init__(self, program: Program, seg: Segment):
        self.program = program
        self.exact = _Exact(program, seg)
        # the break table, in blocks: break ``first + i`` of a block is the root of comparison ``cols[i]``
        # (flat column, piece a, piece b or -1) of leaf op ``leaf``
        self.break_blocks: list[tuple[int, int, np.ndarray]] = []
        self.n_breaks = 0
        self.predicates = 0
        self.exact_predicates = 0
        # unit i's error on interval r is at most E[r] * er[i] + eb[i] anywhere on t in [0, 1]
        self.er = np.zeros((1, 1))
        self.eb = np.zeros((1, 1))
        self.err_stack: list = []
        self._abs_rows: dict[int, np.ndarray] = {}
        self.leaf = 0
        self.code_ops: list[int] = []
        self._number(program.ops)
        self.exact.bind(self.code_ops)

    def _number(self, ops) -> None:
        n_codes = 0

        def visit(ops):
            nonlocal n_codes
            for op in ops:
                if isinstance(op, Residual):
                    visit(op.body)
                    continue
                self.code_ops.append(n_codes)
                if op.records != "nothing":
                    n_codes += 1

        visit(ops)

    # -- exact values ------------------------------------------------------------------------------

    def _column(self, H, col: tuple[int, ...], k: int):
        """Exact ``(alpha, beta)`` of comparison ``col`` on the exact state ``H (2, T, d)``."""
        c, a, b = col
        if b < 0:
            return H[0].reshape(-1)[c], H[1].reshape(-1)[c]
        G0, G1 = H[0].reshape(-1, k), H[1].reshape(-1, k)
        return G0[c, a] - G0[c, b], G1[c, a] - G1[c, b]

    def break_value(self, st: _AState, row: int, which: str) -> Fraction:
        bid = int((st.ilo if which == "lo" else st.ihi)[row])
        if bid == -1:
            return Fraction(0)
        if bid == -2:
            return Fraction(1)
        i = bisect.bisect_right([f for f, _, _ in self.break_blocks], bid) - 1
        first, leaf, block = self.break_blocks[i]
        col = tuple(int(x) for x in block[bid - first])
        H, _ = self.exact.state(st.codes, row, leaf)
        alpha, beta = self._column(H, col, self._k_of[leaf])
        return Fraction(-alpha, beta)

    # -- ops ---------------------------------------------------------------------------------------

    def run(self, st: _AState) -> None:
        self._k_of: dict[int, int] = {}
        self._apply(st, self.program.ops)

    def _apply(self, st: _AState, ops) -> None:
        for op in ops:
            if isinstance(op, Residual):
                st.stack.append((st.H, st.E))
                self.err_stack.append((self.er, self.eb))
                self._apply(st, op.body)
                X, qX = st.stack.pop()
                erX, ebX = self.err_stack.pop()
                H = X + st.H
                size = np.abs(H[:, 0]).max(axis=(1, 2)) + np.abs(H[:, 1]).max(axis=(1, 2))
                q = qX * erX.max() + ebX.max() + st.E * self.er.max() + self.eb.max() + _U * size
                st.E = q * (1 + 8 * _U) + _TINY
                self.er, self.eb = np.ones((1, 1)), np.zeros((1, 1))
                st.H = H
                _finite(st.H, st.E)
                continue
            leaf = self.leaf
            self.leaf += 1
            n, _, T, d = st.H.shape
            if op.key == "affine":
                g = _gamma(d + 1)
                with np.errstate(over="ignore", invalid="ignore"):
                    H = (st.H.reshape(-1, d) @ op.W.T).reshape(n, 2, T, -1)
                    H[:, 0] += op.b
                    # Higham, Accuracy and Stability, 3.1: |fl(w.x + b) - (w.x + b)| <= gamma_{d+1} (|w|.|x| + |b|);
                    # with |x_i(t)| <= s and |error of x_i| <= e for t in [0, 1], unit j's error is at most
                    # rowsum|W_j| (e + gamma s) + gamma |b_j|
                    s = np.abs(st.H[:, 0]).max(axis=(1, 2)) + np.abs(st.H[:, 1]).max(axis=(1, 2))
                    e = st.E * self.er.max() + self.eb.max()
                    q = (e + g * s) * (1 + 8 * _U)
                _finite(H, q)
                st.H, st.E = H, q
                self.er, self.eb = self._affine_error(op, g)
            elif op.key == "relu":
                self._k_of[leaf] = 1
                _chunked(st, functools.partial(self._relu, leaf=leaf), 8 * T * d)
            elif op.key == "groupmax":
                self._k_of[leaf] = op.k
                pairs = op.k * (op.k - 1) // 2
                per = 8 * T * (d // op.k) * pairs + 3 * T * d
                _chunked(st, functools.partial(self._group_max, leaf=leaf, k=op.k), per)
            else:  # the exact walk's row of the op protocol refuses it (attention walks are float walks)
                refusal = support("line/exact", op_key(op))
                if refusal is not None:
                    refusal.raise_()
                raise TypeError(f"the exact line walk has no step for {op_key(op)!r}")

    def _affine_error(self, op: Affine, g: float):
        key = id(op)
        if key not in self._abs_rows:
            self._abs_rows[key] = np.abs(op.W).sum(axis=1) * (1 + 4 * _gamma(op.W.shape[1] + 4))
        er = self._abs_rows[key][None, :]
        eb = np.atleast_2d(g * np.abs(op.b)) * (1 + 4 * _U) + (op.W.shape[1] + 2) * _TINY
        return er, eb

    def _relu(self, st: _AState, leaf: int) -> None:
        n, _, T, d = st.H.shape
        Z = st.H.reshape(n, 2, T * d)
        er, eb = np.broadcast_to(self.er, (T, d)).reshape(-1), np.broadcast_to(self.eb, (T, d)).reshape(-1)
        EZ = st.E[:, None] * er + eb
        cols = np.stack([np.arange(T * d), np.zeros(T * d, np.int64), np.full(T * d, -1)], axis=1)
        par, left, right, flips, starts = self._split(st, Z, EZ, cols, leaf, 1)
        bits = (left > 0)[par]
        rows, cs = flips
        bits[rows, cs] = right[par[rows], cs] > 0
        self._refine(st, par, starts)
        st.H = st.H * bits.reshape(-1, 1, T, d)
        st.codes.append(bits.astype(np.int32))

    def _group_max(self, st: _AState, leaf: int, k: int) -> None:
        n, _, T, d = st.H.shape
        u = T * d // k
        G = st.H.reshape(n, 2, u, k)
        er = np.broadcast_to(self.er, (T, d)).reshape(u, k)
        eb = np.broadcast_to(self.eb, (T, d)).reshape(u, k)
        j0, j1 = np.triu_indices(k, 1)
        D = G[..., j0] - G[..., j1]
        Z = D.reshape(n, 2, -1)
        pair_r, pair_b = (er[:, j0] + er[:, j1]).reshape(-1), (eb[:, j0] + eb[:, j1]).reshape(-1)
        EZ = (st.E[:, None] * pair_r + pair_b + _U * (np.abs(D[:, 0]) + np.abs(D[:, 1])).reshape(n, -1)) * (1 + 4 * _U)
        P = j0.size
        unit = np.repeat(np.arange(u), P)
        cols = np.stack([unit, np.tile(j0, u), np.tile(j1, u)], axis=1)
        par, left, right, flips, starts = self._split(st, Z, EZ, cols, leaf, k)
        # sign of f_a - f_b on every sub-interval: +1 / -1, or 0 where it vanishes identically
        sgn = left.astype(np.int8)[par]
        rows, cs = flips
        sgn[rows, cs] = right[par[rows], cs]
        sgn = sgn.reshape(-1, u, P)
        wins = np.zeros(sgn.shape[:2] + (k,), np.int8)
        for q in range(P):  # a < b: a also wins a tie (the first maximal index, as argmax)
            wins[..., j0[q]] += sgn[..., q] >= 0
            wins[..., j1[q]] += sgn[..., q] < 0
        idx = np.argmax(wins == k - 1, axis=-1)
        # merge neighbouring sub-intervals of one parent with the same winners
        m = par.shape[0]
        new = np.ones(m, bool)
        new[1:] = (par[1:] != par[:-1]) | np.any(idx[1:] != idx[:-1], axis=1)
        keep = np.flatnonzero(new)
        self._refine(st, par[keep], tuple(a[keep] for a in starts))
        ix = idx[keep]
        G = st.H.reshape(-1, 2, u, k)
        st.H = np.take_along_axis(G, ix[:, None, :, None], axis=-1).reshape(-1, 2, T, d // k)
        self.er, self.eb = er.max(axis=1).reshape(T, -1), eb.max(axis=1).reshape(T, -1)  # the winner's is below
        st.codes.append(ix.astype(np.int32))

    def _refine(self, st: _AState, par: np.ndarray, starts: tuple) -> None:
        """Children ``par (m,)`` with left ends ``starts = (t, dt, id, first)`` (``first``: the parent's own)."""
        t, dt, tid, first = starts
        m = par.shape[0]
        last = np.ones(m, bool)
        last[:-1] = par[1:] != par[:-1]
        lo = np.where(first, st.lo[par], t)
        dlo = np.where(first, st.dlo[par], dt)
        ilo = np.where(first, st.ilo[par], tid)
        nxt = np.append(np.arange(1, m), m - 1)
        hi = np.where(last, st.hi[par], lo[nxt])
        dhi = np.where(last, st.dhi[par], dlo[nxt])
        ihi = np.where(last, st.ihi[par], ilo[nxt])
        st.lo, st.hi, st.dlo, st.dhi, st.ilo, st.ihi = lo, hi, dlo, dhi, ilo, ihi
        st.take(par)

    # -- the predicates ----------------------------------------------------------------------------

    def _end_values(self, st: _AState, Z, A, B, which: str):
        """Values ``(n, M)`` of the comparisons at each interval's ``lo`` or ``hi`` end and a bound on
        their distance to the exact values there: ``|v - z(t_exact)| <= gamma_3 (|c0| + |c1 t|) + eps +
        |beta| |t - t_exact|``, with ``A = gamma_3 |c0| + eps`` and ``B = |c1| + 2 eps >= |beta|`` (both
        inflated); ``eps`` bounds the state's error on [0, 1] and the end's float is within ``dt``."""
        t = st.lo if which == "lo" else st.hi
        dt = st.dlo if which == "lo" else st.dhi
        with np.errstate(over="ignore", invalid="ignore"):
            v = Z[:, 0] + Z[:, 1] * t[:, None]
            bound = A + B * (_gamma(3) * np.abs(t) + dt)[:, None]
        _finite(v)
        return v, bound

    def _exact_sign(self, st, row: int, col, leaf: int, k: int, which: str) -> int:
        """The exact sign of comparison ``col`` at the ``which`` end of interval ``row``."""
        t = self.break_value(st, row, which)
        H, _ = self.exact.state(st.codes, row, leaf)
        alpha, beta = self._column(H, tuple(int(x) for x in col), k)
        v = alpha + beta * t  # times a positive power of two
        return (v > 0) - (v < 0)

    def _split(self, st: _AState, Z, EZ, cols, leaf: int, k: int):
        """Split every interval on the signs of the affine comparisons ``Z (n, 2, M)`` (coefficients of 1
        and t; ``EZ (n, M)`` bounds their error anywhere on [0, 1]).

        Returns ``par (m,)``, the signs ``left, right (n, M) int8`` just after ``lo`` and just before
        ``hi`` (equal where no root is inside), ``flips = (rows, cols)``: the sub-intervals (rows of
        ``par``) and comparisons whose sign is ``right`` (after their root) rather than ``left``, and the
        sub-intervals' left ends ``(t, dt, id, first)``.
        """
        n, _, M = Z.shape
        grow = 1 + _gamma(24)  # covers the roundings of the bound's own evaluation
        A = (_gamma(3) * np.abs(Z[:, 0]) + EZ) * grow + 4 * _TINY
        B = (np.abs(Z[:, 1]) + 2 * EZ) * grow  # |beta| <= |c1| + 2 eps (the error is affine in t)
        vL, bL = self._end_values(st, Z, A, B, "lo")
        vR, bR = self._end_values(st, Z, A, B, "hi")
        self.predicates += 2 * n * M
        left = np.sign(vL).astype(np.int8)
        right = np.sign(vR).astype(np.int8)
        unsure_l, unsure_r = np.abs(vL) <= bL, np.abs(vR) <= bR
        if unsure_l.any() or unsure_r.any():
            fix = np.flatnonzero((unsure_l | unsure_r).reshape(-1))
            self.exact_predicates += int(np.count_nonzero(unsure_l) + np.count_nonzero(unsure_r))
            for f in fix.tolist():
                r, c = divmod(f, M)
                sl = self._exact_sign(st, r, cols[c], leaf, k, "lo") if unsure_l[r, c] else int(left[r, c])
                sr = self._exact_sign(st, r, cols[c], leaf, k, "hi") if unsure_r[r, c] else int(right[r, c])
                # affine: a sign that holds at one end and is not 0 holds all through unless the other end
                # has the opposite sign (then one root inside)
                left[r, c] = sl if sl != 0 else sr
                right[r, c] = sr if sr != 0 else sl
        cross = left != right
        ri, rc = np.nonzero(cross)
        c0, c1, eps = Z[ri, 0, rc], Z[ri, 1, rc], EZ[ri, rc]
        mL = np.maximum(np.abs(vL[ri, rc]) - bL[ri, rc], 0)  # lower bounds on |z| at the two ends
        mR = np.maximum(np.abs(vR[ri, rc]) - bR[ri, rc], 0)
        lo_r, hi_r = st.lo[ri], st.hi[ri]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            t = np.minimum(np.maximum(-c0 / c1, lo_r), hi_r)  # the root is inside the interval
            t = np.where(np.isfinite(t), t, lo_r)
            # |beta| (R - L) = |z(L)| + |z(R)| >= the two margins; |t - root| = |z(t)| / |beta|
            width = np.nextafter((hi_r + st.dhi[ri]) - (lo_r - st.dlo[ri]), np.inf)
            slope = (mL + mR) / width * (1 - 8 * _U)
            zt = np.abs(c0 + c1 * t) + _gamma(3) * (np.abs(c0) + np.abs(c1 * t)) + eps
            dt = np.where(slope > 0, zt / slope, np.inf) * (1 + _gamma(8)) + 4 * _TINY
        poor = np.flatnonzero(~(dt <= 2.0**-10))  # t is in [0, 1]: a float that may be off by 1e-3 or more
        if poor.size:  # a float root far from the exact one (underflow, cancellation): round the exact one
            col_list = cols.tolist()
            for i in poor.tolist():
                H, _ = self.exact.state(st.codes, int(ri[i]), leaf)
                alpha, beta = self._column(H, col_list[rc[i]], k)
                t[i] = min(max(float(Fraction(-alpha, beta)), lo_r[i]), hi_r[i])
                dt[i] = math.ulp(t[i]) + st.dlo[ri[i]] + st.dhi[ri[i]]  # the clamp moves it at most that far
        # rounded outwards, so that [lower, upper] holds the exact root
        lower = np.nextafter(np.maximum(t - dt, lo_r - st.dlo[ri]), -np.inf)
        upper = np.nextafter(np.minimum(t + dt, hi_r + st.dhi[ri]), np.inf)
        order = np.lexsort((t, ri))
        ri, rc, t, dt, lower, upper = ri[order], rc[order], t[order], dt[order], lower[order], upper[order]
        R = ri.size
        self.predicates += max(R - 1, 0)
        # running maximum of ``upper`` within each parent (ranks keep it exact): a root whose error
        # interval reaches a later one's cannot be ordered by floats
        run_up = upper
        if R:
            rk = np.empty(R, np.int64)
            rk[np.argsort(upper, kind="stable")] = np.arange(R)
            key = np.maximum.accumulate(ri.astype(np.int64) * (R + 1) + rk)
            run_up = np.sort(upper)[key % (R + 1)]
        same = np.zeros(R, bool)
        same[1:] = ri[1:] == ri[:-1]
        linked = np.zeros(R, bool)  # linked[i]: root i may not lie above root i - 1
        linked[1:] = same[1:] & (lower[1:] <= run_up[:-1])
        new_group = ~linked  # decided by floats: root i lies strictly above the roots before it
        if linked.any():  # the exact order may permute the roots of a cluster: rc, t, dt follow it
            self._resolve_clusters(st, ri, rc, t, dt, linked, new_group, cols, leaf, k)
            t = np.minimum(np.maximum(t, st.lo[ri]), st.hi[ri])
        tid = np.arange(R) + self.n_breaks
        if R:  # (a merged root's row is simply never used)
            self.break_blocks.append((self.n_breaks, leaf, cols[rc]))
            self.n_breaks += R
        # group index of every root within its parent, and the number of groups per parent
        g = np.cumsum(new_group) - 1
        if R:
            base = np.maximum.accumulate(np.where(~same, g, -1))
            g = g - base
        groups = np.zeros(n, np.int64)
        if R:
            np.maximum.at(groups, ri, g + 1)
        counts = groups + 1  # sub-intervals per parent
        par = np.repeat(np.arange(n), counts)
        offs = np.cumsum(counts) - counts
        first = np.zeros(par.size, bool)
        first[offs] = True
        # left end of sub-interval q > 0 of a parent: the first root of group q - 1
        heads = np.flatnonzero(new_group)
        sub = offs[ri[heads]] + g[heads] + 1
        T0, D0 = np.zeros(par.size), np.zeros(par.size)
        I0 = np.full(par.size, -3, np.int64)
        T0[sub], D0[sub], I0[sub] = t[heads], dt[heads], tid[heads]
        # the sub-intervals after each root: offs + g + 1 .. offs + groups
        lengths = groups[ri] - g
        rep = np.repeat(np.arange(R), lengths)
        within = np.arange(rep.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        rows = offs[ri[rep]] + g[rep] + 1 + within
        return par, left, right, (rows, rc[rep]), (T0, D0, I0, first)

    def _resolve_clusters(self, st, ri, rc, t, dt, linked, new_group, cols, leaf, k) -> None:
        """Order the roots of every cluster (a run of linked roots) exactly, in place; equal roots share a
        group. Their floats become the correctly rounded exact values (within half an ulp)."""
        R = ri.size
        start = np.flatnonzero(~linked)
        ends = np.append(start[1:], R)
        col_list = cols.tolist()
        for s, e in zip(start.tolist(), ends.tolist()):
            if e - s < 2:
                continue
            H, _ = self.exact.state(st.codes, int(ri[s]), leaf)
            members = rc[s:e].tolist()
            vals = []
            for c in members:
                alpha, beta = self._column(H, col_list[c], k)
                vals.append(Fraction(-alpha, beta))
            self.exact_predicates += e - s - 1
            perm = sorted(range(e - s), key=vals.__getitem__)
            rc[s:e] = [members[i] for i in perm]
            prev = None
            for j, i in enumerate(perm):
                v = vals[i]
                f = float(v)  # correctly rounded
                t[s + j] = f
                dt[s + j] = math.ulp(f)
                new_group[s + j] = prev is None or v != prev
                prev = v
