"""What a picture shows, computed: the library side of :mod:`regioncount.plotting`, which only draws it.

A 2D picture is drawn from a :class:`RegionSource`: the exact ``plane`` partition where that engine can split
the network, the exact curved cells (:mod:`regioncount.engines._curved`: hardmax after a token-wise FFN, the
first ReLU-attention op) where boundaries are conics, otherwise (boundaries of degree above 2, or more
regions than a cap) a :class:`SampledImage` of activation codes on a grid, whose count is a lower bound.
:func:`region_source` makes that choice; :meth:`RegionSource.summary` says what it holds (JSON-ready).
One module per concern: ``_source`` (what a picture is drawn from), ``_geometry`` (level sets, shared edges,
outlines), ``_truncations`` (the network cut after each layer), ``_sections`` (cross-sections of a box),
``_compiled`` (a Maxout network beside its compiled Transformer), ``_line`` (pieces along a segment) and
``_decision`` (decision regions); this package re-exports their names.
"""

from ._compiled import (
    CompiledComparison as CompiledComparison,
    compare_compiled as compare_compiled,
)
from ._decision import (
    DecisionView as DecisionView,
    decision_view as decision_view,
)
from ._geometry import (
    domain_info as domain_info,
    level_segments as level_segments,
    level_values as level_values,
    linear_outlines as linear_outlines,
    output_range as output_range,
    shared_edges as shared_edges,
    trapezoid_polygons as trapezoid_polygons,
)
from ._line import (
    line_pieces as line_pieces,
)
from ._sections import (
    Section as Section,
    axis_sections as axis_sections,
    box_sections as box_sections,
)
from ._source import (
    DEFAULT_GRID as DEFAULT_GRID,
    DEFAULT_MAX_REGIONS as DEFAULT_MAX_REGIONS,
    RegionSource as RegionSource,
    SampledImage as SampledImage,
    check_linear as check_linear,
    exact_partition as exact_partition,
    exact_solid as exact_solid,
    region_source as region_source,
    sample_image as sample_image,
)
from ._truncations import (
    truncations as truncations,
)
