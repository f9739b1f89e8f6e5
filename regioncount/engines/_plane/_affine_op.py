"""The plane engine's Affine kernel: every region's map is mapped (:func:`~._maps._affine`); no region is split.

Before an op reads the maps, :func:`tightened` replaces the column bounds that the ops before it propagated
(sums of magnitudes: a residual that clears a slot, ``x + (relu(C - x) - C)``, doubles its bound although the
values cancel) by the magnitudes of the float coefficients themselves, where those are smaller."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..._predicates import EPS, ZERO_G
from ...networks._ops import Affine
from ._kernels import KERNELS, leaf
from ._maps import _affine, _Bounds, _Deferred, _Live, _Masked, _Tokens, affine_live, affine_out_bounds, live_cut

#: Floats per chunk of :func:`_magnitudes`: its five passes over a chunk stay in the cache (a 10,922-region batch of
#: the Thm 4.4 Transformer's maps: 8.7-13 ms with chunks of 2^18 floats, 3.7 ms with 2^15; the same maxima).
_MAG_CHUNK = 1 << 15


def _magnitudes(
    X: np.ndarray, on: np.ndarray | None = None, cols: slice = slice(None)
) -> tuple[np.ndarray, np.ndarray]:
    """Over the rows of ``X (R, 3, ...)``: the largest ``|a1| + |a2| + |a0|`` and ``|a1| + |a2|`` per entry,
    rounded up (each float sum of three magnitudes is within 2 EPS of the exact one). Entries where the mask
    ``on (R, 1, ...)`` is False count as zero. ``cols``: only that run of the last axis (a view of each chunk)."""
    sel = (Ellipsis, cols)
    shape = X[:1][sel].shape
    full = np.zeros(shape[2:])
    u = np.zeros(shape[2:])
    step = max(1, _MAG_CHUNK // max(1, int(np.prod(shape[1:])) if X.shape[0] else 1))
    for lo in range(0, X.shape[0], step):
        x = X[lo : lo + step][sel]
        s = np.abs(x[:, 0])
        s += np.abs(x[:, 1])
        t = np.abs(x[:, 2])
        if on is not None:
            # the sums of where(on, X, 0): a sum times 1 is itself, and the masked sum is 0 + 0 (finite maps)
            o = on[lo : lo + step, 0][sel]
            s *= o
            t *= o
        np.maximum(u, s.max(axis=0), out=u)
        s += t
        np.maximum(full, s.max(axis=0), out=full)
    return full * (1 + 4 * EPS), u * (1 + 4 * EPS)


def tightened(A, bd: _Bounds, reads: np.ndarray | None = None, toks=None) -> _Bounds:
    """``bd`` with its magnitude bounds ``hb`` and ``hu`` lowered to the largest coefficient magnitudes of the
    float maps ``A`` (dense ``(R, 3, T, d)`` or :class:`_Tokens`; of a :class:`_Masked` only the units off on every
    region, which are zero). Rigorous: the rounding error of a float sum of products is bounded by the magnitudes
    of the floats it adds (Higham 2002, Thm 3.1), and ``eb`` still bounds their distance from the exact
    coefficients. Zero stays zero.

    ``reads``: the columns the op reads (those with a nonzero weight); only those are tightened. An op uses the
    bounds only through products with its weights' magnitudes, where an unread column adds ``bound * 0 = +0``
    (the bounds are finite): it computes the same floats, and the maps' other columns are not read here.

    ``toks`` (dense maps only): only those tokens are read and tightened (an op that computes only some tokens'
    outputs, :func:`~._maps.live_cut`); the others keep their bounds."""
    eb, ge = bd.eb, bd.ge
    d = bd.hb.shape[-1]
    # the run of columns from the first read to the last (a view; the columns between that the op does not read
    # may be tightened as well: no bound of theirs is used)
    cols = slice(None)
    if reads is not None and (reads.size == 0 or reads[0] > 0 or reads[-1] < d - 1):
        cols = slice(int(reads.min(initial=0)), int(reads.max(initial=-1)) + 1)
    if isinstance(A, _Deferred) and A.keep is None:
        A = A.full()
    if isinstance(A, (_Masked, _Deferred)):
        # A ReLU's output keeps its input's bounds (a mask only zeroes entries); its parents' maps are not scanned
        # again. Scanning them lowered the bounds of the op's output (its rounding term) but cost more than it
        # saved: 6.5% of the instructions of the torch 2->100x5 partition, none of whose decisions it changed, and
        # 2.4% of the Thm 4.4 Transformer's (6% more float tests there, the same exact ones). The residual stream is
        # still tightened before each op that reads it. A unit off on every region is zero, exactly, in the float
        # maps and in the exact ones (a settled ReLU's output, _Deferred with its mask, has each unit on or off on
        # every region).
        if isinstance(A, _Deferred):
            assert A.keep is not None
            off = ~A.keep
        else:
            off = ~np.any(A.fixed | A.cross, axis=0).reshape(bd.hb.shape)
        if not off.any():
            return bd
        return dataclasses.replace(
            bd,
            hb=np.where(off, 0.0, bd.hb),
            hu=np.where(off, 0.0, bd.u_bound()),
            eb=np.where(off, 0.0, eb),
            ge=np.where(off, ZERO_G, ge),
        )
    elif isinstance(A, _Tokens):
        mags = [_magnitudes(p, None, cols) for p in A.parts]
        full = np.stack([mags[c][0] for c in A.cls])
        u = np.stack([mags[c][1] for c in A.cls])
    elif isinstance(A, _Live) or toks is not None:
        # some entries only: those a _Live keeps (the others are +0), or the tokens asked for; the rest keep their
        # bounds
        if isinstance(A, _Live):
            X, sel, ti, ci = A.vals, slice(None), A.toks[:, None], A.cols[None, :]
        else:
            X, sel, ti, ci = A[:, :, toks], cols, toks[:, None], np.arange(d)[cols][None, :]
        if X.shape[0] == 0:
            return bd
        full, u = _magnitudes(X, None, sel)
        hb, hu = bd.hb.copy(), bd.u_bound().copy()
        hb[ti, ci] = np.minimum(hb[ti, ci], full)
        hu[ti, ci] = np.minimum(hu[ti, ci], u)
        return dataclasses.replace(bd, hb=hb, hu=hu)
    else:
        if A.shape[0] == 0:
            return bd
        full, u = _magnitudes(A, None, cols)
    if cols == slice(None):
        hb = np.minimum(bd.hb, full)
        hu = np.minimum(bd.u_bound(), u)
    else:
        hb, hu = bd.hb.copy(), bd.u_bound().copy()
        hb[..., cols] = np.minimum(hb[..., cols], full)
        hu[..., cols] = np.minimum(hu[..., cols], u)
    return dataclasses.replace(bd, hb=hb, hu=hu, eb=eb, ge=ge)


@KERNELS.register("affine")
@leaf
def affine(eng, op: Affine, A, bd: _Bounds):
    """``H @ W.T + b`` on every region's map."""
    # an affine op that reads a ReLU's output directly: which of its outputs are exactly zero on a region
    # follows from the region's bits (see the GroupMax splitter)
    eng._after_relu = op if isinstance(A, _Masked) else None
    cut = live_cut(eng.live.get(id(op)))
    if cut is not None:  # most of its output is read by nothing after it: only the rest, kept apart (_Live)
        toks, cols = cut
        reads = np.flatnonzero(np.any(op.W[cols] != 0, axis=0))
        bd = tightened(A, bd, reads, None if isinstance(A, _Masked) else toks)
        A, bd = affine_live(A, op, bd, toks, cols, reads)
        return A, bd, [], None
    if isinstance(A, _Live):
        A = A.full()
    bd = tightened(A, bd, np.flatnonzero(np.any(op.W != 0, axis=0)))
    if isinstance(A, _Deferred):  # a ReLU's settled output, read whole
        A = A.full()
    if id(op) in eng.defer and isinstance(A, np.ndarray):  # a ReLU follows that may settle it unformed
        return _Deferred(A, op, bd), affine_out_bounds(bd, op, bd.same_u), [], None
    A, bd = _affine(A, op, bd)
    return A, bd, [], None
