"""CLI pieces for models from elsewhere: slices through data points (``--through``), vectors from ``.npy``
files, and the ``--decision`` options of ``count`` and ``plot``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from regioncount import DomainError

from ._common import parse_vector

if TYPE_CHECKING:
    import numpy as np

    from regioncount import Slice

ThroughOpt = Annotated[
    tuple[Path, Path, Path] | None,
    typer.Option(
        help="A.npy B.npy C.npy: the 2D slice through three data points (e.g. images) instead of --origin/--dir1/"
        "--dir2. The frame is centred on their centroid, undistorted, and holds them within 0.75 of the centre "
        "in (u1, u2), so the default --box -1 1 shows all three.",
    ),
]
DecisionOpt = Annotated[
    bool,
    typer.Option(
        "--decision",
        help="Also give the decision regions: the connected regions of one predicted class (argmax of the "
        "outputs; one output z is read as classes z <= 0 and z > 0), exactly, beside activation and linear regions.",
    ),
]


def input_shape(net) -> tuple[int, ...]:
    return tuple(getattr(net, "input_shape", (net.input_dim,)))


def load_point(path: Path, net, option: str) -> np.ndarray:
    """A data point from ``.npy``: an array of the model's input shape (a leading batch axis of 1 allowed)
    or a flat vector of its input dimension -> ``(q,)`` float64."""
    import numpy as np

    try:
        a = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise DomainError(f"{option} {path}: no such file") from None
    except (OSError, ValueError, EOFError) as e:
        raise DomainError(f"{option} {path}: not a readable .npy array ({e})") from None
    shape, q = input_shape(net), net.input_dim
    if a.dtype.kind not in "fiub":
        raise DomainError(f"{option} {path}: holds {a.dtype} data, not numbers")
    if a.shape not in (shape, (1, *shape), (q,)):
        raise DomainError(
            f"{option} {path}: holds an array of shape {a.shape}, but the model takes inputs of shape {shape} "
            f"({q} numbers)"
        )
    v = a.astype(np.float64).reshape(q)
    if not np.all(np.isfinite(v)):
        raise DomainError(f"{option} {path}: holds NaN or inf")
    return v


def vector_arg(text: str | None, name: str, net):
    """A vector option: comma-separated numbers, or the path of a ``.npy`` file of the model's input shape."""
    if text is not None and text.strip().lower().endswith(".npy"):
        return load_point(Path(text.strip()), net, name).tolist()
    return parse_vector(text, name)


def through_slice(net, paths, lo: float, hi: float) -> tuple[Slice, np.ndarray]:
    """The slice through the three points in ``paths`` over ``[lo, hi]^2`` and their ``(u1, u2)`` (3, 2)."""
    import numpy as np

    from regioncount import Slice, slice_through

    pts = np.stack([load_point(p, net, "--through") for p in paths])
    s, uv = slice_through(pts)
    return Slice(s.x0, s.v1, s.v2, (lo, lo), (hi, hi)), uv
