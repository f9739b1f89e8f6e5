"""The one module of float64 error bounds and exact rational predicates (docs/design.md §3).

"Exact" in this project is a claim about the float64 network as given: every weight is an exact binary
fraction, so every map, line and vertex of its partition is a rational number. The engines, the
whole-plane search, the linear-region merge and the certificate compute in float64 where a rigorous bound
decides, and in exact rational arithmetic (Python integers and :class:`fractions.Fraction`) where it does
not. Every such bound is built from the three facts here and nothing else:

- **Rounding** (Higham 2002, *Accuracy and Stability of Numerical Algorithms*, Thm 3.1 and §3.1): a sum
  of ``n`` products computed in floating point, in any order, is off by at most ``gamma(n) * sum |x_i y_i|``
  with ``gamma(n) = n u / (1 - n u)``, ``u = 2**-53`` (:data:`EPS`). :func:`gamma` returns that value
  rounded up (its own float evaluation can only make it larger), so a bound built from it is an upper
  bound; every copy in the engines calls this one function.
- **Underflow** (one rule): Thm 3.1 assumes no underflow. With gradual underflow a float addition or
  subtraction is exact in the subnormal range and a product loses at most half the smallest subnormal
  ``ETA = 2**-1074`` in absolute value (Higham 2002, §2.1, eq. 2.8), so an ``n``-term dot product gains at
  most ``n * ETA`` of absolute error on top of its relative bound: :func:`underflow_slack`. Where a bound
  is built without tracking ``n``, :data:`TINY` (``underflow_slack(2**74)`` = ``2**-1000``) covers any dot
  product of up to ``2**74`` terms.
- **Bounds of bounds**: a bound is itself computed in float64; it is made an upper bound by multiplying
  by ``1 + k u`` for the ``k`` roundings it saw (the callers say which ``k``), and by adding the slack above.

The exact fallback: a float ``m 2**e`` is the integer ``m`` times a power of two (:func:`dyadic`), a line
``w`` is three floats, a vertex the intersection of two lines, and the sign of ``w`` at a vertex is the sign
of a 3x3 determinant of integers (:func:`int_vertex_sign`).
"""

from __future__ import annotations

import numpy as np

#: unit roundoff of float64 (Higham's ``u``)
EPS = 2.0**-53
#: the smallest positive subnormal float64: a rounded product loses at most ``ETA / 2`` under underflow
ETA = 2.0**-1074
#: sentinel granularity exponent of an all-zero column (no constraint on products)
ZERO_G = 1 << 20
#: sentinel granularity exponent of a column whose float values are not known to be exact
INEXACT_G = -(1 << 20)


def underflow_slack(n: int) -> float:
    """Absolute error an ``n``-term float64 dot product can gain from underflow: ``n * ETA`` (module doc)."""
    return float(n) * ETA


#: underflow slack of a dot product of up to ``2**74`` terms (``2**-1000``): the bound used where ``n`` is not
#: tracked (the plane engine's bounds)
TINY = underflow_slack(2**74)


def gamma(n: int) -> float:
    """Higham's ``gamma_n = n u / (1 - n u)`` (Thm 3.1), rounded up: ``n u`` is exact, the subtraction and the
    division round by at most ``u`` each, and the factor ``1 + 4u`` covers both and its own rounding."""
    if n * EPS >= 0.5:
        raise ValueError(f"gamma({n}): n u must stay below 1/2")
    return n * EPS / (1 - n * EPS) * (1 + 4 * EPS)


def gammas(n: np.ndarray) -> np.ndarray:
    """:func:`gamma` of every entry of the integer array ``n``."""
    n = np.asarray(n, dtype=np.float64)
    if np.any(n * EPS >= 0.5):
        raise ValueError("gamma(n): n u must stay below 1/2")
    return n * EPS / (1 - n * EPS) * (1 + 4 * EPS)


def granularity(x: np.ndarray) -> np.ndarray:
    """Per entry the exponent ``g`` of the lowest set bit (``x`` is an integer multiple of ``2**g``);
    :data:`ZERO_G` for zeros. Exact: works on the float's bits."""
    x = np.asarray(x, dtype=np.float64)
    m, e = np.frexp(np.abs(x))  # x = m 2^e, m in [0.5, 1)
    M = (m * 2.0**53).astype(np.int64)  # exact: m has 53 significant bits
    low = M & -M
    tz = np.zeros(M.shape, np.int64)
    nz = low > 0
    tz[nz] = np.log2(low[nz].astype(np.float64)).astype(np.int64)  # exact for powers of two
    g = e.astype(np.int64) - 53 + tz
    return np.where(nz, g, ZERO_G)


