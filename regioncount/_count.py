"""One entry point over the three engines: :func:`count_regions` returns the JSON-ready result of DESIGN §6."""

from __future__ import annotations

import time

import numpy as np

from ._domain import Box, Segment, Slice
from ._errors import MemoryCapError, RegionCountError
from .networks import Attention, is_piecewise_linear, lower, walk_widths

METHODS = ("exact", "line", "sample")
#: Peak resident bytes per region of the plane engine, measured (benchmarks/README.md: 10^6 regions in
#: 1.5 GB); sets the region cap that keeps an exact 2D run under the memory cap.
PLANE_BYTES_PER_REGION = 1536


def region_kind(net) -> str:
    """What a cell of ``net`` is called: ``"activation regions"`` for piecewise-linear nets; ``"spline
    pieces"`` with ReLU attention (a cubic spline per block, Lai, Lim, Liu 2024); with softmax attention the
    map is smooth and only the FFN ReLU codes are counted: ``"FFN ReLU codes (softmax is smooth)"``."""
    program = lower(net)
    if any(isinstance(op, Attention) and op.sigma == "softmax" for op, _, _ in walk_widths(program)):
        return "FFN ReLU codes (softmax is smooth)"
    return "activation regions" if is_piecewise_linear(program) else "spline pieces"


def default_segment(box: Box) -> Segment:
    """The main diagonal of a box, from ``lo`` to ``hi``."""
    return Segment(box.lo, box.hi)


def count_regions(
    net,
    domain,
    *,
    method: str = "exact",
    grid: int | None = None,
    samples: int | None = None,
    seed: int = 0,
    memory_cap: int | None = None,
    progress=None,
    tiles=None,
    client=None,
    shards=None,
) -> dict:
    """Count the regions of ``net`` on ``domain`` with ``method`` and return a JSON-ready dict.

    ``method="sample"``: distinct codes on a grid or random points (a lower bound; adds ``samples``, ``f1``,
    ``f2``, ``chao1``, ``coverage``, ``unseen_mass``). ``method="line"``: exact pieces along a
    :class:`Segment`. ``method="exact"``: the exact plane partition for a 2D box or :class:`Slice`, or
    the line engine on a 1D box / segment. Always present: ``regions``, ``linear_regions`` (None where not
    computed), ``method``, ``exact``, ``seconds``, ``kind``.

    ``tiles`` (exact 2D only): N or ``(rows, cols)``; the domain is split into that many rectangles, each
    partitioned on its own (the memory cap then bounds one tile), and the cells continuing across borders
    merged: the same counts, plus ``tiles`` and ``pieces``. ``client``: a ``dask.distributed.Client`` that
    runs the tiles, or the chunks of a sampled count, as tasks on its cluster. ``shards`` (with ``tiles``): a
    folder that receives each tile's partition as an ``.npz`` shard, written whole or not at all.
    """
    if method not in METHODS:
        raise RegionCountError(f"unknown method {method!r}: use one of {', '.join(METHODS)}")
    kind = region_kind(net)
    if tiles is not None and not (method == "exact" and (isinstance(domain, Slice) or domain.dim == 2)):
        raise RegionCountError(
            "tiles split a 2D domain for an exact count: use them with --method exact on a 2D box or slice"
        )
    if shards is not None and tiles is None:
        raise RegionCountError("disk shards hold the partitions of tiles: give tiles as well")
    t0 = time.perf_counter()
    if method == "sample":
        from .engines._sample import DEFAULT_MEMORY_CAP, count_sampled

        if grid is None and samples is None:
            grid = 1000 if domain.dim <= 2 else None
            samples = None if grid else 1_000_000
        res = count_sampled(
            net,
            domain,
            grid=grid,
            samples=samples,
            seed=seed,
            memory_cap=memory_cap or DEFAULT_MEMORY_CAP,
            progress=progress,
            client=client,
        )
        out = res.as_dict()
        out.pop("exact")
        out.update(method="sample", exact=False, linear_regions=None, kind=kind)
    else:
        if isinstance(domain, Box) and domain.dim == 1:
            domain = Segment(domain.lo, domain.hi)
        if method == "line" and isinstance(domain, Box):
            domain = default_segment(domain)
        if isinstance(domain, Segment):
            from .engines._line import walk_line

            res = walk_line(net, domain)
            out = {
                "regions": int(res.activation_pieces),
                "linear_regions": int(res.linear_pieces),
                "ties": int(res.ties),
                "segment": {"a": domain.a.tolist(), "b": domain.b.tolist()},
            }
        elif method == "exact" and (isinstance(domain, Slice) or domain.dim == 2):
            from .engines._plane import partition_plane
            from .engines._sample import DEFAULT_MEMORY_CAP

            cap = memory_cap or DEFAULT_MEMORY_CAP
            max_regions = max(1, cap // PLANE_BYTES_PER_REGION)
            what = "exact partition" if tiles is None else "partition of a tile"
            try:
                if tiles is None:
                    part = partition_plane(net, domain, progress=progress, max_regions=max_regions)
                    out = {"regions": int(part.n_regions), "linear_regions": int(part.linear_regions())}
                else:
                    from .engines._tiles import count_tiled

                    out = count_tiled(
                        net, domain, tiles, client=client, max_regions=max_regions, shards=shards, progress=progress
                    ).as_dict()
            except MemoryCapError:
                raise MemoryCapError(
                    f"the {what} passed {max_regions:,} regions, about what fits in the "
                    f"{cap / 2**30:.2f} GiB memory cap: raise --memory-cap, use more --tiles, shrink the domain, "
                    "or use --method sample"
                ) from None
        else:
            raise RegionCountError(
                f"exact counting needs a 1D or 2D domain but the box is {domain.dim}D: give a 2D slice "
                "(--origin/--dir1/--dir2), use --method line along a segment, or --method sample"
            )
        out.update(method=method, exact=True, kind=kind)
    out["seconds"] = time.perf_counter() - t0
    return out


def as_json_ready(obj):
    """Convert NumPy scalars/arrays inside ``obj`` into plain Python for ``json.dumps``."""
    if isinstance(obj, dict):
        return {k: as_json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [as_json_ready(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return obj
