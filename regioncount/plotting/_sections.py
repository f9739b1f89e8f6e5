"""Pictures of partitions in three or more dimensions: labelled 2D cross-sections of a box.

Each section is an axis-aligned plane through the box, ``x_axis = value``, spanned by two other inputs.
It is drawn like any 2D slice (exact from the plane engine where it can, else sampled and said so);
when the caller passes the exact partition of the whole box (:class:`~regioncount.results.Polytopes`),
each panel also names how many of its regions the section meets, which equals the section's own count.
"""

from __future__ import annotations

import numpy as np

from .._domain import Box, Slice
from .._errors import DomainError
from ..networks import lower
from ._output import new_figure
from ._regions import (
    DEFAULT_MAX_REGIONS,
    _domain_info,
    _level_legend,
    _output_range,
    draw_source,
    level_values,
    region_source,
)


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


def figure_sections(
    net,
    box: Box,
    *,
    count: int = 3,
    axis: int | None = None,
    solid=None,
    linear: bool = False,
    levels: int = 0,
    zero: bool = False,
    sampled: bool = False,
    grid: int | None = None,
    max_regions: int = DEFAULT_MAX_REGIONS,
):
    """``count`` labelled cross-sections (:func:`axis_sections`) of a box of dimension >= 3 -> ``(Figure, info)``.

    ``solid``: the exact partition of the box (Polytopes), used to state the box's count in the title and
    how many of its regions each section meets."""
    program = lower(net)
    if program.input_dim != box.dim:
        raise DomainError(f"the box is {box.dim}D but the network takes {program.input_dim} inputs")
    secs = axis_sections(box, count, axis)
    srcs = [region_source(net, sl, sampled=sampled, grid=grid, max_regions=max_regions) for _, sl, _, _ in secs]
    values = level_values(*_output_range(srcs[-1]), levels)
    k = len(secs)
    fig = new_figure(4.2 * k + 0.3, 4.7 + (0.35 if (levels or zero) else 0.0))
    axes = fig.subplots(1, k, squeeze=False).ravel()
    panels = []
    for ax, (label, sl, a, value), src in zip(axes, secs, srcs, strict=True):
        met = None
        if solid is not None:
            w = np.zeros(box.dim + 1)
            w[a], w[-1] = 1.0, -value
            met = int(solid.meets_hyperplane(w).size)
        prefix = f"cross-section {label}" + ("" if met is None else f", meets {met:,} of the {box.dim}D regions")
        inf = draw_source(ax, src, linear=linear, levels=values, zero=zero, title_prefix=prefix + "\n")
        ax.title.set_fontsize(9)
        i, j = np.flatnonzero(sl.v1)[0], np.flatnonzero(sl.v2)[0]
        ax.set_xlabel(f"x{i + 1}")
        ax.set_ylabel(f"x{j + 1}")
        inf.update({"section": label, "axis": a, "value": value, **_domain_info(sl)})
        inf["solid_regions_met"] = met
        panels.append(inf)
    _level_legend(fig, values, zero)
    head = f"{box.dim}D box [{', '.join(f'{lo:g}..{hi:g}' for lo, hi in zip(box.lo, box.hi))}]: {k} cross-sections"
    if solid is not None:
        head += f" of the exact partition ({solid.n_regions:,} activation regions in {box.dim}D)"
    fig.suptitle(head, fontsize=10)
    info = {
        "sections": panels,
        "box": {"lo": box.lo.tolist(), "hi": box.hi.tolist()},
        "solid_regions": None if solid is None else solid.n_regions,
        "levels": values.tolist(),
        "zero_set": bool(zero),
    }
    return fig, info
