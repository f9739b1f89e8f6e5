"""CLI pieces for tiled exact counts and Dask clusters: the --tiles/--workers/--scheduler options."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from ._common import fail

TilesOpt = Annotated[
    str | None,
    typer.Option(
        help="exact 2D: split the domain into N rectangles (N = k*k gives k x k, another N the most nearly square grid; "
        "or ROWSxCOLS, e.g. 2x3), "
        "partition each on its own and merge the regions that continue across tile borders: the same counts, "
        "with the memory cap bounding one tile."
    ),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option(
        help="Run the tiles (or a sampled count's chunks of points) on a local Dask cluster of this many "
        "single-threaded worker processes. Needs Dask (the distributed package)."
    ),
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option(
        help="Run the tiles (or a sampled count's chunks) on the running Dask scheduler at this address "
        "(e.g. tcp://host:8786). Needs Dask (the distributed package)."
    ),
]

ShardsOpt = Annotated[
    Path | None,
    typer.Option(
        help="With --tiles: write each tile's partition to this folder as tile-ROW-COL.npz (each file whole or "
        "not at all), so the partition is kept on disk instead of in memory."
    ),
]


def parse_tiles(text: str | None):
    """``"9"`` -> 9, ``"2x3"`` -> ``(2, 3)``, None -> None; anything else is a one-line usage error."""
    if text is None:
        return None
    parts = text.lower().replace(" ", "").split("x")
    try:
        vals = [int(p) for p in parts]
    except ValueError:
        fail(f"--tiles must be N or ROWSxCOLS, got {text!r}", 2)
    if len(vals) > 2 or min(vals) < 1:
        fail(f"--tiles must be N or ROWSxCOLS with positive integers, got {text!r}", 2)
    return vals[0] if len(vals) == 1 else tuple(vals)


def check_cluster_options(method: str, tiles, workers: int | None, scheduler: str | None, shards=None):
    """One-line usage errors for option combinations that cannot run."""
    if shards is not None and tiles is None:
        fail("--shards holds the partitions of tiles: give --tiles as well", 2)
    if workers is not None and scheduler is not None:
        fail("give --workers or --scheduler, not both", 2)
    if workers is not None and workers < 1:
        fail(f"--workers must be at least 1, got {workers}", 2)
    if tiles is not None and method != "exact":
        fail("--tiles splits an exact count: use it with --method exact", 2)
    if (workers is not None or scheduler is not None) and tiles is None and method != "sample":
        fail("--workers and --scheduler run --tiles of an exact count or the chunks of --method sample", 2)


def cluster(workers: int | None, scheduler: str | None):
    """A Dask client for the options (a context manager), or a context holding None when neither is given."""
    if workers is None and scheduler is None:
        return contextlib.nullcontext(None)
    from regioncount.engines import dask_client

    return dask_client(workers=workers, scheduler=scheduler)


def _depths(ds: list[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``"D = 1-3, 5"``."""
    runs: list[list[int]] = []
    for d in ds:
        if runs and d == runs[-1][-1] + 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    return "D = " + ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def counted_line(cells: dict, region_cap: int) -> str:
    """One line for the scan: which construction cells were counted exactly, which remain formulas."""
    parts = []
    for what, label in (("counted", "counted exactly"), ("formulas", f"formulas (over --region-cap {region_cap:,})")):
        items = [f"{name} {_depths(ds)}" for name, ds in cells[what].items() if ds]
        if items:
            parts.append(f"{label}: " + "; ".join(items))
    return ". ".join(parts) + "." if parts else ""
