"""regioncount: count, certify and draw the regions of piecewise networks.

The public surface; everything else lives in private modules.
"""

from . import _config  # noqa: F401  (float64 everywhere)
from ._count import count_regions as count_regions
from ._domain import Box as Box, Segment as Segment, Slice as Slice
from ._errors import (
    CurvedBoundaryError as CurvedBoundaryError,
    DegreeTooHighError as DegreeTooHighError,
    DomainError as DomainError,
    MemoryCapError as MemoryCapError,
    ModelFileError as ModelFileError,
    NotPiecewiseError as NotPiecewiseError,
    RegionCountError as RegionCountError,
)
from ._io import load_model as load_model, save_model as save_model
from ._scan import scan as scan
from .engines import (
    LinePieces as LinePieces,
    SampleCount as SampleCount,
    TiledCount as TiledCount,
    count_sampled as count_sampled,
    count_tiled as count_tiled,
    forward_codes as forward_codes,
    partition_plane as partition_plane,
    walk_line as walk_line,
)
from .networks import (
    MLP as MLP,
    Block as Block,
    Maxout as Maxout,
    Program as Program,
    Transformer as Transformer,
    lower as lower,
    random_maxout as random_maxout,
    random_mlp as random_mlp,
    random_transformer as random_transformer,
    truncate as truncate,
)
from .results import Partition as Partition
from .theory import (
    BOUNDS as BOUNDS,
    bound_attaining_transformer as bound_attaining_transformer,
    compile_maxout as compile_maxout,
    maxout_lower as maxout_lower,
    product_maxout as product_maxout,
    product_relu as product_relu,
    relu_lower_serra as relu_lower_serra,
    relu_upper_serra as relu_upper_serra,
    transformer_maxout_lower as transformer_maxout_lower,
)

__version__ = "0.1.0"
