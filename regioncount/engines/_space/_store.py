"""The space engine's padded polytope store: vertices with incidence bitmasks over each region's constraint
slots, slot ids and planes, enclosing balls and op-start parents (:class:`_Store`), and batches of polytopes in
the same row layout (:class:`_Poly`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from .._rows import last_max, last_sum, nonzero2, slot_sum

#: Float64 values a chunked temporary may hold.
_CHUNK = 1 << 20
#: Bits per incidence word.
_WB = 64


def _popcount(a: np.ndarray) -> np.ndarray:
    return np.bitwise_count(a).sum(axis=-1, dtype=np.int64)


def _bit(slot: np.ndarray, W: int) -> np.ndarray:
    """Incidence masks ``(n, W)`` with only bit ``slot`` set."""
    out = np.zeros((slot.shape[0], W), np.uint64)
    out[np.arange(slot.shape[0]), slot // _WB] = np.left_shift(np.uint64(1), (slot % _WB).astype(np.uint64))
    return out


class _Store:
    """Padded polytopes: vertices ``V (cap, M, k)`` (slots from ``nv`` on repeat vertex 0), incidence
    ``inc (cap, M, W)`` over the region's constraint slots, slot ids ``fid (cap, F)`` (``2 id + side``,
    -1 empty), slot planes ``fpl (cap, F, k+1)`` (``>= 0`` on the region), slot counts ``nf``, enclosing
    balls, the op-start parent ``anc`` and per-op columns ``extra``."""

    def __init__(self, k: int):
        self.k = k
        self.n = 0
        self.V = np.zeros((0, 1, k + 1))  # coordinates, then a bound on the distance to the exact vertex
        self.inc = np.zeros((0, 1, 1), np.uint64)
        self.nv = np.zeros(0, np.int64)
        self.fid = np.zeros((0, 1), np.int64)
        self.fpl = np.zeros((0, 1, k + 2))  # plane, then a bound on the l1 error of its coefficients
        self.nf = np.zeros(0, np.int64)
        self.cen = np.zeros((0, k))
        self.rad = np.zeros(0)
        self.anc = np.zeros(0, np.int64)
        self.extra: dict[str, np.ndarray] = {}
        self.cap_check: Callable[[int], None] = lambda n: None

    _ROW = ("V", "inc", "nv", "fid", "fpl", "nf", "cen", "rad", "anc")

    @property
    def M(self) -> int:
        return self.V.shape[1]

    @property
    def F(self) -> int:
        return self.fid.shape[1]

    @property
    def W(self) -> int:
        return self.inc.shape[2]

    def reset_parents(self):
        self.anc = np.arange(self.V.shape[0])
        self.extra = {}

    def subset(self, lo: int, hi: int) -> _Store:
        """A new store holding copies of rows ``lo:hi`` (each its own parent, no per-op columns)."""
        self._settle()
        st = _Store(self.k)
        for name in ("V", "inc", "nv", "fid", "fpl", "nf", "cen", "rad"):
            setattr(st, name, getattr(self, name)[lo:hi].copy())
        st.n = hi - lo
        st.anc = np.arange(st.n)
        st.cap_check = self.cap_check
        return st

    def add_extra(self, name: str, arr: np.ndarray):
        full = np.zeros((self.V.shape[0],) + arr.shape[1:], arr.dtype)
        full[: arr.shape[0]] = arr
        self.extra[name] = full

    #: the large per-row arrays, which :meth:`sort_by_parent` leaves to :meth:`compact` to reorder
    _BIG = ("V", "inc", "fid", "fpl")
    #: a pending reorder of the large arrays (row ``i`` is row ``_perm[i]`` of them), or None
    _perm: np.ndarray | None = None

    def sort_by_parent(self):
        """Order the rows by op-start parent (stable). The small arrays move now; the large ones move in the
        next :meth:`compact`, which rewrites them anyway (every other access settles the order first)."""
        self._settle()
        order = np.argsort(self.anc[: self.n], kind="stable")
        if np.array_equal(order, np.arange(self.n)):
            return
        for name in self._ROW:
            if name not in self._BIG:
                a = getattr(self, name)
                a[: self.n] = a[: self.n][order]
        for a in self.extra.values():
            a[: self.n] = a[: self.n][order]
        self._perm = order

    def _settle(self):
        """Apply a pending reorder of the large arrays."""
        if self._perm is not None:
            order, self._perm = self._perm, None
            for name in self._BIG:
                a = getattr(self, name)
                a[: self.n] = a[: self.n][order]

    def _shape(self, M: int, F: int):
        """Widen the vertex and slot axes to at least ``M`` and ``F`` (with slack: every round adds a slot,
        and :meth:`compact` trims the axes again at the end of each op)."""
        cap, n = self.V.shape[0], self.n  # rows from n on are unset (written whole when added)
        if M > self.M:
            M = max(M, self.M + max(4, self.M // 4))
            V = np.empty((cap, M, self.k + 1))
            V[:n, : self.M] = self.V[:n]
            V[:n, self.M :] = self.V[:n, :1]
            inc = np.empty((cap, M, self.W), np.uint64)
            inc[:n, : self.M] = self.inc[:n]
            inc[:n, self.M :] = self.inc[:n, :1]
            self.V, self.inc = V, inc
        if F > self.F:
            F = max(F, self.F + 8)
        W = -(-F // _WB)
        if W > self.W:
            inc = np.zeros(self.inc.shape[:2] + (W,), np.uint64)
            inc[:n, :, : self.W] = self.inc[:n]
            self.inc = inc
        if F > self.F:
            fid = np.empty((cap, F), np.int64)  # rows from n on are unset (written whole when added)
            fid[:n, self.F :] = -1
            fid[:n, : self.F] = self.fid[:n]
            fpl = np.zeros((cap, F, self.k + 2))
            fpl[:n, : self.F] = self.fpl[:n]
            self.fid, self.fpl = fid, fpl

    def write(self, rows, P: _Poly, new_slot: np.ndarray | None = None):
        """Write batch ``P`` into ``rows``. ``new_slot (n,)``: the rows' slot arrays already equal ``P``'s except
        at that one slot per row (a cut's part that replaces its polytope: only the cut's slot is written)."""
        self._settle()
        self._shape(P.V.shape[1], P.fid.shape[1])
        M, F, W = P.V.shape[1], P.fid.shape[1], P.inc.shape[2]
        self.V[rows, :M] = P.V
        self.V[rows, M:] = P.V[:, :1]
        self.inc[rows, :M, :W] = P.inc
        self.inc[rows, :M, W:] = 0
        self.inc[rows, M:] = self.inc[rows, :1]
        self.nv[rows] = P.nv
        if new_slot is None:
            self.fid[rows, :F] = P.fid
            self.fid[rows, F:] = -1
            self.fpl[rows, :F] = P.fpl
            self.fpl[rows, F:] = 0
        else:
            at = np.arange(len(new_slot))
            self.fid[rows, new_slot] = P.fid[at, new_slot]
            self.fpl[rows, new_slot] = P.fpl[at, new_slot]
        self.nf[rows] = P.nf
        if P.cen is not None and P.rad is not None:
            self.cen[rows], self.rad[rows] = P.cen, P.rad
        else:
            self.cen[rows], self.rad[rows] = _balls(P.V, P.nv)

    def append(self, P: _Poly, src_rows) -> np.ndarray:
        self._settle()
        m = P.V.shape[0]
        need = self.n + m
        self.cap_check(need)
        cap = self.V.shape[0]
        if need > cap:
            # rows beyond those in use are never touched (np.empty), so a generous capacity costs address space,
            # not memory, and saves copying every row at each of twice as many doublings
            new = max(need, 4 * cap, 64)
            for name in self._ROW:
                setattr(self, name, _grow(getattr(self, name), new, self.n))
            for key, v in self.extra.items():
                self.extra[key] = _grow(v, new, self.n)
        rows = np.arange(self.n, need)
        self.write(rows, P)
        self.anc[rows] = self.anc[src_rows]
        for v in self.extra.values():
            v[rows] = v[src_rows]
        self.n = need
        return rows

    def take(self, rows, M: int | None = None) -> _Poly:
        """Rows ``rows`` as a batch, with the vertex axis cut to ``M`` (at least their largest vertex count:
        the slots beyond it are padding)."""
        self._settle()
        V, inc = (self.V[rows], self.inc[rows]) if M is None else (self.V[rows, :M], self.inc[rows, :M])
        nf = self.nf[rows]
        F = max(1, int(nf.max(initial=1)))  # the slots from nf on are empty: the batch needs none beyond
        return _Poly(V, inc, self.nv[rows], self.fid[rows, :F], self.fpl[rows, :F], nf)

    def vertices(self, rows, M: int) -> np.ndarray:
        """The vertex rows ``(n, M, k+1)`` of ``rows`` (the vertex axis cut to ``M``, as :meth:`take`)."""
        self._settle()
        return self.V[rows, :M]

    def compact(self):
        """Drop constraint slots that lie on fewer than ``k`` vertices (they bound no facet) and shrink the
        padded axes; keeps memory per region proportional to its actual size."""
        n, k = self.n, self.k
        if n == 0:
            return
        M = int(self.nv[:n].max())
        newF = 0
        step = max(1, _CHUNK // max(1, self.M * self.F))
        keeps = []
        perm, self._perm = self._perm, None  # the large arrays' rows are read in this order

        def src(lo: int, hi: int):
            return slice(lo, hi) if perm is None else perm[lo:hi]

        for lo in range(0, n, step):
            sl = src(lo, min(n, lo + step))
            nsl = slice(lo, min(n, lo + step))
            keep = _unpack(_on_at_least(self.inc[sl], self.nv[nsl], k), self.F) & (self.fid[sl] >= 0)
            keeps.append(keep)
            newF = max(newF, int(keep.sum(axis=1).max(initial=0)))
        F2 = max(newF, 1)
        W2 = -(-F2 // _WB)
        inc = np.zeros((self.V.shape[0], M, W2), np.uint64)
        fid = np.empty((self.V.shape[0], F2), np.int64)  # rows from n on are unset, as below
        fid[:n] = -1
        fpl = np.zeros((self.V.shape[0], F2, k + 2))
        for keep, lo in zip(keeps, range(0, n, step), strict=True):
            hi = min(n, lo + step)
            src_rows = np.arange(lo, hi) if perm is None else perm[lo:hi]
            # the kept slots of each region, first and in their order, then padding: flat (row, slot) -> column
            nk = keep.sum(axis=1)
            kr, ks = nonzero2(keep)
            dest = np.cumsum(keep, axis=1)[kr, ks] - 1
            newpos = np.full(keep.shape, -1, np.int64)
            newpos[kr, ks] = dest
            # straight into the new arrays (-1 and 0 beyond); the planes as rows of the flat (rows x slots) arrays
            to, at = (lo + kr) * F2 + dest, src_rows[kr] * self.F + ks
            fid.reshape(-1)[to] = np.take(self.fid.reshape(-1), at)
            fpl.reshape(-1, k + 2)[to] = np.take(self.fpl.reshape(-1, k + 2), at, axis=0)
            # the real vertices only (flat): each set bit of a kept slot moves to its column; padding repeats
            # vertex 0
            nvb = self.nv[lo:hi]
            rr, mm = nonzero2(np.arange(M) < nvb[:, None])
            if self.W == 1 and W2 == 1:
                # a region whose kept slots keep their columns only loses the dropped slots' bits; the others
                # move each set bit to its new column
                old = self.inc[src_rows[rr], mm, 0]
                moved = np.zeros(keep.shape[0], bool)
                moved[kr[dest != ks]] = True
                words = old & _pack(keep, 1)[:, 0][rr]
                at = np.flatnonzero(moved[rr])
                if at.size:
                    words[at] = _remap_bits(old[at], newpos, rr[at])
                words = words[:, None]
            else:
                vi, vs = np.divmod(np.flatnonzero(_unpack8(self.inc[src_rows[rr], mm], self.F)), self.F)
                d = newpos[rr[vi], vs]
                on = d >= 0
                bits = np.zeros((rr.size, F2), np.uint8)
                bits[vi[on], d[on]] = 1
                words = _pack(bits, W2)
            block = inc[lo:hi]
            block[:] = words[np.cumsum(nvb) - nvb][:, None, :]
            block[rr, mm] = words
            self.nf[lo:hi] = nk
        V = np.empty((self.V.shape[0], M, k + 1))
        V[:n] = self.V[src(0, n), :M]  # rows from n on are unset: the store writes every row it adds
        self.V, self.inc, self.fid, self.fpl = V, inc, fid, fpl


def _remap_bits(words: np.ndarray, newpos: np.ndarray, row: np.ndarray) -> np.ndarray:
    """One-word incidence masks ``words (m,)`` with each set bit ``s`` moved to ``newpos[row, s]`` (dropped where
    that is -1), taking one lowest set bit of every word per pass (a vertex lies on a few slots: few passes),
    instead of unpacking all 64 bits of every word."""
    out = np.zeros(words.shape, np.uint64)
    w = words.copy()
    idx = np.flatnonzero(w)
    one = np.uint64(1)
    while idx.size:
        x = w[idx]
        low = x & (~x + one)  # the lowest set bit
        d = newpos[row[idx], np.bitwise_count(low - one).astype(np.int64)]
        ok = d >= 0
        out[idx[ok]] |= np.left_shift(one, d[ok].astype(np.uint64))
        x ^= low
        w[idx] = x
        idx = idx[x != 0]
    return out


def _on_at_least(inc: np.ndarray, nv: np.ndarray, k: int) -> np.ndarray:
    """Words ``(n, W)``: the slots that at least ``k`` of each polytope's ``nv`` vertices lie on (``inc (n, M,
    W)``), counted bit-parallel: ``ge[j]`` holds the slots seen on more than ``j`` vertices so far."""
    ge = [np.zeros(inc.shape[:1] + inc.shape[2:], np.uint64) for _ in range(k)]
    zero = np.uint64(0)
    for m in range(inc.shape[1]):
        x = np.where((m < nv)[:, None], inc[:, m], zero)
        for j in range(k - 1, 0, -1):
            ge[j] |= ge[j - 1] & x
        ge[0] |= x
    return ge[k - 1]


def _unpack(inc: np.ndarray, F: int) -> np.ndarray:
    """Incidence words ``(..., W)`` -> bool ``(..., F)``."""
    b = np.unpackbits(inc.view(np.uint8).reshape(inc.shape[:-1] + (8 * inc.shape[-1],)), axis=-1, bitorder="little")
    return b[..., :F].astype(bool)


def _unpack8(inc: np.ndarray, F: int) -> np.ndarray:
    """Incidence words ``(..., W)`` -> uint8 0/1 ``(..., F)`` (a fresh array)."""
    b = np.unpackbits(inc.view(np.uint8).reshape(inc.shape[:-1] + (8 * inc.shape[-1],)), axis=-1, bitorder="little")
    return np.ascontiguousarray(b[..., :F])


def _pack(bits: np.ndarray, W: int) -> np.ndarray:
    """Bool ``(..., F)`` -> incidence words ``(..., W)``."""
    F = bits.shape[-1]
    pad = np.zeros(bits.shape[:-1] + (W * _WB,), np.uint8)
    pad[..., :F] = bits
    return np.packbits(pad, axis=-1, bitorder="little").view(np.uint64).reshape(bits.shape[:-1] + (W,))


def _grow(a: np.ndarray, cap: int, n: int) -> np.ndarray:
    """``a`` with room for ``cap`` rows, its rows in use ``:n`` copied; the others are left unset (the store
    writes every row it adds, and copying spare rows would only touch fresh pages)."""
    out = np.empty((cap,) + a.shape[1:], a.dtype)
    out[:n] = a[:n]
    return out


def _balls_flat(Vall: np.ndarray, start: np.ndarray, cnt: np.ndarray):
    """:func:`_balls` from flat vertex lists: ``Vall (m, k+1)`` holds polytope ``i``'s ``cnt[i] >= 1`` vertices from
    row ``start[i]`` on (no padding to read). The centre is the vertex mean (summed in another order than
    :func:`_balls`: any centre serves, the radius is measured from it)."""
    k = Vall.shape[1] - 1
    ctr = np.add.reduceat(Vall[:, :k], start, axis=0) / cnt[:, None]
    rid = np.repeat(np.arange(cnt.size), cnt)
    # the squared distance coordinate by coordinate, summed left to right (what last_sum of the squares gives)
    sq = np.zeros(Vall.shape[0])
    for i in range(k):
        d = Vall[:, i] - np.take(ctr[:, i], rid)
        d *= d
        sq += d
    dist = np.sqrt(sq, out=sq)
    dist += Vall[:, k]
    return ctr, np.maximum.reduceat(dist, start) * (1 + 1e-12)


def _balls(V: np.ndarray, nv: np.ndarray):
    """Vertex mean ``(n, k)`` (an interior point) and the radius of a ball around it that holds the polytope
    and its exact vertices (``V (n, M, k+1)``: coordinates and each vertex's error bound)."""
    M = V.shape[1]
    X = V[..., :-1]
    ctr = (slot_sum(X) - (M - nv)[:, None] * X[:, 0]) / nv[:, None]
    rad = last_max(np.sqrt(last_sum((X - ctr[:, None]) ** 2)) + V[..., -1])
    return ctr, rad * (1 + 1e-12)


def _size_groups(nv: np.ndarray, M: int, least: int = 2048) -> list[tuple[np.ndarray, int]]:
    """Split a batch by vertex count so that most of it runs on a short vertex axis: ``[(positions, M_g)]``
    (positions in order; one group where the batch is small or its sizes are even). Padding slots cost as
    much as vertices in every per-vertex step, and a few large polytopes set the store's axis."""
    top = int(nv.max(initial=1))
    if nv.size < least:
        return [(np.arange(nv.size), top)]
    t = int(np.quantile(nv, 0.9, method="higher"))
    if 3 * top < 4 * t:
        return [(np.arange(nv.size), top)]
    small = nv <= t
    return [(np.flatnonzero(small), t), (np.flatnonzero(~small), top)]


def _concat(parts: list[_Poly]) -> _Poly:
    """One batch from several (axes widened to the largest; padding repeats vertex 0, slots -1)."""
    if len(parts) == 1:
        return parts[0]
    M = max(p.V.shape[1] for p in parts)
    F = max(p.fid.shape[1] for p in parts)
    W = max(-(-F // _WB), max(p.inc.shape[2] for p in parts))
    ws = [p.widened(M, F) for p in parts]
    inc = [np.concatenate([p.inc, np.zeros(p.inc.shape[:2] + (W - p.inc.shape[2],), np.uint64)], axis=2) for p in ws]
    balls = all(p.cen is not None and p.rad is not None for p in ws)
    return _Poly(
        np.concatenate([p.V for p in ws]),
        np.concatenate(inc),
        np.concatenate([p.nv for p in ws]),
        np.concatenate([p.fid for p in ws]),
        np.concatenate([p.fpl for p in ws]),
        np.concatenate([p.nf for p in ws]),
        np.concatenate([p.cen for p in ws]) if balls else None,  # type: ignore[misc]
        np.concatenate([p.rad for p in ws]) if balls else None,  # type: ignore[misc]
    )


@dataclasses.dataclass
class _Poly:
    """A batch of padded polytopes (the store's row layout, without parents). ``cen, rad``: the enclosing balls
    (:func:`_balls`' contract), where the batch's maker computed them (a cut, from its flat vertex lists), else
    None (the store computes them when the batch is written)."""

    V: np.ndarray
    inc: np.ndarray
    nv: np.ndarray
    fid: np.ndarray
    fpl: np.ndarray
    nf: np.ndarray
    cen: np.ndarray | None = None
    rad: np.ndarray | None = None

    def select(self, m) -> _Poly:
        cen = None if self.cen is None else self.cen[m]
        rad = None if self.rad is None else self.rad[m]
        return _Poly(self.V[m], self.inc[m], self.nv[m], self.fid[m], self.fpl[m], self.nf[m], cen, rad)

    def assign(self, m, P: _Poly):
        self.cen = self.rad = None  # some rows change: the balls are recomputed when the batch is written
        self.widen(P.V.shape[1], P.fid.shape[1])
        P = P.widened(self.V.shape[1], self.fid.shape[1])
        self.V[m], self.inc[m], self.nv[m], self.fid[m], self.fpl[m], self.nf[m] = (
            P.V,
            P.inc,
            P.nv,
            P.fid,
            P.fpl,
            P.nf,
        )

    def widened(self, M: int, F: int) -> _Poly:
        P = _Poly(self.V, self.inc, self.nv, self.fid, self.fpl, self.nf, self.cen, self.rad)
        P.widen(M, F)
        return P

    def widen(self, M: int, F: int, slots: bool = True):
        """Widen the vertex axis to ``M`` and the slot axis to ``F`` (the incidence words always; the slot
        arrays ``fid``, ``fpl`` only where ``slots``)."""
        n, M0, k = self.V.shape
        if M > M0:
            V = np.empty((n, M, k))
            V[:, :M0] = self.V
            V[:, M0:] = self.V[:, :1]
            inc = np.empty((n, M, self.inc.shape[2]), np.uint64)
            inc[:, :M0] = self.inc
            inc[:, M0:] = self.inc[:, :1]
            self.V, self.inc = V, inc
        W = -(-F // _WB)
        if W > self.inc.shape[2]:
            inc = np.zeros(self.inc.shape[:2] + (W,), np.uint64)
            inc[..., : self.inc.shape[2]] = self.inc
            self.inc = inc
        F0 = self.fid.shape[1]
        if slots and F > F0:
            fid = np.full((n, F), -1, np.int64)
            fid[:, :F0] = self.fid
            fpl = np.zeros((n, F, self.fpl.shape[2]))
            fpl[:, :F0] = self.fpl
            self.fid, self.fpl = fid, fpl
