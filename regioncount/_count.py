"""One entry point over the three engines: :func:`count_regions` returns the JSON-ready result of DESIGN §6."""

from __future__ import annotations

import time

import numpy as np

from ._config import DEFAULT_MEMORY_CAP
from ._domain import AffineSlice, Box, Segment, Slice
from ._enums import METHODS as METHODS, Kind, Method
from ._errors import CertificateError, CurvedBoundaryError, MemoryCapError, RegionCountError, ResidentMemoryError
from ._magnitude import check_magnitudes
from .networks import Attention, is_piecewise_linear, lower, walk_widths

#: Dimensions beyond which the space engine is not tried (vertices and facets grow too fast).
MAX_SPACE_DIM = 8
#: Peak resident bytes per region of the plane engine, measured (benchmarks/README.md: 10^6 regions in
#: 1.5 GB); sets the region cap that keeps an exact 2D run under the memory cap.
PLANE_BYTES_PER_REGION = 1536
#: The same for the space engine (q >= 3), measured in benchmarks/exact3d_speed.py (benchmarks/README.md).
SPACE_BYTES_PER_REGION = 12288


def region_kind(net) -> Kind:
    """What a cell of ``net`` is called: ``"activation regions"`` for piecewise-linear nets; ``"spline
    pieces"`` with ReLU attention (a cubic spline per block, Lai, Lim, Liu 2024); with softmax attention the
    map is smooth and only the FFN ReLU codes are counted: ``"FFN ReLU codes (softmax is smooth)"``."""
    program = lower(net)
    if any(isinstance(op, Attention) and op.sigma == "softmax" for op, _, _ in walk_widths(program)):
        return Kind.SOFTMAX_CODES
    return Kind.ACTIVATION_REGIONS if is_piecewise_linear(program) else Kind.SPLINE_PIECES


def default_segment(box: Box) -> Segment:
    """The main diagonal of a box, from ``lo`` to ``hi``."""
    return Segment(box.lo, box.hi)


def _lower_slice(domain: AffineSlice):
    """A 1D or 2D :class:`AffineSlice` as the :class:`Segment` or :class:`Slice` the line and plane engines take."""
    if domain.dim == 1:
        x0, U = domain.input_map()
        return Segment(x0 + U[:, 0] * domain.lo[0], x0 + U[:, 0] * domain.hi[0])
    return Slice(domain.x0, domain.U[:, 0], domain.U[:, 1], domain.lo, domain.hi)


