"""Every named tolerance the library still uses, each with what it decides and why it is safe there.

No tolerance here decides whether an *activation region exists* in an exact count: the exact engines take
every sign from a float64 value with a rigorous bound or from exact rational arithmetic
(:mod:`regioncount._predicates`). What remains are (a) decisions of the float engines that say so in their
output (``exact: false``), (b) hedges that only send more decisions to exact arithmetic, (c) geometry that
is reported but never counted (adjacency of float polygons, drawing, unions), and (d) the float checks of
the certificate that sit beside its exact ones. docs/design.md §3 lists these names and values; a test
(``tests/test_tolerances.py``) checks the list against this module, so the two cannot drift.
"""

from __future__ import annotations

# -- (a) float decisions of walks that report exact: false -------------------------------------------------

#: line engine, attention walks: a polynomial whose coefficients are all below this times the largest of its
#: op on the interval is identically zero (a dead unit, an exact hardmax tie)
LINE_ZERO = 1e-12
#: line engine, attention walks: a midpoint decision whose compared value is within this of the compared
#: polynomials' size is not trusted (taken from the neighbouring sub-interval)
LINE_NOISE = 1e-14
#: line engine, attention walks: smallest sub-interval relative to its parent (local units)
LINE_SUBINTERVAL = 1e-13
#: line engine, attention walks: smallest sub-interval in ``t``
LINE_T_RESOLUTION = 1e-14

# -- (b) hedges: more work for exact arithmetic, never a different answer -----------------------------------

#: space engine: a float sign is trusted only beyond its rounding bound plus this (relative to the plane's
#: size on the domain); below it, rational arithmetic decides
SPACE_SNAP = 1e-12
#: whole-plane search: ``a . d`` below this (relative) is treated as parallel in the float clip; the region's
#: polygon is then rebuilt in exact arithmetic
WHOLE_PLANE_PARALLEL = 1e-12
#: whole-plane search: a vertex within this (relative) of a line counts as on it in the float clip; the
#: exact clip decides the cycle of edges
WHOLE_PLANE_SNAP = 1e-13

# -- (c) geometry that is reported, never counted -----------------------------------------------------------

#: plane engine: coincident argmax boundary lines share a tag when they agree within this (relative to the
#: domain's size); tags group edges for adjacency only
ARGMAX_ALIAS = 1e-9
#: partitions with engine tags: an edge shorter than this (of the domain's diameter) has no neighbour
#: across it (float noise at a vertex); slivers far below it are still regions
ADJACENCY_TAGGED = 1e-13
#: partitions without tags: two edges lie on one line, and overlap, when they agree within this (of the
#: domain's diameter)
ADJACENCY_UNTAGGED = 1e-9
#: partitions without tags: two edges have one direction when their angles agree within this (radians)
ADJACENCY_ANGLE = 1e-8
#: polytopes: a constraint separates two facets when a facet's vertices lie on its far side within this
#: (relative to the plane's size); adjacency only
POLYTOPE_TOUCH = 1e-9
#: polytopes: a segment meets a region when its parameter interval there is longer than this
POLYTOPE_SEGMENT = 1e-12
#: retrieval cells: shapely unions snap vertices to a grid of this (of the domain's span), so two sides of a
#: cut that subdivide it differently merge without slits
RETRIEVAL_GRID = 1e-13
#: retrieval cells: rings enclosing less than this (of the domain's area) are slits of the union, dropped
RETRIEVAL_SLIT = 1e-12
#: retrieval error: keys the target ties with its best within this (relative) count as ranked first
RETRIEVAL_TIE = 1e-9
#: a compiled model's valid box is checked with this absolute slack (its ends are the compiler's floats)
VALID_BOX_SLACK = 1e-12

# -- (d) the certificate's float checks (beside its exact ones) ---------------------------------------------

#: certificate: the float areas sum to the domain's area within this (relative); the exact checks do not
#: depend on it
CERT_AREA_RTOL = 1e-9
#: certificate: a region whose area is below (this times the domain's diameter)^2 cannot be drawn by its float
#: polygon; the float checks leave it out and say how many (the exact checks do not)
CERT_RESOLUTION = 2.0**-45
#: certificate: float vertices in one cell of a grid of this (of the diameter) are one vertex (Euler check)
CERT_EULER_GRID = 2.0**-40
#: certificate: a float vertex within this (of the domain's span) of a side lies on it
CERT_SIDE = 1e-12
#: certificate: each exact vertex must lie within this (of the diameter) of its float vertex, so that the float
#: polygon drawn and measured is the exact one up to float noise (its exact checks decide signs exactly)
CERT_VERTEX = 2.0**-30

__all__ = [name for name in dir() if name.isupper()]
