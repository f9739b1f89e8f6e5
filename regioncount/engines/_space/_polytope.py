"""The space engine's polytope kernels: the cut of a batch of polytopes by hyperplanes (:func:`_cut`) and the
bound on a float vertex's distance to its exact vertex (:func:`_vertex_error`)."""

from __future__ import annotations

import numpy as np

from .._rows import last_any, last_dot, last_max_abs, last_sum, nonzero2, where_rows
from ._predicates import _gamma
from ._store import _CHUNK, _WB, _balls_flat, _bit, _Poly, _popcount, _unpack


def _cut(P: _Poly, s: np.ndarray, sg: np.ndarray, w: np.ndarray, fid: np.ndarray, sides=(1, -1)) -> list[_Poly]:
    """The parts ``side * (w . u + w0) >= 0`` of polytopes ``P`` that the hyperplanes ``w (n, k+2)`` (plane and
    coefficient error bound) cross (some vertex strictly on each side); ``s, sg (n, M)`` vertex values and
    exact signs, ``fid (n,)`` the hyperplane's id (``2 id``; the negative side gets ``2 id + 1``).

    A new vertex is made on every edge with strictly opposite end signs: vertices ``a, b`` span an edge
    when no third vertex lies on all the slots they share. It lies on those slots and on the new one, and
    gets a bound on its distance to the exact vertex (:func:`_vertex_error`).
    """
    n, M, k1 = P.V.shape
    k = k1 - 1
    valid = np.arange(M) < P.nv[:, None]
    pos, neg = (sg > 0) & valid, (sg < 0) & valid
    slot = P.nf.copy()
    Fn = int(slot.max(initial=0)) + 1
    F0 = P.fid.shape[1]
    if -(-Fn // _WB) > P.inc.shape[2]:  # room for the new slot's bit (the slot arrays widen per side below)
        P = _Poly(P.V, P.inc, P.nv, P.fid, P.fpl, P.nf)
        P.widen(M, Fn, slots=False)
    W = P.inc.shape[2]
    # candidate edges: (region, positive vertex a, negative vertex b) sharing >= k-1 slots; every positive vertex
    # with every negative one of its region, listed by region, then a, then b (the order of a nonzero over the
    # (n, M, M) outer mask, without forming it: its cost grows with the padded M squared, this one with the pairs)
    pr, a = nonzero2(pos)
    nr, nb = nonzero2(neg)
    nneg = np.bincount(nr, minlength=n)
    c = nneg[pr]
    r, a = np.repeat(pr, c), np.repeat(a, c)
    b = nb[np.repeat(np.cumsum(nneg)[pr] - nneg[pr] - np.cumsum(c) + c, c) + np.arange(r.size)]
    # the incidence words as rows of a flat (regions x slots) array: pairs gather them by one index each
    flat = P.inc.reshape(n * M, W)
    com = np.take(flat, r * M + a, axis=0)
    com &= np.take(flat, r * M + b, axis=0)
    ok = (np.bitwise_count(com[:, 0]) if W == 1 else _popcount(com)) >= k - 1
    r, a, b, com = where_rows(ok, r, a, b, com)
    edge = np.ones(r.size, bool)
    step = max(1, _CHUNK // max(1, M * W))
    inc1 = np.ascontiguousarray(P.inc[:, :, 0]) if W == 1 else None
    for lo in range(0, r.size, step):
        sl = slice(lo, lo + step)
        rr, cc = r[sl], com[sl]
        if inc1 is not None:  # one word: no reduction over the word axis
            c0 = cc[:, 0, None]
            on = np.take(inc1, rr, axis=0)
            on &= c0
            on = (on == c0) & np.take(valid, rr, axis=0)
        else:
            on = np.all((P.inc[rr] & cc[:, None, :]) == cc[:, None, :], axis=-1) & valid[rr]
        on[np.arange(rr.size), a[sl]] = False
        on[np.arange(rr.size), b[sl]] = False
        edge[sl] = ~last_any(on)
    r, a, b, com = where_rows(edge, r, a, b, com)
    ia, ib = r * M + a, r * M + b
    sa = np.take(s.reshape(-1), ia)
    t = sa / (sa - np.take(s.reshape(-1), ib))
    # the coordinates only: column k (the vertex error bound, inf where it overflowed) is recomputed below
    X = np.take(P.V.reshape(n * M, k1), ia, axis=0)
    X[:, :k] += t[:, None] * (np.take(P.V.reshape(n * M, k1), ib, axis=0)[:, :k] - X[:, :k])
    newbit = _bit(slot, W)
    Xinc = com | newbit[r]
    X[:, k] = _vertex_error(X[:, :k], (Xinc, max(F0, Fn)), _NewPlanes(P.fpl, r, slot, w))
    zero = (sg == 0) & valid
    inc0 = np.where(zero[:, :, None], P.inc | newbit[:, None, :], P.inc)
    # each part: its side's old vertices in their order, then the new ones in edge order (edges are listed by
    # region); placed straight at their slots, and flat in that order (region by region) for the balls
    ne = np.bincount(r, minlength=n)
    e_at = np.arange(r.size) - (np.cumsum(ne) - ne)[r]  # each new vertex's place among its region's
    Fo = max(F0, Fn)
    rows = np.arange(n)
    out = []
    for side in sides:
        keep = (sg * side >= 0) & valid
        kr, kv = nonzero2(keep)
        nk = np.bincount(kr, minlength=n)
        cnt = nk + ne
        start = np.cumsum(cnt) - cnt
        k_at = np.arange(kr.size) - (np.cumsum(nk) - nk)[kr]
        Vall = np.empty((kr.size + r.size, k1))
        Iall = np.empty((kr.size + r.size, W), np.uint64)
        e_slot = nk[r] + e_at
        fk, fe = start[kr] + k_at, start[r] + e_slot
        Vk, Ik = P.V[kr, kv], inc0[kr, kv]
        Vall[fk], Vall[fe] = Vk, X
        Iall[fk], Iall[fe] = Ik, Xinc
        Mo = int(cnt.max(initial=1))
        # padding repeats vertex 0 (every part keeps at least one vertex): broadcast it, then the vertices
        Vo = np.empty((n, Mo, k1))
        Io = np.empty((n, Mo, W), np.uint64)
        Vo[:] = Vall[start][:, None, :]
        Io[:] = Iall[start][:, None, :]
        Vo[kr, k_at], Vo[r, e_slot] = Vk, X
        Io[kr, k_at], Io[r, e_slot] = Ik, Xinc
        fidn = np.full((n, Fo), -1, np.int64)
        fidn[:, :F0] = P.fid
        fpln = np.zeros((n, Fo, k + 2))
        fpln[:, :F0] = P.fpl
        fidn[rows, slot] = fid + (side < 0)
        fpln[rows, slot, : k + 1] = side * w[:, : k + 1]
        fpln[rows, slot, k + 1] = w[:, k + 1]
        cen, rad = _balls_flat(Vall, start, cnt)
        out.append(_Poly(Vo, Io, cnt, fidn, fpln, slot + 1, cen, rad))
    return out


def _det3(A: np.ndarray, r: tuple[int, int, int], c: tuple[int, int, int]) -> np.ndarray:
    """The determinant of rows ``r`` and columns ``c`` of ``A (n, >=3, >=3)`` by cofactors."""
    (i, j, m), (a, b, d) = r, c
    return (
        A[:, i, a] * (A[:, j, b] * A[:, m, d] - A[:, j, d] * A[:, m, b])
        - A[:, i, b] * (A[:, j, a] * A[:, m, d] - A[:, j, d] * A[:, m, a])
        + A[:, i, d] * (A[:, j, a] * A[:, m, b] - A[:, j, b] * A[:, m, a])
    )


def _det(A: np.ndarray) -> np.ndarray:
    """``det A`` for ``A (n, k, k)``, k = 3 (cofactors) or 4 (along row 0, then cofactors)."""
    if A.shape[1] == 3:
        return _det3(A, (0, 1, 2), (0, 1, 2))
    out = np.zeros(A.shape[0])
    for j in range(4):
        cols = tuple(c for c in range(4) if c != j)
        term = A[:, 0, j] * _det3(A, (1, 2, 3), cols)  # type: ignore[arg-type]
        out = out + term if j % 2 == 0 else out - term
    return out


class _NewPlanes:
    """The slot planes ``(n, F, k+2)`` of new vertices, read where needed: vertex ``i`` on region ``r[i]`` has
    that region's planes ``fpl[r[i]]`` and, at slot ``slot[r[i]]``, the cutting plane ``w[r[i]]``."""

    def __init__(self, fpl: np.ndarray, r: np.ndarray, slot: np.ndarray, w: np.ndarray):
        self.fpl, self.r, self.slot, self.w = fpl, r, slot, w

    def at(self, cols: np.ndarray, sel: np.ndarray | None = None) -> np.ndarray:
        """Rows ``(m, c, k+2)``: the planes of slots ``cols (m, c)`` of vertices ``sel`` (default: all). The
        new slot may lie beyond ``fpl``'s slot axis (it is never read from there)."""
        rr = self.r if sel is None else self.r[sel]
        F, c = self.fpl.shape[1], self.fpl.shape[2]
        # rows of the flat (regions x slots) plane array, one index each
        out = np.take(self.fpl.reshape(-1, c), rr[:, None] * F + np.minimum(cols, F - 1), axis=0)
        new = cols == self.slot[rr][:, None]
        if new.any():
            i, j = nonzero2(new)
            out[i, j] = self.w[rr[i]]
        return out


def _first_bits(words: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` lowest set bits of one-word masks ``words (n,)`` (ascending; each has at least ``k``)."""
    w = words.copy()
    out = np.empty((w.size, k), np.int64)
    one = np.uint64(1)
    for i in range(k):
        low = w & (~w + one)  # the lowest set bit
        out[:, i] = np.bitwise_count(low - one)
        w ^= low
    return out


def _vertex_error(X: np.ndarray, tight: np.ndarray | tuple, planes: np.ndarray | _NewPlanes) -> np.ndarray:
    """A bound on ``|x - x*|_2`` for float vertices ``X (n, k)``, where ``x*`` is the exact vertex: the point on
    which the exact hyperplanes of the ``tight (n, F)`` slots meet (``planes (n, F, k+2)``: float planes and
    bounds ``e_i`` on the l1 error of their coefficients). For any ``k`` tight slots with exact normals ``A*``,
    ``A* (x - x*) = rho`` where ``rho_i`` is the exact plane at ``x``, so ``|x - x*| <= |rho| / sigma_min(A*)``;
    ``|rho_i| <= |fl(a_i . x + b_i)| + gamma_{k+2} (|a_i| . |x| + |b_i|) + e_i max(1, |x|_inf)`` and
    ``sigma_min(A*) >= sigma_min(A) - |E|_F``. For k = 3 and 4, ``sigma_min(A) >= |det A| / |A|_F^(k-1)`` (the
    product of the singular values is ``|det A|``) with the determinant's rounding bound subtracted; for k >= 5, and
    where the first ``k`` tight slots are (numerically) dependent, the smallest eigenvalue of ``A^T A`` over
    all tight slots, less a rounding allowance of ``gamma_(2F+4k+8) |A|_F^2`` for forming and solving it (the
    allowance is the assumed backward error of LAPACK's symmetric eigensolver, not a proven constant).
    ``inf`` where no positive lower bound results (then every sign at that vertex is decided exactly)."""
    n, k = X.shape
    if n == 0:
        return np.zeros(0)
    if isinstance(tight, tuple):  # (incidence words (n, W), F): one word is read bit-wise, without unpacking
        words, F = tight
        if words.shape[1] == 1:
            first = _first_bits(words[:, 0], k)
            n_tight = np.bitwise_count(words[:, 0])
        else:
            tight = _unpack(words, F)
    if not isinstance(tight, tuple):
        F = tight.shape[1]
        first = np.argsort(~tight, axis=1, kind="stable")[:, :k]
        n_tight = tight.sum(axis=1)
    if isinstance(planes, _NewPlanes):
        rows = planes.at(first)
    else:
        rows = np.take_along_axis(planes, first[..., None], axis=1)  # (n, k, k+2)
    A, b, e = rows[..., :k], rows[..., k], rows[..., k + 1]
    big = np.maximum(1.0, last_max_abs(X))
    val = last_dot(A, X[:, None, :]) + b
    rho = np.abs(val) + _gamma(k + 2) * (last_dot(np.abs(A), np.abs(X)[:, None, :]) + np.abs(b)) + e * big[:, None]
    rho = np.sqrt(last_sum(rho**2)) * (1 + 1e-12)
    out = np.full(n, np.inf)
    if k in (3, 4):
        # sigma_min >= |det A| / (sigma_1 ... sigma_(k-1)) >= |det A| / |A|_F^(k-1), with the determinant's
        # rounding bound subtracted: for k = 3 the cofactor expansion (6 products of 3 factors) is off by at most
        # gamma_5 times the sum of |products| (the permanent of |A|, at most the product of the row sums); for
        # k = 4 the expansion along row 0 over those 3x3 cofactors (each off by gamma_5 times the product of its
        # rows' sums, at most rows 1-3 of |A|), then 4 products summed: at most gamma_10 times the product of
        # the row sums of |A| (gamma_4 + gamma_5 + gamma_4 gamma_5 <= gamma_9)
        det = _det(A)
        rs = last_sum(np.abs(A))  # row sums of |A|, then their product
        prod = rs[:, 0].copy()
        for i in range(1, k):
            prod *= rs[:, i]
        det_err = _gamma(5 if k == 3 else 10) * prod
        fro = np.sqrt((A**2).sum(axis=(1, 2)))
        smin = (np.abs(det) - det_err) / np.maximum(fro, 1e-300) ** (k - 1) * (1 - 1e-12)
        smin -= np.sqrt(last_sum(e**2)) * (1 + 1e-12)
    else:
        smin = np.zeros(n)  # k >= 5: always the eigenvalue bound below
    ok = smin > 0
    out[ok] = rho[ok] / smin[ok]
    bad = np.flatnonzero(~ok & ((n_tight > k) | (k > 4)))
    if bad.size:
        # only the tight slots matter (the others enter as zero rows): gather them, in slot order
        tb = _unpack(tight[0][bad], F) if isinstance(tight, tuple) else tight[bad]
        nt = int(tb.sum(axis=1).max(initial=1))
        cols = np.argsort(~tb, axis=1, kind="stable")[:, :nt]
        on = np.take_along_axis(tb, cols, axis=1)
        pb = (
            planes.at(cols, bad)
            if isinstance(planes, _NewPlanes)
            else np.take_along_axis(planes[bad], cols[..., None], 1)
        )
        Wl = np.where(on[:, :, None], pb[:, :, :k], 0.0)
        b2 = np.where(on, pb[:, :, k], 0.0)
        e2 = np.where(on, pb[:, :, k + 1], 0.0)
        Xb = X[bad]
        val = np.einsum("nfk,nk->nf", Wl, Xb) + b2
        r2 = np.abs(val) + _gamma(k + 2) * (np.einsum("nfk,nk->nf", np.abs(Wl), np.abs(Xb)) + np.abs(b2))
        r2 = np.sqrt(((r2 + e2 * big[bad, None]) ** 2).sum(axis=1)) * (1 + 1e-12)
        G = np.matmul(Wl.transpose(0, 2, 1), Wl)
        lam = np.linalg.eigvalsh(G)[:, 0] - _gamma(2 * F + 4 * k + 8) * (Wl**2).sum(axis=(1, 2))
        sm = np.sqrt(np.maximum(lam, 0.0)) - np.sqrt((e2**2).sum(axis=1)) * (1 + 1e-12)
        good = sm > 0
        out[bad[good]] = r2[good] / sm[good]
    return out
