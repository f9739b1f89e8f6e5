"""Decision regions beside activation and linear regions on a 2D domain (DESIGN §9), exactly."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ._enums import Method
from ._errors import MemoryCapError, RegionCountError
from .networks import DecisionNet, class_position, lower
from .results import Topology, decision_summary, topology


def class_of_cells(part, dnet: DecisionNet) -> np.ndarray:
    """Predicted class ``(R,)`` of every cell of an exact partition of ``dnet``: its final group max digit."""
    program = lower(dnet)
    kind, width, digits = part._blocks[-1]
    if kind != "digits" or width != program.tokens:
        raise RegionCountError("the partition was not made from this decision network")
    pos = class_position(dnet)
    assert pos == part.code_length - width + program.out_token
    return np.asarray(digits[:, program.out_token], dtype=np.int64)


def decision_partitions(net, domain, *, max_regions: int | None = None, progress=None):
    """Exact partitions of ``domain`` by ``net`` (activation regions) and by its decision network (cells
    that also carry the predicted class) -> ``(base, decision, classes (R_decision,))``."""
    from .engines._plane import partition_plane

    base = partition_plane(net, domain, max_regions=max_regions, progress=progress)
    dnet = DecisionNet(net)
    dec = partition_plane(dnet, domain, max_regions=max_regions, progress=progress)
    return base, dec, class_of_cells(dec, dnet)


def decision_topology(net, domain, *, max_regions: int | None = None, progress=None) -> Topology:
    """Betti numbers of the decision regions of ``net`` on a 2D domain (box or slice: components, holes, and
    the decision boundary's components and cycles) or a 3D box (components and cavities), read off the
    exact partition of its decision network (:func:`regioncount.results.topology`)."""
    dnet = DecisionNet(net)
    part: Any
    if domain.dim == 3:
        from .engines._space import partition_space

        part = partition_space(dnet, domain, max_regions=max_regions, progress=progress)
    else:
        from .engines._plane import partition_plane

        part = partition_plane(dnet, domain, max_regions=max_regions, progress=progress)
    return topology(part, class_of_cells(part, dnet))


def count_decisions(net, domain, *, memory_cap: int | None = None, progress=None, linear: bool = True) -> dict:
    """``count_regions``' exact result plus ``decision_regions`` (connected regions of one predicted class),
    ``decision_cells`` (cells of the network followed by the argmax) and per-class regions and areas;
    ``linear=False`` skips linear regions (``linear_regions`` is then None)."""
    from ._config import DEFAULT_MEMORY_CAP
    from ._count import PLANE_BYTES_PER_REGION, region_kind
    from .results import CountRecord

    cap = memory_cap or DEFAULT_MEMORY_CAP
    max_regions = max(1, cap // PLANE_BYTES_PER_REGION)
    t0 = time.perf_counter()
    try:
        base, dec, cls = decision_partitions(net, domain, max_regions=max_regions, progress=progress)
    except MemoryCapError:
        raise MemoryCapError(
            f"the exact partition passed {max_regions:,} regions, about what fits in the "
            f"{cap / 2**30:.2f} GiB memory cap: raise --memory-cap or shrink the domain"
        ) from None
    return CountRecord(
        regions=base.regions,
        linear_regions=int(base.linear_regions()) if linear else None,
        exact=base.exact and dec.exact,  # no attention identity assumed in either partition
        method=Method.EXACT,
        kind=region_kind(net),
        domain=domain,
        seconds=time.perf_counter() - t0,
        details={
            "decision_cells": int(dec.n_regions),
            **decision_summary(dec, cls),
            "topology": topology(dec, cls).as_dict(),
        },
        result=base,
    ).as_dict()
