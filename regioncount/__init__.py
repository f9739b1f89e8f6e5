"""regioncount: count, certify and draw the regions of piecewise networks.

The public surface; everything else lives in private modules.
"""

from . import _config  # noqa: F401  (float64 everywhere)
from ._count import count_regions as count_regions
from ._domain import AffineSlice as AffineSlice, Box as Box, Segment as Segment, Slice as Slice
from ._errors import (
    CertificateError as CertificateError,
    CurvedBoundaryError as CurvedBoundaryError,
    DegreeTooHighError as DegreeTooHighError,
    DomainError as DomainError,
    InexactError as InexactError,
    KeySetError as KeySetError,
    MemoryCapError as MemoryCapError,
    ModelFileError as ModelFileError,
    NotPiecewiseError as NotPiecewiseError,
    RegionCountError as RegionCountError,
)
from ._io import load_model as load_model, save_model as save_model
from ._loaders import from_torch as from_torch, load_network as load_network, load_onnx as load_onnx
from ._scan import scan as scan
from .engines import (
    LinePieces as LinePieces,
    SampleCount as SampleCount,
    count_sampled as count_sampled,
    forward_codes as forward_codes,
    partition_plane as partition_plane,
    partition_space as partition_space,
    walk_line as walk_line,
)
from .networks import (
    MLP as MLP,
    Block as Block,
    ConvNet as ConvNet,
    DecisionNet as DecisionNet,
    Maxout as Maxout,
    Program as Program,
    Transformer as Transformer,
    lower as lower,
    random_maxout as random_maxout,
    random_mlp as random_mlp,
    random_transformer as random_transformer,
    truncate as truncate,
)
from .relations import (
    RelationModel as RelationModel,
    fit_relation as fit_relation,
    retrieval_error as retrieval_error,
    retrieval_partition as retrieval_partition,
)
from .results import Partition as Partition, Polytopes as Polytopes, certify as certify
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
