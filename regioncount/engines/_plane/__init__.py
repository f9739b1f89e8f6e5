"""The exact 2D ``plane`` engine (DESIGN §3): split convex polygons op by op.

Every region is a convex polygon in the domain's parameters ``(u1, u2)`` carrying the affine map from
``(u1, u2, 1)`` to the current activations (``(3, T, d)``: every token entry). Each op of the
:class:`~regioncount.networks.Program` splits every region by its boundaries and updates codes and maps:

- ReLU: one line per unit. The pre-activation maps of all units are computed once per region at the
  start of the op (its "parent"); the regions a parent is split into inherit its row. A disc test
  (value at an interior point against gradient times radius) finds the units whose line may cross a
  parent; their vertices settle it. The op then runs in rounds: round ``t`` splits every descendant of a
  parent by that parent's ``t``-th crossing line, all parents at once (the order of the lines does not
  change the arrangement). Only regions whose own disc meets the line have their vertices evaluated.
- GroupMax (maxout): per unit, the cells of an argmax of ``k`` affine functions, obtained by clipping
  each region with the halfplanes ``f_r >= f_j`` (ties go to the lower index, like ``argmax``).
- hardmax attention: per head and query, the argmax cells of the scores over the keys. Scores are
  products of affine maps, so a score difference is quadratic in ``u``; where the quadratic parts of
  the competing keys coincide (within a relative tolerance) the boundaries are lines and are split
  exactly, otherwise :class:`~regioncount._errors.CurvedBoundaryError` is raised.
- Affine maps every region's map; after a ReLU it works per parent (one product) plus a rank-1
  correction per child and crossing unit that is on. Residual keeps a copy of the maps.

Geometry and combinatorics are NumPy (float64), vectorised across regions; Python loops run over ops,
rounds and units, never over regions. Work happens in normalised coordinates ``u' in [-1, 1]^2`` (the
domain rectangle's centre and half-widths), which keeps every tolerance relative. Once a partition holds
more than ``BATCH`` regions (``BATCH // T**2`` with T tokens) at a top-level op boundary, the remaining ops run
on row batches one after the other, which bounds the working memory (maps are ``3 T d`` floats per region,
attention scores ``6 H T**2``). The first time it holds ``_fork.MID_MIN`` regions, it is cut into batches once, which run as two jobs on a
forked worker and on this process at once (``_driver._mid_cut``, by the rule in ``engines/_fork.py`` that the
space engine shares).

Polygons live in a padded store ``(capacity, M, 2)``; slots beyond a polygon's vertex count repeat its
first vertex (and the last slot is always such padding), so shoelace sums and sign tests need no masks.
Every edge carries an integer tag naming the line (op, unit, parent) that created it; the two sides of
a cut get the same tag, which lets :meth:`Partition.adjacency` group edges exactly instead of by
floating-point line keys.

Exactness (docs/design.md §3): no tolerance decides whether a region exists. Every map column carries a
rigorous bound on the distance of its float coefficients from the exact ones (``_exact``), every vertex a
radius that holds the exact vertex (the intersection of the exact lines of its two edges), and every sign
test is decided by its float value only where that value is farther from zero than its error bound. The
rest are decided exactly in integer arithmetic from the float lines where those are exact (``eb == 0``:
dyadic constructions), and otherwise by recomputing the lines exactly from the network's weights and the
region's code (``_exact_lines``). A split is made whenever the exact signs at a polygon's vertices differ,
however small a part it leaves; a vertex exactly on a line creates no new vertex.

Layout (one module per seam): ``_polygon`` (polygon kernels: values, bounds and signs of lines at vertices,
areas, discs, cuts), ``_store`` (the padded polygon store), ``_maps`` (lazy maps and their error bounds),
``_predicates`` (the line table and exact sign decisions), ``_kernels`` (the plane engine's kernel registry of
the op protocol, :mod:`regioncount.engines._protocol`), one module per op kernel (``_affine_op``, ``_relu``,
``_groupmax``, ``_attention``, with ``_argmax`` shared by the last two) and ``_driver`` (the op loop, row
batches and :func:`partition_plane`). Residual is applied by the driver. A new splitter (curved, or of
higher dimension) sits beside these and registers its kernels with its own :class:`~._protocol.Kernels`.
"""

# the names other modules and tests import from regioncount.engines._plane (BATCH is read where it lives:
# patch regioncount.engines._plane._driver.BATCH to change the batch size)
from ._argmax import (
    ALIAS_TOL as ALIAS_TOL,
    _line_classes as _line_classes,
)
from ._attention import (
    _interval_products as _interval_products,
    _same_units as _same_units,
)
from ._driver import (
    BATCH as BATCH,
    _Engine as _Engine,
    _frame as _frame,
    _leaves as _leaves,
    _Piece as _Piece,
    partition_plane as partition_plane,
)
from ._kernels import KERNELS as KERNELS
from ._maps import (
    _affine as _affine,
    _Bounds as _Bounds,
    _coef_bound as _coef_bound,
    _Masked as _Masked,
    _materialise as _materialise,
    _matmul_rows as _matmul_rows,
    _take_rows as _take_rows,
    _token_column as _token_column,
    _Tokens as _Tokens,
)
from ._polygon import (
    _CHUNK as _CHUNK,
    _FIRST_TAG as _FIRST_TAG,
    _areas as _areas,
    _cut as _cut,
    _disc_reach as _disc_reach,
    _discs as _discs,
    _eval as _eval,
    _eval_bound as _eval_bound,
    _float_signs as _float_signs,
    _pad as _pad,
    _pad_tags as _pad_tags,
)
from ._store import (
    _grow as _grow,
    _Store as _Store,
)
