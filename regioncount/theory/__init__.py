"""The theory, executable: exact-int bounds (DESIGN §4), networks that attain them (DESIGN §5), and the
Maxout -> hardmax transformer compiler.

Names are imported on first use: the bounds are pure Python and import neither NumPy nor JAX."""

from .._lazy import lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)

_EXPORTS = {
    "BOUNDS": "._bounds",
    "BoundSpec": "._bounds",
    "maxout_lower": "._bounds",
    "maxout_upper_mrz": "._bounds",
    "maxout_upper_serra": "._bounds",
    "relu_lower_montufar": "._bounds",
    "relu_lower_serra": "._bounds",
    "relu_upper_serra": "._bounds",
    "transformer_maxout_lower": "._bounds",
    "zaslavsky": "._bounds",
    "estimate_size": "._bounds",
    "LAYOUTS": "._compile",
    "bound_attaining_transformer": "._compile",
    "compile_constant": "._compile",
    "compile_maxout": "._compile",
    "preactivation_bound": "._compile",
    "bound_attaining_nbytes": "._compile",
    "compiled_nbytes": "._compile",
    "MaxoutFold": "._constructions",
    "ReluFold": "._constructions",
    "fold_maxout_network": "._constructions",
    "fold_relu_network": "._constructions",
    "general_forms": "._constructions",
    "maxout_fold": "._constructions",
    "maxout_fold_pieces": "._constructions",
    "product_maxout": "._constructions",
    "product_maxout_regions": "._constructions",
    "product_relu": "._constructions",
    "product_relu_regions": "._constructions",
    "relu_fold": "._constructions",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the same names, imported eagerly, for type checkers and editors
    from ._bounds import (
        BOUNDS as BOUNDS,
        BoundSpec as BoundSpec,
        estimate_size as estimate_size,
        maxout_lower as maxout_lower,
        maxout_upper_mrz as maxout_upper_mrz,
        maxout_upper_serra as maxout_upper_serra,
        relu_lower_montufar as relu_lower_montufar,
        relu_lower_serra as relu_lower_serra,
        relu_upper_serra as relu_upper_serra,
        transformer_maxout_lower as transformer_maxout_lower,
        zaslavsky as zaslavsky,
    )
    from ._compile import (
        LAYOUTS as LAYOUTS,
        bound_attaining_nbytes as bound_attaining_nbytes,
        bound_attaining_transformer as bound_attaining_transformer,
        compile_constant as compile_constant,
        compile_maxout as compile_maxout,
        compiled_nbytes as compiled_nbytes,
        preactivation_bound as preactivation_bound,
    )
    from ._constructions import (
        MaxoutFold as MaxoutFold,
        ReluFold as ReluFold,
        fold_maxout_network as fold_maxout_network,
        fold_relu_network as fold_relu_network,
        general_forms as general_forms,
        maxout_fold as maxout_fold,
        maxout_fold_pieces as maxout_fold_pieces,
        product_maxout as product_maxout,
        product_maxout_regions as product_maxout_regions,
        product_relu as product_relu,
        product_relu_regions as product_relu_regions,
        relu_fold as relu_fold,
    )
