"""Labelled cross-sections of a box of dimension 3 or more, beside its exact solid partition."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._domain import Box, Slice
from .._errors import DomainError
from ..networks import lower
from ..results import Polytopes
from ._source import DEFAULT_MAX_REGIONS, RegionSource, region_source

# ----------------------------------------------------------------------------------------------------
# cross-sections of a box


def axis_sections(box: Box, count: int = 3, axis: int | None = None) -> list[tuple[str, Slice, int, float]]:
    """``count`` planes ``x_axis = value`` at evenly spaced interior values of a box of dimension >= 3
    (``axis`` defaults to the last input), spanned by the first two other inputs, the rest at the box's
    centre. Returns ``(label, slice, axis, value)`` per section."""
    q = box.dim
    if q < 3:
        raise DomainError(f"cross-sections are for boxes of dimension 3 or more, got {q}")
    axis = q - 1 if axis is None else int(axis)
    if not 0 <= axis < q:
        raise DomainError(f"section axis must be in 0..{q - 1}, got {axis}")
    if count < 1:
        raise DomainError(f"give at least one section, got {count}")
    i, j = [a for a in range(q) if a != axis][:2]
    ctr = (box.lo + box.hi) / 2
    out = []
    for f in (np.arange(count) + 1) / (count + 1):
        x0 = ctr.copy()
        x0[i] = x0[j] = 0.0
        x0[axis] = box.lo[axis] + f * (box.hi[axis] - box.lo[axis])
        e1, e2 = np.eye(q)[i], np.eye(q)[j]
        sl = Slice(x0, e1, e2, (box.lo[i], box.lo[j]), (box.hi[i], box.hi[j]))
        out.append((f"x{axis + 1} = {x0[axis]:.4g}", sl, axis, float(x0[axis])))
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class Section:
    """One cross-section ``x_axis = value`` of a box: its slice, what it is drawn from, and how many regions
    of the box's exact partition it meets (None without that partition)."""

    label: str
    slice: Slice
    axis: int
    value: float
    source: RegionSource
    solid_regions_met: int | None


def box_sections(
    net,
    box: Box,
    *,
    count: int = 3,
    axis: int | None = None,
    solid: Polytopes | None = None,
    sampled: bool = False,
    grid: int | None = None,
    max_regions: int = DEFAULT_MAX_REGIONS,
) -> list[Section]:
    """The :func:`axis_sections` of a box of dimension >= 3, each with its :func:`region_source`, and with
    ``solid`` (the box's exact partition) the number of its regions each section meets, which equals the
    section's own count."""
    program = lower(net)
    if program.input_dim != box.dim:
        raise DomainError(f"the box is {box.dim}D but the network takes {program.input_dim} inputs")
    secs = axis_sections(box, count, axis)
    srcs = [region_source(net, sl, sampled=sampled, grid=grid, max_regions=max_regions) for _, sl, _, _ in secs]
    out = []
    for (label, sl, a, value), src in zip(secs, srcs, strict=True):
        met = None
        if solid is not None:
            w = np.zeros(box.dim + 1)
            w[a], w[-1] = 1.0, -value
            met = int(solid.meets_hyperplane(w).size)
        out.append(Section(label, sl, a, value, src, met))
    return out
