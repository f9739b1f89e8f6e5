"""Conic and line kernels for the curved 2D engine (NumPy float64, vectorised over a leading axis).

A conic is six coefficients ``(A, B, C, D, E, F)`` of ``A x^2 + B x y + C y^2 + D x + E y + F``; a line is
a conic with ``A = B = C = 0``. At fixed ``x`` it is a quadratic in ``y`` with coefficients
``c2 = C``, ``c1 = B x + E``, ``c0 = A x^2 + D x + F``. Its two roots are computed with the cancellation-free
formula ``q = -(c1 + sign(c1) sqrt(c1^2 - 4 c2 c0)) / 2``, roots ``q / c2`` and ``c0 / q``; with ``c2 = +0``
(a curve linear in ``y``) the first root is ``+-inf``. A *branch* is the index (0 lower, 1 upper) of a root
in sorted order; stored curves are normalised to ``C >= +0`` so that the index is well defined.

Univariate polynomials are ascending coefficient arrays ``(n, K+1)``.
"""

from __future__ import annotations

import numpy as np

from ..results._arcs import arc_y, branch_y, y_roots  # noqa: F401  (evaluation lives in the results layer)

#: Companion eigenvalues with ``|imag| <= _IMAG (1 + |real|)`` are candidate real (possibly double) roots.
_IMAG = 1e-6
#: Candidate roots of one polynomial closer than this are one (multiple) root, refined as a root of P'.
_CLUSTER = 1e-6


