"""Figure output: image formats from file suffixes, and figures rendered to bytes (callers write files whole)."""

from __future__ import annotations

import io
from pathlib import Path

# Figures are built as matplotlib.figure.Figure objects, never through pyplot, so importing this
# package leaves the user's backend (e.g. Jupyter's inline one) alone.
from matplotlib.figure import Figure

from .._errors import RegionCountError

#: Image formats the plotting functions write, by file suffix.
FORMATS = ("png", "svg", "pdf")


def format_of(path) -> str:
    """The image format named by ``path``'s suffix (``"png"``, ``"svg"`` or ``"pdf"``); any other suffix
    raises :class:`RegionCountError` with one clear sentence."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        got = f"'.{suffix}'" if suffix else "no suffix"
        raise RegionCountError(f"cannot tell the image format of {path}: it has {got}; use .png, .svg or .pdf")
    return suffix


def new_figure(width: float, height: float) -> Figure:
    """A figure that belongs to no pyplot state (nothing to close, nothing leaks between calls)."""
    return Figure(figsize=(width, height), layout="constrained")


def figure_bytes(fig: Figure, fmt: str = "png", dpi: float = 150, *, compact: bool = False) -> bytes:
    """Render ``fig`` in ``fmt`` (png, svg, pdf) and return the bytes; nothing touches the file system.

    ``compact`` (png only): store at most 256 colours (an adaptive palette, no dithering), which keeps
    flat-coloured region pictures several times smaller at no visible cost.
    """
    if fmt not in FORMATS:
        raise RegionCountError(f"unknown image format {fmt!r}: use one of {', '.join(FORMATS)}")
    buf = io.BytesIO()
    # fixed metadata keep repeated renders of one figure byte-identical (no creation date)
    meta = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}[fmt]
    fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta)
    if not (compact and fmt == "png"):
        return buf.getvalue()
    from PIL import Image

    buf.seek(0)
    img = Image.open(buf).convert("RGB")
    small = img.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    return out.getvalue()
