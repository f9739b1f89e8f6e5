"""Degrees of a program's polynomials from the weights' exact zeros (DESIGN §3 ``curved``, ``line``).

On one piece (one code) every state entry of a program of ReLU, maxout and attention ops is a polynomial in
the input; its degree is bounded column by column: each state column carries the largest degree of its
entries over all tokens (1 for the input). An affine map's output column takes the largest degree of the
columns it reads with a nonzero weight; a ReLU keeps degrees and a maxout unit takes the largest of its
pieces; an attention head's score has the degree of its query plus that of its key; ReLU attention writes
score degree plus value degree into the columns its output weights reach (hardmax writes the value degree);
a residual takes the larger of its input and its body. An op no rule names gets its declared facts: degree
``op.degree`` times its input's, comparisons ``op.decision_degree`` times it. A comparison (a ReLU
pre-activation, a maxout difference, a score or score difference) is a wall of the certified 2D engine and a
root of the line engine.

The bound is rigorous for the float64 network as given, and in float64 arithmetic too: a weight that is
exactly 0.0 contributes exactly 0 to a product, so a coefficient of a power above a column's bound is a sum
of exact zeros, i.e. exactly 0.0 in any evaluation (while every value is finite). The line engine therefore
truncates its coefficient arrays to these degrees without losing anything, and checks that what it drops is
zero. Generic weights give ``3^t`` after ``t`` ReLU-attention blocks (Lai, Lim, Liu 2024, arXiv 2408.09624);
a network whose attention reads only low-degree columns stays low at any depth.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..networks._protocol import op_key


@dataclasses.dataclass(frozen=True)
class Degrees:
    """Per-op degree bounds of a program (see the module docstring).

    ``wall``: the largest degree of a comparison; ``output``: the largest degree of a column of the final
    state; ``after[id(op)]``: the largest column degree of the state right after ``op`` (for an op inside a
    residual body, before the residual adds its input); ``decision[id(op)]``: the degree of the comparisons
    that decide ``op``'s code (0 where it compares nothing). An op object that occurs more than once keeps the
    largest bound of its occurrences, which bounds each."""

    wall: int
    output: int
    after: dict[int, int]
    decision: dict[int, int]


def _reads(W, deg: list[int]) -> list[int]:
    """``W (in, out)``: per output column the largest degree of an input column it reads with a nonzero weight."""
    W = np.asarray(W, float)
    out = []
    for o in range(W.shape[1]):
        nz = np.flatnonzero(W[:, o])
        out.append(max((deg[j] for j in nz), default=0))
    return out


def _affine(op, deg: list[int]) -> tuple[int, list[int]]:
    return 0, _reads(op.W.T, deg)


def _relu(op, deg: list[int]) -> tuple[int, list[int]]:
    return max(deg, default=0), deg


def _groupmax(op, deg: list[int]) -> tuple[int, list[int]]:
    k = op.k
    deg = [max(deg[u * k : (u + 1) * k]) for u in range(len(deg) // k)]
    return max(deg, default=0), deg


def _attention(op, deg: list[int]) -> tuple[int, list[int]]:
    new = [0] * len(deg)
    dec = 0
    for h in range(op.heads):
        dq = max(_reads(op.Wq[h], deg), default=0)
        dk = max(_reads(op.Wk[h], deg), default=0)
        score = dq + dk
        dec = max(dec, score)
        dv = max(_reads(op.Wv[h], deg), default=0)
        w = score + dv if op.sigma == "relu" else dv
        Wo = np.asarray(op.Wo[h], float)
        for c in range(len(deg)):
            if np.any(Wo[:, c]):
                new[c] = max(new[c], w)
    return dec, new


#: The degree rule of each op key (``networks._protocol.op_key``): ``rule(op, degrees in) -> (degree of the
#: op's comparisons, degrees out)``. A residual is structure (its body runs in :func:`program_degrees`); an op
#: without a rule gets its declared facts.
_RULES = {"affine": _affine, "relu": _relu, "groupmax": _groupmax, "attention/hardmax": _attention}
_RULES["attention/relu"] = _attention


def _declared(op, deg: list[int]) -> tuple[int, list[int]]:
    top = max(deg, default=0)
    dec = op.decision_degree * top if op.records != "nothing" else 0
    return dec, [op.degree * top] * op.width_out(len(deg))


def program_degrees(program) -> Degrees:
    """The :class:`Degrees` of ``program`` (a :class:`~regioncount.networks.Program`) on inputs of degree 1."""
    after: dict[int, int] = {}
    decision: dict[int, int] = {}
    wall = 0

    def run(ops, deg: list[int]) -> list[int]:
        nonlocal wall
        for op in ops:
            if op.body_ops is not None:  # a residual: its body, then the larger of its input and the body's output
                body = run(op.body_ops, deg)
                dec, deg = 0, [max(a, b) for a, b in zip(deg, body, strict=True)]
            else:
                dec, deg = _RULES.get(op_key(op), _declared)(op, deg)
            wall = max(wall, dec)
            decision[id(op)] = max(decision.get(id(op), 0), dec)
            after[id(op)] = max(after.get(id(op), 0), max(deg, default=0))
        return deg

    final = run(program.ops, [1] * program.input_dim)
    return Degrees(wall=wall, output=max(final, default=0), after=after, decision=decision)
