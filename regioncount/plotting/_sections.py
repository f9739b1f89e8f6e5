"""Pictures of partitions in three or more dimensions: labelled 2D cross-sections of a box.

Each section is an axis-aligned plane through the box, ``x_axis = value``, spanned by two other inputs.
It is drawn like any 2D slice (exact from the plane engine where it can, else sampled and said so);
when the caller passes the exact partition of the whole box (:class:`~regioncount.results.Polytopes`),
each panel also names how many of its regions the section meets, which equals the section's own count.
"""

from __future__ import annotations

import numpy as np

from .._domain import Box
from .._views import (
    DEFAULT_MAX_REGIONS,
    axis_sections as axis_sections,
    box_sections,
    domain_info,
    level_values,
    output_range,
)
from ..results import Polytopes
from ._output import new_figure
from ._regions import _level_legend, draw_source


def figure_sections(
    net,
    box: Box,
    *,
    count: int = 3,
    axis: int | None = None,
    solid: Polytopes | None = None,
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
    secs = box_sections(
        net, box, count=count, axis=axis, solid=solid, sampled=sampled, grid=grid, max_regions=max_regions
    )
    values = level_values(*output_range(secs[-1].source), levels)
    k = len(secs)
    fig = new_figure(4.2 * k + 0.3, 4.7 + (0.35 if (levels or zero) else 0.0))
    axes = fig.subplots(1, k, squeeze=False).ravel()
    panels = []
    for ax, sec in zip(axes, secs, strict=True):
        label, sl, met = sec.label, sec.slice, sec.solid_regions_met
        prefix = f"cross-section {label}" + ("" if met is None else f", meets {met:,} of the {box.dim}D regions")
        inf = draw_source(ax, sec.source, linear=linear, levels=values, zero=zero, title_prefix=prefix + "\n")
        ax.title.set_fontsize(9)
        i, j = np.flatnonzero(sl.v1)[0], np.flatnonzero(sl.v2)[0]
        ax.set_xlabel(f"x{i + 1}")
        ax.set_ylabel(f"x{j + 1}")
        inf.update({"section": label, "axis": sec.axis, "value": sec.value, **domain_info(sl)})
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
