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
    arc carry its id) and a bounding box ``[xa, xb] x [ylo, yhi]`` that contains each trapezoid."""

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

    @property
    def n(self) -> int:
        return int(self.xa.shape[0])

    def take(self, idx) -> Traps:
        return Traps(*(getattr(self, f.name)[idx] for f in dataclasses.fields(self)))

    @staticmethod
    def concat(parts: list[Traps]) -> Traps:
        return Traps(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in dataclasses.fields(Traps)))

    def lower_y(self, x) -> np.ndarray:
        return cn.branch_y(self.Lc, self.Lk, x)

    def upper_y(self, x) -> np.ndarray:
        return cn.branch_y(self.Uc, self.Uk, x)

    def witness(self) -> tuple[np.ndarray, np.ndarray]:
        """An interior point of each trapezoid: the middle of its vertical chord at the mid ``x``."""
        xm = (self.xa + self.xb) / 2
        return xm, (self.lower_y(xm) + self.upper_y(xm)) / 2


def _code_dtype(largest: int):
    """The narrowest integer type for code entries ``0 .. largest``: the codes are most of the memory that
    follows the trapezoids (one entry per unit per block), so bits and small argmax indices take a byte."""
    return np.int8 if largest <= 127 else np.int16 if largest <= 32767 else np.int32
