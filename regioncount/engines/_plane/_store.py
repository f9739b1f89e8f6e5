"""The plane engine's growable store of padded polygons (vertices, counts, edge tags, discs, parents)."""

from __future__ import annotations

import numpy as np

from .._rows import take_rows
from ._polygon import _as_complex, _discs


class _Store:
    """Padded polygons ``V (cap, M, 2)`` (slots from ``nv`` on repeat the first vertex; the last slot is
    always padding), counts ``nv``, edge tags, enclosing discs, the op-start parent ``anc`` and per-op
    columns (``extra``), all growing together."""

    def __init__(self, V, nv, tag, cap_check):
        self.V, self.nv, self.tag = V, nv, tag
        self.R = np.zeros(V.shape[:2])  # radius around each float vertex that holds the exact one
        self.cen, self.rad = _discs(V, nv, self.R)
        self.n = V.shape[0]
        self.anc = np.arange(self.V.shape[0])
        self.extra: dict[str, np.ndarray] = {}
        self.cap_check = cap_check

    def subset(self, lo: int, hi: int) -> _Store:
        """A new store holding copies of rows ``lo:hi``."""
        st = _Store.__new__(_Store)
        st.V, st.nv, st.tag = self.V[lo:hi].copy(), self.nv[lo:hi].copy(), self.tag[lo:hi].copy()
        st.R = self.R[lo:hi].copy()
        st.cen, st.rad = self.cen[lo:hi].copy(), self.rad[lo:hi].copy()
        st.n = hi - lo
        st.anc = np.arange(st.n)
        st.extra = {}
        st.cap_check = self.cap_check
        return st

    @property
    def M(self) -> int:
        return self.V.shape[1]

    def reset_parents(self):
        self.anc = np.arange(self.V.shape[0])
        self.extra = {}

    def sort_by_parent(self):
        """Reorder the regions so that the descendants of each op-start parent are contiguous, in parent
        order: later ops then work on parents in chunks that map to contiguous runs of regions."""
        n = self.n
        anc = self.anc[:n]
        if n < 2 or bool(np.all(anc[1:] >= anc[:-1])):
            return  # already in parent order (one parent, as the first layer has): the stable sort moves nothing
        order = np.argsort(anc, kind="stable")
        for a in [getattr(self, name) for name in ("V", "nv", "tag", "R", "cen", "rad", "anc")] + list(
            self.extra.values()
        ):
            a[:n] = np.take(a[:n], order, axis=0, mode="clip")  # order is a permutation: in range

    def _widen(self, M: int):
        if M <= self.M:
            return
        # a few slots at a time: each widening copies the whole store, and polygons gain vertices one by one
        M = max(M, self.M + max(2, self.M // 4))
        # only the rows in use are copied (rows past them are written whole before they are read), so the
        # spare capacity stays untouched memory
        cap, n = self.V.shape[0], self.n
        V = np.empty((cap, M, 2))
        V[:n, : self.M] = self.V[:n]
        V[:n, self.M :] = self.V[:n, :1]
        tag = np.empty((cap, M), np.int64)
        tag[:n, : self.M] = self.tag[:n]
        tag[:n, self.M :] = -1
        R = np.empty((cap, M))
        R[:n, : self.M] = self.R[:n]
        R[:n, self.M :] = self.R[:n, :1]
        self.V, self.tag, self.R = V, tag, R

    def _write(self, rows, Vc, nvc, tagc, Rc):
        Mc = Vc.shape[1]
        self._widen(Mc)
        # a vertex as one complex element: scattered rows of slots move one 16-byte element per vertex, not a
        # two-float subspace (1.8x faster)
        Vz, Vcz = _as_complex(self.V), _as_complex(np.ascontiguousarray(Vc))
        Vz[rows, :Mc] = Vcz
        self.tag[rows, :Mc] = tagc
        self.R[rows, :Mc] = Rc
        if Mc < self.M:
            Vz[rows, Mc:] = Vcz[:, :1]
            self.tag[rows, Mc:] = -1
            self.R[rows, Mc:] = Rc[:, :1]
        self.nv[rows] = nvc
        self.cen[rows], self.rad[rows] = _discs(Vc, nvc, Rc)

    def set_rows(self, rows, Vc, nvc, tagc, Rc):
        """Replace the polygons in ``rows`` (their parent and per-op columns stay)."""
        self._write(rows, Vc, nvc, tagc, Rc)

    def append(self, Vc, nvc, tagc, Rc, src_rows) -> np.ndarray:
        """Append polygons whose parent (and per-op columns) are copied from ``src_rows``; returns their rows."""
        m = Vc.shape[0]
        self.cap_check(self.n + m)
        need = self.n + m
        cap = self.V.shape[0]
        if need > cap:
            new = max(need, 2 * cap, 64)  # zero-filled on demand: the unused rows cost no memory until written
            n = self.n
            self.V = _grow(self.V, new, n)
            self.nv = _grow(self.nv, new, n)
            self.tag = _grow(self.tag, new, n)
            self.R = _grow(self.R, new, n)
            self.cen = _grow(self.cen, new, n)
            self.rad = _grow(self.rad, new, n)
            self.anc = _grow(self.anc, new, n)
            for k, v in self.extra.items():
                self.extra[k] = _grow(v, new, n)
        rows = slice(self.n, need)
        self._write(rows, Vc, nvc, tagc, Rc)
        self.anc[rows] = self.anc[src_rows]
        for v in self.extra.values():
            v[rows] = take_rows(v, src_rows)
        self.n = need
        return np.arange(need - m, need)

    def add_extra(self, name: str, arr: np.ndarray):
        cap = self.V.shape[0]
        full = np.zeros((cap,) + arr.shape[1:], arr.dtype)
        full[: arr.shape[0]] = arr
        self.extra[name] = full


def _grow(a: np.ndarray, cap: int, n: int) -> np.ndarray:
    """``a`` with room for ``cap`` rows, its rows in use ``:n`` copied: the spare rows of ``a`` are never read
    before they are written, and copying them would touch (and so allocate) as many fresh pages again."""
    out = np.zeros((cap,) + a.shape[1:], a.dtype)
    out[:n] = a[:n]
    return out