def column_granularity(x: np.ndarray, axes) -> np.ndarray:
    """Minimum :func:`granularity` over ``axes``."""
    return granularity(x).min(axis=axes, initial=ZERO_G)


def affine_bounds(hb, eb, ge, W, b):
    """Bounds after ``h -> W h + b`` on every token: magnitude ``hb (T, d_out)``, error ``eb`` and granularity.

    ``hb (T, d)`` bounds the 1-norm of each entry's three coefficients, ``eb (T, d)`` their error, ``ge (T, d)``
    their granularity (or :data:`INEXACT_G`). ``b`` may be ``(d_out,)`` or ``(T, d_out)``. While every input
    is exact and the partial sums stay below ``2**(53 + g)`` the output is exact (Higham 2002, §2.2).
    """
    aW = np.abs(W)
    bb = b if b.ndim == 2 else b[None, :]
    S = hb @ aW.T + np.abs(bb)
    gw = granularity(W)  # (d_out, d)
    gb = granularity(bb)  # (1 or T, d_out)
    used = W != 0
    # min over inputs i of ge_i + gw_ji where W_ji != 0 and the input column is not identically zero
    gsum = ge[:, None, :] + np.where(used, gw, ZERO_G)[None, :, :]  # (T, d_out, d)
    gsum = np.where(used[None] & (ge[:, None, :] < ZERO_G), gsum, ZERO_G)
    g = np.minimum(gsum.min(axis=2, initial=ZERO_G), gb)
    exact_in = (eb == 0) & (ge > INEXACT_G)
    exact_in_used = np.all(exact_in[:, None, :] | ~used[None], axis=2)  # (T, d_out)
    exact = exact_in_used & (S < np.ldexp(1.0, np.clip(53 + g, -1074, 1023).astype(np.int64)))
    exact |= S == 0
    # a product with a zero weight is an exact zero and adding it is exact: only the nonzero terms (and the
    # bias) of each row round, so Thm 3.1 holds with n their count
    n = np.count_nonzero(W, axis=1) + 1
    err = eb @ aW.T + gammas(n) * S * (1 + 4 * EPS) + TINY
    eb_out = np.where(exact, 0.0, err)
    ge_out = np.where(exact, g, INEXACT_G)
    return S, eb_out, ge_out


def sum_bounds(hb1, eb1, ge1, hb2, eb2, ge2):
    """Bounds of an entrywise sum of two maps."""
    S = hb1 + hb2
    g = np.minimum(ge1, ge2)
    exact = (eb1 == 0) & (eb2 == 0) & (g > INEXACT_G)
    exact &= S < np.ldexp(1.0, np.clip(53 + g, -1074, 1023).astype(np.int64))
    exact |= S == 0
    err = eb1 + eb2 + EPS * S * (1 + 4 * EPS) + TINY
    return S, np.where(exact, 0.0, err), np.where(exact, g, INEXACT_G)


def _norm1(x: np.ndarray) -> np.ndarray:
    """``sum |x|`` over the last axis, rounded up (two additions of non-negative terms: factor ``1 + 2u``)."""
    return np.abs(x).sum(axis=-1) * (1 + 4 * EPS)


def _minors_bounded(l1, e1, l2, e2):
    """The 2x2 minors ``X, Y, Z`` of float lines ``l1, l2 (n, 3)`` (Cramer's rule, as in :func:`int_vertex_sign`),
    the sums of their two products' magnitudes, and bounds on each minor's distance from the exact lines' (each
    exact line within ``e_i (n,)`` of its float one in every coefficient): the rounding of the float minor
    (``gamma(2)`` times those magnitudes) plus the perturbation ``e1 |L2|' + e2 |l1|'`` over the minor's two
    columns, rounded up."""
    a1, b1, c1 = l1.T
    a2, b2, c2 = l2.T
    with np.errstate(all="ignore"):
        minors = (b1 * c2 - c1 * b2, c1 * a2 - a1 * c2, a1 * b2 - b1 * a2)
        A1, A2 = np.abs(l1), np.abs(l2)
        terms, bounds = [], []
        for i, j in ((1, 2), (0, 2), (0, 1)):
            t = A1[:, i] * A2[:, j] + A1[:, j] * A2[:, i]
            b = gamma(2) * t + e1 * (A2[:, i] + A2[:, j] + 2 * e2) + e2 * (A1[:, i] + A1[:, j])
            terms.append(t)
            bounds.append(b * (1 + 16 * EPS) + TINY)  # an upper bound despite its own roundings
    return minors, terms, bounds


