"""The exact 1D ``line`` engine (DESIGN §3): every piece of a network restricted to a segment.

On the segment ``x = a + t (b - a)``, ``t in [0, 1]``, every quantity of the forward pass is an exact
polynomial in ``t`` between two events. The engine keeps a list of intervals, each carrying the whole
state ``H`` as polynomial coefficients, and lets every op of the :class:`~regioncount.networks.Program`
split every interval at the roots (inside it) of the comparisons that op makes:

- ReLU: the roots of every pre-activation;
- GroupMax (maxout): the roots of the pairwise differences of the ``k`` pieces of every unit;
- hardmax attention: the roots of the pairwise score differences ``S_ij - S_ij'`` of every head and
  query (products of two polynomials: quadratics when ``H`` is affine in ``t``);
- ReLU attention: the roots of every score entry ``S_ij``.

**ReLU MLPs and Maxout networks (no attention): exact.** The state is affine in ``t`` on every interval
and so is every comparison, so its signs at the interval's two ends settle it: a strict sign change is
one root inside, otherwise the sign holds throughout (zero at both ends: identically zero, an exact tie
or a dead unit). Every sign is a float64 evaluation with a rigorous error bound (Higham, *Accuracy and
Stability of Numerical Algorithms*, 2002, §3.1: a ``d``-term dot product errs by at most
``gamma_d = d u / (1 - d u)`` of ``|w|.|x|``; bounds carried op by op, plus ``2^-1074`` per product for
underflow); where the bound cannot decide, the engine replays the interval's code in exact rational
arithmetic on the float64 weights (each an exact binary fraction) and takes the exact sign. Roots of one
interval are ordered by their floats where their error intervals are apart and exactly where they
overlap; exactly equal roots (duplicate or concurrent units) make one break. Every break remembers which
comparison of which op vanishes there, so exact arithmetic can always recover its exact value. No length,
distance or relative size decides whether a piece exists: a piece shorter than float64 resolution is
kept (its two breaks may then round to the same float, so ``breaks`` is only non-decreasing). The result
reports the predicates decided (``predicates``) and how many needed exact arithmetic
(``exact_predicates``). Float64 overflow of an intermediate value stops the walk with
:class:`FloatRangeError` rather than guessing.

**With attention: float64 decisions with tolerances (``exact = False``).** The op's decision is read at
the midpoint of every sub-interval and adjacent sub-intervals with equal decisions are merged again, so a
root that changes no decision (a tangency, a double root, a crossing below the current maximum) never
creates a piece. Each interval stores its polynomials in its own local variable ``s in [-1, 1]``
(``t = mid + half * s``); a split re-expands the parent's coefficients to the children, so later ops
(score products, cubic ReLU-attention terms) are formed on small intervals where monomials are well
conditioned. Roots of degree <= 2 are closed forms; higher degrees are eigenvalues of batched
companion matrices polished by Newton steps. A polynomial whose coefficients are all below
``_ZERO`` (1e-12) times the largest of its op on that interval is identically zero (a dead unit, an
exact hardmax tie). A decision whose compared value is within ``_NOISE`` (1e-14) of the size of the
compared polynomials on the parent interval is not trusted: it is taken from the neighbouring
sub-interval of the same parent, preferring the neighbour it then equals. Hence the resolution: pieces
shorter than ``1e-13`` of their parent interval or ``1e-14`` in ``t``, or on which the deciding gap is
below ``1e-14`` of the compared values, are not resolved there.

The decisions are read in the code layout of ``networks/_ops.py``, so each piece's code is the code
:func:`~regioncount.engines._forward.forward_codes` gives inside it (where float64 evaluates it
correctly). Ops run on blocks of intervals, so memory is linear in the number of pieces. This module is
NumPy and Python fractions (combinatorial splitting does not fit XLA); only the reference forward pass is
JAX.

Modules: :mod:`._walk` (:func:`walk_line`, the entry point), :mod:`._exact_walk` (the exact walk),
:mod:`._float` (the float walk and the engine's kernel registry :data:`KERNELS`), :mod:`._poly` (polynomial
helpers), :mod:`._pieces` (:class:`LinePieces`, the result), :mod:`._consts` (named tolerances).
"""

from ._consts import (
    _CHUNK as _CHUNK,
    _IMAG as _IMAG,
    _NOISE as _NOISE,
    _S_EPS as _S_EPS,
    _T_EPS as _T_EPS,
    _ZERO as _ZERO,
)
from ._exact_walk import (
    _TINY as _TINY,
    _U as _U,
    FloatRangeError as FloatRangeError,
    _AState as _AState,
    _dyadic as _dyadic,
    _Exact as _Exact,
    _finite as _finite,
    _gamma as _gamma,
    _Walk as _Walk,
)
from ._float import KERNELS as KERNELS, _State as _State
from ._pieces import LinePieces as LinePieces
from ._walk import _degree_plan as _degree_plan, walk_line as walk_line

__all__ = ["KERNELS", "FloatRangeError", "LinePieces", "walk_line"]
