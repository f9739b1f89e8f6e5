"""Figures (matplotlib, Agg): they draw results that the library computed (:mod:`regioncount._views`: what a
picture shows, exact or sampled; its names are re-exported here). ``figure_*`` return ``(Figure, info)``; ``plot_*`` return image bytes, so callers
write files whole; :func:`figure_bytes` renders a figure in png, svg or pdf."""

from .._views import (
    RegionSource as RegionSource,
    SampledImage as SampledImage,
    level_segments as level_segments,
    region_source as region_source,
    sample_image as sample_image,
    truncations as truncations,
)
from ._atlas import atlas_html as atlas_html
from ._colour import PALETTE as PALETTE, greedy_colouring as greedy_colouring
from ._decision import figure_decision as figure_decision
from ._depth import plot_scan as plot_scan
from ._graph import (
    figure_region_graph as figure_region_graph,
    figure_region_stats as figure_region_stats,
    plot_region_graph as plot_region_graph,
    plot_region_stats as plot_region_stats,
    region_stats as region_stats,
)
from ._line import figure_line as figure_line, plot_line as plot_line
from ._output import FORMATS as FORMATS, figure_bytes as figure_bytes, format_of as format_of
from ._regions import (
    figure_compiled as figure_compiled,
    figure_regions as figure_regions,
    plot_compiled as plot_compiled,
    plot_regions as plot_regions,
    region_colours as region_colours,
)
from ._retrieval import figure_retrieval as figure_retrieval, plot_retrieval as plot_retrieval
from ._sections import axis_sections as axis_sections, figure_sections as figure_sections
from ._track import figure_track as figure_track, plot_track as plot_track

__all__ = [
    "FORMATS",
    "PALETTE",
    "RegionSource",
    "SampledImage",
    "atlas_html",
    "axis_sections",
    "figure_bytes",
    "figure_compiled",
    "figure_decision",
    "figure_line",
    "figure_region_graph",
    "figure_region_stats",
    "figure_regions",
    "figure_retrieval",
    "figure_sections",
    "figure_track",
    "format_of",
    "greedy_colouring",
    "level_segments",
    "plot_compiled",
    "plot_line",
    "plot_region_graph",
    "plot_region_stats",
    "plot_regions",
    "plot_retrieval",
    "plot_scan",
    "plot_track",
    "region_colours",
    "region_source",
    "region_stats",
    "sample_image",
    "truncations",
]
