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
