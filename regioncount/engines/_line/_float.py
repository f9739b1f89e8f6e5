"""The line engine's float walk (programs with attention): splitting intervals at the roots of each op's
comparisons, decisions read at midpoints with the tolerances of ``regioncount._tolerances`` (``exact = False``;
see the package docstring). Holds the engine's kernel registry :data:`KERNELS`."""

from __future__ import annotations

import dataclasses
import functools
import typing

import numpy as np

from ...networks._ops import Affine, Attention, GroupMax, ReLU, Residual
from .._protocol import Kernels
from ._consts import _CHUNK, _NOISE, _S_EPS, _T_EPS, _ZERO
from ._poly import _combine, _pad, _polymul, _polyval, _project, _reexpand, _roots

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
    #: ``id(op) -> degree``: after each op, ``H`` keeps the coefficients up to that degree (:mod:`.._degrees`)
    keep: dict | None = None

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
            self.keep,
        )

    def join(self, parts: list[_State]) -> None:
        """Become the concatenation of ``parts`` (in order)."""
        cat = lambda xs: np.concatenate(xs, axis=0)
        self.lo, self.hi, self.H = cat([q.lo for q in parts]), cat([q.hi for q in parts]), cat([q.H for q in parts])
        self.stack = [cat(list(cs)) for cs in zip(*(q.stack for q in parts))]
        self.codes = [cat(list(cs)) for cs in zip(*(q.codes for q in parts))]
        self.ties = cat([q.ties for q in parts])


class _Blocks(typing.Protocol):
    """What :func:`_chunked` needs of an interval state (the float walk's :class:`_State`, the exact walk's
    ``_AState``): the intervals' ``lo``, a block of them, and joining blocks back."""

    lo: np.ndarray

    def part(self, i: int, j: int) -> typing.Any: ...

    def join(self, parts: list) -> None: ...


#: the two interval states (float walk, exact walk): both have ``lo``, ``part`` and ``join``
_Intervals = typing.TypeVar("_Intervals", bound=_Blocks)


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
        if st.keep is not None:
            st.H = _truncate(st.H, st.keep[id(op)] + 1)


def _truncate(H: np.ndarray, K1: int) -> np.ndarray:
    """``H (n, K+1, ...)`` cut to its first ``K1`` coefficients. The degree bound from the weights' exact zeros
    makes the dropped ones exactly 0.0 in float64 (:mod:`.._degrees`); that is checked, not assumed (a
    non-finite value, an overflow, is left to the walk as before)."""
    if H.shape[1] <= K1:
        return H
    tail = H[:, K1:]
    if np.any((tail != 0) & np.isfinite(tail)):
        raise AssertionError(
            "internal error: a coefficient above the degree bound from the weights' exact zeros is not zero"
        )
    return np.ascontiguousarray(H[:, :K1])


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
