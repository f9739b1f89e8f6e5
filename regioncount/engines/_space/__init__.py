"""The exact ``space`` engine: activation regions of a network on a box in R^q, q >= 3, or on a
``k``-dimensional affine slice, ``k >= 3`` (DESIGN §2-§3; the higher-dimensional sibling of ``plane``).

Every region is a convex polytope in the domain's normalised parameters ``u in [-1, 1]^k`` carrying the
affine map from ``(u, 1)`` to the current activations (``(k+1, T, d)``: every token entry). Each op of the
:class:`~regioncount.networks.Program` splits every region by its boundaries, as the plane engine does:

- ReLU: one hyperplane per unit; per op-start parent the crossing units are found (bounding-ball test,
  then the vertices), and the op runs in rounds: round ``t`` splits every descendant of a parent by that
  parent's ``t``-th crossing unit, all parents at once.
- GroupMax (maxout) and hardmax attention: the argmax cells of ``k`` affine functions, by clipping a copy of
  the region per piece ``r`` with ``f_r >= f_j`` (ties to the lower index, like ``argmax``). Attention scores
  must be affine on the region (the first block, constant queries, the compiled constructions): where
  the quadratic parts of competing keys differ, :class:`CurvedBoundaryError` is raised.

Representation (no LP anywhere). A polytope is its vertex list; each vertex carries a bitmask of the
region's constraint slots (hyperplanes: box sides and cuts) it lies on. Splitting by a hyperplane takes
the vertex signs; a new vertex appears on every edge whose ends have strictly opposite signs. Two
vertices span an edge exactly when no third vertex lies on every constraint the two share (the face the
shared constraints cut out then has just these two vertices), which is combinatorial and holds for
degenerate polytopes too (vertices on more than ``k`` hyperplanes, duplicate or concurrent planes).
Arrays are padded NumPy, vectorised across regions; Python loops run over ops, rounds and units. The first
time the store holds ``_fork.MID_MIN`` regions at a top-level op boundary it is cut into batches once, which
run as two jobs on a forked worker and on this process at once (``_driver._mid_cut``).

Exactness (DESIGN §2). Whether a region exists is decided by signs only: a split is made when some vertex
is strictly positive and some strictly negative, a clip kills a cell when no vertex is strictly positive.
No volume or distance threshold decides anything. A float64 sign ``s = w . v + w0`` is trusted only when
``|s|`` exceeds a bound on its error, made of three parts:

- the evaluation's rounding, ``gamma_(k+2) (|w| . |v| + |w0|)`` (Higham's ``gamma_n = n u / (1 - n u)``);
- the plane's coefficient error: the engine carries, per activation entry and over all regions, bounds on
  the l1 error and size of the float maps through every op (standard forward error analysis of sums of
  products: Affine, ReLU masks, maxout selection, residual sums, hardmax scores and outputs);
- the vertex's distance to the exact vertex (where the exact planes it lies on meet), bounded when the
  vertex is made from its residuals in those planes and the smallest singular value of their normals
  (:func:`_vertex_error`); ill-conditioned vertices get an infinite bound.

and at least ``SNAP`` (1e-12) of the plane's size on the domain. Below the bound the sign is decided in
exact rational arithmetic (:class:`_Exact`): the region's code fixes every map of the float64 network, the
vertex is the exact solution of the constraints it lies on, and the hyperplane is evaluated there with
``fractions.Fraction`` on the float64 weights (every float64 is an exact binary fraction). So concurrent
planes, planes through vertices and duplicate or dead units are decided exactly, neither crashing nor
inventing regions. Caveats, stated plainly: the bounds assume IEEE float64 with round-to-nearest in NumPy
and BLAS (any summation order; fused multiply-adds only help); for ``k >= 5`` (and degenerate vertices)
the singular-value bound uses LAPACK's symmetric eigensolver with an assumed, not proven, backward error;
for hardmax attention, score differences are affine only when the float quadratic parts agree bitwise
(the rational path re-checks this exactly where it runs), and tied keys are averaged when their scores
agree within ``SNAP``.
"""

# the names other modules and tests import from regioncount.engines._space
from ._driver import _cube as _cube, _Engine as _Engine, _frame as _frame, partition_space as partition_space
from ._kernels import KERNELS as KERNELS
from ._polytope import _cut as _cut, _vertex_error as _vertex_error
from ._predicates import SNAP as SNAP, _Exact as _Exact, _solve_exact as _solve_exact
from ._store import _Poly as _Poly, _Store as _Store

__all__ = ["partition_space"]
