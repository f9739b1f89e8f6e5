"""The line engine's result: the pieces of a network on a segment (:class:`LinePieces`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..._domain import Segment


@dataclasses.dataclass(frozen=True, eq=False)
class LinePieces:
    """The pieces of a network on a segment: exact for ReLU MLPs and Maxout networks (``exact``), with
    float64 tolerances where there is attention (see the module docstring).

    ``breaks`` ``(n+1,)``: t-values, ``breaks[0] = 0``, ``breaks[-1] = 1``, non-decreasing (strictly
    increasing except around a piece shorter than float64 resolution, which is kept).
    ``codes`` ``(n, C) int32``: the activation code on each piece, the code the network's ops record (a
    piecewise-linear op's piece per entry, :func:`~regioncount.networks.op_codes`).
    ``output`` ``(n, out, degree+1)``: the output on each piece as coefficients of ``1, t, t^2, ...``
    (ascending powers of the global ``t``; ill-conditioned for high degree on tiny pieces).
    ``local_output`` ``(n, out, degree+1)``: the same polynomial in the piece's own variable
    ``s in [-1, 1]``, ``t = (lo + hi)/2 + s (hi - lo)/2`` (well conditioned; used by :meth:`evaluate`).
    ``kind``: ``"linear"`` (ReLU/Maxout/hardmax: affine on each piece) or ``"spline"`` (ReLU attention:
    spline pieces, polynomial of degree <= ``degree`` on each).
    ``piece_ties`` ``(n,)``: hardmax rows that tie identically on each piece (forward's ``ties`` there).
    ``ties``: number of pieces on which some hardmax row ties identically (attention averaged there).
    ``same_polynomial`` ``(n-1,)``: piece ``i+1`` carries the same output polynomial as piece ``i``.
    ``exact``: every combinatorial decision was made for the float64 network as given; ``predicates``:
    sign and order decisions made; ``exact_predicates``: those the float bound could not decide, settled
    in exact rational arithmetic (both 0 for the attention walk, which does not count them).
    """

    segment: Segment
    breaks: np.ndarray
    codes: np.ndarray
    output: np.ndarray
    local_output: np.ndarray
    kind: str
    degree: int
    ties: int
    piece_ties: np.ndarray
    same_polynomial: np.ndarray
    exact: bool = True
    predicates: int = 0
    exact_predicates: int = 0

    @property
    def activation_pieces(self) -> int:
        """Number of pieces: maximal intervals of one activation code."""
        return int(self.codes.shape[0])

    # -- the result protocol (results/_protocol.py) ------------------------------------------------------

    @property
    def regions(self) -> int:
        return self.activation_pieces

    def linear_regions(self) -> int:
        """:attr:`linear_pieces` (for spline pieces: equal polynomials merged)."""
        return self.linear_pieces

    @property
    def region_codes(self) -> np.ndarray:
        return self.codes

    @property
    def witnesses(self) -> np.ndarray:
        """``(n, 1)`` the midpoint ``t`` of each piece."""
        return ((self.breaks[:-1] + self.breaks[1:]) / 2)[:, None]

    @property
    def domain(self) -> Segment:
        return self.segment

    @property
    def distinct_codes(self) -> int:
        """Number of distinct codes met (a code can come back on a curved partition, never for ReLU MLPs)."""
        if self.codes.shape[1] == 0:
            return 1
        return int(np.unique(self.codes, axis=0).shape[0])

    @property
    def polynomial_pieces(self) -> int:
        """Maximal runs of adjacent pieces whose output polynomials coincide (relative tolerance)."""
        return int(self.codes.shape[0] - np.count_nonzero(self.same_polynomial))

    @property
    def linear_pieces(self) -> int:
        """For ``kind == "linear"``: linear pieces (adjacent pieces with the same affine map merged;
        Montúfar et al. 2014). For ``kind == "spline"`` these are *spline pieces with equal polynomials
        merged*, not linear regions: ReLU attention is not piecewise linear."""
        return self.polynomial_pieces

    @property
    def polynomial_breaks(self) -> np.ndarray:
        """``breaks`` without the breaks between pieces carrying the same polynomial."""
        keep = np.concatenate([[True], ~self.same_polynomial, [True]])
        return self.breaks[keep]

    def points(self, t) -> np.ndarray:
        """Inputs ``a + t (b - a)`` for t-values of any shape ``S`` -> ``S + (q,)``."""
        t = np.asarray(t, dtype=np.float64)
        return self.segment.a + t[..., None] * (self.segment.b - self.segment.a)

    def piece_index(self, t) -> np.ndarray:
        """Index of the piece holding each t (a break belongs to the piece on its right; t = 1 to the last)."""
        t = np.asarray(t, dtype=np.float64)
        return np.clip(np.searchsorted(self.breaks, t, side="right") - 1, 0, self.activation_pieces - 1)

    def evaluate(self, t) -> np.ndarray:
        """The output at t-values ``(N,)`` from the piece polynomials -> ``(N, out)``."""
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        i = self.piece_index(t)
        lo, hi = self.breaks[i], self.breaks[i + 1]
        with np.errstate(divide="ignore", invalid="ignore"):  # a piece below float resolution has hi == lo
            s = np.where(hi > lo, (t - (lo + hi) / 2) / ((hi - lo) / 2), 0.0)
        c = self.local_output[i]
        y = c[..., -1]
        for k in range(c.shape[-1] - 2, -1, -1):
            y = y * s[:, None] + c[..., k]
        return y
