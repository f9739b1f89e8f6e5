"""Counts against depth on a log axis, with the Thm 4.4 bound curve (Gu, Yang, Zhou 2026)."""

from __future__ import annotations

from ._output import figure_bytes, new_figure


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
    x, y = series("compact_formula")
    if x:
        ax.plot(x, y, ":", color="tab:green", label="compact construction formula")
    x, y = series("random_sample_mean")
    if x:
        err = [r["random_sample_std"] or 0 for r in rows if r.get("random_sample_mean") is not None]
        ax.errorbar(
            x, y, yerr=err, fmt="^-", color="tab:orange", capsize=3, label="random hardmax, sampled 2D (lower bound)"
        )
    x, y = series("random_chao1_mean")
    if x:
        ax.plot(x, y, "^--", color="tab:orange", alpha=0.5, label="random hardmax, Chao1 estimate")
    x, y = series("random_line_mean")
    if x:
        ax.plot(x, y, "v-", color="tab:red", label="random hardmax, exact pieces on the diagonal")
    x, y = series("relu_attention_mean")
    if x:
        ax.plot(x, y, "d-", color="tab:purple", label="random ReLU attention, sampled spline pieces (lower bound)")
    ax.set_yscale("log")
    ax.set_xlabel("depth D (blocks)")
    ax.set_ylabel("count")
    ax.set_xticks(D)
    ax.grid(True, which="major", alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=7.5, loc="upper left")
    return figure_bytes(fig, fmt, dpi)
