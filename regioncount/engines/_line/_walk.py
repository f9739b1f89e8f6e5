"""The line engine's entry point :func:`walk_line`: the degree plan, then the exact walk (no attention) or
the float walk (attention)."""

from __future__ import annotations

import numpy as np

from ..._domain import Segment
from ..._errors import DegreeTooHighError, DomainError
from ..._magnitude import check_magnitudes
from ...networks import check_domain, lower, op_codes
from ...networks._ops import Program, Residual, is_piecewise_linear
from .._degrees import Degrees, program_degrees
from .._protocol import op_key, support
from ._exact_walk import _U, _AState, _finite, _Walk
from ._float import _apply, _State, _truncate
from ._pieces import LinePieces
from ._poly import _pad, _reexpand, _same_polynomials


def _degree_plan(program: Program, max_degree: int) -> Degrees:
    """The degrees the walk's polynomials reach, from the weights' exact zeros (:mod:`.._degrees`); refuse
    with one line where an op's comparisons or output would exceed ``max_degree``."""

    def visit(ops) -> None:
        for op in ops:
            refusal = support("line", op_key(op))  # softmax: the line engine's refusal
            if refusal is not None:
                refusal.raise_()
            if isinstance(op, Residual):
                visit(op.body)

    visit(program.ops)
    plan = program_degrees(program)

    def check(ops) -> None:
        for op in ops:
            if isinstance(op, Residual):
                check(op.body)
            need = max(plan.decision[id(op)], plan.after[id(op)])
            if need > max_degree:
                raise DegreeTooHighError(
                    f"{op.label} needs polynomials of degree {need} in t, above max_degree={max_degree} (ReLU "
                    "attention composes degrees up to 3^t over t blocks); use --method sample"
                )

    check(program.ops)
    return plan


def walk_line(net, segment, *, max_degree: int = 27) -> LinePieces:
    """Every piece of ``net`` on ``segment``, exactly (DESIGN §3, ``line``).

    ``net``: an MLP, Maxout, Transformer or :class:`~regioncount.networks.Program`; ``segment``: a
    :class:`~regioncount._domain.Segment` or a pair ``(a, b)`` of input vectors ``(q,)``.
    Raises :class:`NotPiecewiseError` for softmax attention and :class:`DegreeTooHighError` when ReLU
    attention would need polynomials above ``max_degree``.

    Examples
    --------
    The lines ``x = 0``, ``y = 0`` and ``x + y = 1/2`` of three ReLU units cross this segment at three
    points (``t = 8/17, 1/2, 23/37``), so it has ``3 + 1`` pieces:

    >>> import regioncount as rc
    >>> net = rc.MLP(([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]], [[1.0, 2.0, 3.0]]), ([0.0, 0.0, 0.5], [0.0]))
    >>> pieces = rc.walk_line(net, rc.Segment([-1.0, -0.8], [1.0, 0.9]))
    >>> pieces.activation_pieces, pieces.exact, [round(float(t), 6) for t in pieces.breaks[1:-1]]
    (4, True, [0.470588, 0.5, 0.621622])
    """
    seg = segment if isinstance(segment, Segment) else Segment(*segment)
    program = lower(net)
    if seg.a.shape[0] != program.input_dim:
        raise DomainError(f"the segment lives in R^{seg.a.shape[0]} but the network takes {program.input_dim} inputs")
    check_domain(net, np.minimum(seg.a, seg.b), np.maximum(seg.a, seg.b))
    check_magnitudes(program, seg)  # refuse magnitudes whose float bounds could overflow
    plan = _degree_plan(program, max_degree)
    degree = plan.output

    if not _has_attention(program.ops):
        return _walk_exact(program, seg)

    T = program.tokens
    mid, half = (seg.a + seg.b) / 2, (seg.b - seg.a) / 2
    H = np.broadcast_to(np.stack([mid, half])[None, :, None, :], (1, 2, T, mid.shape[0])).copy()
    st = _State(lo=np.zeros(1), hi=np.ones(1), H=H, stack=[], codes=[], ties=np.zeros(1, np.int64), keep=plan.after)
    _apply(st, program.ops, T)

    local = _pad(_truncate(st.H[:, :, program.out_token, :], degree + 1), degree + 1)  # (n, K+1, out)
    m, h = (st.lo + st.hi) / 2, (st.hi - st.lo) / 2
    with np.errstate(over="ignore", invalid="ignore"):
        glob = _reexpand(local, -m / h, 1.0 / h)
    arrays = _piece_arrays(st, program, glob, local, st.ties, _same_polynomials(st.lo, st.hi, local))
    return LinePieces(
        segment=seg,
        kind="linear" if is_piecewise_linear(program) else "spline",
        degree=degree,
        ties=int(np.count_nonzero(st.ties)),
        exact=False,
        **arrays,
    )