def vertex_signs_bounded(l1, e1, l2, e2, l3, e3) -> np.ndarray:
    """Signs ``(n,)`` of lines ``l3`` at the intersections of lines ``l1`` and ``l2`` (all ``(n, 3)`` floats),
    where each exact line lies within ``e_i (n,)`` of its float one in every coefficient: +1 / -1 where the
    float determinants prove it, 2 where they cannot (the caller decides those exactly).

    The sign is ``sign(D) sign(Z)`` with ``D = l3 . (l1 x l2)`` and ``Z = a1 b2 - b1 a2`` (Cramer's rule, as in
    :func:`int_vertex_sign`). Each is decided only where its float value is farther from zero than a bound on
    its distance from the exact determinant of the exact lines: the rounding of the float expansion
    (``gamma(5)`` times the expansion's absolute terms: two roundings in each 2x2 minor, three in the dot
    product with them; Higham 2002 Thm 3.1) plus the multilinear perturbation
    ``D(L) - D(l) = D(d1, L2, L3) + D(l1, d2, L3) + D(l1, l2, d3)`` with ``|D(x, y, z)| <= |x|_inf |y|_1 |z|_1``
    and ``|L_i| <= |l_i| + e_i`` entrywise (and :func:`_minors_bounded` for the 2x2 ``Z``). Infinite or NaN
    errors leave a sign undecided."""
    l1, l2, l3 = (np.asarray(v, np.float64) for v in (l1, l2, l3))
    e1, e2, e3 = (np.asarray(v, np.float64) for v in (e1, e2, e3))
    (X, Y, Z), (pX, pY, pZ), (_, _, dZ) = _minors_bounded(l1, e1, l2, e2)
    a3, b3, c3 = l3.T
    with np.errstate(invalid="ignore", over="ignore"):
        D = a3 * X + b3 * Y + c3 * Z
        A3 = np.abs(l3)
        n1, n2 = _norm1(l1), _norm1(l2)
        u2 = n2 + 3 * e2
        u3 = _norm1(l3) + 3 * e3
        dD = gamma(5) * (A3[:, 0] * pX + A3[:, 1] * pY + A3[:, 2] * pZ)
        dD += e1 * u2 * u3 + e2 * n1 * u3 + e3 * n1 * n2
        dD = dD * (1 + 16 * EPS) + TINY
        ok = (np.abs(D) > dD) & (np.abs(Z) > dZ)
    out = np.full(D.shape, 2, np.int8)
    out[ok] = (np.sign(D[ok]) * np.sign(Z[ok])).astype(np.int8)
    return out


def intersections_bounded(l1, e1, l2, e2) -> tuple[np.ndarray, np.ndarray]:
    """Float intersections ``(n, 2)`` of lines ``l1`` and ``l2`` (``(n, 3)``, each exact line within ``e_i (n,)``
    of its float one in every coefficient) and radii ``(n,)`` that hold the exact intersections; radius inf
    where the float determinant cannot prove the lines meet (the caller places those exactly).

    Cramer's rule: the point is ``(X / Z, Y / Z)`` with the minors and bounds of :func:`_minors_bounded`, and
    ``|X / Z - X* / Z*| <= (|X| dZ + |Z| dX) / (|Z| (|Z| - dZ))`` where ``|Z| > dZ``; the division's rounding
    adds ``u |x|``, and the radius is the sum of the coordinates' bounds (at least the Euclidean distance)."""
    l1, l2 = np.asarray(l1, np.float64), np.asarray(l2, np.float64)
    e1, e2 = np.asarray(e1, np.float64), np.asarray(e2, np.float64)
    (X, Y, Z), _, (dX, dY, dZ) = _minors_bounded(l1, e1, l2, e2)
    with np.errstate(all="ignore"):
        aZ = np.abs(Z)
        P = np.stack([X / Z, Y / Z], axis=1)
        den = aZ * (aZ - dZ)
        rx = (np.abs(X) * dZ + aZ * dX) / den + EPS * np.abs(P[:, 0])
        ry = (np.abs(Y) * dZ + aZ * dY) / den + EPS * np.abs(P[:, 1])
        r = (rx + ry) * (1 + 32 * EPS) + TINY
        ok = (aZ > dZ) & np.isfinite(r) & np.all(np.isfinite(P), axis=1)
    return np.where(ok[:, None], P, 0.0), np.where(ok, r, np.inf)


def finite_or_raise(*arrays, what: str = "the network's maps"):
    """Raise :class:`~regioncount._errors.RegionCountError` if any value is inf or NaN (float64 overflow)."""
    from ._errors import RegionCountError

    for a in arrays:
        if not np.all(np.isfinite(a)):
            raise RegionCountError(
                f"float64 overflow: {what} exceed the range of float64 on this domain, so no exact count can be "
                "made; rescale the network's weights or shrink the domain"
            )


# ----------------------------------------------------------------------------------------------------
# the exact fallback: floats as integers times powers of two


