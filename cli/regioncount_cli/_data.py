"""CLI pieces for domains and models from elsewhere: the domain the shared options name, slices through data
points (``--through``), vectors from ``.npy`` files, and the ``--decision`` options of ``count`` and ``plot``."""

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


def slice_from_options(lo: float, hi: float, origin, dir1, dir2):
    """The 2D slice named by --origin/--dir1/--dir2 over [lo, hi]^2 in (u1, u2), or None when none is given."""
    from regioncount import DomainError, Slice

    if origin is None and dir1 is None and dir2 is None:
        return None
    if None in (origin, dir1, dir2):
        raise DomainError("a slice needs all of --origin, --dir1 and --dir2")
    return Slice(origin, dir1, dir2, (lo, lo), (hi, hi))


def domain_from_options(
    net,
    box: tuple[float, float],
    origin: str | None,
    dir1: str | None,
    dir2: str | None,
    through=None,
    *,
    plane: bool = False,
    start: str | None = None,
    end: str | None = None,
    dirs: list[str] | None = None,
):
    """The domain that the shared options name for ``net``, and the ``(u1, u2)`` of the --through points (or
    None): the slice through three data points (--through), a segment (--from/--to), a k-dimensional slice
    (--origin with --dir), a 2D slice (--origin/--dir1/--dir2, each comma-separated or a .npy file), else the
    box [LO, HI] in every input; ``plane``: the domain must be 2D (a box only for a 2-input model)."""
    from regioncount import AffineSlice, Box, DomainError, Segment

    lo, hi = box
    if through is not None:
        if origin is not None or dir1 is not None or dir2 is not None:
            raise DomainError("give --through or --origin/--dir1/--dir2, not both")
        return through_slice(net, through, lo, hi)
    o, d1, d2 = (vector_arg(v, name, net) for v, name in ((origin, "--origin"), (dir1, "--dir1"), (dir2, "--dir2")))
    a, b = parse_vector(start, "--from"), parse_vector(end, "--to")
    k_dirs = [parse_vector(d, "--dir") for d in dirs or []]
    if lo >= hi:
        raise DomainError(f"--box takes LO HI with LO below HI, got LO={lo:g}, HI={hi:g}")
    if a is not None or b is not None:
        if a is None or b is None:
            raise DomainError("give both --from and --to for a segment")
        return Segment(a, b), None
    if k_dirs:
        import numpy as np

        if o is None or d1 is not None or d2 is not None:
            raise DomainError("a slice with --dir needs --origin and no --dir1/--dir2")
        if len({len(d) for d in k_dirs} | {len(o)}) != 1:
            raise DomainError("--origin and every --dir must have the same number of entries")
        return AffineSlice(o, np.array(k_dirs).T, lo, hi), None
    sliced = slice_from_options(lo, hi, o, d1, d2)
    if sliced is not None:
        return sliced, None
    if plane and net.input_dim != 2:
        raise DomainError(
            f"the model takes {net.input_dim} input{'s' if net.input_dim != 1 else ''}: give a 2D slice with "
            "--origin, --dir1 and --dir2 (or --through)"
        )
    return Box(lo, hi, net.input_dim), None
