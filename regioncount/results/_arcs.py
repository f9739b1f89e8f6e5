"""Evaluation of conic arcs (NumPy float64, vectorised): the branch ``y`` of a line or conic at given ``x``.

It lives in the results layer because a curved partition (:mod:`._cells`) evaluates its arcs for areas,
point location and drawing; the curved engines build on it (``engines._conic``). A conic is six
coefficients ``(A, B, C, D, E, F)`` of ``A x^2 + B x y + C y^2 + D x + E y + F``, normalised to ``C >= +0``;
a *branch* is the index (0 lower, 1 upper) of a root in ``y`` in sorted order. With ``C = +0`` (a curve
linear in ``y``) the first root is ``+-inf``, so the finite root is branch 1 where ``dQ/dy > 0``.
"""

from __future__ import annotations

import numpy as np


def y_roots(Q: np.ndarray, x, clamp: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Sorted roots ``(lo, hi)`` in ``y`` of ``Q(x, .)`` (NaN where there is no real root, unless ``clamp``,
    which reads a slightly negative discriminant as 0: used on boundary branches at their slab ends)."""
    c2 = Q[..., 2]
    c1 = Q[..., 1] * x + Q[..., 4]
    c0 = (Q[..., 0] * x + Q[..., 3]) * x + Q[..., 5]
    disc = c1 * c1 - 4.0 * c2 * c0
    if clamp:
        disc = np.maximum(disc, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.sqrt(disc)
        q = -0.5 * (c1 + np.copysign(s, c1))
        r1 = q / c2
        r2 = c0 / q
        # q = 0: c1 = 0 and a zero discriminant, a double root at -c1 / (2 c2) = 0 (or no y-dependence)
        dbl = np.where(c2 != 0, 0.0, np.nan)
        r1 = np.where(q == 0, dbl, r1)
        r2 = np.where(q == 0, dbl, r2)
    return np.minimum(r1, r2), np.maximum(r1, r2)


def branch_y(Q: np.ndarray, k: np.ndarray, x, clamp: bool = True) -> np.ndarray:
    """``y`` of branch ``k`` (0 lower, 1 upper root) of normalised conics ``Q (..., 6)`` at ``x``."""
    lo, hi = y_roots(Q, x, clamp)
    return np.where(k == 0, lo, hi)


def poly_branch_y(g, x) -> np.ndarray:
    """``y`` of a branch ``g = (coef, k, nreal)`` of a curve of any degree at the points ``x`` (any shape):
    ``coef[i, j]`` the coefficient of ``x^i y^j``; the branch is the ``k``-th of the ``nreal`` real roots in
    ``y`` (the roots of ``numpy.roots`` nearest the real line). Float64, for areas and drawing only."""
    coef, k, nreal = g
    x = np.asarray(x, float)
    out = np.empty(x.shape)
    cy = np.stack([np.polynomial.polynomial.polyval(x, coef[:, j]) for j in range(coef.shape[1])], -1)
    flat = cy.reshape(-1, coef.shape[1])
    res = out.reshape(-1)
    for n, c in enumerate(flat):
        nz = np.flatnonzero(c)
        if nz.size == 0 or nz[-1] == 0:
            res[n] = np.nan
            continue
        r = np.roots(c[: nz[-1] + 1][::-1])
        r = r[np.argsort(np.abs(r.imag), kind="stable")][: max(nreal, 1)]
        r = np.sort(r.real)
        res[n] = r[min(k, r.size - 1)]
    return out


def arc_y(Q: np.ndarray, k: np.ndarray, G, x) -> np.ndarray:
    """:func:`branch_y` of conics ``Q (N, 6)`` and branches ``k (N,)``, with the entries where ``G (N,)`` (an
    object array or None) holds a branch of a curve of higher degree evaluated by :func:`poly_branch_y`. ``x``
    is ``(N,)`` or ``(N, m)`` (or a scalar)."""
    Qb = Q if np.ndim(x) < 2 else Q[:, None]
    kb = k if np.ndim(x) < 2 else k[:, None]
    y = branch_y(Qb, kb, x)
    if G is None:
        return y
    for n in np.flatnonzero(np.array([g is not None for g in G], bool)):
        xn = x if np.ndim(x) == 0 else np.asarray(x)[n]
        y[n] = poly_branch_y(G[n], xn)
    return y
