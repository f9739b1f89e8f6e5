"""Polynomial helpers of the line engine: coefficient arrays ``(n, K+1, ...)`` with ascending powers on axis 1,
re-expansion on sub-intervals, batched roots, and the comparison of neighbouring pieces' polynomials."""

from __future__ import annotations

import functools
import math

import numpy as np

from ._consts import _IMAG

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
