"""The plane engine's kernel registry (one kernel per op key, see :mod:`regioncount.engines._protocol`).

A kernel is ``kernel(eng, op, A, bd) -> (A, bd, par)``: it applies ``op`` to the maps ``A`` (with bounds
``bd``) of every region in the driver's store ``eng.st`` and returns the new maps, bounds and the parent of
each region at entry (``None``: no region was split). Leaf kernels are written with :func:`leaf` (which does
the driver's per-leaf bookkeeping) and splitters with :func:`splitter` (which also resets the store's parents
and materialises the maps first), so a splitter only splits and writes its code block.
"""

from __future__ import annotations

from collections.abc import Callable

from .._protocol import Kernels
from ._maps import _materialise

KERNELS = Kernels("plane")


def leaf(fn: Callable) -> Callable:
    """A leaf kernel from ``fn(eng, op, A, bd) -> (A, bd, new_blocks, par)``: advances the leaf position and
    progress and appends the op's code blocks (after reordering the earlier ones by ``par``)."""

    def kernel(eng, op, A, bd):
        A, bd, new, par = fn(eng, op, A, bd)
        eng.pos += 1
        if par is not None:
            eng.blocks = [(kind, w, arr[par]) for kind, w, arr in eng.blocks]
        eng.blocks += new
        eng._tick()
        return A, bd, par

    kernel.__doc__, kernel.__name__ = fn.__doc__, fn.__name__
    return kernel


def splitter(fn: Callable, lazy: tuple = ()) -> Callable:
    """A leaf kernel from a splitter ``fn(eng, op, A, bd) -> (A, block, bd)`` that splits the regions of
    ``eng.st`` (each op-start region is a parent) on the materialised maps ``A (R0, 3, T, d)`` (maps of the types
    ``lazy`` are passed as they are: the splitter materialises them where it needs them)."""

    def split(eng, op, A, bd):
        eng.st.reset_parents()
        A_new, block, bd = fn(eng, op, A if isinstance(A, lazy) else _materialise(A), bd)
        eng._after_relu = None
        return A_new, bd, [block], eng.st.anc[: eng.st.n].copy()

    split.__doc__, split.__name__ = fn.__doc__, fn.__name__
    return leaf(split)
