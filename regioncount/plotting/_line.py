"""The output of a network along a segment, exactly: pieces of the ``line`` engine coloured, every breakpoint
marked (a filled dot where the output polynomial changes, a hollow one where only the code does)."""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.lines import Line2D

from .._enums import Kind, Method
from .._errors import RegionCountError
from .._views import line_pieces
from ._output import figure_bytes, new_figure

#: Piece colours, darker than the region fills so thin curves stay visible; neighbours always differ.
LINE_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02")


def piece_curves(pieces, output: int = 0, points: int | None = None) -> list[np.ndarray]:
    """Each piece's graph ``(K, 2)`` of ``(t, y)``: the two ends for linear pieces (exact), ``points`` samples
    of the piece polynomial for spline pieces (default 24)."""
    K = 2 if pieces.kind == "linear" and points is None else (points or 24)
    s = np.linspace(-1.0, 1.0, K)
    c = pieces.local_output[:, output, :]  # (n, deg+1) in the piece's own s
    y = np.zeros((c.shape[0], K))
    for k in range(c.shape[1] - 1, -1, -1):
        y = y * s + c[:, k, None]
    lo, hi = pieces.breaks[:-1], pieces.breaks[1:]
    t = (lo + hi)[:, None] / 2 + s * (hi - lo)[:, None] / 2
    return list(np.stack([t, y], axis=-1))


def figure_line(net, segment, *, output: int = 0, title: str | None = None):
    """The output ``output`` of ``net`` along ``segment`` (a :class:`Segment` or ``(a, b)``) -> ``(Figure, info)``.

    Pieces from :func:`~regioncount.engines._line.walk_line`, coloured so neighbours differ; dots at every
    break (filled: the output polynomial changes; hollow: only the activation code changes); a rug of the
    breaks under the curve. ReLU attention is labelled "spline pieces", never linear regions.
    """
    seg, lp = line_pieces(net, segment)
    if not 0 <= output < lp.output.shape[1]:
        raise RegionCountError(f"--output must be between 0 and {lp.output.shape[1] - 1}, got {output}")
    curves = piece_curves(lp, output)
    n = lp.activation_pieces
    fig = new_figure(7.6, 4.0)
    ax = fig.subplots()
    cols = [LINE_COLOURS[i % len(LINE_COLOURS)] for i in range(n)]
    lc = LineCollection(curves, colors=cols, linewidths=1.8 if n < 200 else 1.0)
    lc.set_gid("pieces")
    ax.add_collection(lc)
    inner = lp.breaks[1:-1]
    kink = ~lp.same_polynomial
    y_at = np.array([c[-1, 1] for c in curves[:-1]])  # value at each inner break, from its left piece
    ms = 4.5 if n < 200 else 2.0
    ax.plot(inner[kink], y_at[kink], "o", ms=ms, color="k", zorder=3)
    if np.any(~kink):
        ax.plot(inner[~kink], y_at[~kink], "o", ms=ms, mfc="white", mec="k", mew=0.8, zorder=3)
    ys = np.concatenate([c[:, 1] for c in curves])
    pad = 0.06 * (ys.max() - ys.min()) or 1.0
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(ys.min() - pad, ys.max() + pad)
    rug = ax.vlines(inner, 0, 0.035, transform=ax.get_xaxis_transform(), colors="k", linewidths=0.6)
    rug.set_gid("breaks")
    a = ", ".join(f"{v:g}" for v in seg.a)
    b = ", ".join(f"{v:g}" for v in seg.b)
    ax.set_xlabel(f"t along the segment x = a + t (b − a),  a = ({a}),  b = ({b})", fontsize=8.5)
    ax.set_ylabel(f"output {output}")
    ax.tick_params(labelsize=8)
    ax.grid(True, alpha=0.25)
    # the line engine's own verdict (attention decides with tolerances: not exact), as count --method line says
    exact = bool(lp.exact)
    how = "exact" if exact else "float64 decisions with tolerances, not exact"
    if lp.kind == "linear":
        counts = f"{n:,} activation pieces, {lp.linear_pieces:,} linear pieces ({how})"
        legend = ["breakpoint, slope changes", "breakpoint, code changes only"]
    else:
        counts = f"{n:,} spline pieces, degree ≤ {lp.degree} ({how})"
        legend = ["breakpoint, polynomial changes", "breakpoint, code changes only"]
    ax.set_title(title or counts, fontsize=10)
    handles = [Line2D([], [], ls="", marker="o", color="k", ms=4.5, label=legend[0])]
    if np.any(~kink):
        handles.append(Line2D([], [], ls="", marker="o", mfc="white", mec="k", ms=4.5, label=legend[1]))
    ax.legend(handles=handles, fontsize=7.5, loc="best", framealpha=0.85)
    info = {
        "method": Method.LINE,
        "exact": exact,
        "kind": Kind.ACTIVATION_PIECES if lp.kind == "linear" else Kind.SPLINE_PIECES,
        "pieces": n,
        "linear_pieces": lp.linear_pieces if lp.kind == "linear" else None,
        "polynomial_pieces": lp.polynomial_pieces,
        "degree": lp.degree,
        "ties": lp.ties,
        "breaks": inner.tolist(),
        "output": output,
        "segment": {"a": seg.a.tolist(), "b": seg.b.tolist()},
    }
    return fig, info


def plot_line(net, segment, *, output: int = 0, fmt: str = "png", dpi: float = 150) -> bytes:
    """:func:`figure_line` rendered to image bytes."""
    fig, _ = figure_line(net, segment, output=output)
    return figure_bytes(fig, fmt, dpi)
