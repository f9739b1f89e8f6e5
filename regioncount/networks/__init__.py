"""Networks: one module per architecture, each lowered to the op vocabulary of ``_ops``."""

from ._maxout import Maxout as Maxout, random_maxout as random_maxout
from ._mlp import MLP as MLP, random_mlp as random_mlp
from ._ops import (
    Affine as Affine,
    Attention as Attention,
    GroupMax as GroupMax,
    Program as Program,
    ReLU as ReLU,
    Residual as Residual,
    code_length as code_length,
    is_piecewise_linear as is_piecewise_linear,
    walk_widths as walk_widths,
)
from ._transformer import Block as Block, Transformer as Transformer, random_transformer as random_transformer

Network = MLP | Maxout | Transformer


def lower(net) -> Program:
    """The :class:`Program` of a network (a Program is returned as is)."""
    return net if isinstance(net, Program) else net.lower()
