"""The space engine's GroupMax (maxout) kernel: per unit, the argmax cells of its ``k`` pieces."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._argmax import _argmax_unit
from ._kernels import KERNELS, _splitter

if TYPE_CHECKING:
    from ._driver import _Engine


def groupmax(eng: _Engine, A: np.ndarray, kk: int):
    st = eng.st
    R0, c1, T, d = A.shape
    n = d // kk
    U = T * n
    F = A.reshape(R0, c1, U, kk).transpose(0, 2, 1, 3)  # (R0, U, k+1, kk)
    fam = eng.family(R0 * U * (kk * (kk - 1) // 2), "argmax", U=U, P=kk * (kk - 1) // 2, k=kk)
    act = np.ones((R0, kk), bool)
    st.add_extra("digits", np.zeros((R0, U), np.int32))
    eF, hF = eng.E.reshape(U, kk), eng.hb.reshape(U, kk)
    for u in range(U):
        _argmax_unit(eng, u, F[:, u], act, fam, eF[u], hF[u])
    eng.E, eng.hb = eF.max(axis=1).reshape(T, n), hF.max(axis=1).reshape(T, n)
    st.sort_by_parent()
    dig = st.extra["digits"][: st.n].astype(np.int64)
    anc = st.anc[: st.n]
    Fg = A.reshape(R0, c1, T, n, kk)[anc]
    out = np.take_along_axis(Fg, dig.reshape(-1, 1, T, n, 1), axis=-1)[..., 0]
    return out, ("digits", U, dig.astype(np.uint8 if kk <= 256 else np.int32))


# -- hardmax attention ---------------------------------------------------------------------------


KERNELS.register("groupmax")(_splitter(lambda eng, op, A: groupmax(eng, A, op.k)))
