"""One entry point over the engines: :func:`count_record` chooses the engine from the method, the domain and the
op support table (``engines/_protocol.py`` ``SUPPORT``) before any work, runs it, and returns one
:class:`~regioncount.results.CountRecord`; :func:`count_regions` returns its JSON-ready dict (DESIGN §6)."""

from __future__ import annotations

import functools
import inspect
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, ParamSpec

import numpy as np

from ._config import DEFAULT_MEMORY_CAP
from ._domain import AffineSlice, Box, Domain, Segment, Slice
from ._enums import METHODS as METHODS, Kind, Method
from ._errors import CertificateError, CurvedBoundaryError, MemoryCapError, RegionCountError, ResidentMemoryError
from ._magnitude import check_magnitudes
from .engines._protocol import first_refusal
from .networks import is_piecewise_linear, lower, walk_widths

if TYPE_CHECKING:
    from .results._protocol import CountRecord

_P = ParamSpec("_P")

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
    if any(op.smooth for op, _, _ in walk_widths(program)):
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


def _passed(cert: dict) -> dict:
    """``cert`` (a certificate's record) when every check passed; else :class:`CertificateError` naming the
    checks that failed."""
    if not cert["passed"]:
        failed = [f"{k} ({v['detail']})" for k, v in cert["checks"].items() if v["passed"] is False]
        raise CertificateError("the certificate failed: " + "; ".join(failed))
    return cert


