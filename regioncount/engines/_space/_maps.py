"""The space engine's maps: every region's affine map through an :class:`~regioncount.networks._ops.Affine`."""

from __future__ import annotations

import numpy as np

from ...networks._ops import Affine
from ._store import _CHUNK


def _affine(A: np.ndarray, op: Affine) -> np.ndarray:
    W, b = op.W, op.b
    R = A.shape[0]
    out = np.empty(A.shape[:3] + (W.shape[0],))
    step = max(1, _CHUNK // max(1, A[0].size, out[0].size))
    for lo in range(0, R, step):
        x = A[lo : lo + step]
        out[lo : lo + step] = (x.reshape(-1, x.shape[-1]) @ W.T).reshape(x.shape[:-1] + (W.shape[0],))
    out[:, -1] += b if b.ndim == 2 else b[None, :]
    return out
