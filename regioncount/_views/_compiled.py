"""A Maxout network beside the hardmax Transformer compiled from it."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._domain import Box
from .._errors import RegionCountError
from ..networks import Maxout, Transformer
from ..results import Partition

# ----------------------------------------------------------------------------------------------------
# a Maxout network beside the hardmax Transformer compiled from it


@dataclasses.dataclass(frozen=True, eq=False)
class CompiledComparison:
    """The exact partitions of a 2-input Maxout network and of its compiled Transformer on one box.

    ``match (R_transformer,)``: the Maxout region holding each Transformer region's centroid; ``identical``:
    that map is a bijection with equal areas (to 1e-9 of the box) and equal output 0, region by region."""

    net: Maxout
    transformer: Transformer
    box: Box
    layout: str
    maxout: Partition
    compiled: Partition
    match: np.ndarray
    identical: bool


def compare_compiled(net: Maxout, lo, hi, *, layout: str = "compact") -> CompiledComparison:
    """Compile ``net`` (:func:`~regioncount.theory.compile_maxout`) on the box ``[lo, hi]^2`` and compare the
    two exact partitions region by region."""
    from ..engines._plane import partition_plane
    from ..theory import compile_maxout

    if not isinstance(net, Maxout) or net.input_dim != 2:
        raise RegionCountError("figure_compiled draws a 2-input Maxout network")
    box = Box(lo, hi, 2)
    tf = compile_maxout(net, box.lo, box.hi, layout=layout)
    pm = partition_plane(net, box)
    pt = partition_plane(tf, box)
    match = pm.locate(pt.centroids())
    box_area = float(np.prod(box.hi - box.lo))
    identical = bool(
        pm.n_regions == pt.n_regions
        and np.all(match >= 0)
        and np.array_equal(np.sort(match), np.arange(pm.n_regions))
        and np.allclose(pt.areas, pm.areas[match], rtol=0, atol=1e-9 * box_area)
        and np.allclose(pt.maps[:, 0], pm.maps[match, 0], rtol=1e-9, atol=1e-9)
    )
    return CompiledComparison(net, tf, box, layout, pm, pt, match, identical)
