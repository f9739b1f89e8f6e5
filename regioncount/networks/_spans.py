"""Where hardmax attention's boundaries are lines, decided from the program before any partition.

A hardmax head compares the scores ``S_ij = (H_i Wq)(H_j Wk)^T`` of one query ``i`` over the keys ``j``. On a
region every row ``H_t`` is affine in the domain's parameters ``u``, ``H_t = u L_t + c_t``, so the boundary
between keys ``j`` and ``k`` is ``S_ij - S_ik = 0``, whose quadratic part is ``u L_i M (L_j - L_k)^T u^T`` with
``M = Wq Wk^T``. It is a line (or nothing) on every region of the domain when ``z M w^T = 0`` for every ``z``
in the span ``Z`` of all rows of all ``L_t`` and every ``w`` in the span ``D`` of all differences
``L_j - L_k`` over every region.

:func:`hardmax_straight` follows two subspaces of ``R^d`` through the ops, exactly (rational Gaussian
elimination on the float64 weights as given): ``Z`` starts as the domain's directions and ``D`` as ``{0}``
(the input is the same on every row); each op maps them by its own rule (:meth:`_Facts.spans` in
``_ops.py``): an affine map by its weight, an entrywise or groupwise op to the coordinates it may keep (its
decisions differ per token, so ``D`` grows to them when there are several tokens), hardmax attention by its
value-output maps (its rows mix the value rows with weights summing to 1, so differences stay differences), a
residual block by the sum with its body. Both are supersets of the true spans, so a zero check proves every
boundary straight; a nonzero one says only that a boundary may be a conic, and the curved engine (which splits
lines too) is then chosen before any work (``_count.choose_engine``).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np


class Span:
    """A subspace of ``Q^d`` as an exact row-reduced basis (tuples of Fractions)."""

    __slots__ = ("basis", "d")

    def __init__(self, d: int, vectors=()):
        self.d = int(d)
        self.basis: list[list[Fraction]] = []
        for v in vectors:
            self.add(v)

    @staticmethod
    def coordinates(d: int, idx) -> Span:
        s = Span(d)
        for i in sorted(set(int(i) for i in idx)):
            e = [Fraction(0)] * d
            e[i] = Fraction(1)
            s.basis.append(e)
        return s

    def add(self, v) -> None:
        v = [x if isinstance(x, Fraction) else Fraction(float(x)) for x in v]
        for b in self.basis:
            p = next(i for i, x in enumerate(b) if x != 0)
            if v[p] != 0:
                f = v[p] / b[p]
                v = [x - f * y for x, y in zip(v, b)]
        if any(x != 0 for x in v):
            self.basis.append(v)

    def __add__(self, other: Span) -> Span:
        out = Span(self.d, self.basis)
        for v in other.basis:
            out.add(v)
        return out

    def support(self) -> set[int]:
        """The coordinates some vector of the span does not vanish on."""
        return {i for v in self.basis for i, x in enumerate(v) if x != 0}

    def map(self, A) -> Span:
        """``{v A : v in span}`` for a matrix ``A (d, d')``: floats (taken exactly) or rows of Fractions."""
        rows = exact_rows(A)
        cols = [list(c) for c in zip(*rows)]
        out = [[sum((x * c for x, c in zip(v, col) if x and c), Fraction(0)) for col in cols] for v in self.basis]
        return Span(len(cols), out)

    @property
    def zero(self) -> bool:
        return not self.basis


def exact_rows(A) -> list[list[Fraction]]:
    """A float matrix as rows of Fractions (exact); rows of Fractions as they are."""
    if isinstance(A, list):
        return A
    return [[Fraction(float(x)) for x in row] for row in np.asarray(A)]


def bilinear_zero(Z: Span, M, D: Span) -> bool:
    """``z M w^T = 0`` for every ``z`` in ``Z`` and ``w`` in ``D`` (exactly; ``M`` as for :meth:`Span.map`)."""
    if Z.zero or D.zero:
        return True
    Mf = exact_rows(M)
    for z in Z.basis:
        zm = [
            sum((z[i] * Mf[i][j] for i in range(len(z)) if z[i] and Mf[i][j]), Fraction(0)) for j in range(len(Mf[0]))
        ]
        for w in D.basis:
            if sum((a * b for a, b in zip(zm, w) if a and b), Fraction(0)) != 0:
                return False
    return True


def hardmax_straight(program, directions: np.ndarray) -> bool:
    """True when every hardmax attention boundary of ``program`` is a line on every region of a domain whose
    parameters move the input along ``directions (q, k)`` (module docstring); False: one may be a conic."""
    V = np.asarray(directions, dtype=np.float64)
    Z = Span(V.shape[0], [V[:, j] for j in range(V.shape[1])])
    D = Span(V.shape[0])
    straight = True

    def visit(ops, Z: Span, D: Span) -> tuple[Span, Span]:
        nonlocal straight
        for op in ops:
            if op.body_ops is not None:
                Zb, Db = visit(op.body_ops, Z, D)
                Z, D = Z + Zb, D + Db
                continue
            straight = straight and op.straight_on(Z, D)
            Z, D = op.spans(Z, D, program.tokens)
        return Z, D

    visit(program.ops, Z, D)
    return straight


def entrywise_spans(Z: Span, D: Span, tokens: int) -> tuple[Span, Span]:
    """An op that decides per entry and keeps (a multiple of) each entry it decides on: the coordinates of
    ``Z``; per-token decisions make any of them a difference when there are several tokens."""
    Zc = Span.coordinates(Z.d, Z.support())
    return Zc, (Span.coordinates(Z.d, Z.support() | D.support()) if tokens > 1 else Span(Z.d))
