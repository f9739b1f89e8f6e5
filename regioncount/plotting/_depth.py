"""Counts against depth on a log axis, with the Thm 4.4 bound curve (Gu, Yang, Zhou 2026)."""

from __future__ import annotations

from ._output import figure_bytes, new_figure

#: Series that hold measured counts (and the bound); their range sets the y axis.
MEASURED = (
    "bound",
    "constructed",
    "compact",
    "random_sample_mean",
    "random_chao1_mean",
    "random_line_mean",
    "random_exact_mean",
    "relu_attention_mean",
    "relu_exact_mean",
)


def plot_scan(rows: list[dict], *, title: str | None = None, fmt: str = "png", dpi: int = 150) -> bytes:
    """Render scan rows (see ``regioncount._scan``) and return the image bytes in ``fmt``."""
    D = [r["depth"] for r in rows]
    fig = new_figure(7.0, 4.6)
    ax = fig.add_subplot()

    def series(key):
        pts = [(r["depth"], r[key]) for r in rows if r.get(key) is not None]
        return [p[0] for p in pts], [p[1] for p in pts]

    x, y = series("bound")
    if x:
        # the bound is constant between multiples of 3 blocks: draw it as the step function it is
        ax.plot(x, y, "k-", lw=2, drawstyle="steps-post", label="Thm 4.4 lower bound (Gu, Yang, Zhou 2026)")
    x, y = series("constructed")
    if x:
        ax.plot(x, y, "o", ms=9, mfc="none", mec="tab:blue", mew=2, label="constructed, paper layout (exact)")
    x, y = series("compact")
    if x:
        ax.plot(x, y, "s", color="tab:green", label="constructed, compact layout (exact)")
    formula = series("compact_formula")
    x, y = series("random_sample_mean")
    if x:
        err = [r["random_sample_std"] or 0 for r in rows if r.get("random_sample_mean") is not None]
        ax.errorbar(
            x, y, yerr=err, fmt="^-", color="tab:orange", capsize=3, label="random hardmax, sampled 2D (lower bound)"
        )
    x, y = series("random_exact_mean")
    if x:
        err = [r.get("random_exact_std") or 0 for r in rows if r.get("random_exact_mean") is not None]
        ax.errorbar(
            x, y, yerr=err, fmt="P-", color="tab:olive", capsize=3, label="random hardmax, exact connected cells (2D)"
        )
    x, y = series("random_chao1_mean")
    if x:
        ax.plot(x, y, "x--", color="tab:brown", label="random hardmax, Chao1 estimate (from the sampled counts)")
    x, y = series("random_line_mean")
    if x:
        ax.plot(x, y, "v-", color="tab:red", label="random hardmax, exact pieces on the diagonal")
    x, y = series("relu_attention_mean")
    if x:
        ax.plot(x, y, "d-", color="tab:purple", label="random ReLU attention, sampled spline pieces (lower bound)")
    x, y = series("relu_exact_mean")
    if x:
        ax.plot(
            x,
            y,
            "D",
            ms=8,
            mfc="none",
            mec="tab:purple",
            mew=2,
            label="random ReLU attention, exact spline pieces (2D)",
        )
    ax.set_yscale("log")
    # The compact formula grows like a power of D and would squeeze the measured series into the bottom of
    # the log axis: draw it only inside the measured range and say where it leaves.
    measured = [v for key in MEASURED for r in rows if isinstance(v := r.get(key), (int, float)) and v > 0]
    if measured:
        lo, hi = min(measured) / 2, max(measured) * 3
        ax.set_ylim(lo, hi)
        x, y = formula
        inside = [(d, v) for d, v in zip(x, y) if v <= hi]
        if inside:
            ax.plot(*zip(*inside), ":", color="tab:green", label="compact construction formula")
        beyond = [(d, v) for d, v in zip(x, y) if v > hi]
        if beyond:
            d, v = beyond[-1]
            ax.text(
                0.99,
                0.02,
                f"compact formula above the axis from D = {beyond[0][0]} (D = {d}: {v:.2g})",
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                fontsize=7,
                color="tab:green",
            )
    ax.set_xlabel("depth D (blocks)")
    ax.set_ylabel("count")
    ax.set_xticks(D)
    ax.grid(True, which="major", alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=7.5, loc="upper left")
    return figure_bytes(fig, fmt, dpi)
