"""Quantities against the training step (rows of :func:`regioncount.track`): draws only."""

from __future__ import annotations

from matplotlib.ticker import MaxNLocator

from ._output import figure_bytes, new_figure

#: (row key, label, marker) of each series, by panel.
_PANELS = (
    ("regions", (("regions", "activation regions", "o-"), ("linear_regions", "linear regions", "s--"))),
    (
        "decision regions",
        (
            ("decision_regions", "decision regions (b0)", "o-"),
            ("decision_holes", "holes of decision regions (b1)", "^-"),
            ("boundary_components", "decision boundary components", "v--"),
        ),
    ),
    ("local complexity", (("local_complexity", "regions meeting the ball, mean", "o-"),)),
)


def figure_track(rows: list[dict], *, title: str | None = None):
    """One panel per group of quantities present in ``rows`` (regions; decision regions and topology; local
    complexity, with its min-max range shaded) against ``step`` -> ``(Figure, info)``."""
    panels = [(name, [s for s in series if any(r.get(s[0]) is not None for r in rows)]) for name, series in _PANELS]
    panels = [(name, series) for name, series in panels if series] or [("regions", list(_PANELS[0][1]))]
    fig = new_figure(6.0 * len(panels), 4.2)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (name, series) in zip(axes, panels, strict=True):
        for key, label, style in series:
            pts = sorted((r["step"], r[key]) for r in rows if r.get(key) is not None)
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, ms=4, label=label)
            if key == "local_complexity":
                band = sorted((r["step"], r["local"]["min"], r["local"]["max"]) for r in rows if r.get("local"))
                ax.fill_between(
                    [b[0] for b in band], [b[1] for b in band], [b[2] for b in band], alpha=0.2, label="min to max"
                )
        exact = all(r.get("exact", False) for r in rows)
        ax.set_title(f"{name} ({'exact' if exact else 'not all exact'})", fontsize=10)
        ax.set_xlabel("training step")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    info = {"panels": [name for name, _ in panels], "rows": len(rows)}
    return fig, info


def plot_track(rows: list[dict], *, title: str | None = None, fmt: str = "png", dpi: int = 120) -> bytes:
    """:func:`figure_track` rendered to image bytes in ``fmt``."""
    fig, _ = figure_track(rows, title=title)
    return figure_bytes(fig, fmt, dpi)
