"""The exact 1D ``line`` engine (DESIGN §3): every piece of a network restricted to a segment.

On the segment ``x = a + t (b - a)``, ``t in [0, 1]``, every quantity of the forward pass is an exact
polynomial in ``t`` between two events. The engine keeps a list of intervals, each carrying the whole
state ``H`` as polynomial coefficients, and lets every op of the :class:`~regioncount.networks.Program`
split every interval at the roots (inside it) of the comparisons that op makes:

- ReLU: the roots of every pre-activation;
- GroupMax (maxout): the roots of the pairwise differences of the ``k`` pieces of every unit;
- hardmax attention: the roots of the pairwise score differences ``S_ij - S_ij'`` of every head and
  query (products of two polynomials: quadratics when ``H`` is affine in ``t``);
- ReLU attention: the roots of every score entry ``S_ij``.

**ReLU MLPs and Maxout networks (no attention): exact.** The state is affine in ``t`` on every interval
and so is every comparison, so its signs at the interval's two ends settle it: a strict sign change is
one root inside, otherwise the sign holds throughout (zero at both ends: identically zero, an exact tie
or a dead unit). Every sign is a float64 evaluation with a rigorous error bound (Higham, *Accuracy and
Stability of Numerical Algorithms*, 2002, §3.1: a ``d``-term dot product errs by at most
``gamma_d = d u / (1 - d u)`` of ``|w|.|x|``; bounds carried op by op, plus ``2^-1074`` per product for
underflow); where the bound cannot decide, the engine replays the interval's code in exact rational
arithmetic on the float64 weights (each an exact binary fraction) and takes the exact sign. Roots of one
interval are ordered by their floats where their error intervals are apart and exactly where they
overlap; exactly equal roots (duplicate or concurrent units) make one break. Every break remembers which
comparison of which op vanishes there, so exact arithmetic can always recover its exact value. No length,
distance or relative size decides whether a piece exists: a piece shorter than float64 resolution is
kept (its two breaks may then round to the same float, so ``breaks`` is only non-decreasing). The result
reports the predicates decided (``predicates``) and how many needed exact arithmetic
(``exact_predicates``). Float64 overflow of an intermediate value stops the walk with
:class:`FloatRangeError` rather than guessing.

**With attention: float64 decisions with tolerances (``exact = False``).** The op's decision is read at
the midpoint of every sub-interval and adjacent sub-intervals with equal decisions are merged again, so a
root that changes no decision (a tangency, a double root, a crossing below the current maximum) never
creates a piece. Each interval stores its polynomials in its own local variable ``s in [-1, 1]``
(``t = mid + half * s``); a split re-expands the parent's coefficients to the children, so later ops
(score products, cubic ReLU-attention terms) are formed on small intervals where monomials are well
conditioned. Roots of degree <= 2 are closed forms; higher degrees are eigenvalues of batched
companion matrices polished by Newton steps. A polynomial whose coefficients are all below
``_ZERO`` (1e-12) times the largest of its op on that interval is identically zero (a dead unit, an
exact hardmax tie). A decision whose compared value is within ``_NOISE`` (1e-14) of the size of the
compared polynomials on the parent interval is not trusted: it is taken from the neighbouring
sub-interval of the same parent, preferring the neighbour it then equals. Hence the resolution: pieces
shorter than ``1e-13`` of their parent interval or ``1e-14`` in ``t``, or on which the deciding gap is
below ``1e-14`` of the compared values, are not resolved there.

The decisions are read in the code layout of ``networks/_ops.py``, so each piece's code is the code
:func:`~regioncount.engines._forward.forward_codes` gives inside it (where float64 evaluates it
correctly). Ops run on blocks of intervals, so memory is linear in the number of pieces. This module is
NumPy and Python fractions (combinatorial splitting does not fit XLA); only the reference forward pass is
JAX.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
import typing
from fractions import Fraction

import numpy as np

from .. import _tolerances as tol
from .._domain import Segment
from .._errors import DegreeTooHighError, DomainError, RegionCountError
from .._magnitude import check_magnitudes
from .._predicates import EPS, ETA, dyadic, gamma, rescale
from ..networks import check_domain, lower, op_codes
from ..networks._ops import Affine, Attention, GroupMax, Program, ReLU, Residual, is_piecewise_linear
from ._exact import ExactMap, ExactReplay
from ._protocol import Kernels, op_key, support

_ZERO = tol.LINE_ZERO  # relative size below which a compared polynomial counts as identically zero
_NOISE = tol.LINE_NOISE  # relative margin below which a midpoint decision is not trusted
_S_EPS = tol.LINE_SUBINTERVAL  # smallest sub-interval, relative to its parent (local units)
_T_EPS = tol.LINE_T_RESOLUTION  # smallest sub-interval in t
_CHUNK = 1 << 22  # floats per temporary array: ops run on blocks of intervals of about this size
_IMAG = 1e-6  # companion eigenvalues with a smaller imaginary part are candidate (near-double) roots


@dataclasses.dataclass(frozen=True, eq=False)
class LinePieces:
    """The pieces of a network on a segment: exact for ReLU MLPs and Maxout networks (``exact``), with
    float64 tolerances where there is attention (see the module docstring).

    ``breaks`` ``(n+1,)``: t-values, ``breaks[0] = 0``, ``breaks[-1] = 1``, non-decreasing (strictly
    increasing except around a piece shorter than float64 resolution, which is kept).
    ``codes`` ``(n, C) int32``: the activation code on each piece, the code the network's ops record (a
    piecewise-linear op's piece per entry, :func:`~regioncount.networks.op_codes`).
    ``output`` ``(n, out, degree+1)``: the output on each piece as coefficients of ``1, t, t^2, ...``
    (ascending powers of the global ``t``; ill-conditioned for high degree on tiny pieces).
    ``local_output`` ``(n, out, degree+1)``: the same polynomial in the piece's own variable
    ``s in [-1, 1]``, ``t = (lo + hi)/2 + s (hi - lo)/2`` (well conditioned; used by :meth:`evaluate`).
    ``kind``: ``"linear"`` (ReLU/Maxout/hardmax: affine on each piece) or ``"spline"`` (ReLU attention:
    spline pieces, polynomial of degree <= ``degree`` on each).
    ``piece_ties`` ``(n,)``: hardmax rows that tie identically on each piece (forward's ``ties`` there).
    ``ties``: number of pieces on which some hardmax row ties identically (attention averaged there).
    ``same_polynomial`` ``(n-1,)``: piece ``i+1`` carries the same output polynomial as piece ``i``.
    ``exact``: every combinatorial decision was made for the float64 network as given; ``predicates``:
    sign and order decisions made; ``exact_predicates``: those the float bound could not decide, settled
    in exact rational arithmetic (both 0 for the attention walk, which does not count them).
    """

    segment: Segment
    breaks: np.ndarray
    codes: np.ndarray
    output: np.ndarray
    local_output: np.ndarray
    kind: str
    degree: int
    ties: int
    piece_ties: np.ndarray
    same_polynomial: np.ndarray
    exact: bool = True
    predicates: int = 0
    exact_predicates: int = 0

    @property
    def activation_pieces(self) -> int:
        """Number of pieces: maximal intervals of one activation code."""
        return int(self.codes.shape[0])

    # -- the result protocol (results/_protocol.py) ------------------------------------------------------

    @property
    def regions(self) -> int:
        return self.activation_pieces

    def linear_regions(self) -> int:
        """:attr:`linear_pieces` (for spline pieces: equal polynomials merged)."""
        return self.linear_pieces

    @property
    def region_codes(self) -> np.ndarray:
        return self.codes

    @property
    def witnesses(self) -> np.ndarray:
        """``(n, 1)`` the midpoint ``t`` of each piece."""
        return ((self.breaks[:-1] + self.breaks[1:]) / 2)[:, None]

    @property
    def domain(self) -> Segment:
        return self.segment

    @property
    def distinct_codes(self) -> int:
        """Number of distinct codes met (a code can come back on a curved partition, never for ReLU MLPs)."""
        if self.codes.shape[1] == 0:
            return 1
        return int(np.unique(self.codes, axis=0).shape[0])

    @property
    def polynomial_pieces(self) -> int:
        """Maximal runs of adjacent pieces whose output polynomials coincide (relative tolerance)."""
        return int(self.codes.shape[0] - np.count_nonzero(self.same_polynomial))

    @property
    def linear_pieces(self) -> int:
        """For ``kind == "linear"``: linear pieces (adjacent pieces with the same affine map merged;
        Montúfar et al. 2014). For ``kind == "spline"`` these are *spline pieces with equal polynomials
        merged*, not linear regions: ReLU attention is not piecewise linear."""
        return self.polynomial_pieces

    @property
    def polynomial_breaks(self) -> np.ndarray:
        """``breaks`` without the breaks between pieces carrying the same polynomial."""
        keep = np.concatenate([[True], ~self.same_polynomial, [True]])
        return self.breaks[keep]

    def points(self, t) -> np.ndarray:
        """Inputs ``a + t (b - a)`` for t-values of any shape ``S`` -> ``S + (q,)``."""
        t = np.asarray(t, dtype=np.float64)
        return self.segment.a + t[..., None] * (self.segment.b - self.segment.a)

    def piece_index(self, t) -> np.ndarray:
        """Index of the piece holding each t (a break belongs to the piece on its right; t = 1 to the last)."""
        t = np.asarray(t, dtype=np.float64)
        return np.clip(np.searchsorted(self.breaks, t, side="right") - 1, 0, self.activation_pieces - 1)

    def evaluate(self, t) -> np.ndarray:
        """The output at t-values ``(N,)`` from the piece polynomials -> ``(N, out)``."""
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        i = self.piece_index(t)
        lo, hi = self.breaks[i], self.breaks[i + 1]
        with np.errstate(divide="ignore", invalid="ignore"):  # a piece below float resolution has hi == lo
            s = np.where(hi > lo, (t - (lo + hi) / 2) / ((hi - lo) / 2), 0.0)
        c = self.local_output[i]
        y = c[..., -1]
        for k in range(c.shape[-1] - 2, -1, -1):
            y = y * s[:, None] + c[..., k]
        return y


# ---------------------------------------------------------------------------------------------------
# polynomial helpers; coefficient arrays are (n, K+1, ...) with ascending powers on axis 1


@functools.cache
def _binomials(K: int) -> np.ndarray:
    return np.array([[math.comb(k, j) for j in range(K + 1)] for k in range(K + 1)], dtype=np.float64)


def _reexpand(C: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Coefficients of ``u -> p(a + b u)`` for ``p`` with coefficients ``C (n, K+1, ...)``; ``a, b (n,)``."""
    K = C.shape[1] - 1
    if K == 0:
        return C.copy()
    flat = C.reshape(C.shape[0], K + 1, -1)
    if K == 1:
        return np.stack([flat[:, 0] + a[:, None] * flat[:, 1], b[:, None] * flat[:, 1]], axis=1).reshape(C.shape)
    k = np.arange(K + 1)
    e = k[:, None] - k[None, :]
    low = e >= 0
    with np.errstate(over="ignore", invalid="ignore"):
        M = _binomials(K) * np.where(low, a[:, None, None] ** np.where(low, e, 0), 0.0) * b[:, None, None] ** k
    return np.matmul(M.transpose(0, 2, 1), flat).reshape(C.shape)


def _polyval(C: np.ndarray, s: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Horner: ``sum_k C[rows, k] s^k`` for ``C (n, K+1, ...)``, ``s (m,)``, ``rows (m,)`` (default all).

    Returns ``(m, ...)``.
    """
    pick = (lambda k: C[:, k]) if rows is None else (lambda k: C[rows, k])
    shape = (-1,) + (1,) * (C.ndim - 2)
    s = s.reshape(shape)
    y = pick(C.shape[1] - 1)
    for k in range(C.shape[1] - 2, -1, -1):
        y = y * s + pick(k)
    return y


def _polymul(X: np.ndarray, Y: np.ndarray, mul) -> np.ndarray:
    """Product of two polynomial arrays ``X (n, Kx+1, ...)``, ``Y (n, Ky+1, ...)`` -> ``(n, Kx+Ky+1, ...)``.

    ``mul(Xi, Y)`` multiplies one coefficient ``Xi (n, ...)`` of ``X`` with every coefficient of ``Y``
    (contracting the non-coefficient axes as the caller needs) and returns ``(n, Ky+1, ...)``.
    """
    ky = Y.shape[1]
    first = mul(X[:, 0], Y)
    Z = np.zeros((first.shape[0], X.shape[1] + ky - 1) + first.shape[2:])
    Z[:, :ky] += first
    for i in range(1, X.shape[1]):
        Z[:, i : i + ky] += mul(X[:, i], Y)
    return Z


def _project(H: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Per-head projection ``H (n, K+1, T, d)``, ``W (heads, d, e)`` -> ``(n, K+1, heads, T, e)`` (one GEMM)."""
    n, K1, T, d = H.shape
    h, _, e = W.shape
    out = H.reshape(-1, d) @ W.transpose(1, 0, 2).reshape(d, h * e)
    return out.reshape(n, K1, T, h, e).transpose(0, 1, 3, 2, 4)


def _combine(X: np.ndarray, Wo: np.ndarray) -> np.ndarray:
    """``sum_h X_h Wo_h`` for ``X (n, K+1, heads, T, e)``, ``Wo (heads, e, d)`` -> ``(n, K+1, T, d)`` (one GEMM)."""
    n, K1, h, T, e = X.shape
    out = X.transpose(0, 1, 3, 2, 4).reshape(-1, h * e) @ Wo.reshape(h * e, -1)
    return out.reshape(n, K1, T, -1)


def _pad(C: np.ndarray, K1: int) -> np.ndarray:
    if C.shape[1] == K1:
        return C
    pad = [(0, 0)] * C.ndim
    pad[1] = (0, K1 - C.shape[1])
    return np.pad(C, pad)


# ---------------------------------------------------------------------------------------------------
# roots


def _roots(P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Candidate roots in ``(-1, 1)`` of the polynomials ``P (m, K+1)`` -> ``(row (R,), s (R,))``.

    Real roots are all returned; near-double roots may come as the real part of a close complex pair
    (an extra candidate is harmless: the caller merges sub-intervals with equal decisions).
    """
    m, K1 = P.shape
    rows_out: list[np.ndarray] = [np.zeros(0, np.int64)]
    s_out: list[np.ndarray] = [np.zeros(0)]
    if m == 0 or K1 < 2:
        return rows_out[0], s_out[0]
    if K1 == 2:  # the hot path (ReLU / maxout on affine states)
        c0, c1 = P[:, 0], P[:, 1]
        ok = np.abs(c0) < np.abs(c1)  # root inside (-1, 1)
        r = np.flatnonzero(ok)
        s = -c0[r] / c1[r]
        inside = (s > -1.0) & (s < 1.0)
        return r[inside], s[inside]
    A = np.abs(P)
    big = A > 1e-14 * A.max(axis=1, keepdims=True)
    deg = np.where(big.any(axis=1), K1 - 1 - np.argmax(big[:, ::-1], axis=1), 0)

    r = np.flatnonzero(deg == 1)
    if r.size:
        rows_out.append(r)
        s_out.append(-P[r, 0] / P[r, 1])

    r = np.flatnonzero(deg == 2)
    if r.size:
        c0, c1, c2 = P[r, 0], P[r, 1], P[r, 2]
        disc = c1 * c1 - 4 * c2 * c0
        real = disc >= 0
        sq = np.sqrt(np.where(real, disc, 0.0))
        q = -0.5 * (c1 + np.where(c1 >= 0, sq, -sq))  # stable form, Numerical Recipes §5.6
        with np.errstate(divide="ignore", invalid="ignore"):
            r1 = q / c2
            r2 = np.where(q != 0, c0 / q, r1)
        # a slightly negative discriminant is a rounded tangency: its vertex is a harmless candidate
        near = ~real & (disc >= -1e-8 * (c1 * c1 + 4 * np.abs(c2 * c0)))
        vertex = -c1 / (2 * c2)
        for sel, val in ((real, r1), (real, r2), (near, vertex)):
            rows_out.append(r[sel])
            s_out.append(val[sel])

    for d in np.unique(deg[deg >= 3]):
        r = np.flatnonzero(deg == d)
        lead = P[r, d]
        comp = np.zeros((r.size, d, d))
        comp[:, np.arange(1, d), np.arange(d - 1)] = 1.0
        comp[:, :, -1] = -P[r, :d] / lead[:, None]
        ev = np.linalg.eigvals(comp)
        ok = (np.abs(ev.imag) <= _IMAG * (1 + np.abs(ev.real))) & (np.abs(ev.real) < 1.5)
        rr, cc = np.nonzero(ok)
        x = ev.real[rr, cc]
        x = _newton(P[r[rr], : d + 1], x)
        rows_out.append(r[rr])
        s_out.append(x)

    rows = np.concatenate(rows_out)
    s = np.concatenate(s_out)
    inside = np.isfinite(s) & (s > -1.0) & (s < 1.0)
    return rows[inside], s[inside]


def _newton(P: np.ndarray, x: np.ndarray, steps: int = 4) -> np.ndarray:
    """Polish roots ``x (R,)`` of ``P (R, d+1)``; a step that does not reduce ``|p|`` is not taken."""
    dP = P[:, 1:] * np.arange(1, P.shape[1])
    for _ in range(steps):
        p = _polyval(P, x)
        dp = _polyval(dP, x)
        with np.errstate(divide="ignore", invalid="ignore"):
            y = x - p / dp
        py = _polyval(P, np.where(np.isfinite(y), y, x))
        x = np.where(np.isfinite(y) & (np.abs(py) < np.abs(p)), y, x)
    return x


# ---------------------------------------------------------------------------------------------------
# splitting


@dataclasses.dataclass
class _State:
    """All intervals with their polynomial state: ``H (n, K+1, T, d)`` in each interval's local ``s``."""

    lo: np.ndarray
    hi: np.ndarray
    H: np.ndarray
    stack: list
    codes: list
    ties: np.ndarray

    def refine(self, parent: np.ndarray, sa: np.ndarray, sb: np.ndarray) -> None:
        """Replace the intervals by children ``[sa, sb]`` (parent-local units) of ``parent``."""
        mid, half = (self.lo + self.hi)[parent] / 2, (self.hi - self.lo)[parent] / 2
        self.lo, self.hi = (
            np.where(sa == -1.0, self.lo[parent], mid + half * sa),
            np.where(sb == 1.0, self.hi[parent], mid + half * sb),
        )
        a, b = (sa + sb) / 2, (sb - sa) / 2
        whole = (sa == -1.0) & (sb == 1.0)

        def move(C):
            out = C[parent]
            cut = np.flatnonzero(~whole)
            if cut.size:
                out[cut] = _reexpand(out[cut], a[cut], b[cut])
            return out

        self.H = move(self.H)
        self.stack = [move(C) for C in self.stack]
        self.codes = [c[parent] for c in self.codes]
        self.ties = self.ties[parent]

    def part(self, i: int, j: int) -> _State:
        """Intervals ``i:j`` (views)."""
        return _State(
            self.lo[i:j],
            self.hi[i:j],
            self.H[i:j],
            [C[i:j] for C in self.stack],
            [c[i:j] for c in self.codes],
            self.ties[i:j],
        )

    def join(self, parts: list[_State]) -> None:
        """Become the concatenation of ``parts`` (in order)."""
        cat = lambda xs: np.concatenate(xs, axis=0)
        self.lo, self.hi, self.H = cat([q.lo for q in parts]), cat([q.hi for q in parts]), cat([q.H for q in parts])
        self.stack = [cat(list(cs)) for cs in zip(*(q.stack for q in parts))]
        self.codes = [cat(list(cs)) for cs in zip(*(q.codes for q in parts))]
        self.ties = cat([q.ties for q in parts])


#: the two interval states (float walk, exact walk): both have ``lo``, ``part`` and ``join``
_Intervals = typing.TypeVar("_Intervals", "_State", "_AState")


def _chunked(st: _Intervals, fn, per_interval: int) -> None:
    """Apply the splitting op ``fn(state)`` to blocks of intervals, so temporaries of ``per_interval``
    floats per interval stay near ``_CHUNK`` floats (memory linear in the pieces, small constant)."""
    n = st.lo.shape[0]
    step = max(64, _CHUNK // max(per_interval, 1))
    if n <= step:
        fn(st)
        return
    parts: list[_Intervals] = []
    for i in range(0, n, step):
        q = st.part(i, i + step)
        fn(q)
        parts.append(q)
    st.join(parts)


def _subdivide(st: _State, rows: np.ndarray, s: np.ndarray):
    """Cut every interval at the candidate roots ``s`` of interval ``rows`` -> sub-intervals
    ``(parent (m,), s_lo (m,), s_hi (m,))`` sorted by parent then position."""
    n = st.lo.shape[0]
    mid, half = (st.lo + st.hi) / 2, (st.hi - st.lo) / 2
    t = mid[rows] + half[rows] * s
    ok = (s > -1 + _S_EPS) & (s < 1 - _S_EPS) & (t - st.lo[rows] > _T_EPS) & (st.hi[rows] - t > _T_EPS)
    p = np.concatenate([np.arange(n), rows[ok]])
    x = np.concatenate([np.full(n, -1.0), s[ok]])
    order = np.lexsort((x, p))
    p, x = p[order], x[order]
    if p.size > n:
        keep = np.ones(p.size, bool)
        tx = mid[p] + half[p] * x
        keep[1:] = (p[1:] != p[:-1]) | ((x[1:] - x[:-1] > _S_EPS) & (tx[1:] - tx[:-1] > _T_EPS))
        p, x = p[keep], x[keep]
    same = np.zeros(p.size, bool)
    same[:-1] = p[1:] == p[:-1]
    hi = np.where(same, np.append(x[1:], 1.0), 1.0)
    return p, x, hi


def _fill_uncertain(p: np.ndarray, dec: np.ndarray, unc: np.ndarray) -> np.ndarray:
    """Replace decisions ``dec (m, E)`` flagged ``unc`` by the nearest trusted one of the same parent
    (left first); keep them where the parent has none."""
    cols = np.flatnonzero(unc.any(axis=0))
    if cols.size == 0:
        return dec
    m = p.shape[0]
    idx = np.arange(m)
    first = np.ones(m, bool)
    first[1:] = p[1:] != p[:-1]
    start = np.maximum.accumulate(np.where(first, idx, 0))
    last = np.ones(m, bool)
    last[:-1] = p[1:] != p[:-1]
    end = np.minimum.accumulate(np.where(last, idx, m)[::-1])[::-1]
    u = unc[:, cols]
    left = np.maximum.accumulate(np.where(u, -1, idx[:, None]), axis=0)
    right = np.minimum.accumulate(np.where(u, m, idx[:, None])[::-1], axis=0)[::-1]
    src = np.where(left >= start[:, None], left, np.where(right <= end[:, None], right, idx[:, None]))
    out = dec.copy()
    out[:, cols] = np.take_along_axis(dec[:, cols], src, axis=0)
    # A sliver between two roots that coincide in exact arithmetic (two comparisons switching at one
    # point) can end up differing from one neighbour only in untrusted columns: it joins that neighbour.
    rows = np.flatnonzero(unc.any(axis=1))
    for _ in range(3):
        changed = False
        for side in (-1, 1):
            nb = rows + side
            ok = (nb >= 0) & (nb < m)
            r, nb = rows[ok], nb[ok]
            r, nb = r[p[r] == p[nb]], nb[p[r] == p[nb]]
            differ = out[r] != out[nb]
            join = differ.any(axis=1) & ~np.any(differ & ~unc[r], axis=1)
            if join.any():
                out[r[join]] = out[nb[join]]
                changed = True
        if not changed:
            break
    return out


def _merge(p: np.ndarray, lo: np.ndarray, hi: np.ndarray, dec: np.ndarray):
    """Merge adjacent sub-intervals of one parent with equal decision rows -> children and their decisions."""
    m = p.shape[0]
    new = np.ones(m, bool)
    if m > 1:
        new[1:] = (p[1:] != p[:-1]) | np.any(dec[1:] != dec[:-1], axis=1)
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], m) - 1
    return p[starts], lo[starts], hi[ends], dec[starts]


def _sign_split(st: _State, Z: np.ndarray, allowed: np.ndarray | None = None):
    """Split on the signs of ``Z (n, K+1, M)``; decision ``Z > 0`` (0 where not ``allowed (M,)``).

    Returns ``(parent, sa, sb, bits (n_children, M) int32)``.
    """
    size = np.abs(Z).sum(axis=1)  # bounds |Z| on the interval
    if allowed is not None:
        size = np.where(allowed, size, 0.0)
    zero = size <= _ZERO * size.max(axis=1, keepdims=True)
    r, c = np.nonzero(~zero)
    rows, s = _roots(Z[r, :, c])
    p, s_lo, s_hi = _subdivide(st, r[rows], s)
    v = _polyval(Z, (s_lo + s_hi) / 2, p)
    z = zero[p]
    dec = (v > 0) & ~z
    unc = (np.abs(v) <= _NOISE * size[p]) & ~z
    dec = _fill_uncertain(p, dec, unc)
    par, sa, sb, bits = _merge(p, s_lo, s_hi, dec)
    return par, sa, sb, bits.astype(np.int32)


def _argmax_split(st: _State, C: np.ndarray, allowed: np.ndarray | None = None):
    """Split on the argmax over the last axis of ``C (n, K+1, R, k)`` (keys not ``allowed (R, k)`` excluded).

    Candidates whose difference is identically zero on an interval tie: they share the value of the
    first of them, so the decision is the first maximal index, as ``jnp.argmax``.
    Returns ``(parent, sa, sb, idx (n_children, R), group (n_children, R, k) bool)`` where ``group``
    marks the keys tied with the winner (the winner included).
    """
    n, K1, R, k = C.shape
    if allowed is None:
        allowed = np.ones((R, k), bool)
    j0, j1 = np.triu_indices(k, 1)
    pair_ok = allowed[:, j0] & allowed[:, j1]  # (R, P)
    size = np.where(allowed, np.abs(C).sum(axis=1), 0.0)  # (n, R, k), bounds |C| on the interval
    scale = size.max(axis=(1, 2))  # (n,)
    # a key whose upper bound is below another key's lower bound never wins on this interval
    c0 = C[:, 0]
    lower = np.where(allowed, c0 - (size - np.abs(c0)), -np.inf)
    alive = allowed & (c0 + (size - np.abs(c0)) >= lower.max(axis=-1, keepdims=True) - _ZERO * scale[:, None, None])
    Dif = C[..., j0] - C[..., j1]  # (n, K+1, R, P)
    tie = (np.abs(Dif).max(axis=1) <= _ZERO * scale[:, None, None]) & pair_ok
    active = alive[..., j0] & alive[..., j1] & ~tie
    nn, rr, pp = np.nonzero(active)
    rows, s = _roots(Dif[nn, :, rr, pp])
    p, s_lo, s_hi = _subdivide(st, nn[rows], s)

    rep = np.broadcast_to(np.arange(k), (n, R, k)).copy()
    for q in range(j0.size):
        col = rep[..., j1[q]]
        rep[..., j1[q]] = np.where(tie[..., q], np.minimum(col, j0[q]), col)

    sm = (s_lo + s_hi) / 2
    v = _polyval(C, sm, p)  # (m, R, k)
    rp = rep[p]
    v = np.where(allowed, np.take_along_axis(v, rp, axis=-1), -np.inf)
    idx = np.argmax(v, axis=-1)
    top = np.take_along_axis(v, idx[..., None], axis=-1)[..., 0]
    grp = rp == np.take_along_axis(rp, idx[..., None], axis=-1)
    second = np.where(grp | ~allowed, -np.inf, v).max(axis=-1)
    noise = _NOISE * size[p].max(axis=-1)
    unc = (top - second) <= noise
    idx = _fill_uncertain(p, idx, unc)
    par, sa, sb, idx = _merge(p, s_lo, s_hi, idx)
    rc = rep[par]
    group = (rc == np.take_along_axis(rc, idx[..., None], axis=-1)) & allowed
    return par, sa, sb, idx, group


# ---------------------------------------------------------------------------------------------------
# ops


def _relu(st: _State) -> None:
    n, K1, T, d = st.H.shape
    par, sa, sb, bits = _sign_split(st, st.H.reshape(n, K1, T * d))
    st.refine(par, sa, sb)
    st.H = st.H * bits.reshape(-1, 1, T, d)
    st.codes.append(bits)


def _group_max(st: _State, k: int) -> None:
    n, K1, T, d = st.H.shape
    u = d // k
    par, sa, sb, idx, _ = _argmax_split(st, st.H.reshape(n, K1, T * u, k))
    st.refine(par, sa, sb)
    G = st.H.reshape(-1, K1, T * u, k)
    st.H = np.take_along_axis(G, idx[:, None, :, None], axis=-1).reshape(-1, K1, T, u)
    st.codes.append(idx.astype(np.int32))


def _apply(st: _State, ops, tokens: int) -> None:
    for op in ops:
        KERNELS.lookup(op)(st, op, tokens)


#: The float walk's kernels (the line engine's row of the op protocol): ``kernel(st, op, tokens)`` applies
#: ``op`` to every interval of ``st``, splitting intervals where the op has boundaries.
KERNELS = Kernels("line")


@KERNELS.register("affine")
def _affine_op(st: _State, op: Affine, tokens: int) -> None:
    n, K1, T, d = st.H.shape
    st.H = (st.H.reshape(-1, d) @ op.W.T).reshape(n, K1, T, -1)
    st.H[:, 0] += op.b


@KERNELS.register("relu")
def _relu_op(st: _State, op: ReLU, tokens: int) -> None:
    n, K1, T, d = st.H.shape
    _chunked(st, _relu, 4 * K1 * T * d)


@KERNELS.register("groupmax")
def _group_max_op(st: _State, op: GroupMax, tokens: int) -> None:
    n, K1, T, d = st.H.shape
    _chunked(st, functools.partial(_group_max, k=op.k), 2 * K1 * T * d * op.k)


@KERNELS.register("attention/hardmax", "attention/relu")
def _attention_op(st: _State, op: Attention, tokens: int) -> None:
    n, K1, T, d = st.H.shape
    width = 3 * K1 * op.heads * T * (T * T + op.Wv.shape[2] + op.Wq.shape[2])
    _chunked(st, functools.partial(_attention, op=op, T=tokens), width)


@KERNELS.register("residual")
def _residual_op(st: _State, op: Residual, tokens: int) -> None:
    st.stack.append(st.H)
    _apply(st, op.body, tokens)
    X = st.stack.pop()
    K1 = max(X.shape[1], st.H.shape[1])
    st.H = _pad(X, K1) + _pad(st.H, K1)


def _scores(st: _State, op: Attention):
    Q, K = _project(st.H, op.Wq), _project(st.H, op.Wk)
    return _polymul(Q, K.swapaxes(-1, -2), lambda q, Kt: q[:, None] @ Kt)  # (n, 2K+1, heads, T, T)


def _attention(st: _State, op: Attention, T: int) -> None:
    h = op.heads
    allowed = np.tril(np.ones((T, T), bool)) if op.causal else np.ones((T, T), bool)
    S = _scores(st, op)
    n, K1 = S.shape[:2]
    if op.sigma == "hardmax":
        par, sa, sb, idx, group = _argmax_split(st, S.reshape(n, K1, h * T, T), np.tile(allowed, (h, 1)))
        st.refine(par, sa, sb)
        count = group.sum(axis=-1)
        Aw = (group / count[..., None]).reshape(-1, h, T, T)  # ties average over the tied keys
        st.H = _combine(Aw[:, None] @ _project(st.H, op.Wv), op.Wo)
        st.codes.append(idx.astype(np.int32))
        st.ties = st.ties + (count > 1).sum(axis=-1)
    elif op.sigma == "relu":
        mask = np.broadcast_to(allowed, (h, T, T)).reshape(-1)
        par, sa, sb, bits = _sign_split(st, S.reshape(n, K1, h * T * T), mask)
        st.refine(par, sa, sb)
        S = _scores(st, op) * bits.reshape(-1, 1, h, T, T)
        if op.scale_by_T:
            S = S / T
        AV = _polymul(S, _project(st.H, op.Wv), lambda a, V: a[:, None] @ V)  # Lai, Lim, Liu 2024: cubic in H
        st.H = _combine(AV, op.Wo)
        st.codes.append(bits)
    else:  # pragma: no cover - the kernel is registered for hardmax and ReLU attention only
        raise TypeError(f"attention with sigma={op.sigma!r}")


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


def _degree_plan(program: Program, max_degree: int) -> int:
    """Check every polynomial the walk needs stays within ``max_degree``; return the output degree."""

    def visit(ops, deg: int) -> int:
        for op in ops:
            if isinstance(op, Residual):
                deg = max(deg, visit(op.body, deg))
            else:
                refusal = support("line", op_key(op))  # softmax: the line engine's refusal
                if refusal is not None:
                    refusal.raise_()
                need = max(op.degree, op.decision_degree) * deg
                if need > max_degree:
                    raise DegreeTooHighError(
                        f"{op.label} needs polynomials of degree {need} in t, above max_degree="
                        f"{max_degree} (ReLU attention triples the degree per block); use --method sample"
                    )
                deg = op.degree * deg
        return deg

    return visit(program.ops, 1)


def _same_polynomials(lo: np.ndarray, hi: np.ndarray, C: np.ndarray, rtol: float = 1e-9) -> np.ndarray:
    """For local output polynomials ``C (n, K+1, out)`` on ``[lo, hi]``: is piece ``i+1`` the same
    polynomial as piece ``i``? -> ``(n-1,)`` bool.

    Both are expanded at their common break and compared in units of the smaller piece's half-width;
    each side's size, scaled alike, sets the tolerance, so a tiny piece's slope is not over-trusted.
    """
    n, K1, _ = C.shape
    if n < 2:
        return np.zeros(0, bool)
    L = _reexpand(C[:-1], np.ones(n - 1), np.ones(n - 1))  # Taylor at the right end, left piece
    Rr = _reexpand(C[1:], -np.ones(n - 1), np.ones(n - 1))  # Taylor at the left end, right piece
    hl, hr = (hi - lo)[:-1] / 2, (hi - lo)[1:] / 2
    hm = np.minimum(hl, hr)
    k = np.arange(K1)[None, :, None]
    rl, rr = (hm / hl)[:, None, None] ** k, (hm / hr)[:, None, None] ** k  # to the smaller piece's units
    diff = np.abs(L * rl - Rr * rr)
    size = np.abs(C).sum(axis=1)  # (n, out)
    floor = 1e-12 * size.max()
    tol = rtol * (np.maximum(size[:-1], floor)[:, None, :] * rl + np.maximum(size[1:], floor)[:, None, :] * rr)
    return np.all(diff <= tol, axis=(1, 2))


def walk_line(net, segment, *, max_degree: int = 27) -> LinePieces:
    """Every piece of ``net`` on ``segment``, exactly (DESIGN §3, ``line``).

    ``net``: an MLP, Maxout, Transformer or :class:`~regioncount.networks.Program`; ``segment``: a
    :class:`~regioncount._domain.Segment` or a pair ``(a, b)`` of input vectors ``(q,)``.
    Raises :class:`NotPiecewiseError` for softmax attention and :class:`DegreeTooHighError` when ReLU
    attention would need polynomials above ``max_degree``.

    Examples
    --------
    The lines ``x = 0``, ``y = 0`` and ``x + y = 1/2`` of three ReLU units cross this segment at three
    points (``t = 8/17, 1/2, 23/37``), so it has ``3 + 1`` pieces:

    >>> import regioncount as rc
    >>> net = rc.MLP(([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]], [[1.0, 2.0, 3.0]]), ([0.0, 0.0, 0.5], [0.0]))
    >>> pieces = rc.walk_line(net, rc.Segment([-1.0, -0.8], [1.0, 0.9]))
    >>> pieces.activation_pieces, pieces.exact, [round(float(t), 6) for t in pieces.breaks[1:-1]]
    (4, True, [0.470588, 0.5, 0.621622])
    """
    seg = segment if isinstance(segment, Segment) else Segment(*segment)
    program = lower(net)
    if seg.a.shape[0] != program.input_dim:
        raise DomainError(f"the segment lives in R^{seg.a.shape[0]} but the network takes {program.input_dim} inputs")
    check_domain(net, np.minimum(seg.a, seg.b), np.maximum(seg.a, seg.b))
    check_magnitudes(program, seg)  # refuse magnitudes whose float bounds could overflow
    degree = _degree_plan(program, max_degree)

    if not _has_attention(program.ops):
        return _walk_exact(program, seg)

    T = program.tokens
    mid, half = (seg.a + seg.b) / 2, (seg.b - seg.a) / 2
    H = np.broadcast_to(np.stack([mid, half])[None, :, None, :], (1, 2, T, mid.shape[0])).copy()
    st = _State(lo=np.zeros(1), hi=np.ones(1), H=H, stack=[], codes=[], ties=np.zeros(1, np.int64))
    _apply(st, program.ops, T)

    n = st.lo.shape[0]
    local = _pad(st.H[:, :, program.out_token, :], degree + 1)[:, : degree + 1]  # (n, K+1, out)
    m, h = (st.lo + st.hi) / 2, (st.hi - st.lo) / 2
    with np.errstate(over="ignore", invalid="ignore"):
        glob = _reexpand(local, -m / h, 1.0 / h)
    codes = np.concatenate(st.codes, axis=1) if st.codes else np.zeros((n, 0), np.int32)
    arrays = {
        "breaks": np.append(st.lo, st.hi[-1]),
        "codes": op_codes(program, codes.astype(np.int32)),  # pieces, not the ReLU form's bits
        "output": glob.transpose(0, 2, 1).copy(),
        "local_output": local.transpose(0, 2, 1).copy(),
        "piece_ties": st.ties,
        "same_polynomial": _same_polynomials(st.lo, st.hi, local),
    }
    for a in arrays.values():
        a.setflags(write=False)
    return LinePieces(
        segment=seg,
        breaks=arrays["breaks"],
        codes=arrays["codes"],
        output=arrays["output"],
        local_output=arrays["local_output"],
        kind="linear" if is_piecewise_linear(program) else "spline",
        degree=degree,
        ties=int(np.count_nonzero(st.ties)),
        piece_ties=arrays["piece_ties"],
        same_polynomial=arrays["same_polynomial"],
        exact=False,
    )


def _same_affine(C: np.ndarray, rtol: float = 1e-9) -> np.ndarray:
    """Neighbouring pieces with the same affine output ``C (n, 2, out)`` (coefficients of 1 and t on
    [0, 1], so both are on one scale) up to ``rtol`` of their size -> ``(n-1,)`` (linear pieces merge them)."""
    if C.shape[0] < 2:
        return np.zeros(0, bool)
    size = np.abs(C).sum(axis=1)  # (n, out)
    tol = rtol * (np.maximum(size[:-1], size[1:]) + 1e-12 * size.max())
    return np.all(np.abs(C[1:] - C[:-1]) <= tol[:, None, :], axis=(1, 2))


def _has_attention(ops) -> bool:
    return any(op.key.startswith("attention/") or (isinstance(op, Residual) and _has_attention(op.body)) for op in ops)


def _walk_exact(program: Program, seg: Segment) -> LinePieces:
    """:func:`walk_line` for programs without attention (ReLU MLPs, Maxout): exact predicates."""
    T, q = program.tokens, program.input_dim
    H = np.zeros((1, 2, T, q))
    H[0, 0] = seg.a
    with np.errstate(over="ignore"):
        H[0, 1] = seg.b - seg.a
    _finite(H)
    one = np.ones(1)
    st = _AState(one * 0, one, one * 0, one * 0, np.array([-1]), np.array([-2]), H, one.copy(), [], [])
    walk = _Walk(program, seg)
    walk.er, walk.eb = 2 * _U * np.abs(H[0, 1]), np.zeros((T, q))  # b - a is rounded once
    walk.run(st)

    n = st.lo.shape[0]
    glob = st.H[:, :, program.out_token, :]  # (n, 2, out) in t
    m, h = (st.lo + st.hi) / 2, (st.hi - st.lo) / 2
    local = np.stack([glob[:, 0] + glob[:, 1] * m[:, None], glob[:, 1] * h[:, None]], axis=1)
    codes = np.concatenate(st.codes, axis=1) if st.codes else np.zeros((n, 0), np.int32)
    arrays = {
        "breaks": np.append(st.lo, st.hi[-1]),
        "codes": op_codes(program, codes.astype(np.int32)),  # pieces, not the ReLU form's bits
        "output": glob.transpose(0, 2, 1).copy(),
        "local_output": local.transpose(0, 2, 1).copy(),
        "piece_ties": np.zeros(n, np.int64),
        "same_polynomial": _same_affine(glob),
    }
    for a in arrays.values():
        a.setflags(write=False)
    return LinePieces(
        segment=seg,
        kind="linear",
        degree=1,
        ties=0,
        exact=True,
        predicates=walk.predicates,
        exact_predicates=walk.exact_predicates,
        **arrays,
    )
