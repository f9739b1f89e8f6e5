"""Engines: ``sample`` (JAX, lower bounds), ``line`` (exact 1D), ``plane`` (exact 2D, straight boundaries) and
the curved exact 2D engine (conic arcs). Each implements every op of the vocabulary in ``networks/_ops.py`` once."""

from ._curved import partition_curved as partition_curved
from ._forward import forward_codes as forward_codes
from ._line import LinePieces as LinePieces, walk_line as walk_line
from ._plane import partition_plane as partition_plane
from ._sample import (
    SampleCount as SampleCount,
    count_sampled as count_sampled,
    count_sampled_prefixes as count_sampled_prefixes,
    grid_codes as grid_codes,
)
