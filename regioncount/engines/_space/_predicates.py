"""The space engine's predicates: the constraint registry (families of hyperplane ids), the exact rational
re-evaluation of a region's maps from its code (:class:`_Exact`), and the sign decisions: float values trusted
beyond their error bound, the rest decided in rational arithmetic (:class:`_Decisions`, mixed into the driver's
engine)."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np

from ... import _tolerances as tol
from ..._errors import CurvedBoundaryError
from ..._predicates import EPS, gamma
from ...networks._ops import GroupMax, Program
from .._exact import ExactMap, ExactReplay
from .._rows import last_dot, last_max, last_max_abs, last_sum, nonzero2
from ._store import _Poly, _unpack

#: top of the rounding-error bound: a hedge, it only sends more signs to rational arithmetic.
SNAP = tol.SPACE_SNAP
#: Unit roundoff of float64.
_U = EPS
#: Higham's gamma_n = n u / (1 - n u), rounded up (:func:`regioncount._predicates.gamma`).
_gamma = gamma


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
        from ...networks._interpret import ExactProgram

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


def solve_exact(rows: list, k: int) -> list[Fraction] | None:
    """The point ``u`` with ``row[:k] . u + row[k] = 0`` for every row (``k + 1`` Fractions each), or None where
    the rows have rank below ``k`` or no common point. The space engine's exact vertex and the 3D certificate's
    (:mod:`regioncount.engines._certify_space`) both come from here."""
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
        return None  # inconsistent: the rows do not meet (a vertex's constraints cannot, with exact signs)
    u = [Fraction(0)] * k
    for i, c in enumerate(piv_cols):
        u[c] = -M[i][k]
    return u


_solve_exact = solve_exact


def exact_value(w, u) -> Fraction:
    """The affine function ``w`` (``k + 1`` Fractions: coefficients, then the constant) at the exact point ``u``."""
    k = len(u)
    return sum((w[j] * u[j] for j in range(k)), w[k])


def float_values(X: np.ndarray, wl: np.ndarray, w0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float64 values ``(n, M)`` of the hyperplanes ``wl (n, k) . u + w0 (n,)`` at the points ``X (n, M, k)``
    (hyperplane ``i`` at the points of row ``i``) and a rigorous bound on their rounding,
    ``gamma_(k+2) (|w| . |x| + |w0|)`` (an inner product of ``k`` terms plus the constant, any summation
    order). The bound covers rounding only: callers add the coefficients' error and the points' distance to
    their exact positions. The certificate's vertex and witness checks use it; the engine's vertex signs take the
    same values with the one-pass bound ``gamma_(k+2) (max_i |x_i| |w|_1 + |w0|)`` (:meth:`_Decisions.vertex_signs`)."""
    k = X.shape[-1]
    s = last_dot(X, wl[:, None, :]) + w0[:, None]
    r = _gamma(k + 2) * (last_dot(np.abs(X), np.abs(wl)[:, None, :]) + np.abs(w0)[:, None])
    return s, r


class _Decisions:
    """Exact sign decisions of the engine (mixed into :class:`~._driver._Engine`, whose state they read: ``k``,
    ``families``, ``blocks``, ``exact``, ``_ops``, ``_cache``, ``exact_calls``)."""

    k: int
    families: list[_Family]
    blocks: list
    exact: _Exact
    _ops: list
    _cache: dict
    exact_calls: int

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
            u = solve_exact(rows, k)
            if u is None:
                raise ArithmeticError("a vertex's constraints do not determine a point")  # pragma: no cover
            v = exact_value(self._exact_function(p, int(plane_fid[i])), u)
            out[i] = (v > 0) - (v < 0)
        self.exact_calls += par.shape[0]
        return out

    def signs(self, P: _Poly, par, w, plane_fid):
        """Vertex values ``(n, M)`` and exact signs of hyperplanes ``w (n, k+2)`` (plane, coefficient error
        bound) on polytopes ``P``. A float value is trusted when it exceeds its error bound: rounding of the
        evaluation, the plane's coefficient error, and the vertex's distance to the exact vertex times the
        plane's gradient (and at least ``SNAP`` of the plane's size); the rest are decided exactly."""
        return self.vertex_signs(P.V, P.nv, par, w, plane_fid, lambda r, v: (P.inc[r, v], P.fid[r]))

    def vertex_signs(self, V, nv, par, w, plane_fid, slots):
        """:meth:`signs` on vertices ``V (n, M, k+1)`` (``nv`` of each row real); ``slots(r, v)`` gives the
        incidence words of vertices ``(r, v)`` and their rows' slot ids, read only for the signs decided
        exactly (a caller holding just the vertices need not copy the rest)."""
        k = self.k
        X, verr = V[..., :k], V[..., k]
        wl, w0, werr = w[:, :k], w[:, k], w[:, k + 1]
        # float_values' value, and its rounding bound with |w| . |x| <= max_i |x_i| |w|_1 (the vertices' largest
        # coordinate is needed below anyway): looser by at most k, one pass fewer over the vertices
        s = last_dot(X, wl[:, None, :]) + w0[:, None]
        mx = last_max_abs(X)
        wl1, aw0, gw = last_sum(np.abs(wl)), np.abs(w0), np.sqrt(last_sum(wl**2)) + werr
        snap = SNAP * np.abs(w[:, : k + 1]).sum(axis=1)

        def tolerance(mx, verr, i):
            """The bound for vertices of largest coordinate ``mx`` and error ``verr`` on rows ``i``."""
            rounding = _gamma(k + 2) * (mx * wl1[i] + aw0[i])
            big = np.maximum(1.0, mx)
            return np.maximum((rounding + werr[i] * big + gw[i] * verr) * (1 + 1e-12), snap[i])

        # first one bound per row, from its vertices' largest coordinate and error (it grows with both, in floats
        # too): a value beyond it is beyond its vertex's own bound; the few within it get their own
        rows = slice(None)
        top = tolerance(last_max(mx), last_max(verr), rows)[:, None]
        sg = (s > top).astype(np.int8) - (s < -top).astype(np.int8)
        valid = np.arange(V.shape[1]) < nv[:, None]
        amb_r, amb_v = nonzero2(~(np.abs(s) > top) & valid)  # (a NaN bound leaves its row to the vertices' own)
        if amb_r.size:
            f = s[amb_r, amb_v]
            tv = tolerance(mx[amb_r, amb_v], verr[amb_r, amb_v], amb_r)
            sg[amb_r, amb_v] = (f > tv).astype(np.int8) - (f < -tv).astype(np.int8)
            near = np.abs(f) <= tv
            amb_r, amb_v = amb_r[near], amb_v[near]
        if amb_r.size:
            # decide each distinct vertex once (padding repeats vertex 0, which is decided already)
            inc, fid = slots(amb_r, amb_v)
            sg[amb_r, amb_v] = self.exact_signs(par[amb_r], inc, fid, plane_fid[amb_r])
            # keep the float value only where it has the exact sign (it places new vertices on edges);
            # elsewhere a tiny value of the exact sign puts the crossing at that vertex, to float precision
            e, f = sg[amb_r, amb_v], s[amb_r, amb_v]
            s[amb_r, amb_v] = np.where(np.sign(f) == e, f, e * 1e-300)
        return s, np.where(valid, sg, sg[:, :1])  # padding takes vertex 0's sign

    def _margin(self, scale, werr):
        """What a ball test adds to ``|grad| rad``: coefficient error, rounding, and the SNAP hedge."""
        return (werr + (_gamma(self.k + 2) + SNAP) * scale) * (1 + 1e-9)