def _region_limit(cap: int, per_region: int, max_regions: int | None) -> int:
    limit = max(1, cap // per_region)
    return limit if max_regions is None else min(limit, int(max_regions))


def _cap_error(cap: int, limit: int, max_regions: int | None) -> MemoryCapError:
    if max_regions is not None and limit == max_regions:
        return MemoryCapError(
            f"the exact partition passed max_regions={limit:,} regions: raise --max-regions, shrink the domain, "
            "or use --method sample"
        )
    return MemoryCapError(
        f"the exact partition passed {limit:,} regions, about what fits in the {cap / 2**30:.2f} GiB memory cap: "
        "raise --memory-cap, shrink the domain, or use --method sample"
    )


#: Peak resident bytes per trapezoid of the curved engine, measured (benchmarks/README.md, curved_speed.py:
#: 2.6 GB for 247,789 trapezoids at depth 9); sets the trapezoid cap that keeps a run under the memory cap.
CURVED_BYTES_PER_TRAP = 10_240


def _count_curved(net, domain, cap: int, progress, max_regions: int | None) -> dict:
    """The curved engine's counts: ``regions`` are connected cells, ``codes`` distinct codes; ``exact`` is
    False where an arc-order check failed or an area integral did not converge. ``max_regions`` caps the
    trapezoids (every cell is one or more of them, so the cap is conservative)."""
    from .engines._curved import partition_curved

    max_traps = max(1, cap // CURVED_BYTES_PER_TRAP)
    if max_regions is not None:
        max_traps = min(max_traps, max_regions)
    try:
        cells = partition_curved(net, domain, progress=progress, max_traps=max_traps)
    except MemoryCapError:
        raise MemoryCapError(
            f"the curved partition passed {max_traps:,} trapezoids, about what fits in the "
            f"{cap / 2**30:.2f} GiB memory cap: raise --memory-cap, shrink the domain, or use --method sample"
        ) from None
    out = cells.summary()
    out["engine"] = "curved"
    return out


def count_regions(
    net,
    domain,
    *,
    method: Method | str = Method.EXACT,
    grid: int | None = None,
    samples: int | None = None,
    seed: int = 0,
    memory_cap: int | None = None,
    max_regions: int | None = None,
    progress=None,
    certify: bool = False,
    linear: bool = True,
    tiles=None,
    client=None,
    shards=None,
) -> dict:
    """Count the regions of ``net`` on ``domain`` with ``method`` and return a JSON-ready dict.

    ``method="sample"``: distinct codes on a grid or random points (a lower bound; adds ``samples``, ``f1``,
    ``f2``, ``chao1``, ``coverage``, ``unseen_mass``). ``method="line"``: exact pieces along a
    :class:`Segment`. ``method="exact"``: the exact plane partition for a 2D box or :class:`Slice`, the
    exact space partition for a box of dimension >= 3 or an :class:`AffineSlice` (adds ``dimension`` and
    ``exact_decisions``, the vertex signs decided in rational arithmetic), or the line engine on a 1D box /
    segment; ``max_regions`` caps an exact partition below what ``memory_cap`` allows. Always present:
    ``regions``, ``linear_regions`` (None where not computed), ``method``, ``exact``, ``seconds``, ``kind``.
    An exact 2D count adds ``predicates`` (vertex sign tests), ``exact_predicates`` (those decided in exact
    rational arithmetic), ``assumed_identities`` (attention ties or straight boundaries taken from equal
    floats; ``exact`` is false unless 0) and ``smallest_area``; with ``certify=True`` also ``certificate``
    (see :func:`regioncount.results.certify`), and a failed check raises :class:`CertificateError`.
    ``linear=False`` skips linear regions (``linear_regions`` is then None): on an exact 2D partition they cost
    about as much as the partition.

    ``tiles`` (exact 2D only): N or ``(rows, cols)``; the domain is split into that many rectangles, each
    partitioned on its own (the memory cap then bounds one tile), and the cells continuing across borders
    merged: the same counts, plus ``tiles`` and ``pieces``. ``client``: a ``dask.distributed.Client`` that
    runs the tiles, or the chunks of a sampled count, as tasks on its cluster. ``shards`` (with ``tiles``): a
    folder that receives each tile's partition as an ``.npz`` shard, written whole or not at all.
    """
    if certify and method != Method.EXACT:
        raise RegionCountError("certify applies to exact 2D counts (method 'exact')")
    if method not in METHODS:
        raise RegionCountError(f"unknown method {method!r}: use one of {', '.join(METHODS)}")
    method = Method(method)
    kind = region_kind(net)
    check_magnitudes(net, domain)  # helper 25: every engine, sampled too; refused past float64's safe range
    if tiles is not None and not (method == Method.EXACT and (isinstance(domain, Slice) or domain.dim == 2)):
        raise RegionCountError(
            "tiles split a 2D domain for an exact count: use them with --method exact on a 2D box or slice"
        )
    if shards is not None and tiles is None:
        raise RegionCountError("disk shards hold the partitions of tiles: give tiles as well")
    t0 = time.perf_counter()
    if method == Method.SAMPLE:
        from .engines._sample import count_sampled

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
        out.update(method=Method.SAMPLE, exact=False, linear_regions=None, kind=kind)
    else:
        if isinstance(domain, Box) and domain.dim == 1:
            domain = Segment(domain.lo, domain.hi)
        if isinstance(domain, AffineSlice) and domain.dim <= 2:
            domain = _lower_slice(domain)
        if method == Method.LINE and isinstance(domain, Box):
            domain = default_segment(domain)
        if certify and (isinstance(domain, Segment) or not (isinstance(domain, Slice) or domain.dim == 2)):
            # helper 25: the certificate checks 2D polygons; a segment or a polytope partition is refused, not skipped
            raise RegionCountError(
                "--certify checks an exact 2D partition (a 2D box or slice); this domain is "
                f"{'a segment' if isinstance(domain, Segment) else f'{domain.dim}-dimensional'}: drop --certify"
            )
        if isinstance(domain, Segment):
            from .engines._line import walk_line

            pieces = walk_line(net, domain)
            out = {
                "regions": int(pieces.activation_pieces),
                "linear_regions": int(pieces.linear_pieces) if linear else None,
                "ties": int(pieces.ties),
                "segment": {"a": domain.a.tolist(), "b": domain.b.tolist()},
                # ReLU/Maxout: every predicate exact (float bound, else rationals); attention: tolerances
                "exact": bool(pieces.exact),
                "predicates": int(pieces.predicates),
                "exact_predicates": int(pieces.exact_predicates),
            }
        elif method == Method.EXACT and (isinstance(domain, Slice) or domain.dim == 2):
            from .engines._plane import partition_plane

            cap = memory_cap or DEFAULT_MEMORY_CAP
            limit = _region_limit(cap, PLANE_BYTES_PER_REGION, max_regions)
            if tiles is not None:
                from .engines._tiles import count_tiled

                try:
                    out = count_tiled(
                        net,
                        domain,
                        tiles,
                        client=client,
                        max_regions=limit,
                        shards=shards,
                        progress=progress,
                        certify=certify,
                    ).as_dict()
                except ResidentMemoryError:
                    raise
                except MemoryCapError:
                    raise MemoryCapError(
                        f"the partition of a tile passed {limit:,} regions, about what fits in the "
                        f"{cap / 2**30:.2f} GiB memory cap: raise --memory-cap, use more --tiles, shrink the domain, "
                        "or use --method sample"
                    ) from None
                out.setdefault("exact", True)
                if certify and not out["certificate"]["passed"]:  # helper 25: tiles are certified too
                    failed = [
                        f"{k} ({v['detail']})" for k, v in out["certificate"]["checks"].items() if not v["passed"]
                    ]
                    raise CertificateError("the certificate failed: " + "; ".join(failed))
            part = None
            try:
                if tiles is None:
                    part = partition_plane(net, domain, progress=progress, max_regions=limit)
            except ResidentMemoryError:
                raise
            except MemoryCapError:
                raise _cap_error(cap, limit, max_regions) from None
            except CurvedBoundaryError:
                part = None
            if tiles is not None:
                pass  # tiled: the merged counts are in out
            elif part is None:
                # curved boundaries (hardmax past its first block, ReLU attention): the curved engine
                if certify:
                    raise RegionCountError(
                        "--certify checks straight 2D partitions; curved cells are not certified yet"
                    )
                out = _count_curved(net, domain, cap, progress, max_regions)
            else:
                st = part.stats
                out = {
                    "regions": int(part.n_regions),
                    "linear_regions": int(part.linear_regions()) if linear else None,
                    "predicates": st["predicates"],
                    "exact_predicates": st["exact_predicates"],
                    "assumed_identities": st["assumed"],
                    "smallest_area": st["min_area"],
                }
                if certify:
                    from .results._certify import certify as run_certify

                    cert = run_certify(part, net)
                    out["certificate"] = cert
                    if not cert["passed"]:
                        failed = [f"{k} ({v['detail']})" for k, v in cert["checks"].items() if v["passed"] is False]
                        raise CertificateError("the certificate failed: " + "; ".join(failed))
                out.update(method=method, exact=st["assumed"] == 0, kind=kind)
        elif method == Method.EXACT and (isinstance(domain, AffineSlice) or domain.dim >= 3):
            from .engines._space import partition_space

            if domain.dim > MAX_SPACE_DIM:
                raise RegionCountError(
                    f"an exact partition of a {domain.dim}-dimensional domain is out of reach (at most "
                    f"{MAX_SPACE_DIM} dimensions): give a 2D or 3D slice (--origin with --dir1/--dir2 or repeated "
                    "--dir) or use --method sample"
                )

            cap = memory_cap or DEFAULT_MEMORY_CAP
            limit = _region_limit(cap, SPACE_BYTES_PER_REGION, max_regions)
            try:
                poly = partition_space(net, domain, progress=progress, max_regions=limit)
            except MemoryCapError:
                raise _cap_error(cap, limit, max_regions) from None
            out = {
                "regions": int(poly.n_regions),
                "linear_regions": int(poly.linear_regions()),
                "dimension": poly.k,
                "exact_decisions": poly.exact_decisions,
            }
        else:
            raise RegionCountError(
                f"exact counting of a {type(domain).__name__} of dimension {domain.dim} is not supported: give a box, "
                "a slice (--origin with --dir1/--dir2 or repeated --dir), a segment, or use --method sample"
            )
        out.setdefault("exact", True)
        out.update(method=method, kind=kind)
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
