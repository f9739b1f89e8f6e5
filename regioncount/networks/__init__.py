"""Networks: one module per architecture, each lowered to the op vocabulary of ``_ops``."""

from ._conv import ConvNet as ConvNet, lower_layers as lower_layers
from ._decision import DecisionNet as DecisionNet, class_position as class_position
from ._maxout import Maxout as Maxout, random_maxout as random_maxout
from ._mlp import MLP as MLP, random_mlp as random_mlp
from ._ops import (
    Affine as Affine,
    Attention as Attention,
    CodeMap as CodeMap,
    GroupMax as GroupMax,
    PiecewiseLinear as PiecewiseLinear,
    Program as Program,
    ReLU as ReLU,
    Residual as Residual,
    abs_op as abs_op,
    code_length as code_length,
    form_codes as form_codes,
    hardtanh as hardtanh,
    is_piecewise_linear as is_piecewise_linear,
    leaky_relu as leaky_relu,
    op_code_length as op_code_length,
    op_codes as op_codes,
    parse_activation as parse_activation,
    relu_form as relu_form,
    walk_widths as walk_widths,
    with_activation as with_activation,
)
from ._relation import (
    RelationModel as RelationModel,
    attention_head_relation as attention_head_relation,
    linear_map as linear_map,
    random_relation as random_relation,
)
from ._transformer import (
    Block as Block,
    Transformer as Transformer,
    depth_code_ends as depth_code_ends,
    identity_block as identity_block,
    pad_to_depth as pad_to_depth,
    random_transformer as random_transformer,
    truncate as truncate,
)

__all__ = [
    "Affine",
    "CodeMap",
    "Attention",
    "Block",
    "GroupMax",
    "MLP",
    "Maxout",
    "Network",
    "PiecewiseLinear",
    "abs_op",
    "hardtanh",
    "leaky_relu",
    "relu_form",
    "Program",
    "ReLU",
    "Residual",
    "Transformer",
    "check_domain",
    "code_length",
    "form_codes",
    "depth_code_ends",
    "identity_block",
    "is_piecewise_linear",
    "lower",
    "op_code_length",
    "op_codes",
    "parse_activation",
    "pad_to_depth",
    "random_maxout",
    "random_mlp",
    "random_transformer",
    "truncate",
    "with_activation",
    "walk_widths",
]


Network = MLP | Maxout | Transformer


def lower(net) -> Program:
    """The :class:`Program` of a network (a Program is returned as is), with every piecewise-linear
    activation in its exact ReLU form (:func:`relu_form`), the form every engine runs."""
    return relu_form(net if isinstance(net, Program) else net.lower())


def check_domain(net, lo, hi) -> None:
    """Raise :class:`~regioncount._errors.DomainError` when the input box ``[lo, hi]`` (the bounding box of
    the domain in input space) leaves the box a model is valid on (``valid_box``, set by the compiler)."""
    import numpy as np

    from .._errors import DomainError
    from .._tolerances import VALID_BOX_SLACK

    vb = getattr(net, "valid_box", None)
    if vb is None:
        return
    vlo, vhi = np.asarray(vb[0]), np.asarray(vb[1])
    if np.any(np.asarray(lo) < vlo - VALID_BOX_SLACK) or np.any(np.asarray(hi) > vhi + VALID_BOX_SLACK):
        raise DomainError(
            f"this model was compiled for the box [{vlo.tolist()}, {vhi.tolist()}] and is not exact outside it; "
            f"the requested domain spans [{np.asarray(lo).tolist()}, {np.asarray(hi).tolist()}]"
        )
