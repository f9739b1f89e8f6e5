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
        "with the memory cap bounding one tile. Default: a ReLU network whose first layer alone cuts the domain "
        "into 2^17 regions or more is split into k x k tiles run on every core (--tiles 1 keeps one partition)."
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


#: Most tiles a count takes: each tile is a partition of its own plus a border summary, measured at about
#: 4 ms even for a tile with one region (400 tiles of a 1-unit MLP, load 7), so 10^6 tiles would spend over
#: an hour on that overhead alone.
MAX_TILES = 10_000
#: Resident bytes of one Dask worker process before it holds a tile (measured: about 70 MB with NumPy,
#: 200 MB once the engines and JAX are imported), rounded up.
WORKER_BYTES = 256 * 2**20


def cores() -> int:
    """Cores this process may run on."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_cluster_options(
    method: str, tiles, workers: int | None, scheduler: str | None, shards=None, memory_cap: float | None = None
):
    """One-line errors, before any work, for option combinations that cannot run and for sizes known in
    advance that are over a limit: more tiles than :data:`MAX_TILES`, more workers than cores, or workers
    whose own memory (:data:`WORKER_BYTES` each) is over ``memory_cap`` (GiB, all processes together)."""
    if shards is not None and tiles is None:
        fail("--shards holds the partitions of tiles: give --tiles as well", 2)
    if workers is not None and scheduler is not None:
        fail("give --workers or --scheduler, not both", 2)
    if workers is not None and workers < 1:
        fail(f"--workers must be at least 1, got {workers}", 2)
    if scheduler is not None:
        import re

        # PROTOCOL://HOST:PORT, HOST:PORT, or an in-process address (inproc://host/pid/n, which has no port)
        addr = scheduler.strip()
        if not (
            re.fullmatch(r"(?:[a-z]+://)?(?:\[[0-9a-fA-F:.]+\]|[^\s:/\[\]]+):\d{1,5}/?", addr)
            or re.fullmatch(r"inproc://\S+", addr)
        ):
            fail(f"--scheduler {scheduler!r} is not a scheduler address: give one such as tcp://host:8786", 2)
    if tiles is not None:
        rows, cols = tiles if isinstance(tiles, tuple) else (1, tiles)
        if rows * cols > MAX_TILES:
            fail(
                f"--tiles {rows * cols:,} is over the limit of {MAX_TILES:,} tiles: each tile is a partition of its "
                "own (about 4 ms even when it holds one region), so more tiles cost time without saving memory; "
                "give fewer tiles",
                5,
            )
    if workers is not None:
        n = cores()
        if workers > n:
            fail(
                f"--workers {workers} is more than the {n} cores this run may use: each worker is a single-threaded "
                f"process, so more than {n} only compete for them (and each holds its own memory); give at most {n}",
                5,
            )
        if memory_cap is not None and workers * WORKER_BYTES > memory_cap * 2**30:
            fit = max(1, int(memory_cap * 2**30 // WORKER_BYTES))
            fail(
                f"--workers {workers} would hold about {workers * WORKER_BYTES / 2**30:.2f} GiB before any work "
                f"({WORKER_BYTES // 2**20} MiB each), over --memory-cap {memory_cap:g} GiB, which bounds this process "
                f"and its workers together: give at most {fit} workers or raise --memory-cap",
                5,
            )
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
