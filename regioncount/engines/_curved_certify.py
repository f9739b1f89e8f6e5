"""An independent check of a certified curved partition (``count --certify`` on curved cells).

Checks, each reported with its numbers:

- ``witness_codes``: every cell's rational witness point (inside its largest trapezoid, exactly) run through
  an exact forward pass of the network (rationals of the float64 weights, op by op, written here
  independently of the engine's maps), whose code must equal the cell's code; the float64 forward pass at
  the rounded point is reported beside it (``float_mismatches``, informative only);
- ``neighbours_differ``: cells that share a boundary arc or wall have different codes (else they would be
  one cell);
- ``areas``: the cells' areas sum to the domain's within the quadrature's reported error plus rounding;
- ``euler``: Euler's relation ``V - E + F = 1`` on the trapezoidal complex the cells are unions of (its
  faces are the trapezoids, its vertices and edges found by exact comparisons:
  :func:`~regioncount.engines._curved_exact.euler_counts`): the trapezoids tile the rectangle.

The partition must be certified (``Cells.exact``); a float partition is refused, its thresholds cannot be
checked this way. ``largest_degree`` reports the largest degree of a curve that split a trapezoid.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..networks import lower


def area_slack(cells) -> float:
    """The bound on the error of the cells' areas the ``areas`` check allows: the quadrature's reported
    unresolved difference (``area_error``) plus float64 rounding, ``64 eps`` of the domain's area per square
    root of the number of trapezoids summed. It stands for the summed error of all the trapezoids' areas, so it
    is also the allowance for one cell's area (a sum over some of them). Like ``area_error`` it is a bound in
    practice, not a proof: areas are reported, they decide nothing."""
    area = float(np.prod(np.asarray(cells.domain.param_hi, float) - np.asarray(cells.domain.param_lo, float)))
    return float(cells.area_error + 64 * np.finfo(float).eps * area * max(1, cells.n_traps) ** 0.5)


def _F(v) -> Fraction:
    return Fraction(float(v))


def _mat(a) -> list[list[Fraction]]:
    a = np.asarray(a, float)
    return [[Fraction(float(v)) for v in row] for row in a]


def _matmul(A, B):
    return [[sum((a * b for a, b in zip(row, col)), Fraction(0)) for col in zip(*B)] for row in A]


def exact_forward_code(program, x) -> list[int]:
    """The activation code of the rational input ``x`` (Fractions, length ``q``) by an exact forward pass."""
    T = program.tokens
    H = [[Fraction(v) for v in x] for _ in range(T)]
    code: list[int] = []

    def run(ops, H):
        for op in ops:
            H = step(op, H)
        return H

    # one step per op key (the op protocol's keys); a residual is a block of ops
    def affine(op, H):
        b = np.asarray(op.b, float)
        out = _matmul(H, _mat(op.W.T))
        for t in range(T):
            bt = b if b.ndim == 1 else b[t]
            out[t] = [v + _F(c) for v, c in zip(out[t], bt)]
        return out

    def relu(op, H):
        code.extend(int(v > 0) for row in H for v in row)
        return [[v if v > 0 else Fraction(0) for v in row] for row in H]

    def group_max(op, H):
        k = op.k
        out = []
        for row in H:
            r = []
            for u in range(len(row) // k):
                g = row[u * k : (u + 1) * k]
                j = max(range(k), key=lambda i: (g[i], -i))
                code.append(j)
                r.append(g[j])
            out.append(r)
        return out

    def attention(op, H):
        d = len(H[0])
        out = [[Fraction(0)] * d for _ in range(T)]
        for h in range(op.heads):
            Q, K = _matmul(H, _mat(op.Wq[h])), _matmul(H, _mat(op.Wk[h]))
            VO = _matmul(_matmul(H, _mat(op.Wv[h])), _mat(op.Wo[h]))
            S = [[sum((a * b for a, b in zip(Q[i], K[j])), Fraction(0)) for j in range(T)] for i in range(T)]
            for i in range(T):
                keys = range(i + 1) if op.causal else range(T)
                if op.sigma == "hardmax":
                    m = max(S[i][j] for j in keys)
                    tie = [j for j in keys if S[i][j] == m]
                    code.append(min(tie))
                    w = {j: Fraction(1, len(tie)) for j in tie}
                elif op.sigma == "relu":
                    code.extend(int(j in keys and S[i][j] > 0) for j in range(T))
                    scale = Fraction(1, T) if op.scale_by_T else Fraction(1)
                    w = {j: max(S[i][j], Fraction(0)) * scale for j in keys}
                else:
                    raise ValueError("softmax attention is not piecewise")
                for j, wj in w.items():
                    if wj:
                        out[i] = [o + wj * v for o, v in zip(out[i], VO[j])]
        return out

    steps = {"affine": affine, "relu": relu, "groupmax": group_max}
    steps.update({"attention/hardmax": attention, "attention/relu": attention})

    def step(op, H):
        if op.body_ops is not None:
            B = run(op.body_ops, H)
            return [[a + b for a, b in zip(r, s)] for r, s in zip(H, B)]
        if op.key not in steps:
            raise TypeError(f"the curved certificate has no exact step for {op.key!r}")
        return steps[op.key](op, H)

    run(program.ops, H)
    return code


def certify_cells(cells, net) -> dict:
    """The checks of the module docstring on a certified :class:`~regioncount.results._cells.Cells`;
    returns ``{"passed", "checks": {name: {"passed", "detail"}}, "largest_degree"}``."""
    if not cells.exact or cells.rational_witness is None:
        raise ValueError("only a certified curved partition can be certified")
    from ._forward import forward_codes

    program = lower(net)
    x0, V = cells.domain.input_map()
    rep = cells._cell_rep
    cc = np.asarray(cells.cell_codes, np.int64)
    bad = 0
    Ws = []
    for n, r in enumerate(rep):
        u = cells.rational_witness[r]
        x = [_F(x0[i]) + sum((_F(V[i, k]) * u[k] for k in range(2)), Fraction(0)) for i in range(len(x0))]
        Ws.append([float(v) for v in x])
        if exact_forward_code(program, x) != cc[n].tolist():
            bad += 1
    import jax.numpy as jnp

    _, fc, _ = forward_codes(program, jnp.asarray(np.array(Ws).reshape(-1, len(x0))))
    float_bad = int(np.count_nonzero(np.any(np.asarray(fc) != cc, axis=1)))
    E = cells.adjacency
    same = int(np.count_nonzero(np.all(cc[E[:, 0]] == cc[E[:, 1]], axis=1))) if E.size else 0
    from ._curved_exact import euler_counts

    V, Ec, F = euler_counts(cells.exact_traps)
    area = float(np.prod(np.asarray(cells.domain.param_hi, float) - np.asarray(cells.domain.param_lo, float)))
    total = float(cells.cell_area.sum())
    slack = area_slack(cells)
    checks = {
        "witness_codes": {
            "passed": bad == 0,
            "detail": f"{cells.n_cells - bad}/{cells.n_cells} exact codes match; float64 differs at {float_bad}",
        },
        "neighbours_differ": {"passed": same == 0, "detail": f"{same} of {E.shape[0]} adjacent pairs share a code"},
        "areas": {
            "passed": abs(total - area) <= slack,
            "detail": f"sum {total!r} vs {area!r} (bound {slack:.3g}, quadrature error {cells.area_error:.3g})",
        },
        "euler": {"passed": V - Ec + F == 1, "detail": f"V - E + F = {V} - {Ec} + {F} = {V - Ec + F} (1 expected)"},
    }
    return {
        "passed": all(c["passed"] is not False for c in checks.values()),
        "checks": checks,
        "largest_degree": cells.degree,
    }
