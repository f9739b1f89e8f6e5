"""Reductions over a short last axis (a polygon's vertex slots, a polytope's coordinates), column by column.

NumPy reduces a contiguous last axis row by row, with a per-row start-up that dominates when the axis holds a
handful of entries: the maximum of ``(n, 6)`` signs takes 5-10 times as long as six elementwise maxima of
``n`` entries (measured on this project's 2-core machine, NumPy 2.4). These helpers take the columns in turn
below :data:`SHORT` entries, and the reduction itself beyond. Maxima, minima and the logical reductions are
exact in any order; sums are taken in NumPy's own order (left to right below 8 terms), so every helper returns
bit for bit what the reduction it replaces returns. :func:`slot_sum` sums a middle axis of vertex slots, slot by
slot, for the same reason."""

from __future__ import annotations

import numpy as np

#: Longest last axis the helpers reduce column by column.
SHORT = 16


def _fold(X: np.ndarray, step) -> np.ndarray:
    """The columns of ``X`` (at least one) folded left to right by the in-place binary ufunc ``step``."""
    out = X[..., 0].copy()
    for i in range(1, X.shape[-1]):
        step(out, X[..., i], out=out)
    return out


def last_max(X: np.ndarray) -> np.ndarray:
    """``X.max(axis=-1)``."""
    return X.max(axis=-1) if X.shape[-1] > SHORT else _fold(X, np.maximum)


def last_min(X: np.ndarray) -> np.ndarray:
    """``X.min(axis=-1)``."""
    return X.min(axis=-1) if X.shape[-1] > SHORT else _fold(X, np.minimum)


def last_any(X: np.ndarray) -> np.ndarray:
    """``X.any(axis=-1)`` of a bool array."""
    k = X.shape[-1]
    return np.asarray(X.any(axis=-1)) if k > SHORT or k == 0 else _fold(X, np.logical_or)


def last_all(X: np.ndarray) -> np.ndarray:
    """``X.all(axis=-1)`` of a bool array."""
    k = X.shape[-1]
    return np.asarray(X.all(axis=-1)) if k > SHORT or k == 0 else _fold(X, np.logical_and)


def last_sum(X: np.ndarray) -> np.ndarray:
    """``X.sum(axis=-1)``: the same sum in the same order (NumPy adds fewer than 8 terms left to right)."""
    k = X.shape[-1]
    return X.sum(axis=-1) if k >= 8 or k == 0 else _fold(X, np.add)


def last_dot(X: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``sum_i X[..., i] w[..., i]`` over a short last axis (``w`` broadcast against ``X``), column by column: the
    products summed in two interleaved partial sums ``(p0 + p2 + ...) + (p1 + p3 + ...)``, the order NumPy's
    ``einsum`` takes for these shapes on this project's machines (any order serves the callers: their error
    bounds hold for all summation orders); ``einsum`` beyond 4 terms."""
    k = X.shape[-1]
    if k < 2 or k > 4:
        return np.einsum("...k,...k->...", X, w)
    even = X[..., 0] * w[..., 0]
    odd = X[..., 1] * w[..., 1]
    for i in range(2, k):
        if i % 2:
            odd += X[..., i] * w[..., i]
        else:
            even += X[..., i] * w[..., i]
    return even + odd


def last_max_abs(X: np.ndarray) -> np.ndarray:
    """``np.abs(X).max(axis=-1)``."""
    out = np.abs(X[..., 0])
    for i in range(1, X.shape[-1]):
        np.maximum(out, np.abs(X[..., i]), out=out)
    return out


def slot_sum(X: np.ndarray) -> np.ndarray:
    """``X.sum(axis=1)`` of ``X (n, M, ...)`` (every polygon's or polytope's vertex slots), slot by slot: NumPy adds
    along a middle axis in turn, so the same sums (a third of its time on the plane engine's polygons)."""
    out = X[:, 0].copy()
    for i in range(1, X.shape[1]):
        out += X[:, i]
    return out


def take_rows(a: np.ndarray, rows: np.ndarray, m: int | None = None) -> np.ndarray:
    """``a[rows]`` (a fresh C-contiguous array), or ``a[rows, :m]`` with ``m``: rows gathered whole by ``np.take``,
    which copies each row as one block, where indexing with an array walks each row's entries through a buffered
    iterator (two to three times as long for a polygon's slots). Narrowed to ``m`` slots afterwards, as a copy."""
    out = np.take(a, rows, axis=0)
    if m is not None and m < a.shape[1]:
        out = np.ascontiguousarray(out[:, :m])
    return out


def take_lines(A: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``A[rows, :, cols]`` ``(n, k)`` of ``A (R, k, D)`` (each region's coefficients of one unit), gathered from the
    flat array ``k`` times: indexing with arrays on either side of the slice walks a buffered iterator per pair
    (twice as long)."""
    if not A.flags.c_contiguous:
        return A[rows, :, cols]
    R, k, D = A.shape
    if R == 1:  # one row (a tile's box before its first split): the units' lines as rows, each taken whole
        return np.take(np.ascontiguousarray(A[0].T), cols, axis=0)
    flat = A.reshape(-1)
    at = rows * (k * D) + cols
    out = np.empty((at.size, k), A.dtype)
    for c in range(k):
        out[:, c] = flat[at]
        at += D
    return out


def where_rows(mask: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """``a[mask]`` for each array (rows along axis 0) of a 1-D bool ``mask``: the mask scanned once, then each array
    gathered by ``np.take``. Indexing with a bool mask branches on every entry, and an irregular mask (the engines'
    "this pair is an edge", "this unit crosses") costs several times as long as the scan and gathers."""
    at = np.flatnonzero(mask)
    return tuple(np.take(a, at, axis=0) for a in arrays)


def nonzero2(a: np.ndarray) -> tuple[np.ndarray, ...]:
    """``np.nonzero(a)``: for a 2-D array, the flat indices split into rows and columns (twice as fast as NumPy's
    two-index scan on the engines' (regions, units) masks)."""
    if a.ndim != 2:
        return np.nonzero(a)
    f = np.flatnonzero(a)
    return f // a.shape[1], f % a.shape[1]