def dyadic(x) -> tuple[np.ndarray, int]:
    """Float64 array ``x`` as exact integers ``M`` (object array) and one exponent: ``x = M * 2**-e``."""
    x = np.asarray(x, dtype=np.float64)
    ratios = [v.as_integer_ratio() for v in x.ravel().tolist()]
    e = max((q.bit_length() - 1 for _, q in ratios), default=0)
    ints = [p << (e - (q.bit_length() - 1)) for p, q in ratios]
    out = np.empty(x.size, dtype=object)
    out[:] = ints
    return out.reshape(x.shape), e


def rescale(M: np.ndarray, e: int, to: int) -> np.ndarray:
    """Integers ``M * 2**-e`` expressed in units of ``2**-to`` (``to >= e``)."""
    return M if to == e else M * (1 << (to - e))


def int_line(w) -> tuple[int, int, int]:
    """A line ``(w0, w1, w2)`` of floats as integers times a common positive power of two (sign-preserving)."""
    fr = [float(v).as_integer_ratio() for v in w]
    den = max(d for _, d in fr)  # denominators are powers of two
    return tuple(n * (den // d) for n, d in fr)  # type: ignore[return-value]


def int_vertex_sign(l1, l2, l3) -> int:
    """Exact sign of integer line ``l3`` at the intersection of integer lines ``l1`` and ``l2``."""
    a1, b1, c1 = l1
    a2, b2, c2 = l2
    a3, b3, c3 = l3
    X = b1 * c2 - c1 * b2
    Y = c1 * a2 - a1 * c2
    Z = a1 * b2 - b1 * a2
    if Z == 0:
        raise ZeroDivisionError("parallel lines have no vertex")
    v = a3 * X + b3 * Y + c3 * Z
    return (v > 0) - (v < 0) if Z > 0 else (v < 0) - (v > 0)


def int_intersection(l1, l2) -> tuple[float, float]:
    """The float point nearest (coordinate by coordinate) the intersection of two integer lines: Python's int
    division is correctly rounded."""
    a1, b1, c1 = l1
    a2, b2, c2 = l2
    Z = a1 * b2 - b1 * a2
    if Z == 0:
        raise ZeroDivisionError("parallel lines have no vertex")
    return (b1 * c2 - c1 * b2) / Z, (c1 * a2 - a1 * c2) / Z


def vertex_sign(l1, l2, l3) -> int:
    """Exact sign of line ``l3`` (``w . (u1, u2, 1)``) at the intersection of lines ``l1`` and ``l2`` (float
    triples taken as exact rationals). Raises ``ZeroDivisionError`` when ``l1`` and ``l2`` are parallel."""
    return int_vertex_sign(int_line(l1), int_line(l2), int_line(l3))


def intersection(l1, l2) -> tuple[float, float]:
    """The float point nearest the exact intersection of two float lines."""
    return int_intersection(int_line(l1), int_line(l2))


def point_sign(w, p) -> int:
    """Exact sign of ``w0 p0 + w1 p1 + w2`` for float ``w`` and a float point ``p``."""
    from fractions import Fraction

    v = Fraction(w[0]) * Fraction(p[0]) + Fraction(w[1]) * Fraction(p[1]) + Fraction(w[2])
    return (v > 0) - (v < 0)


def exact_frame_error(x0n, Vn, x0, V, c, h) -> float:
    """Bound on the distance of the float frame ``x = x0n + Vn u'`` from the exact ``x0 + V (c + h u')`` with
    ``c = (lo + hi) / 2``, ``h = (hi - lo) / 2`` taken exactly: 0 when the float frame is exact."""
    from fractions import Fraction

    worst = Fraction(0)
    for i in range(x0n.shape[0]):
        e0 = Fraction(x0n[i]) - (Fraction(x0[i]) + sum(Fraction(V[i, k]) * c[k] for k in range(V.shape[1])))
        worst = max(worst, abs(e0))
        for k in range(V.shape[1]):
            worst = max(worst, abs(Fraction(Vn[i, k]) - Fraction(V[i, k]) * h[k]))
    return 0.0 if worst == 0 else float(worst) * (1 + 4 * EPS) + TINY


__all__ = [
    "EPS",
    "ETA",
    "TINY",
    "ZERO_G",
    "INEXACT_G",
    "underflow_slack",
    "gamma",
    "granularity",
    "column_granularity",
    "affine_bounds",
    "sum_bounds",
    "finite_or_raise",
    "vertex_signs_bounded",
    "intersections_bounded",
    "dyadic",
    "rescale",
    "int_line",
    "int_vertex_sign",
    "int_intersection",
    "vertex_sign",
    "intersection",
    "point_sign",
    "exact_frame_error",
]
