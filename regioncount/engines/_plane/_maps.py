"""The plane engine's region maps: lazy ReLU outputs (:class:`_Masked`), unexpanded token repeats
(:class:`_Tokens`), the error bounds of every map column (:class:`_Bounds`) and the affine op on maps."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..._predicates import affine_bounds, finite_or_raise
from ...networks._ops import Affine
from .._exact import ExactMap, exact_affine
from .._rows import nonzero2, where_rows
from ._polygon import _CHUNK


@dataclasses.dataclass
class _Masked:
    """ReLU output kept lazy: row ``r`` is ``base[parent[r]] * bits[r]`` (``(3, T, d)``), never materialised
    for all regions at once. ``fixed (R0, T d)`` is the mask every descendant of a parent shares (units
    that do not cross it), ``cross (R0, T d)`` the units whose bit varies among its descendants."""

    base: np.ndarray  # (R0, 3, T, d)
    parent: np.ndarray  # (R,)
    bits: np.ndarray  # (R, ceil(T d / 8)) packed
    fixed: np.ndarray  # (R0, T d) bool
    cross: np.ndarray  # (R0, T d) bool
    #: ``np.nonzero(cross)``, where the splitter has it already
    cross_pairs: tuple[np.ndarray, np.ndarray] | None = None

    def rows(self, sl) -> np.ndarray:
        R0, _, T, d = self.base.shape
        m = np.unpackbits(self.bits[sl], axis=1, count=T * d).reshape(-1, 1, T, d)
        # a fresh array, masked in place by the bits as floats: the same products x * 1 and x * 0 as by the uint8
        # bits, whose mixed-type product casts per buffer (2.5 times slower)
        x = self.base[self.parent[sl]]
        np.multiply(x, m.astype(np.float64), out=x)
        return x

    @property
    def n(self) -> int:
        return self.parent.shape[0]

    def varying(self) -> tuple[np.ndarray, np.ndarray]:
        """Pairs ``(r, j)`` (sorted by ``r``) where unit ``j`` crosses the parent of ``r`` and is on in ``r``."""
        pp, jj = nonzero2(self.cross) if self.cross_pairs is None else self.cross_pairs
        if pp.size == 0:  # no unit crosses any parent (each region is its own parent)
            return np.zeros(0, np.intp), np.zeros(0, np.intp)
        cnt = np.bincount(pp, minlength=self.cross.shape[0])
        first = np.cumsum(cnt) - cnt
        c = cnt[self.parent]
        r = np.repeat(np.arange(self.n), c)
        k = np.repeat(first[self.parent] - np.cumsum(c) + c, c) + np.arange(r.size)
        j = jj[k]
        on = (self.bits[r, j >> 3] >> (7 - (j & 7)).astype(np.uint8)) & 1
        r, j = where_rows(on.astype(bool), r, j)
        return r, j


@dataclasses.dataclass
class _Tokens:
    """Maps whose token slices repeat, kept unexpanded: token ``i`` of every row is ``parts[cls[i]]``
    (``(R, 3, d)`` each). Attention makes them when several query tokens get the same output."""

    parts: list
    cls: list
    #: per part, the columns that may be nonzero (an index array or slice; the others are +0 in every row), or None
    cols: list | None = None

    def full(self) -> np.ndarray:
        R, _, d = self.parts[0].shape
        out = np.empty((R, 3, len(self.cls), d))
        for i, c in enumerate(self.cls):
            out[:, :, i, :] = self.parts[c]
        return out

    def add_to(self, out: np.ndarray):
        """``out += self``, token by token (the same sums as adding the expanded maps, but in the columns a part
        holds only +0: ``x + 0`` is ``x``, but for ``-0 + 0``, which is ``+0``; no decision reads a zero's sign)."""
        for i, c in enumerate(self.cls):
            cols = slice(None) if self.cols is None else self.cols[c]
            out[:, :, i, cols] += self.parts[c][:, :, cols]


@dataclasses.dataclass
class _Added:
    """A residual's output where attention split the regions, kept lazy: row ``r`` is ``base[parent[r]]`` (the
    input maps ``(R0, 3, T, d)`` of its parent) plus row ``r`` of ``tokens`` (the attention's :class:`_Tokens`).
    A count whose store is then split into batches gathers each batch's rows only, never every region's at
    once; any kernel gets the dense maps (:meth:`full`), the same floats as gathering and adding at once."""

    base: np.ndarray  # (R0, 3, T, d)
    parent: np.ndarray  # (R,)
    tokens: _Tokens

    def full(self) -> np.ndarray:
        out = self.base[self.parent]  # a fresh array: add in place (x + y == y + x exactly)
        self.tokens.add_to(out)
        return out


def _materialise(A) -> np.ndarray:
    if isinstance(A, _Masked):
        return A.rows(slice(None))
    if isinstance(A, (_Tokens, _Added, _Live, _Deferred)):
        return A.full()
    return A


def _run_as_slice(cols: np.ndarray):
    """Sorted column indices as a slice where they are one run (a view to add into, not a fancy index's gather and
    scatter), else as they are."""
    return slice(int(cols[0]), int(cols[-1]) + 1) if cols.size and cols[-1] - cols[0] + 1 == cols.size else cols


def _coef_bound(A: np.ndarray) -> np.ndarray:
    """max over regions of ``|a1| + |a2| + |a0|`` per entry ``(T, d)``: bounds ``|h|`` on ``[-1, 1]^2``."""
    out = np.zeros(A.shape[2:])
    step = max(1, _CHUNK // max(1, A[0].size if A.shape[0] else 1))
    for lo in range(0, A.shape[0], step):
        X = np.abs(A[lo : lo + step])
        np.maximum(out, (X[:, 0] + X[:, 1] + X[:, 2]).max(axis=0), out=out)
    return out


def _add_bias(out: np.ndarray, b: np.ndarray):
    """``out[:, 2] += b`` for C-contiguous maps ``out (R, 3, T, d)`` and ``b (T or 1, d)``: the constant plane of each
    row as one run of ``T d`` floats (the same sums as the broadcast add, with a longer inner loop)."""
    R, _, T, d = out.shape
    flat = np.ascontiguousarray(np.broadcast_to(b, (T, d))).reshape(-1)
    view = out[:, 2]
    view.shape = (R, T * d)  # in place (raises where it would take a copy): a row's tokens and columns lie together
    view += flat


def _matmul_rows(X: np.ndarray, W: np.ndarray, out: np.ndarray, bias: np.ndarray | None = None):
    """``out = X @ W.T`` over the last axis, in row chunks (X ``(R, ...)``, ``out`` C-contiguous): each chunk's
    product is written in place (the same floats as a product then a copy, without the copy). ``bias``: added
    to the constant coefficients (``out[:, 2]``) of each chunk while it is in cache (the same single rounding
    per entry as adding it to the whole array afterwards, without a second pass over it)."""
    R = X.shape[0]
    step = max(1, _CHUNK // max(1, X[0].size if R else 1, out[0].size if R else 1))
    for lo in range(0, R, step):
        x = X[lo : lo + step]
        np.matmul(x.reshape(-1, x.shape[-1]), W.T, out=out[lo : lo + step].reshape(-1, W.shape[0]))
        if bias is not None:
            _add_bias(out[lo : lo + step], bias)


@dataclasses.dataclass(frozen=True)
class _Bounds:
    """Per map column ``(T, d)``, over every region: ``hb`` bounds the 1-norm of the three coefficients (so
    ``|h|`` on ``[-1, 1]^2``), ``eb`` their distance from the exact coefficients, ``ge`` their granularity
    while exact (see ``_exact``). ``same_u``: the ``u`` coefficients of every token are identical, as exact
    values (the embedding gives every token the same ``E x``; token-wise ops keep it)."""

    hb: np.ndarray
    eb: np.ndarray
    ge: np.ndarray
    same_u: bool = False
    #: bound on ``|a1| + |a2|`` alone (the ``u`` coefficients): 0 proves a column constant on the domain
    hu: np.ndarray | None = None

    def u_bound(self) -> np.ndarray:
        return self.hb if self.hu is None else self.hu

    def check_finite(self):
        finite_or_raise(self.hb, self.eb)


def affine_out_bounds(bd: _Bounds, op: Affine, same_u: bool) -> _Bounds:
    """The bounds of ``H @ W.T + b`` from those of ``H`` (``bd``, tightened), checked finite; ``same_u``: what the
    output may claim of its tokens' ``u`` coefficients."""
    hb, eb, ge = affine_bounds(bd.hb, bd.eb, bd.ge, op.W, op.b)
    out = _Bounds(hb, eb, ge, same_u, bd.u_bound() @ np.abs(op.W).T)
    out.check_finite()
    return out


#: Costs (ns per float touched, this machine's NumPy and OpenBLAS) of the two ways :func:`_affine` maps a ReLU's lazy
#: output: a multiply-add inside a BLAS product, a row copied by ``take``, a float of a rank-1 correction (gathered,
#: formed, added and scattered back by fancy indexing) and a float of a child's masked map formed before its product
_NS_BLAS, _NS_COPY, _NS_PAIR, _NS_MASK = 0.11, 1.0, 12.0, 2.5


def _corrections_pay(n: int, R0: int, pairs: int, T: int, d: int, d_out: int) -> bool:
    """Whether one product per parent and a rank-1 correction per ``pairs`` (child, crossing unit on) costs less
    than a product per child (``n`` children of ``R0`` parents, ``T`` tokens, ``d -> d_out``). Both are rigorous
    (Higham's bound holds for any order of the sum), so only the time decides. Measured on torch MLPs (2->100x5,
    2->128x3, 2->256x2): a correction costs about as much as a whole child's 100 -> 100 product, so a hidden layer
    whose children carry two or more corrections each is faster child by child (9.3 against 15.1 ms on 2,402
    children), while an output layer (``d_out`` = 1) is always faster by corrections."""
    corrections = pairs * d_out * _NS_PAIR + T * (R0 * d * d_out * _NS_BLAS + n * d_out * _NS_COPY)
    per_child = n * T * d * (_NS_MASK + d_out * _NS_BLAS)
    return corrections < per_child


def _affine(A, op: Affine, bd: _Bounds):
    """``H @ W.T + b`` on every region's map; returns the maps ``(R, 3, T, d_out)`` and their bounds."""
    W, b = op.W, op.b
    if isinstance(A, _Tokens):
        A = A.full()
    bb = b if b.ndim == 2 else b[None, :]
    T, d_out = bd.hb.shape[0], W.shape[0]
    biased = False
    if not isinstance(A, _Masked):
        out = np.empty(A.shape[:3] + (d_out,))
        _matmul_rows(A, W, out, bb)
        biased = True
    elif A.base.shape[0] <= 16 and T == 1 and 2 * int(A.cross.sum()) < A.cross.size:
        # few parents with many children each (the box, split by a first layer): per parent, the units on in
        # every child (``fixed``) once, then (children x crossing units) bits @ (crossing x 3 d_out): a unit
        # that does not cross the parent costs nothing per child (taken where most units do not cross: a
        # tile of a wide first layer). One token only: with several, tokens whose exact maps are equal must get
        # bitwise-equal floats, which one summation order over every unit gives
        R0, _, _, d = A.base.shape
        out = np.empty((A.n, 3, 1, d_out))
        for p in range(R0):
            rows = np.flatnonzero(A.parent == p)
            if rows.size == 0:
                continue
            # the always-on part as a stack of (1, d) @ (d, d_out) products: a (3, d) @ (d, d_out) product rounds
            # differently, and the maps stay the floats they were
            F = ((A.base[p] * A.fixed[p].reshape(1, 1, d)) @ W.T)[:, 0]  # (3, d_out)
            base = A.base[p, :, 0]  # (3, d)
            c = np.flatnonzero(A.cross[p])
            BT = (base[:, c, None] * W.T[c][None]).transpose(0, 2, 1).reshape(3 * d_out, c.size)
            # the crossing units' bits, unit by unit: bytes transposed to rows of units, each row gathered whole and
            # shifted (gathering columns of an unpacked row-per-child array, then the narrow product by B, took
            # twice as long); (3 d_out, c) @ (c, children) sums the same terms
            byte, bit = c >> 3, (1 << (7 - (c & 7))).astype(np.uint8)[:, None]
            step = max(1, _CHUNK // max(1, c.size, 3 * d_out))
            for lo in range(0, rows.size, step):
                rs = rows[lo : lo + step]
                g = np.ascontiguousarray(A.bits[rs].T)[byte]  # (c, children)
                g &= bit
                o = (BT @ (g != 0).astype(np.float64)).T.reshape(-1, 3, d_out)
                o += F
                out[rs, :, 0, :] = o
    elif A.base.shape[0] <= 16:
        # few parents with many children each: per parent and token, (children x d) bits @ (d x 3 d_out)
        R0, _, _, d = A.base.shape
        out = np.empty((A.n, 3, T, d_out))
        step = max(1, _CHUNK // max(1, T * d, 3 * T * d_out))
        for p in range(R0):
            B = (A.base[p, :, :, :, None] * W.T[None, None]).transpose(1, 2, 0, 3).reshape(T, d, 3 * d_out)
            rows = np.flatnonzero(A.parent == p)
            for lo in range(0, rows.size, step):
                rs = rows[lo : lo + step]
                m = np.unpackbits(A.bits[rs], axis=1, count=T * d).reshape(rs.size, T, d).astype(np.float64)
                for t in range(T):
                    out[rs, :, t, :] = (m[:, t] @ B[t]).reshape(-1, 3, d_out)
    else:
        R0, _, _, d = A.base.shape
        r, j = A.varying()
        if _corrections_pay(A.n, R0, r.size, T, d, d_out):
            # Children differ from their parent's shared mask only on the parent's crossing units: one
            # product per parent, then a rank-1 correction per (child, crossing unit that is on).
            # parents are sorted (see _Store.sort_by_parent): a chunk of parents is a run of children
            out = np.empty((A.n, 3, T, d_out))
            step = max(1, _CHUNK // (3 * T * max(d, d_out)))
            cuts = np.searchsorted(A.parent, np.arange(0, R0 + step, step))
            for k, plo in enumerate(range(0, R0, step)):
                x = A.base[plo : plo + step]
                if not A.fixed[plo : plo + step].all():  # x * 1.0 is x: a chunk of units on everywhere is read as it is
                    x = x * A.fixed[plo : plo + step].reshape(-1, 1, T, d)
                lo, hi = cuts[k], cuts[k + 1]
                idx = A.parent[lo:hi] - plo
                if idx.size == x.shape[0] and np.array_equal(idx, np.arange(idx.size)):
                    # no parent split in this chunk: the product straight into place
                    np.matmul(x.reshape(-1, d), W.T, out=out[lo:hi].reshape(-1, d_out))
                else:
                    P0 = (x.reshape(-1, d) @ W.T).reshape(x.shape[:-1] + (d_out,))
                    # gathered straight into place; the indices are in range, and mode="clip" skips the buffered copy
                    np.take(P0, idx, axis=0, out=out[lo:hi], mode="clip")
                if r.size == 0:  # no corrections follow: the bias while the chunk is in cache
                    _add_bias(out[lo:hi], bb)
            biased = r.size == 0
            t, dj = j // d, j % d
            key = r * T + t
            new = np.r_[True, key[1:] != key[:-1]]
            rank = np.arange(key.size) - np.flatnonzero(new)[np.cumsum(new) - 1]
            order = np.argsort(rank, kind="stable")
            bounds = np.searchsorted(rank[order], np.arange(int(rank.max(initial=-1)) + 2))
            a = A.base[A.parent[r], :, t, dj]  # (pairs, 3)
            WT = np.ascontiguousarray(W.T)
            out2 = out.reshape(-1, d_out)  # row (child * 3 + c) * T + token
            step = max(1, (_CHUNK // 4) // (3 * d_out))
            # pairs of equal rank belong to distinct (child, token): plain fancy += is safe
            for k in range(bounds.size - 1):
                for lo in range(bounds[k], bounds[k + 1], step):
                    sel = order[lo : min(lo + step, bounds[k + 1])]
                    flat = ((r[sel, None] * 3 + np.arange(3)) * T + t[sel, None]).ravel()
                    out2[flat] += (a[sel][:, :, None] * WT[dj[sel]][:, None, :]).reshape(-1, d_out)
        else:
            out = np.empty((A.n, 3, T, d_out))
            step = max(1, _CHUNK // max(1, 3 * T * max(d, d_out)))
            for lo in range(0, A.n, step):
                x = A.rows(slice(lo, lo + step))
                np.matmul(x.reshape(-1, d), W.T, out=out[lo : lo + step].reshape(-1, d_out))
                _add_bias(out[lo : lo + step], bb)  # while the chunk is in cache
            biased = True
    if not biased:
        _add_bias(out, bb)
    return out, affine_out_bounds(bd, op, bd.same_u)


#: The largest fraction of an op's output entries that may be live for :func:`live_cut` to leave the rest out (where
#: most are live, computing every entry costs about as much, and keeps the maps' usual paths).
_LIVE_MAX = 0.5


def live_cut(live: np.ndarray | None):
    """The tokens and columns ``(toks, cols)`` of an op's output to compute, from its live entries ``live (T, d)``
    (:func:`~regioncount.networks._ops.live_entries`): the live tokens, and every column live in one of them
    (sorted indices); None where every entry is computed (``live`` None, or most entries live)."""
    if live is None or live.sum() > _LIVE_MAX * live.size:
        return None
    return np.flatnonzero(live.any(axis=1)), np.flatnonzero(live.any(axis=0))


@dataclasses.dataclass
class _Live:
    """Maps of which only the entries ``[:, :, toks, cols]`` are kept, as ``vals (R, 3, k, c)``: the others are read
    by nothing after the op that made them (:func:`live_cut`), and count as +0."""

    vals: np.ndarray
    toks: np.ndarray
    cols: np.ndarray
    T: int
    d: int

    @property
    def n(self) -> int:
        return self.vals.shape[0]

    def full(self) -> np.ndarray:
        out = np.zeros((self.n, 3, self.T, self.d))
        out[:, :, self.toks[:, None], self.cols[None, :]] = self.vals
        return out

    def token(self, t: int) -> np.ndarray | None:
        """Token ``t``'s maps ``(R, 3, d)`` where they are kept whole (every column), else None."""
        if self.cols.size != self.d or t not in self.toks:  # cols are sorted: all of them is arange(d)
            return None
        return self.vals[:, :, int(np.searchsorted(self.toks, t))]


@dataclasses.dataclass
class _Deferred:
    """An affine op's output ``A_in @ W.T + b`` not formed yet (``A_in (R, 3, T, d)`` dense, ``bd_in`` its bounds,
    tightened), times ``keep (T, d_out)`` once a ReLU has proven every unit's sign (1 on, 0 off; None: not yet):
    the ReLU after it may settle every unit from the input's extremes (:func:`~._relu._whole_by_intervals`), and
    an op after that reads only a few entries (:func:`affine_live`). :meth:`full` forms it as the affine op and a
    ReLU's lazy output do (the same floats)."""

    A_in: np.ndarray
    op: Affine
    bd_in: _Bounds
    keep: np.ndarray | None = None

    @property
    def n(self) -> int:
        return self.A_in.shape[0]

    def full(self) -> np.ndarray:
        W, b = self.op.W, self.op.b
        out = np.empty(self.A_in.shape[:3] + (W.shape[0],))
        _matmul_rows(self.A_in, W, out, b if b.ndim == 2 else b[None, :])
        if self.keep is not None:
            out *= self.keep.astype(np.float64)  # x * 1 and x * 0, as _Masked.rows
        return out

    def rows(self, lo: int, hi: int, toks: np.ndarray, units: np.ndarray) -> np.ndarray:
        """Rows ``lo:hi``, tokens ``toks``, units ``units`` of :meth:`full`: the same products, which a narrower BLAS
        product may sum in another order (within the same bounds, Higham 2002, Thm 3.1)."""
        W, b = self.op.W[units], self.op.b
        x = self.A_in[lo:hi][:, :, toks]
        y = (x.reshape(-1, x.shape[-1]) @ W.T).reshape(x.shape[:3] + (units.size,))
        y[:, 2] += b[toks][:, units] if b.ndim == 2 else b[units]
        if self.keep is not None:
            y *= self.keep[toks][:, units].astype(np.float64)
        return y


def _in_live(A, toks: np.ndarray, reads: np.ndarray):
    """For an affine op computing tokens ``toks`` from columns ``reads`` of ``A``: the maps to read them from (a
    :class:`_Live` that keeps them all, a :class:`_Deferred`, else dense or :class:`_Masked` maps), and the columns
    the rows read from them hold (None: all)."""
    if isinstance(A, _Deferred):  # only the units read are formed
        return A, reads
    if not isinstance(A, _Live):
        return A, None
    if set(toks.tolist()) <= set(A.toks.tolist()) and set(reads.tolist()) <= set(A.cols.tolist()):
        return A, A.cols
    return A.full(), None


def _rows_at(A, lo: int, hi: int, toks: np.ndarray, base_t: np.ndarray | None, held=None) -> np.ndarray:
    """Rows ``lo:hi`` of the maps ``A`` (dense, :class:`_Masked`, :class:`_Live` or :class:`_Deferred`), tokens
    ``toks`` only: a fresh array. For a :class:`_Masked`, ``base_t`` is its parents' maps of those tokens
    (``base[:, :, toks]``); a :class:`_Live` gives the columns it keeps, a :class:`_Deferred` the units ``held``."""
    if isinstance(A, _Deferred):
        return A.rows(lo, hi, toks, held)
    if isinstance(A, _Live):
        pos = np.searchsorted(A.toks, toks)  # toks are kept (_in_live), and both are sorted
        return A.vals[lo:hi][:, :, pos]
    if not isinstance(A, _Masked):
        return A[lo:hi][:, :, toks]
    T, d = A.base.shape[2:]
    m = np.unpackbits(A.bits[lo:hi], axis=1, count=T * d).reshape(-1, 1, T, d)[:, :, toks]
    assert base_t is not None
    x = base_t[A.parent[lo:hi]]
    np.multiply(x, m.astype(np.float64), out=x)  # x * 1 and x * 0, as in _Masked.rows
    return x


def affine_live(
    A, op: Affine, bd: _Bounds, toks: np.ndarray, cols: np.ndarray, reads: np.ndarray
) -> tuple[_Live, _Bounds]:
    """:func:`_affine` for the entries ``[:, :, toks, cols]`` of its output alone (:func:`live_cut`), kept as a
    :class:`_Live`; the others keep their bounds. Each computed entry is its token's row times its weight row, plus
    its bias, as in :func:`_affine`, but over the columns its input keeps (the others meet a zero weight): rigorous
    under the same bounds, whatever order the products are summed in (Higham 2002, Thm 3.1). ``bd``: the input's
    bounds, already tightened; ``reads``: the input columns with a nonzero weight in the rows ``cols``."""
    W, b = op.W, op.b
    if isinstance(A, _Tokens):
        A = A.full()
    A, held = _in_live(A, toks, reads)
    if isinstance(A, _Masked):
        n, (T, d) = A.n, A.base.shape[2:]
    elif isinstance(A, _Live):
        n, T, d = A.n, A.T, A.d
    elif isinstance(A, _Deferred):
        n, T, d = A.n, A.A_in.shape[2], A.op.W.shape[0]
    else:
        n, _, T, d = A.shape
    Wc = W[cols] if held is None else W[cols][:, held]
    Wt = np.ascontiguousarray(Wc.T)
    c = Wc.shape[0]
    bc = (b[toks][:, cols] if b.ndim == 2 else b[cols][None, :]).reshape(1, -1, c)  # (1, k or 1, c)
    base_t = None
    if isinstance(A, _Masked):  # one token (the output's): a view, gathered row by row below; else a copy
        base_t = A.base[:, :, toks[0] : toks[0] + 1] if toks.size == 1 else A.base[:, :, toks]
    out = np.empty((n, 3, toks.size, c))
    step = max(1, _CHUNK // max(1, 3 * toks.size * max(d, c)))
    for lo in range(0, n, step):
        x = _rows_at(A, lo, lo + step, toks, base_t, held)
        y = out[lo : lo + step]
        np.matmul(x.reshape(-1, x.shape[-1]), Wt, out=y.reshape(-1, c))
        y[:, 2] += bc
    # same_u is dropped: the entries left out are +0, whatever the exact maps' u coefficients are
    return _Live(out, toks, cols, T, W.shape[0]), affine_out_bounds(bd, op, False)


def _take_rows(A, lo: int, hi: int):
    """Rows ``lo:hi`` of the maps (a lazy ReLU output keeps only the parents those rows need)."""
    if isinstance(A, _Tokens):
        return _Tokens([p[lo:hi] for p in A.parts], A.cls, A.cols)
    if isinstance(A, _Added):
        return _Added(A.base, A.parent[lo:hi], _take_rows(A.tokens, lo, hi))
    if isinstance(A, _Live):
        return _Live(A.vals[lo:hi], A.toks, A.cols, A.T, A.d)
    if isinstance(A, _Deferred):
        return _Deferred(A.A_in[lo:hi], A.op, A.bd_in, A.keep)
    if not isinstance(A, _Masked):
        return A[lo:hi]
    plo, phi = int(A.parent[lo]), int(A.parent[hi - 1]) + 1
    pairs = None
    if A.cross_pairs is not None:
        pp, jj = A.cross_pairs
        a, b = np.searchsorted(pp, [plo, phi])  # nonzero lists the pairs by parent
        pairs = (pp[a:b] - plo, jj[a:b])
    return _Masked(A.base[plo:phi], A.parent[lo:hi] - plo, A.bits[lo:hi], A.fixed[plo:phi], A.cross[plo:phi], pairs)


def _token_column(M, op: Affine, t: int, j: int):
    """Output ``j`` of the affine ``op`` on token ``t`` of the exact maps ``M``: an ExactMap ``(3, 1, 1)``."""
    b = op.b[t : t + 1] if op.b.ndim == 2 else op.b
    return exact_affine(ExactMap(M.N[:, t : t + 1, :], M.s), op.W, b, rows=np.array([j]))
