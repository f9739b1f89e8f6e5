"""The space engine's kernel registry (its row of the op protocol, :mod:`regioncount.engines._protocol`):
``kernel(eng, op, A) -> (A, par)``, ``par`` the parent of each region at entry (None: no region was split).
Affine and Residual are here; each splitting op's kernel is in its own module, made with :func:`_splitter`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ...networks._ops import Affine, Residual
from .._protocol import Kernels
from ._maps import _affine
from ._predicates import _U, _gamma

if TYPE_CHECKING:
    from ._driver import _Engine

KERNELS = Kernels("space")


@KERNELS.register("residual")
def _residual_op(eng: _Engine, op: Residual, A: np.ndarray):
    E0, hb0 = eng.E, eng.hb
    A_b, par = eng.run(op.body, A)
    A = A[par] + A_b
    eng.E = E0 + eng.E + _U * (hb0 + eng.hb)
    eng.hb = hb0 + eng.hb + eng.E
    return A, par


@KERNELS.register("affine")
def _affine_op(eng: _Engine, op: Affine, A: np.ndarray):
    A = _affine(A, op)
    aW = np.abs(op.W).T
    bb = np.abs(op.b) if op.b.ndim == 2 else np.abs(op.b)[None, :]
    eng.E = eng.E @ aW + _gamma(op.W.shape[1] + 1) * (eng.hb @ aW + bb)
    eng.hb = eng.hb @ aW + bb + eng.E
    eng._tick()
    return A, None


def _splitter(split: Callable[[_Engine, Any, np.ndarray], tuple[np.ndarray, tuple]]):
    """A kernel from ``split(eng, op, A) -> (A, code block)``, which splits every region (each is a parent)."""

    def kernel(eng: _Engine, op, A: np.ndarray):
        eng.st.reset_parents()
        eng._cache = {}
        A, block = split(eng, op, A)
        par = eng.st.anc[: eng.st.n].copy()
        eng.blocks = [(kind, w, arr[par]) for kind, w, arr in eng.blocks] + [block]
        eng.split_index += 1
        eng.st.compact()
        eng._tick()
        return A, par

    return kernel
