"""The trapezoids the curved engines split (:mod:`._curved`, floats; :mod:`._curved_exact`, certified), and the
code entries' integer type: one module both engines import, so neither imports the other at module level."""

from __future__ import annotations

import dataclasses

import numpy as np

from . import _conic as cn


@dataclasses.dataclass
class Traps:
    """Trapezoids ``x in [xa, xb]``, ``y`` between branch ``Lk`` of conic ``Lc`` and branch ``Uk`` of ``Uc``
    (``(N, 6)`` normalised conics, ``(N,)`` int8 branches), arc ids ``Lid, Uid`` ``(N,)`` (both sides of an
    arc carry its id) and a bounding box ``[xa, xb] x [ylo, yhi]`` that contains each trapezoid.

    ``Lg, Ug`` (certified partitions with walls of degree >= 3; None otherwise): object arrays ``(N,)`` whose
    entry is None for a conic arc or ``(coef, k, nreal)`` for a branch of a curve of any degree (``coef[i, j]``
    the float coefficient of ``x^i y^j``, ``k`` the root index among the ``nreal`` real roots in ``y``); the
    conic columns then hold the arc's chord, for drawing only (:func:`~regioncount.results._arcs.arc_y`)."""

    xa: np.ndarray
    xb: np.ndarray
    Lc: np.ndarray
    Lk: np.ndarray
    Lid: np.ndarray
    Uc: np.ndarray
    Uk: np.ndarray
    Uid: np.ndarray
    ylo: np.ndarray
    yhi: np.ndarray
    Lg: np.ndarray | None = None
    Ug: np.ndarray | None = None

    @property
    def n(self) -> int:
        return int(self.xa.shape[0])

    def take(self, idx) -> Traps:
        return Traps(*(_take(getattr(self, f.name), idx) for f in dataclasses.fields(self)))

    @staticmethod
    def concat(parts: list[Traps]) -> Traps:
        out: list = []
        for f in dataclasses.fields(Traps):
            vals = [getattr(p, f.name) for p in parts]
            if any(v is None for v in vals):
                if all(v is None for v in vals):
                    out.append(None)
                    continue
                vals = [np.full(p.n, None, object) if v is None else v for v, p in zip(vals, parts)]
            out.append(np.concatenate(vals))
        return Traps(*out)

    def lower_y(self, x) -> np.ndarray:
        return cn.arc_y(self.Lc, self.Lk, self.Lg, x)

    def upper_y(self, x) -> np.ndarray:
        return cn.arc_y(self.Uc, self.Uk, self.Ug, x)

    def witness(self) -> tuple[np.ndarray, np.ndarray]:
        """An interior point of each trapezoid: the middle of its vertical chord at the mid ``x``."""
        xm = (self.xa + self.xb) / 2
        return xm, (self.lower_y(xm) + self.upper_y(xm)) / 2


def _take(a, idx):
    return None if a is None else a[idx]


def _code_dtype(largest: int):
    """The narrowest integer type for code entries ``0 .. largest``: the codes are most of the memory that
    follows the trapezoids (one entry per unit per block), so bits and small argmax indices take a byte."""
    return np.int8 if largest <= 127 else np.int16 if largest <= 32767 else np.int32