def _piece_arrays(st, program: Program, glob, local, piece_ties, same) -> dict:
    """The read-only arrays of a walk's :class:`LinePieces`: breaks, the ops' codes (pieces, not the ReLU
    form's bits), outputs in ``t`` and per piece, ties and which neighbours share one output."""
    n = st.lo.shape[0]
    codes = np.concatenate(st.codes, axis=1) if st.codes else np.zeros((n, 0), np.int32)
    arrays = {
        "breaks": np.append(st.lo, st.hi[-1]),
        "codes": op_codes(program, codes.astype(np.int32)),
        "output": glob.transpose(0, 2, 1).copy(),
        "local_output": local.transpose(0, 2, 1).copy(),
        "piece_ties": piece_ties,
        "same_polynomial": same,
    }
    for a in arrays.values():
        a.setflags(write=False)
    return arrays


def _same_affine(C: np.ndarray, rtol: float = 1e-9) -> np.ndarray:
    """Neighbouring pieces with the same affine output ``C (n, 2, out)`` (coefficients of 1 and t on
    [0, 1], so both are on one scale) up to ``rtol`` of their size -> ``(n-1,)`` (linear pieces merge them)."""
    if C.shape[0] < 2:
        return np.zeros(0, bool)
    size = np.abs(C).sum(axis=1)  # (n, out)
    tol = rtol * (np.maximum(size[:-1], size[1:]) + 1e-12 * size.max())
    return np.all(np.abs(C[1:] - C[:-1]) <= tol[:, None, :], axis=(1, 2))


def _has_attention(ops) -> bool:
    return any(op.key.startswith("attention/") or (isinstance(op, Residual) and _has_attention(op.body)) for op in ops)


def _walk_exact(program: Program, seg: Segment) -> LinePieces:
    """:func:`walk_line` for programs without attention (ReLU MLPs, Maxout): exact predicates."""
    T, q = program.tokens, program.input_dim
    H = np.zeros((1, 2, T, q))
    H[0, 0] = seg.a
    with np.errstate(over="ignore"):
        H[0, 1] = seg.b - seg.a
    _finite(H)
    one = np.ones(1)
    st = _AState(one * 0, one, one * 0, one * 0, np.array([-1]), np.array([-2]), H, one.copy(), [], [])
    walk = _Walk(program, seg)
    walk.er, walk.eb = 2 * _U * np.abs(H[0, 1]), np.zeros((T, q))  # b - a is rounded once
    walk.run(st)

    n = st.lo.shape[0]
    glob = st.H[:, :, program.out_token, :]  # (n, 2, out) in t
    m, h = (st.lo + st.hi) / 2, (st.hi - st.lo) / 2
    local = np.stack([glob[:, 0] + glob[:, 1] * m[:, None], glob[:, 1] * h[:, None]], axis=1)
    arrays = _piece_arrays(st, program, glob, local, np.zeros(n, np.int64), _same_affine(glob))
    return LinePieces(
        segment=seg,
        kind="linear",
        degree=1,
        ties=0,
        exact=True,
        predicates=walk.predicates,
        exact_predicates=walk.exact_predicates,
        **arrays,
    )