def normalise(Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``Q (..., 6)`` scaled by ``+-1`` so that ``C >= +0`` (never ``-0``); returns ``(Qn, factor)``."""
    f = np.where(Q[..., 2] < 0, -1.0, 1.0)
    Qn = Q * f[..., None]
    Qn[..., 2] = Qn[..., 2] + 0.0  # -0.0 -> +0.0
    return Qn, f


def value(Q: np.ndarray, x, y) -> np.ndarray:
    """``Q(x, y)`` for conics ``(..., 6)`` and points broadcasting against ``Q[..., 0]``."""
    return ((Q[..., 0] * x + Q[..., 1] * y + Q[..., 3]) * x) + (Q[..., 2] * y + Q[..., 4]) * y + Q[..., 5]


def dy(Q: np.ndarray, x, y) -> np.ndarray:
    """``dQ/dy = B x + 2 C y + E``."""
    return Q[..., 1] * x + 2.0 * Q[..., 2] * y + Q[..., 4]


# ----------------------------------------------------------------------------------------------------
# univariate polynomials in x


def polymul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Products of ascending coefficient rows ``(n, p)`` and ``(n, r)`` -> ``(n, p + r - 1)``."""
    out = np.zeros((a.shape[0], a.shape[1] + b.shape[1] - 1))
    for i in range(a.shape[1]):
        out[:, i : i + b.shape[1]] += a[:, i : i + 1] * b
    return out


def _pad(a: np.ndarray, K: int) -> np.ndarray:
    out = np.zeros((a.shape[0], K))
    out[:, : a.shape[1]] = a
    return out


def y_polys(Q: np.ndarray):
    """``c2, c1, c0`` of conics ``(n, 6)`` as polynomials in ``x``: ``(n, 1)``, ``(n, 2)``, ``(n, 3)``."""
    return Q[:, 2:3], Q[:, [4, 1]], Q[:, [5, 3, 0]]


def discriminant(Q: np.ndarray) -> np.ndarray:
    """``c1(x)^2 - 4 c2 c0(x)``: zero where ``Q(x, .)`` has a double root (vertical tangents and the
    crossing of a pair of lines) -> ``(n, 3)``."""
    c2, c1, c0 = y_polys(Q)
    return polymul(c1, c1) - 4.0 * c2 * c0


def resultant(Q: np.ndarray, L: np.ndarray) -> np.ndarray:
    """Resultant in ``y`` of conics ``Q, L (n, 6)``: a polynomial in ``x`` ``(n, 5)`` vanishing at every
    ``x`` where they share a ``y`` root (for the degrees they have: a curve linear in ``y`` (``C = 0``) has
    its linear resultant, so two lines give their crossing)."""
    c2, c1, c0 = y_polys(Q)
    d2, d1, d0 = y_polys(L)
    qa, la = Q[:, 2] != 0, L[:, 2] != 0
    # both quadratic in y: (c2 d0 - d2 c0)^2 - (c2 d1 - d2 c1)(c1 d0 - d1 c0)
    u = c2 * d0 - d2 * c0
    v = c2 * _pad(d1, 3) - d2 * _pad(c1, 3)
    w = polymul(c1, d0) - polymul(d1, c0)
    both = polymul(u, u) - polymul(v, w)[:, :5]
    # one of them linear in y: substitute its root y = -e0/e1 into the other, times e1^2
    q_lin = d2 * polymul(c0, c0) - polymul(polymul(d1, c0), c1)[:, :5] + polymul(polymul(d0, c1), c1)[:, :5]
    l_lin = c2 * polymul(d0, d0) - polymul(polymul(c1, d0), d1)[:, :5] + polymul(polymul(c0, d1), d1)[:, :5]
    lin = _pad(polymul(c1, d0) - polymul(d1, c0), 5)
    out = np.where((qa & la)[:, None], both, np.where(la[:, None], q_lin, np.where(qa[:, None], l_lin, lin)))
    return out


def _horner(P: np.ndarray, x: np.ndarray) -> np.ndarray:
    y = np.zeros_like(x)
    for k in range(P.shape[1] - 1, -1, -1):
        y = y * x + P[:, k : k + 1]
    return y


def _deriv(P: np.ndarray) -> np.ndarray:
    K = P.shape[1]
    if K == 1:
        return np.zeros_like(P)
    return P[:, 1:] * np.arange(1, K)


def _newton(P: np.ndarray, x: np.ndarray, steps: int) -> np.ndarray:
    dP = _deriv(P)
    for _ in range(steps):
        f, g = _horner(P, x), _horner(dP, x)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(g != 0, f / g, 0.0)
        # a step that does not reduce |P| is not taken (near multiple roots Newton wanders)
        x2 = x - step
        better = np.abs(_horner(P, x2)) <= np.abs(f)
        x = np.where(better & np.isfinite(x2), x2, x)
    return x


def real_roots(P: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Real roots in the open intervals ``(lo, hi)`` of polynomials ``P (n, K+1)`` (ascending).

    Returns ``(R (n, K), degenerate (n,))``: roots padded with NaN (each multiple root once), and rows whose
    polynomial vanishes identically (relative to its coefficients), which have no isolated roots.

    Roots are companion-matrix eigenvalues polished by Newton steps. Eigenvalues within ``_IMAG`` of the
    real axis are candidates (a double root comes out as a close pair, real or complex); candidates closer
    than ``_CLUSTER`` are one multiple root, located as the root of ``P'`` between them. A candidate is
    kept where ``P`` changes sign near it or ``|P|`` is at rounding level there; extra roots only cost
    extra vertical cuts, a missed one is caught by the caller's ordering check.
    """
    n, K1 = P.shape
    K = K1 - 1
    out = np.full((n, K), np.nan)
    scale = np.abs(P).max(axis=1)
    degenerate = scale == 0
    if n == 0 or K == 0:
        return out, degenerate
    Pn = P / np.where(scale > 0, scale, 1.0)[:, None]
    big = np.abs(Pn) > 1e-14
    deg = np.where(big.any(axis=1), K - np.argmax(big[:, ::-1], axis=1), 0)
    deg[degenerate] = 0
    cand = np.full((n, K), np.nan + 0j)
    for dg in range(1, K + 1):
        rows = np.flatnonzero(deg == dg)
        if rows.size == 0:
            continue
        c = Pn[rows, :dg] / Pn[rows, dg : dg + 1]
        M = np.zeros((rows.size, dg, dg))
        M[:, 0, :] = -c[:, ::-1]
        if dg > 1:
            M[:, np.arange(1, dg), np.arange(dg - 1)] = 1.0
        cand[rows, :dg] = np.linalg.eigvals(M)
    re = cand.real
    ok = np.isfinite(re) & (np.abs(cand.imag) <= _IMAG * (1 + np.abs(re)))
    re = np.where(ok, re, np.nan)
    re = np.sort(re, axis=1)  # NaN last
    # merge clusters: a run of candidates within _CLUSTER is one multiple root
    dP = _deriv(Pn)
    for j in range(K - 1):
        close = np.abs(re[:, j + 1] - re[:, j]) <= _CLUSTER
        if close.any():
            m = (re[close, j] + re[close, j + 1]) / 2
            rows = np.flatnonzero(close)
            r = _newton(dP[rows], m[:, None], 6)[:, 0]
            re[rows, j] = np.nan
            re[rows, j + 1] = np.where(np.abs(r - m) <= 10 * _CLUSTER, r, m)
    single = np.isfinite(re)
    pol = _newton(Pn, np.where(single, re, 0.0), 3)
    re = np.where(single & (np.abs(pol - re) <= 10 * _CLUSTER), pol, re)
    inside = (re > lo[:, None]) & (re < hi[:, None])
    re = np.where(inside, re, np.nan)
    out[:, :K] = np.sort(re, axis=1)
    return out, degenerate


def quad_poly_roots(P: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Real roots of quadratics ``P (n, 3)`` (ascending) in ``[lo, hi]`` -> ``(n, 2)``, NaN padded (used for
    bounding boxes; extra points only make a box larger)."""
    c0, c1, c2 = P[:, 0], P[:, 1], P[:, 2]
    disc = c1 * c1 - 4 * c2 * c0
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.sqrt(disc)
        q = -0.5 * (c1 + np.copysign(s, c1))
        r1 = np.where(c2 != 0, q / c2, np.nan)
        r2 = np.where(q != 0, c0 / q, np.nan)
    R = np.stack([r1, r2], 1)
    return np.where((R >= lo[:, None]) & (R <= hi[:, None]), R, np.nan)


def branch_range(Q: np.ndarray, k: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Range ``(ymin, ymax)`` of branch ``k`` of normalised conics ``Q (n, 6)`` over ``x in [a, b]``: the
    branch at the ends and at the conic's horizontal tangents (``Q_x = 2 A x + B y + D = 0``) in between."""
    A, B, C, D, E, F = (Q[:, i] for i in range(6))
    # B != 0: B^2 Q with B y = -(2 A x + D) is a quadratic in x
    c2 = 4 * A * A * C - A * B * B
    c1 = 4 * A * C * D - 2 * A * B * E
    c0 = C * D * D - B * D * E + F * B * B
    xs = quad_poly_roots(np.stack([c0, c1, c2], 1), a, b)
    with np.errstate(invalid="ignore", divide="ignore"):
        xv = np.where((B == 0) & (A != 0), -D / (2 * A), np.nan)
    xv = np.where((xv >= a) & (xv <= b), xv, np.nan)
    X = np.stack([a, b, xs[:, 0], xs[:, 1], xv], 1)
    Y = branch_y(Q[:, None, :], k[:, None], X)
    Y = np.where(np.isfinite(X), Y, np.nan)
    return np.nanmin(Y, axis=1), np.nanmax(Y, axis=1)


def interval_sign(Q: np.ndarray, xlo, xhi, ylo, yhi) -> np.ndarray:
    """+1 / -1 where ``Q`` provably has that sign on the boxes ``[xlo, xhi] x [ylo, yhi]`` (interval
    arithmetic with a rounding margin), 0 where it may vanish there. ``Q (n, 6)``, bounds ``(n,)``."""

    def sq(lo, hi):
        m = np.where((lo <= 0) & (hi >= 0), 0.0, np.minimum(lo * lo, hi * hi))
        return m, np.maximum(lo * lo, hi * hi)

    def mul(c, lo, hi):
        return np.minimum(c * lo, c * hi), np.maximum(c * lo, c * hi)

    x2 = sq(xlo, xhi)
    y2 = sq(ylo, yhi)
    p = np.stack([xlo * ylo, xlo * yhi, xhi * ylo, xhi * yhi])
    xy = (p.min(axis=0), p.max(axis=0))
    terms = [mul(Q[:, 0], *x2), mul(Q[:, 1], *xy), mul(Q[:, 2], *y2), mul(Q[:, 3], xlo, xhi), mul(Q[:, 4], ylo, yhi)]
    lo = Q[:, 5] + sum(t[0] for t in terms)
    hi = Q[:, 5] + sum(t[1] for t in terms)
    mag = np.abs(Q[:, 5]) + sum(np.maximum(np.abs(t[0]), np.abs(t[1])) for t in terms)
    margin = 1e-12 * mag
    return np.where(lo > margin, 1, np.where(hi < -margin, -1, 0)).astype(np.int8)