def _run_curved(net, domain, cap: int, progress, max_regions: int | None, certify: bool = False):
    """The curved engine's cells; ``max_regions`` caps the trapezoids (every cell is one or more of them, so the
    cap is conservative). ``exact`` is True where the certified engine decided the partition (python-flint;
    small partitions by default, every partition with ``certify``)."""
    from .engines._curved import partition_curved

    max_traps = max(1, cap // CURVED_BYTES_PER_TRAP)
    if max_regions is not None:
        max_traps = min(max_traps, max_regions)
    try:
        if certify:
            try:
                return partition_curved(net, domain, max_traps=max_traps, certified=True)
            except ImportError as e:
                raise RegionCountError(f"--certify on curved cells: {e}") from None
        return partition_curved(net, domain, progress=progress, max_traps=max_traps)
    except MemoryCapError:
        raise MemoryCapError(
            f"the curved partition passed {max_traps:,} trapezoids, about what fits in the "
            f"{cap / 2**30:.2f} GiB memory cap: raise --memory-cap, shrink the domain, or use --method sample"
        ) from None


#: The engines :func:`choose_engine` names.
ENGINES = ("sample", "line", "plane", "tiles", "curved", "space")


def choose_engine(net, domain, method: Method | str = Method.EXACT, *, tiles=None) -> tuple[str, Domain]:
    """The engine that counts ``net`` on ``domain`` with ``method``, and the domain it runs on, decided before any
    work from the method, the domain's dimension and the support table (``engines/_protocol.py``).

    ``"sample"`` for ``method="sample"``; ``"line"`` for a segment, a 1D box or slice, or ``method="line"`` (a
    box's diagonal); for ``method="exact"`` in 2D ``"plane"`` (``"tiles"`` with ``tiles``), or ``"curved"`` where
    the plane engine's row refuses an op as curved (ReLU attention) and the curved engine's row supports every
    op, or where a hardmax attention boundary may be a conic on the domain (decided exactly from the weights and
    the domain's directions, :func:`~regioncount.networks._spans.hardmax_straight`: the plane engine runs only
    where every such boundary is proven a line, so it never meets a conic mid-run; ``"tiles"`` keep the plane
    engine per tile, which then refuses a conic); ``"space"`` for dimension 3 to :data:`MAX_SPACE_DIM`. An op
    that no applicable engine runs raises that engine's refusal here.
    """
    method = Method(method)
    if method == Method.SAMPLE:
        return "sample", domain
    if isinstance(domain, Box) and domain.dim == 1:
        domain = Segment(domain.lo, domain.hi)
    if isinstance(domain, AffineSlice) and domain.dim <= 2:
        domain = _lower_slice(domain)
    if method == Method.LINE and isinstance(domain, Box):
        domain = default_segment(domain)
    ops = [op for op, _, _ in walk_widths(lower(net))]
    if isinstance(domain, Segment):
        engine = "line"
    elif method == Method.EXACT and (isinstance(domain, Slice) or domain.dim == 2):
        refusal = first_refusal("plane", ops)
        if refusal is not None and refusal.error is CurvedBoundaryError and first_refusal("curved", ops) is None:
            if tiles is not None:
                raise RegionCountError(
                    "tiles split straight 2D partitions, and this network's cells are curved: drop --tiles"
                )
            return "curved", domain
        engine = "plane" if tiles is None else "tiles"
        if refusal is not None:
            refusal.raise_()
        if tiles is None and first_refusal("curved", ops) is None and not _straight(lower(net), domain):
            return "curved", domain
        return engine, domain
    elif method == Method.EXACT and (isinstance(domain, AffineSlice) or domain.dim >= 3):
        if domain.dim > MAX_SPACE_DIM:
            raise RegionCountError(
                f"an exact partition of a {domain.dim}-dimensional domain is out of reach (at most "
                f"{MAX_SPACE_DIM} dimensions): give a 2D or 3D slice (--origin with --dir1/--dir2 or repeated "
                "--dir) or use --method sample"
            )
        engine = "space"
    else:
        raise RegionCountError(
            f"exact counting of a {type(domain).__name__} of dimension {domain.dim} is not supported: give a box, "
            "a slice (--origin with --dir1/--dir2 or repeated --dir), a segment, or use --method sample"
        )
    refusal = first_refusal(engine, ops)
    if refusal is not None:
        refusal.raise_()
    return engine, domain


def _straight(program, domain) -> bool:
    """Every hardmax attention boundary of ``program`` is a line on the 2D ``domain`` (exact check, see
    :func:`~regioncount.networks._spans.hardmax_straight`); True at once without hardmax attention."""
    from .networks._spans import hardmax_straight

    if not any(op.key == "attention/hardmax" for op, _, _ in walk_widths(program)):
        return True
    _, V = domain.input_map()
    return hardmax_straight(program, V)


def count_record(
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
) -> CountRecord:
    """As :func:`count_regions`, as a :class:`~regioncount.results.CountRecord` that also holds the result
    object counted (``record.result``: a :class:`Partition`, :class:`Polytopes`, :class:`Cells`,
    :class:`LinePieces` or :class:`SampleCount`; None for a tiled count)."""
    if certify and method != Method.EXACT:
        raise RegionCountError("certify applies to exact 2D counts (method 'exact')")
    if method not in METHODS:
        raise RegionCountError(f"unknown method {method!r}: use one of {', '.join(METHODS)}")
    method = Method(method)
    kind = region_kind(net)
    check_magnitudes(net, domain)  # every engine, sampled too: refused past float64's safe range
    if tiles is not None and not (method == Method.EXACT and (isinstance(domain, Slice) or domain.dim == 2)):
        raise RegionCountError(
            "tiles split a 2D domain for an exact count: use them with --method exact on a 2D box or slice"
        )
    if shards is not None and tiles is None:
        raise RegionCountError("disk shards hold the partitions of tiles: give tiles as well")
    from .results._protocol import CountRecord  # here, not at import: the results load with the engines

    engine, dom = choose_engine(net, domain, method, tiles=tiles)
    auto = None
    if engine == "plane" and tiles is None and client is None and max_regions is None:
        from .engines._tiles import auto_tiles

        auto = auto_tiles(net, dom)  # a large count: tiles, on every core (None: one partition)
        if auto is not None:
            engine, tiles = "tiles", auto
    if certify and engine == "line":
        raise RegionCountError(
            "--certify checks an exact partition of a 2D or higher-dimensional domain; this domain is a segment: "
            "drop --certify"
        )
    cap = memory_cap or DEFAULT_MEMORY_CAP
    t0 = time.perf_counter()

    def record(result, regions, linear_regions, exact, details) -> CountRecord:
        return CountRecord(
            regions=int(regions),
            linear_regions=linear_regions,
            exact=bool(exact),
            method=method,
            kind=kind,
            domain=domain,
            seconds=time.perf_counter() - t0,
            details=details,
            result=result,
        )

    if engine == "sample":
        from .engines._sample import count_sampled

        if grid is None and samples is None:
            grid = 1000 if domain.dim <= 2 else None
            samples = None if grid else 1_000_000
        res = count_sampled(
            net, domain, grid=grid, samples=samples, seed=seed, memory_cap=cap, progress=progress, client=client
        )
        details = res.as_dict()
        for key in ("regions", "exact", "seconds"):
            details.pop(key)
        return record(res, res.regions, None, False, details)
    if engine == "line":
        from .engines._line import walk_line

        assert isinstance(dom, Segment)  # choose_engine lowered the domain
        pieces = walk_line(net, dom)
        details = {
            "ties": int(pieces.ties),
            "segment": {"a": dom.a.tolist(), "b": dom.b.tolist()},
            # ReLU/Maxout: every predicate exact (float bound, else rationals); attention: tolerances
            "predicates": int(pieces.predicates),
            "exact_predicates": int(pieces.exact_predicates),
        }
        lin = int(pieces.linear_regions()) if linear else None
        return record(pieces, pieces.regions, lin, pieces.exact, details)
    if engine == "space":
        from .engines._space import partition_space

        limit = _region_limit(cap, SPACE_BYTES_PER_REGION, max_regions)
        try:
            poly = partition_space(net, dom, progress=progress, max_regions=limit)
        except MemoryCapError:
            raise _cap_error(cap, limit, max_regions) from None
        lin = int(poly.linear_regions()) if linear else None
        details = {"dimension": poly.k, "exact_decisions": poly.exact_decisions}
        if certify:
            from .engines._certify import certify as run_certify

            details["certificate"] = _passed(run_certify(poly, net))
        return record(poly, poly.regions, lin, True, details)
    limit = _region_limit(cap, PLANE_BYTES_PER_REGION, max_regions)
    if engine == "tiles":
        from .engines._fork import default_workers
        from .engines._tiles import count_tiled

        try:
            # tiles chosen for a large count start on every worker at once (no first tile here to gauge the pace)
            workers = None if auto is None else default_workers()
            tiled = count_tiled(
                net,
                dom,
                tiles,
                client=client,
                max_regions=limit,
                shards=shards,
                progress=progress,
                certify=certify,
                workers=workers,
            )
        except ResidentMemoryError:
            raise
        except MemoryCapError:
            raise MemoryCapError(
                f"the partition of a tile passed {limit:,} regions, about what fits in the "
                f"{cap / 2**30:.2f} GiB memory cap: raise --memory-cap, use more --tiles, shrink the domain, "
                "or use --method sample"
            ) from None
        d = tiled.as_dict()
        if auto is not None:
            d["tiles_chosen"] = "auto"
        if certify:  # each tile certified, and the merge across borders checked again
            _passed(d["certificate"])
        lin = d.pop("linear_regions")
        lin = lin if linear else None
        return record(None, d.pop("regions"), lin, d.pop("exact", True), d)
    if engine == "plane":
        from .engines._plane import partition_plane

        try:
            part = partition_plane(net, dom, progress=progress, max_regions=limit)
        except ResidentMemoryError:
            raise
        except MemoryCapError:
            raise _cap_error(cap, limit, max_regions) from None
        st = part.stats
        details = {
            "predicates": st["predicates"],
            "exact_predicates": st["exact_predicates"],
            "assumed_identities": st["assumed"],
            "smallest_area": st["min_area"],
        }
        lin = int(part.linear_regions()) if linear else None
        # REGIONCOUNT_CERTIFY_ALL=1, a debugging aid: every exact 2D count certifies its partition
        if certify or os.environ.get("REGIONCOUNT_CERTIFY_ALL"):
            from .engines._certify import certify as run_certify

            details["certificate"] = _passed(run_certify(part, net))
        return record(part, part.regions, lin, part.exact, details)
    cells = _run_curved(net, dom, cap, progress, max_regions, certify)
    details = {
        "codes": cells.n_codes,
        "trapezoids": cells.n_traps,
        "order_violations": cells.order_violations,
        "area_error": cells.area_error,
        "ties": cells.ties,
        "largest_degree": cells.degree,
        "polynomial_pieces": cells.polynomial_pieces(),
        "cells": cells.summary()["cells"],
        "predicates": "exact (algebraic)" if cells.certified else "float64 with thresholds",
        "engine": "curved",
    }
    if certify:
        from .engines._curved_certify import certify_cells

        details["certificate"] = _passed(certify_cells(cells, net))
    lin = cells.linear_regions() if linear else None
    return record(cells, cells.regions, lin, cells.exact, details)


def _as_dict(count: Callable[_P, CountRecord], name: str, doc: str) -> Callable[_P, dict]:
    """``count`` with its signature (one parameter list for both entry points), returning the record's
    ``as_dict()``; named ``name`` with docstring ``doc``, and arguments that do not fit refused in its name."""
    signature = inspect.signature(count)

    @functools.wraps(count)
    def as_dict(*args: _P.args, **kwargs: _P.kwargs) -> dict:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{name}(): {e}") from None
        return count(*args, **kwargs).as_dict()

    as_dict.__name__ = as_dict.__qualname__ = name
    as_dict.__doc__ = doc
    as_dict.__signature__ = signature.replace(return_annotation=dict)  # type: ignore[attr-defined]
    return as_dict


_COUNT_REGIONS_DOC = """Count the regions of ``net`` on ``domain`` with ``method`` and return a JSON-ready dict: the
    :meth:`~regioncount.results.CountRecord.as_dict` of :func:`count_record`, which takes the same arguments.

    ``method="sample"``: distinct codes on a grid or random points (a lower bound; adds ``samples``, ``f1``,
    ``f2``, ``chao1``, ``coverage``, ``unseen_mass``). ``method="line"``: exact pieces along a
    :class:`Segment`. ``method="exact"``: the exact plane partition for a 2D box or :class:`Slice`, the
    exact space partition for a box of dimension >= 3 or an :class:`AffineSlice` (adds ``dimension`` and
    ``exact_decisions``, the vertex signs decided in rational arithmetic), or the line engine on a 1D box /
    segment; ``max_regions`` caps an exact partition below what ``memory_cap`` allows. Always present:
    ``regions``, ``linear_regions`` (None where not computed), ``method``, ``exact``, ``seconds``, ``kind``,
    ``domain`` (the domain given, as its ``as_dict()``).
    An exact 2D count adds ``predicates`` (vertex sign tests), ``exact_predicates`` (those decided in exact
    rational arithmetic), ``assumed_identities`` (attention ties or straight boundaries taken from equal
    floats; ``exact`` is false unless 0) and ``smallest_area``; with ``certify=True`` also ``certificate``
    (see :func:`regioncount.certify`), and a failed check raises :class:`CertificateError`.
    ``linear=False`` skips linear regions (``linear_regions`` is then None): on an exact 2D partition they cost
    about as much as the partition.

    ``tiles`` (exact 2D only): N or ``(rows, cols)``; the domain is split into that many rectangles, each
    partitioned on its own (the memory cap then bounds one tile), and the cells continuing across borders
    merged: the same counts, plus ``tiles``, ``pieces`` and ``linear_exact``. None (the default) splits a large
    count by itself: where the first layer's lines alone cut the domain into ``2**17`` regions or more (a ReLU
    network, estimated in floats before any work; :func:`regioncount.engines.auto_tiles`), into ``k x k`` tiles
    run on every core (``tiles_chosen`` is then ``"auto"`` and the record holds no partition), unless
    ``max_regions`` or ``client`` is given; ``tiles=1`` always keeps one partition. ``client``: a ``dask.distributed.Client`` that
    runs the tiles, or the chunks of a sampled count, as tasks on its cluster. ``shards`` (with ``tiles``): a
    folder that receives each tile's partition as an ``.npz`` shard, written whole or not at all.

    Examples
    --------
    Eight ReLU units of one hidden layer cut the square along eight lines; a sampled count is a lower bound:

    >>> import regioncount as rc
    >>> net = rc.random_mlp(2, (8,), seed=0)
    >>> res = rc.count_regions(net, rc.Box(-2, 2, 2))
    >>> res["regions"] <= 1 + 8 + 8 * 7 // 2, res["exact"], res["method"]
    (True, True, 'exact')
    >>> res["regions"] == rc.partition_plane(net, rc.Box(-2, 2, 2)).n_regions
    True
    >>> low = rc.count_regions(net, rc.Box(-2, 2, 2), method="sample", grid=200)
    >>> low["regions"] <= res["regions"], low["exact"]
    (True, False)
    """

#: Count the regions of ``net`` on ``domain``: :func:`count_record`'s arguments, its record as a JSON-ready dict.
count_regions = _as_dict(count_record, "count_regions", _COUNT_REGIONS_DOC)


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
