"""The theory, executable: exact-int bounds (DESIGN §4), networks that attain them (DESIGN §5), and the
Maxout -> hardmax transformer compiler."""

from ._bounds import (
    BOUNDS as BOUNDS,
    BoundSpec as BoundSpec,
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
    bound_attaining_transformer as bound_attaining_transformer,
    compile_constant as compile_constant,
    compile_maxout as compile_maxout,
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
