"""Relations and retrieval (Altabaa and Lafferty 2024, arXiv 2402.08856): relation models
``<phi(x), psi(y)>``, their fitting to target relations, and exact retrieval cells for a key set.

Sits above ``networks``, ``engines`` and ``results`` and imports only from them (and ``_domain``/``_errors``).
"""

from ..networks import (
    RelationModel as RelationModel,
    attention_head_relation as attention_head_relation,
    linear_map as linear_map,
    random_relation as random_relation,
)
from ._fit import FitResult as FitResult, fit_relation as fit_relation, relation_errors as relation_errors
from ._retrieval import (
    Retrieval as Retrieval,
    RetrievalError as RetrievalError,
    load_keys as load_keys,
    retrieval_error as retrieval_error,
    retrieval_partition as retrieval_partition,
    softmax_inverse_temperature as softmax_inverse_temperature,
    voronoi_bias as voronoi_bias,
)
from ._targets import (
    BUILTINS as BUILTINS,
    Bilinear as Bilinear,
    CallableRelation as CallableRelation,
    GaussianKernel as GaussianKernel,
    ModelUtility as ModelUtility,
    Prefers as Prefers,
    as_target as as_target,
    utility_program as utility_program,
)
