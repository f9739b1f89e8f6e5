"""The op protocol, re-exported from :mod:`regioncount.networks._protocol` (where it lives so that the exact
interpreter below the engines can register its kernels in the same table)."""

from ..networks._protocol import (  # noqa: F401
    CONSUMERS,
    MODULES,
    SUPPORT,
    Kernels,
    NotPiecewiseError,
    Refusal,
    _row,
    all_keys,
    first_refusal,
    kernels_of,
    op_key,
    refuse_unsupported,
    support,
)
