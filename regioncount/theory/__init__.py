"""The theory, executable: exact-int bounds (DESIGN §4), networks that attain them (DESIGN §5), and the
Maxout -> hardmax transformer compiler."""

from ._bounds import (
    BOUNDS as BOUNDS,
)
from ._bounds import (
    BoundSpec as BoundSpec,
)
from ._bounds import (
    maxout_lower as maxout_lower,
)
from ._bounds import (
    maxout_upper_mrz as maxout_upper_mrz,
)
from ._bounds import (
    maxout_upper_serra as maxout_upper_serra,
)
from ._bounds import (
    relu_lower_montufar as relu_lower_montufar,
)
from ._bounds import (
    relu_lower_serra as relu_lower_serra,
)
from ._bounds import (
    relu_upper_serra as relu_upper_serra,
)
from ._bounds import (
    transformer_maxout_lower as transformer_maxout_lower,
)
from ._bounds import (
    zaslavsky as zaslavsky,
)
from ._compile import (
    LAYOUTS as LAYOUTS,
)
from ._compile import (
    bound_attaining_transformer as bound_attaining_transformer,
)
from ._compile import (
    compile_constant as compile_constant,
)
from ._compile import (
    compile_maxout as compile_maxout,
)
from ._compile import (
    identity_block as identity_block,
)
from ._compile import (
    preactivation_bound as preactivation_bound,
)
from ._constructions import (
    MaxoutFold as MaxoutFold,
)
from ._constructions import (
    ReluFold as ReluFold,
)
from ._constructions import (
    fold_maxout_network as fold_maxout_network,
)
from ._constructions import (
    fold_relu_network as fold_relu_network,
)
from ._constructions import (
    general_forms as general_forms,
)
from ._constructions import (
    maxout_fold as maxout_fold,
)
from ._constructions import (
    maxout_fold_pieces as maxout_fold_pieces,
)
from ._constructions import (
    product_maxout as product_maxout,
)
from ._constructions import (
    product_maxout_regions as product_maxout_regions,
)
from ._constructions import (
    product_relu as product_relu,
)
from ._constructions import (
    product_relu_regions as product_relu_regions,
)
from ._constructions import (
    relu_fold as relu_fold,
)
