"""Engines: ``sample`` (JAX, lower bounds), ``line`` (exact 1D), ``plane`` (exact 2D, straight boundaries), the
curved exact 2D engine (conic arcs) and ``space`` (exact in 3 or more dimensions). Each implements every op of the vocabulary in ``networks/_ops.py`` once. Names are imported on first use: the NumPy engines
(``line``, ``plane``) do not import JAX."""

from .._lazy import lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)

_EXPORTS = {
    "forward_codes": "._forward",
    "LinePieces": "._line",
    "walk_line": "._line",
    "partition_plane": "._plane",
    "partition_space": "._space",
    "partition_curved": "._curved",
    "TiledCount": "._tiles",
    "count_tiled": "._tiles",
    "shard_name": "._tiles",
    "tile_grid": "._tiles",
    "auto_tiles": "._tiles",
    "first_layer_regions": "._tiles",
    "dask_client": "._distributed",
    "SampleCount": "._sample",
    "count_sampled": "._sample",
    "count_sampled_prefixes": "._sample",
    "grid_codes": "._sample",
    "WholePlane": "._whole_plane",
    "whole_plane_box": "._whole_plane",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the same names, imported eagerly, for type checkers and editors
    from ._curved import partition_curved as partition_curved
    from ._distributed import dask_client as dask_client
    from ._forward import forward_codes as forward_codes
    from ._line import LinePieces as LinePieces, walk_line as walk_line
    from ._plane import partition_plane as partition_plane
    from ._sample import (
        SampleCount as SampleCount,
        count_sampled as count_sampled,
        count_sampled_prefixes as count_sampled_prefixes,
        grid_codes as grid_codes,
    )
    from ._space import partition_space as partition_space
    from ._tiles import (
        TiledCount as TiledCount,
        auto_tiles as auto_tiles,
        count_tiled as count_tiled,
        first_layer_regions as first_layer_regions,
        shard_name as shard_name,
        tile_grid as tile_grid,
    )
    from ._whole_plane import WholePlane as WholePlane, whole_plane_box as whole_plane_box
