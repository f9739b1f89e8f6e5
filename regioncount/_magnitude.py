"""Magnitudes float64 can carry: the up-front refusal of domains and weights so large that the engines'
float bounds could overflow (issue 25: on ``--box -1e300 1e300`` a 3-input MLP was counted as 1 region
with ``exact: true``, the 2D area was NaN, the certificate raised OverflowError).

The exact engines evaluate products of a few such values in float64 with a rigorous error bound: areas
and volumes (the domain's extent to the power 2 or 3), determinants of 3 x 3 systems of pre-activation
coefficients, hardmax scores (a product of two affine values). :func:`check_magnitudes` refuses, before any
work, with :class:`~regioncount._errors.InexactError` and one line naming the magnitude, a domain whose
coordinates exceed :data:`MAX_MAGNITUDE` = 2^250 (about 1.8e75), so that the fourth power of anything the
engines multiply stays below float64's largest number (1.8e308) with room for the error terms; for the
space engine also a network whose values on the domain could exceed it (interval arithmetic through the
ops in float64, whose few ulps of rounding are nothing beside that margin), or nonzero weights below
2^-250, whose products it forms could underflow to 0 (for ReLU and softmax attention, whose engines decide
with float tolerances anyway, the domain alone). Every domain and network under the
limit is counted as before; none over it gets a number.
"""

from __future__ import annotations

import math

import numpy as np

from ._errors import InexactError

#: The largest domain coordinate or network value an engine is given (2^250, about 1.8e75).
MAX_MAGNITUDE = 2.0**250


def domain_reach(domain) -> float:
    """The largest absolute coordinate of ``domain``, in its parameters and in input space (an upper bound;
    inf where it overflows)."""
    if hasattr(domain, "a") and hasattr(domain, "b"):  # a segment: its two ends
        r = float(max(np.max(np.abs(domain.a), initial=0.0), np.max(np.abs(domain.b), initial=0.0)))
        return r if math.isfinite(r) else math.inf
    with np.errstate(over="ignore", invalid="ignore"):
        x0, V = domain.input_map()
        lo = np.asarray(getattr(domain, "param_lo", 0.0), dtype=np.float64)
        hi = np.asarray(getattr(domain, "param_hi", 1.0), dtype=np.float64)
        u = np.maximum(np.abs(lo), np.abs(hi))
        x = np.abs(np.asarray(x0, dtype=np.float64)) + np.abs(np.asarray(V, dtype=np.float64)) @ np.atleast_1d(u)
        r = max(float(np.max(u, initial=0.0)), float(np.max(x, initial=0.0)))
    return r if math.isfinite(r) else math.inf


def _norm(W) -> float:
    """The infinity norm (largest absolute row sum) of ``W``'s last two axes, over any leading axes."""
    W = np.abs(np.asarray(W, dtype=np.float64))
    if W.ndim == 1:
        return float(W.max(initial=0.0))
    return float(W.sum(axis=-1).max(initial=0.0))


def smallest_weight(program) -> float:
    """The smallest nonzero absolute entry of any weight or bias of ``program`` (inf where there is none)."""
    out = math.inf

    def visit(ops):
        nonlocal out
        for op in ops:
            if type(op).__name__ == "Residual":
                visit(op.body)
                continue
            for name in ("W", "b", "Wq", "Wk", "Wv", "Wo"):
                a = getattr(op, name, None)
                if a is not None:
                    a = np.abs(np.asarray(a, dtype=np.float64))
                    a = a[a > 0]
                    if a.size:
                        out = min(out, float(a.min()))

    visit(program.ops)
    return out


def value_bound(program, reach: float) -> float:
    """An upper bound on every value ``program`` computes (activations, attention scores) when its inputs
    lie within ``reach`` in absolute value; inf where the bound overflows."""
    top = reach

    def run(ops, m: float) -> float:
        nonlocal top
        for op in ops:
            if op.is_affine:
                m = _norm(op.W) * m + float(np.max(np.abs(op.b), initial=0.0))
            elif op.body_ops is not None:
                m = m + run(op.body_ops, m)
            elif op.key.startswith("attention/"):
                # per head: queries and keys |H Wq|, |H Wk| <= m |Wq|, m |Wk|; values m |Wv| |Wo|
                heads = op.Wq.shape[0]
                q = max(_norm(np.swapaxes(op.Wq, -1, -2)), _norm(op.Wq)) * m
                k = max(_norm(np.swapaxes(op.Wk, -1, -2)), _norm(op.Wk)) * m
                score = q * k * op.Wq.shape[-1]
                v = m * _norm(op.Wv) * _norm(op.Wo) * op.Wv.shape[-1]
                top = max(top, score)
                weights = 1.0 if op.sigma in ("hardmax", "softmax") else program.tokens * score  # relu: T keys
                m = heads * weights * v
            # ReLU and GroupMax do not grow the largest value
            top = max(top, m)
        return m

    with np.errstate(over="ignore", invalid="ignore"):
        run(program.ops, reach)
    return top if math.isfinite(top) else math.inf


def _smooth_or_spline(program) -> bool:
    from .networks import walk_widths

    return any(op.smooth or op.degree > 1 for op, _, _ in walk_widths(program))


def check_magnitudes(net, domain, *, values: bool = False) -> None:
    """Refuse (:class:`InexactError`, one line naming the magnitude) a ``domain`` whose coordinates could
    exceed :data:`MAX_MAGNITUDE`, and with ``values`` a network whose values on it could (see the module
    docstring). The space engine asks for ``values``: a function-preserving rescale by 2^600 (first layer
    down, second up) once changed its count from 327 regions to 36 without a word. The plane and line
    engines carry the scale of each value in their error bounds and count the same rescale by 2^900
    exactly (``tests/test_exact_plane.py``), so for them the domain alone is checked."""
    from .networks import lower

    reach = domain_reach(domain)
    if reach > MAX_MAGNITUDE:
        raise InexactError(
            f"the domain reaches |x| = {reach:.3g}, beyond the {MAX_MAGNITUDE:.3g} where the float64 bounds "
            "the engines use could overflow, so no count is given: shrink the box"
        )
    if not values:
        return
    program = lower(net)
    if _smooth_or_spline(program):
        # ReLU and softmax attention: their engines decide with float tolerances and say exact: false (or
        # refuse the degree), and a bound through products of three values per block would refuse every
        # deep network on any box; the domain alone is checked
        return
    tiny = smallest_weight(program)
    if tiny < 1.0 / MAX_MAGNITUDE:
        raise InexactError(
            f"the network has weights as small as {tiny:.3g}, below the {1.0 / MAX_MAGNITUDE:.3g} where products "
            "the space engine forms could underflow to 0, so no count is given: rescale the weights"
        )
    top = value_bound(program, reach)
    if top > MAX_MAGNITUDE:
        raise InexactError(
            f"the network's values on this domain reach about {top:.3g} (domain |x| up to {reach:.3g}), beyond the "
            f"{MAX_MAGNITUDE:.3g} where the float64 bounds the engines use could overflow, so no count is given: "
            "shrink the box or rescale the weights"
        )
