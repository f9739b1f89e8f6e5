"""The plane engine's GroupMax (maxout) splitter."""

from __future__ import annotations

import numpy as np

from ...networks._ops import GroupMax
from ._argmax import argmax_start, argmax_unit
from ._kernels import KERNELS, splitter
from ._maps import _Bounds


@KERNELS.register("groupmax")
@splitter
def split_groupmax(eng, op: GroupMax, A: np.ndarray, bd: _Bounds):
    """Maxout: the argmax cells of every unit's ``k`` pieces (:mod:`._argmax`)."""
    k = op.k
    st = eng.st
    R0, _, T, d = A.shape
    n = d // k
    U = T * n
    F = A.reshape(R0, 3, U, k).transpose(0, 2, 1, 3)  # (R0, U, 3, k)
    E = bd.eb.reshape(1, U, k)
    zero = _exact_zeros(eng, R0, T, d)
    if zero is not None:
        # pieces that are exactly zero on a parent (a max pool over units the ReLU before it switched off)
        # carry no error there, so their ties are decided by the floats, not by exact arithmetic
        E = np.where(zero.reshape(R0, U, k), 0.0, E)
    act = np.ones((R0, U, k), bool)
    win = argmax_start(eng, F, E, act)
    dt = np.uint8 if k <= 256 else np.int32
    st.add_extra("digits", np.maximum(win, 0).astype(dt))
    for u in np.flatnonzero(np.any(win < 0, axis=0)):
        argmax_unit(eng, int(u), F[:, u], E[:, u], act[:, u], win[:, u], R0, "groupmax", {})
    st.sort_by_parent()
    digits = st.extra["digits"][: st.n]
    anc = st.anc[: st.n]
    Fg = A.reshape(R0, 3, T, n, k)[anc]
    out = np.take_along_axis(Fg, digits.astype(np.int64).reshape(-1, 1, T, n, 1), axis=-1)[..., 0]
    bd_out = _Bounds(
        bd.hb.reshape(T, n, k).max(axis=-1),
        bd.eb.reshape(T, n, k).max(axis=-1),
        bd.ge.reshape(T, n, k).min(axis=-1),
        hu=bd.u_bound().reshape(T, n, k).max(axis=-1),
    )
    return out, ("digits", U, digits.copy()), bd_out


def _exact_zeros(eng, R0: int, T: int, d: int):
    """``(R0, T d)`` bool or None: the entries of the current maps that are exactly zero on each parent,
    where they come from an affine op that read a ReLU's output directly: output ``j`` is exactly zero on a
    region when its bias is 0 and every input it reads with a nonzero weight is off there."""
    op = eng._after_relu
    if op is None or not eng.blocks or eng.blocks[-1][0] != "bits":
        return None
    _, width, bits = eng.blocks[-1]
    if bits.shape[0] != R0 or width != T * op.W.shape[1]:
        return None
    on = np.unpackbits(bits, axis=1, count=width).reshape(R0, T, -1).astype(np.float32)
    reads = (op.W != 0).astype(np.float32)  # (d_out, d_in)
    hits = on @ reads.T  # (R0, T, d_out): how many inputs that are on each output reads
    bias = op.b if op.b.ndim == 2 else np.broadcast_to(op.b, (T, op.b.shape[0]))
    return ((hits == 0) & (bias == 0)[None]).reshape(R0, T * d)
