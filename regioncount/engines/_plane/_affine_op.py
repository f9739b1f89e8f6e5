"""The plane engine's Affine kernel: every region's map is mapped (:func:`~._maps._affine`); no region is split."""

from __future__ import annotations

from ...networks._ops import Affine
from ._kernels import KERNELS, leaf
from ._maps import _affine, _Bounds, _Masked


@KERNELS.register("affine")
@leaf
def affine(eng, op: Affine, A, bd: _Bounds):
    """``H @ W.T + b`` on every region's map."""
    # an affine op that reads a ReLU's output directly: which of its outputs are exactly zero on a region
    # follows from the region's bits (see the GroupMax splitter)
    eng._after_relu = op if isinstance(A, _Masked) else None
    A, bd = _affine(A, op, bd)
    return A, bd, [], None
