"""regioncount: count, certify and draw the regions of piecewise networks."""

from . import _config  # noqa: F401  (float64 everywhere)
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
)

__version__ = "0.1.0"
