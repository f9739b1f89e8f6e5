"""Engines: ``sample`` (JAX, lower bounds), ``line`` (exact 1D) and ``plane`` (exact 2D). Each implements
every op of the vocabulary in ``networks/_ops.py`` once."""

from ._forward import forward_codes as forward_codes
from ._line import LinePieces as LinePieces, walk_line as walk_line
from ._plane import partition_plane as partition_plane
from ._sample import (
    SampleCount as SampleCount,
    count_sampled as count_sampled,
    count_sampled_prefixes as count_sampled_prefixes,
    grid_codes as grid_codes,
)
from ._tiles import TiledCount as TiledCount, count_tiled as count_tiled
