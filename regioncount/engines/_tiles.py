"""Exact 2D counts by tiles (DESIGN §9): split the domain into rectangles, partition each independently,
merge the cells that continue across tile borders.

A tile's partition (the ``plane`` engine on the tile as its own domain) cuts every region that crosses
a tile border into pieces, one per tile it meets. The plane engine's regions are convex (it refuses curved
boundaries), so the pieces that carry one activation code, in whatever tiles, are one cell: the merge is
decided by the codes alone, exactly, with no length or distance threshold (see :func:`_same_code_edges`).
Linear regions (Montúfar et al. 2014) are the components of the region graph over edges whose affine maps
agree (the rule of :meth:`Partition.linear_region_labels`, with maps normalised on the whole domain):
inside a tile the tile's own adjacency gives those edges, across a border the pieces of one code and the
pieces of different codes that share a border segment (a boundary that runs along the border).
``certify=True`` certifies each tile's partition and recomputes the cells by a second, geometric route
(:func:`certify_merge`).

Each tile is reduced where it is computed to a :class:`TileSummary`: its piece and linear-component
counts and the pieces on its inner sides (interval on the border, code bytes, normalised map). Only
summaries travel, so tiles can run one after the other in this process or as Dask tasks (see
``_distributed``), and memory holds one tile's partition per worker, not the whole partition.

Borders may pass through vertices and run along region boundaries: a unit whose line is a tile
border does not cut either tile (its values vanish on that side), and its two sides show up as
different codes across the border, which are not merged as cells but are merged as linear regions
when the maps agree.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import time
from collections.abc import Callable, Iterable

import numpy as np

from .._domain import Box, Slice
from .._errors import DomainError, WriteError
from ..results._graph import dense_ranks
from ..results._partition import Partition, _components, maps_agree, normalised_maps
from ._plane import partition_plane

#: Edge tags of a plane partition's domain sides, counter-clockwise from the bottom: u2 = lo, u1 = hi,
#: u2 = hi, u1 = lo (``partition_plane`` tags its starting square so).
BOTTOM, RIGHT, TOP, LEFT = 0, 1, 2, 3
#: The border coordinate that runs along each side: u1 along the bottom and top, u2 along the others.
_ALONG = {BOTTOM: 0, RIGHT: 1, TOP: 0, LEFT: 1}


def tile_grid(tiles) -> tuple[int, int]:
    """``(rows, cols)`` for ``tiles``: an int ``N`` (a square ``k x k`` when ``N = k^2``, else the most
    nearly square ``rows x cols = N`` with ``rows <= cols``) or a pair ``(rows, cols)``."""
    if isinstance(tiles, (tuple, list)):
        if len(tiles) != 2:
            raise DomainError(f"tiles must be N or (rows, cols), got {tiles!r}")
        rows, cols = (int(t) for t in tiles)
    else:
        n = int(tiles)
        if n < 1:
            raise DomainError(f"the number of tiles must be at least 1, got {n}")
        rows = max(r for r in range(1, math.isqrt(n) + 1) if n % r == 0)
        cols = n // rows
    if rows < 1 or cols < 1:
        raise DomainError(f"tiles must be at least 1 x 1, got {rows} x {cols}")
    return rows, cols


#: An exact 2D count with no tiles given is split into tiles (:func:`auto_tiles`) where the first layer's lines
#: alone cut the domain into at least this many regions (below it one partition is as fast; measured in
#: benchmarks/README.md).
AUTO_TILES_MIN = 1 << 17

#: Line pairs :func:`first_layer_regions` tests at most (a seeded sample of them beyond it, scaled up). 2^18 pairs
#: take about 15 ms, spent before any tile starts, and put the estimate within a few tenths of a percent of the
#: exact count on the 2->1800 and 2->5700 nets (2^21, the whole of the first, took 60-180 ms).
_PAIRS_MAX = 1 << 18


def _first_lines(net, domain) -> tuple[np.ndarray, np.ndarray] | None:
    """The lines of ``net``'s first layer on the 2D ``domain`` in floats, as ``a u' + a0`` on the square ``u'`` in
    ``[-1, 1]^2`` (``a (n, 2)``, ``a0 (n,)``): those that cross it. None where the lowered network does not start
    with an affine map and ReLU on one token, or the domain does not fit it. For estimates only."""
    from ..networks import lower

    program = lower(net)
    ops = program.ops
    if program.tokens != 1 or len(ops) < 2 or ops[0].key != "affine" or ops[1].key != "relu":
        return None
    x0, V = domain.input_map()
    W, b = np.asarray(ops[0].W, float), np.asarray(ops[0].b, float)
    if W.shape[1] != np.shape(V)[0] or np.shape(V)[1] != 2:
        return None  # the domain does not fit the network: the engine says so
    lo, hi = np.asarray(domain.param_lo, float), np.asarray(domain.param_hi, float)
    c, h = (lo + hi) / 2, (hi - lo) / 2
    WV = W @ np.asarray(V, float)
    a = WV * h
    a0 = W @ np.asarray(x0, float) + b + WV @ c
    crosses = np.abs(a0) < np.abs(a).sum(axis=1)
    return a[crosses], a0[crosses]


def first_layer_regions(net, domain) -> int | None:
    """About how many regions the lines of ``net``'s first layer alone cut the 2D ``domain`` into, in floats:
    ``1 + L + X`` for ``L`` lines that cross the domain and ``X`` crossings inside it (Zaslavsky 1975; lines in
    general position), with ``X`` from a seeded sample of the pairs where there are more than
    :data:`_PAIRS_MAX`. An estimate that only chooses how the work is split (:func:`auto_tiles`), never a count.
    None where the lowered network does not start with an affine map and ReLU on one token."""
    lines = _first_lines(net, domain)
    if lines is None:
        return None
    a, a0 = lines
    L = a0.size
    n_pairs = L * (L - 1) // 2
    if n_pairs == 0:
        return 1 + L
    if n_pairs <= _PAIRS_MAX:
        i, j = np.triu_indices(L, 1)
    else:
        rng = np.random.default_rng(0)
        i, j = rng.integers(0, L, _PAIRS_MAX), rng.integers(0, L, _PAIRS_MAX)
        ok = i != j
        i, j = i[ok], j[ok]
    inside = 0
    for s in range(0, i.size, 1 << 20):
        p, q = i[s : s + (1 << 20)], j[s : s + (1 << 20)]
        det = a[p, 0] * a[q, 1] - a[p, 1] * a[q, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            x = (a[p, 1] * a0[q] - a[q, 1] * a0[p]) / det
            y = (a[q, 0] * a0[p] - a[p, 0] * a0[q]) / det
        inside += int(np.count_nonzero((np.abs(x) < 1) & (np.abs(y) < 1)))
    return 1 + L + int(round(inside * n_pairs / max(1, i.size)))


def auto_tiles(net, domain) -> int | None:
    """The tiles an exact 2D count takes by default: ``k * k`` with ``k = max(2, ceil(sqrt(n) / 256))`` where
    :func:`first_layer_regions` estimates ``n >= AUTO_TILES_MIN`` regions (tiles of some 2^16 regions or fewer:
    each tile's first layer has fewer lines, so the whole takes less time and memory, on every core); None (one
    partition) below that or where there is no estimate."""
    n = first_layer_regions(net, domain)
    if n is None or n < AUTO_TILES_MIN:
        return None
    k = max(2, math.ceil(math.sqrt(n) / 256))
    return k * k


def split_domain(domain, tiles) -> list[tuple[tuple[int, int], Box | Slice]]:
    """The tiles of a 2D :class:`Box` or :class:`Slice`: ``[((row, col), tile_domain), ...]``, row ``r``
    covering the ``r``-th band of ``u2`` and column ``c`` of ``u1``. Neighbouring tiles share their cut
    coordinates bitwise, and the outer tiles reach the domain's bounds exactly."""
    if not isinstance(domain, (Box, Slice)) or domain.dim != 2:
        raise DomainError("tiles need a 2D domain: a 2D box or a slice")
    rows, cols = tile_grid(tiles)
    lo, hi = np.asarray(domain.param_lo, float), np.asarray(domain.param_hi, float)
    xs = _cuts(lo[0], hi[0], cols)
    ys = _cuts(lo[1], hi[1], rows)
    out: list[tuple[tuple[int, int], Box | Slice]] = []
    for r in range(rows):
        for c in range(cols):
            tlo, thi = (xs[c], ys[r]), (xs[c + 1], ys[r + 1])
            tile: Box | Slice
            if isinstance(domain, Box):
                tile = Box(tlo, thi)
            else:
                tile = Slice(domain.x0, domain.v1, domain.v2, tlo, thi)
            out.append(((r, c), tile))
    return out


def _cuts(a: float, b: float, n: int) -> np.ndarray:
    x = a + (b - a) * (np.arange(n + 1) / n)
    x[0], x[-1] = a, b
    if np.any(np.diff(x) <= 0):
        raise DomainError(f"{n} tiles across [{a}, {b}] would be empty")
    return x


@dataclasses.dataclass
class TileSummary:
    """What the merge needs from one tile.

    ``pieces``: regions of the tile's partition; ``linear``: labels ``(pieces,)`` of the tile's own
    linear-region components (0..n_linear-1). ``sides[s]`` for each inner side ``s`` (BOTTOM..LEFT):
    ``(piece (E,), lo (E,), hi (E,))``, the edges on that side as intervals of the border coordinate.
    ``codes (B, nbytes)`` and ``maps (B, out, 3)`` (normalised on the whole domain) of the pieces
    ``border (B,)`` that touch an inner side. ``partition``: the tile's Partition when kept."""

    index: tuple[int, int]
    pieces: int
    n_linear: int
    linear: np.ndarray
    sides: dict
    border: np.ndarray
    codes: np.ndarray
    maps: np.ndarray
    seconds: float
    partition: Partition | None = None
    certificate: dict | None = None
    #: how ``codes`` splits into the partition's code blocks: ``(kind, width, dtype, columns)`` each (so the
    #: merge can expand a border piece's code for the exact comparison of its output map); None: unknown
    layout: tuple | None = None
    #: whether ``linear`` was decided in exact arithmetic (the partition's program), not by a tolerance
    linear_exact: bool = False
    #: the border pieces' float output maps ``(B, 3, out)`` in the domain's own coordinates ``u`` (the same
    #: in every tile) and a rigorous bound ``(B, out)`` on every coefficient's distance from the exact map
    #: (:func:`_maps_in_u`); None where the partition has no engine maps
    fmaps: np.ndarray | None = None
    ferr: np.ndarray | None = None
    #: the tile partition's sign tests, those decided in rationals, and attention identities assumed from
    #: equal floats (``Partition.stats``); None where unknown (a shard read back)
    tests: tuple | None = None


def _maps_in_u(part: Partition, rows: np.ndarray):
    """The engine's float output maps of regions ``rows``, rewritten from the tile's normalised coordinates
    ``u = c + h u'`` (``c``, ``h``: the exact midpoint and half-width of the tile) into ``u`` itself, with a
    rigorous bound on each coefficient's error: the engine's bound carried through ``a_k = a'_k / h_k`` and
    ``a_0 = a'_0 - sum_k a'_k c_k / h_k``, plus every rounding of that rewriting (``c`` and ``h`` are computed
    in floats within one rounding each; ``gamma(8)`` covers the few roundings of each term). Exact maps are
    equal in ``u`` iff in ``u'``, so these compare pieces of different tiles. ``(None, None)`` without engine
    maps."""
    if part._engine_maps is None:
        return None, None
    from .._predicates import EPS, TINY, gamma

    F, eb = part._engine_maps
    F = F[rows]  # (B, 3, out)
    eb = np.broadcast_to(eb, (part.n_regions, F.shape[2]))[rows]  # (B, out)
    lo, hi = np.asarray(part.domain.param_lo, float), np.asarray(part.domain.param_hi, float)
    c, h = (lo + hi) / 2, (hi - lo) / 2
    G = np.empty_like(F)
    G[:, 0] = F[:, 0] / h[0]
    G[:, 1] = F[:, 1] / h[1]
    t0, t1 = G[:, 0] * c[0], G[:, 1] * c[1]
    G[:, 2] = F[:, 2] - t0 - t1
    r = gamma(8)
    s = abs(c[0] / h[0]) + abs(c[1] / h[1])
    slope = eb * (1 / min(abs(h[0]), abs(h[1]))) * (1 + r) + r * np.maximum(np.abs(G[:, 0]), np.abs(G[:, 1]))
    const = eb * (1 + s) * (1 + r) + r * (np.abs(F[:, 2]) + np.abs(t0) + np.abs(t1) + np.abs(G[:, 2]))
    err = (np.maximum(slope, const) + TINY) * (1 + 4 * EPS)
    return G, err


def _code_layout(part: Partition) -> tuple:
    return tuple((kind, int(w), a.dtype.str, int(np.prod(a.shape[1:], dtype=np.int64))) for kind, w, a in part._blocks)


def _code_rows(layout: tuple, codes: np.ndarray) -> np.ndarray:
    """Flat int32 codes ``(n, C)`` from the byte rows ``codes (n, nbytes)`` of :meth:`Partition.code_bytes`."""
    from ..results._partition import block_code_rows

    blocks, at = [], 0
    for kind, w, dt, cols in layout:
        nb = np.dtype(dt).itemsize * cols
        a = np.ascontiguousarray(codes[:, at : at + nb]).view(np.dtype(dt)).reshape(codes.shape[0], cols)
        blocks.append((kind, w, a))
        at += nb
    return block_code_rows(blocks, slice(None), codes.shape[0])


def summarise_tile(
    net, domain, index, tile, grid, *, max_regions=None, keep=False, rtol=None, shards=None, certify=False
) -> TileSummary:
    """Partition ``tile`` (one of ``split_domain(domain, grid)``'s, at ``index = (row, col)``) and reduce it
    to a :class:`TileSummary`. Runs anywhere (a Dask task): it needs only its arguments. With ``shards`` (a
    folder the task can write to) the tile's partition is also written there, see :func:`write_shard`. With
    ``certify`` the tile's partition is checked by :func:`regioncount.results.certify` (on the tile as its
    own domain) and the result kept in ``certificate``."""
    t0 = time.perf_counter()
    part = partition_plane(net, tile, max_regions=max_regions)
    if shards is not None:
        path = os.path.join(os.fspath(shards), shard_name(index))
        try:
            write_shard(path, part)
        except OSError as e:
            raise WriteError(f"cannot write the shard {path}: {e.strerror or e}") from None
    out = _summarise(part, domain, index, grid, rtol)
    if certify:
        from ._certify import certify as run_certify

        out.certificate = run_certify(part, net)
    out.seconds = time.perf_counter() - t0
    out.partition = part if keep else None
    return out


def _summarise(part: Partition, domain, index, grid, rtol: float | None) -> TileSummary:
    """A tile's partition reduced to what the merge needs (see :class:`TileSummary`)."""
    rows, cols = grid
    R = part.n_regions
    lo, hi = np.asarray(domain.param_lo, float), np.asarray(domain.param_hi, float)
    exact = rtol is None and part.program is not None
    if exact:  # the tile's own exact merge (exact maps are equal or not in any coordinates)
        lab = part.linear_region_labels()
    else:  # the tile's region graph under the whole domain's rules: its adjacency tolerance and map normalisation
        whole = Partition(domain, part.vertices, part.offsets, part.maps, part.areas, [], edge_tags=part.edge_tags)
        lab = whole.linear_region_labels(1e-9 if rtol is None else rtol)
    linear = dense_ranks(np.asarray(lab))[1]
    r, c = index
    inner = {BOTTOM: r > 0, TOP: r < rows - 1, LEFT: c > 0, RIGHT: c < cols - 1}
    tags = part.edge_tags
    reg = np.repeat(np.arange(R), np.diff(part.offsets))
    nxt = np.arange(part.vertices.shape[0]) + 1
    nxt[part.offsets[1:] - 1] = part.offsets[:-1]
    sides = {}
    for s, on in inner.items():
        if not on:
            continue
        e = np.flatnonzero(tags == s)
        a = part.vertices[e, _ALONG[s]]
        b = part.vertices[nxt[e], _ALONG[s]]
        sides[s] = (reg[e], np.minimum(a, b), np.maximum(a, b))
    border = dense_ranks(np.concatenate([v[0] for v in sides.values()]))[0] if sides else np.zeros(0, np.int64)
    maps = normalised_maps(part.maps[border], lo, hi)
    codes = part.code_bytes()[border]
    out = TileSummary(
        index=(int(r), int(c)),
        pieces=R,
        n_linear=int(linear.max(initial=-1)) + 1,
        linear=linear,
        sides=sides,
        border=border,
        codes=codes,
        maps=maps,
        seconds=0.0,
        layout=_code_layout(part),
        linear_exact=exact,
    )
    if exact:
        out.fmaps, out.ferr = _maps_in_u(part, border)
    if all(k in part.stats for k in ("predicates", "exact_predicates", "assumed")):
        out.tests = tuple(int(part.stats[k]) for k in ("predicates", "exact_predicates", "assumed"))
    return out


@dataclasses.dataclass
class TiledCount:
    """An exact count by tiles. ``regions``: cells (activation regions; connected cells where they are
    curved) of the whole domain; ``linear_regions``: linear regions; both equal the single-process counts
    (exactly, see the module docstring).
    ``pieces``: the tiles' regions before merging; ``tiles``: ``(rows, cols)``; ``seconds``: wall time;
    ``tile_seconds``: each tile's own time (row-major).

    With ``keep=True``: ``partition`` holds every piece (a :class:`Partition` of the whole domain whose
    edges along tile borders share tags), ``cell_of_piece`` and ``linear_of_piece`` ``(pieces,)`` label
    each piece's cell and linear region."""

    regions: int
    linear_regions: int
    pieces: int
    tiles: tuple[int, int]
    seconds: float
    tile_seconds: list
    partition: Partition | None = None
    cell_of_piece: np.ndarray | None = None
    linear_of_piece: np.ndarray | None = None
    certificate: dict | None = None
    #: whether ``linear_regions`` was decided in exact arithmetic (False: by a relative tolerance)
    linear_exact: bool = False
    #: summed over the tiles: vertex sign tests, those decided in rational arithmetic, and attention identities
    #: taken from equal floats (not proven; ``exact`` is False unless 0); None where a tile did not say
    tests: tuple | None = None

    @property
    def exact(self) -> bool:
        """No tile assumed an attention identity from equal floats (every other decision is exact)."""
        return self.tests is None or self.tests[2] == 0

    def as_dict(self) -> dict:
        out = {
            "regions": self.regions,
            "linear_regions": self.linear_regions,
            "linear_exact": self.linear_exact,
            "exact": self.exact,
            "pieces": self.pieces,
            "tiles": list(self.tiles),
        }
        if self.tests is not None:
            out.update(zip(("predicates", "exact_predicates", "assumed_identities"), self.tests, strict=True))
        if self.certificate is not None:
            out["certificate"] = self.certificate
        return out


def count_tiled(
    net,
    domain,
    tiles=4,
    *,
    client=None,
    max_regions: int | None = None,
    keep: bool = False,
    shards=None,
    rtol: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    certify: bool = False,
    workers: int | None = None,
) -> TiledCount:
    """Exact regions and linear regions of ``net`` on a 2D ``domain`` from ``tiles`` partitioned
    independently (``tiles``: N or ``(rows, cols)``, see :func:`tile_grid`).

    ``client``: a ``dask.distributed.Client`` to run the tiles as tasks on its cluster; None runs them one
    after the other here. ``max_regions``: the region cap of each tile's partition. ``keep``: also return
    the merged pieces (see :class:`TiledCount`; holds the whole partition in this process). ``shards``: a
    folder (created if needed; on a cluster, one every worker can write to) that receives each tile's
    partition as ``tile-ROW-COL.npz``, written whole or not at all: the partition is kept on disk, never
    in memory all at once (read a shard back with :func:`read_shard`).
    ``progress(done, total)`` is called as tiles finish. ``certify``: check every tile's partition with
    :func:`regioncount.results.certify` and the merge by a second route (see :func:`certify_merge`); the
    result's ``certificate`` then holds both, with ``passed`` false if any check failed.
    ``workers`` (without ``client``): processes that run the tiles, forked from this one; 1 runs them here, one
    after the other. None (the default) runs the first tile here and, where the tiles left would take longer
    than :data:`PARALLEL_AFTER_S` at its pace (a large count), the rest on ``REGIONCOUNT_WORKERS`` processes, or
    one per available core, each running tile after tile. Every worker's share of ``max_regions`` and of the
    resident-memory limit (:mod:`regioncount._memory`) is its part of the whole, so the run stays within them.
    Only tile summaries travel back (their partitions too with ``keep``), and the counts do not depend on which
    process ran which tile.
    """
    t0 = time.perf_counter()
    grid = tile_grid(tiles)
    parts = split_domain(domain, grid)
    if shards is not None:
        shards = os.path.abspath(os.fspath(shards))
        try:
            os.makedirs(shards, exist_ok=True)
        except OSError as e:
            raise WriteError(f"cannot make the shards folder {shards}: {e.strerror or e}") from None
    if client is not None and max_regions is not None:
        from ._distributed import n_workers

        # the workers run tiles at once: the region cap (a share of one memory cap) is split between them
        max_regions = max(1, int(max_regions) // n_workers(client))
    kw = dict(max_regions=max_regions, keep=keep, rtol=rtol, shards=shards, certify=certify)
    if client is None:
        summaries: Iterable[TileSummary] = _local_summaries(net, domain, parts, grid, kw, workers)
    else:
        from ._distributed import map_tasks

        summaries = map_tasks(client, summarise_tile, net, domain, [(i, t, grid) for i, t in parts], kw)
    done: dict[tuple[int, int], TileSummary] = {}
    for s in summaries:
        done[s.index] = s
        if progress is not None:
            progress(len(done), len(parts))
    from ..networks import lower

    out = merge_tiles(domain, grid, done, rtol=rtol, seconds=time.perf_counter() - t0, program=lower(net))
    if certify:
        out.certificate = certify_merge(domain, grid, done, out)
    return out


#: With ``workers=None``, the rest of a count goes to worker processes where the first tile's time, times the
#: tiles left, passes this (seconds).
PARALLEL_AFTER_S = 0.5


def _local_summaries(net, domain, parts: list, grid, kw: dict, workers: int | None) -> Iterable[TileSummary]:
    """Tile summaries computed on this machine, in this process or on forked workers (see :func:`count_tiled`)."""
    from ._fork import default_workers, fork_pool_map

    want = default_workers(workers)
    todo = _largest_first(net, parts) if want > 1 else list(parts)
    if workers is None and want > 1 and todo:
        i, t = todo.pop(0)
        first = summarise_tile(net, domain, i, t, grid, **kw)
        yield first
        if first.seconds * len(todo) < PARALLEL_AFTER_S:
            want = 1  # a small count: starting workers would cost more than it saves
    want = min(want, len(todo))
    if want <= 1:
        for i, t in todo:
            yield summarise_tile(net, domain, i, t, grid, **kw)
        return
    wkw = dict(kw)
    if wkw.get("max_regions") is not None:
        wkw["max_regions"] = max(1, int(wkw["max_regions"]) // want)

    def one(item):
        i, t = item
        return summarise_tile(net, domain, i, t, grid, **wkw)

    # the workers stay for tile after tile (warm memory, one fork each)
    for _, out in fork_pool_map(one, todo, want):
        yield out


def _largest_first(net, parts: list) -> list:
    """``parts`` ordered by the work they are likely to take, most first, for workers that take tile after tile: the
    last tiles to start are then the small ones, and the workers finish close together (with the tiles in grid
    order, the last could be a dense one that one worker runs alone). The estimate is the square of the number of
    the first layer's lines that cross a tile (its regions grow with it); the order is kept where there is none
    (:func:`_first_lines`). The counts do not depend on the order."""
    weights = []
    for _, tile in parts:
        lines = _first_lines(net, tile)
        if lines is None:
            return list(parts)
        weights.append(lines[1].size ** 2)
    order = np.argsort(-np.asarray(weights, np.int64), kind="stable")
    return [parts[k] for k in order]


def certify_merge(domain, grid, summaries: dict, merged: TiledCount) -> dict:
    """The certificate of a tiled count: ``tiles`` (every tile's own certificate passed; the failed checks
    named) and ``merge``, the merged cell count recomputed by a second route: pieces joined where they have
    the same code and their edges on a shared border overlap (geometry, not the codes' convexity that
    :func:`merge_tiles` relies on), and every same-code pair across a border found so. Returns the
    :func:`regioncount.results.certify` layout ``{"passed", "checks"}``; the tiles' own checks are under
    ``"tile_checks"``, keyed ``"ROW,COL"``."""
    rows, cols = grid
    order = [(r, c) for r in range(rows) for c in range(cols)]
    S = [summaries[i] for i in order]
    bad = []
    for i, s in zip(order, S, strict=True):
        cert = s.certificate or {"passed": False, "checks": {"certificate": {"passed": False, "detail": "missing"}}}
        if not cert["passed"]:
            bad.append(
                f"tile {i[0]},{i[1]}: " + ", ".join(k for k, v in cert["checks"].items() if v["passed"] is False)
            )
    tiles_ok = {
        "passed": not bad,
        "detail": f"{len(S) - len(bad)} of {len(S)} tiles certified" + (f" ({'; '.join(bad)})" if bad else ""),
    }
    piece0 = np.cumsum([0] + [s.pieces for s in S])
    edges, missed = [], 0
    for k, j, side, oside, ia, ib, ka, _kb, same in _border_pairs(grid, S):
        a, b = S[k], S[j]
        edges.append(np.stack([piece0[k] + ia, piece0[j] + ib], 1)[same])
        # every code on both sides of this border must have been found overlapping itself across it
        pa = np.unique(a.sides[side][0])
        pb = np.unique(b.sides[oside][0])
        ca = {bytes(x) for x in a.codes[np.searchsorted(a.border, pa)]}
        cb = {bytes(x) for x in b.codes[np.searchsorted(b.border, pb)]}
        found = {bytes(x) for x in a.codes[ka[same]]}
        missed += len((ca & cb) - found)
    cells, _ = _count_components(int(piece0[-1]), edges)
    ok = cells == merged.regions and missed == 0
    merge = {
        "passed": bool(ok),
        "detail": f"{cells:,} cells by overlapping border edges of equal codes, {merged.regions:,} by codes; "
        f"{missed} codes on both sides of a border without an overlapping edge",
    }
    return {
        "passed": bool(tiles_ok["passed"] and ok),
        "checks": {"tiles": tiles_ok, "merge": merge},
        "tile_checks": {f"{i[0]},{i[1]}": s.certificate for i, s in zip(order, S, strict=True)},
    }


def count_shards(domain, tiles, folder, *, rtol: float = 1e-9) -> TiledCount:
    """The counts of :func:`count_tiled` again, from the shards it wrote to ``folder`` (one tile in memory
    at a time), without partitioning anything."""
    t0 = time.perf_counter()
    grid = tile_grid(tiles)
    done = {}
    for index, _ in split_domain(domain, grid):
        part = read_shard(os.path.join(os.fspath(folder), shard_name(index)))
        done[index] = _summarise(part, domain, index, grid, rtol)
    return merge_tiles(domain, grid, done, rtol=rtol, seconds=time.perf_counter() - t0)


def _overlapping(a: tuple, b: tuple):
    """Pairs ``(piece_a, piece_b)`` whose edges on one border (``a``, ``b``: ``(piece, lo, hi)`` of the
    two sides) overlap in a segment of positive length. Each side's edges tile the border, so every
    elementary interval between consecutive endpoints of either side lies in one edge of each.

    No length threshold: the pairs this finds between pieces of different codes matter only where a
    boundary runs along the border (elsewhere the pieces across a border carry the same codes in the
    same order, and two neighbours that a rounding difference makes overlap are adjacent inside a tile
    already, so joining them changes no linear region)."""
    pa, la, ha = a
    pb, lb, hb = b
    if pa.size == 0 or pb.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pts = np.unique(np.concatenate([la, ha, lb, hb]))
    x0, x1 = pts[:-1], pts[1:]
    mid = x0 + (x1 - x0) / 2
    keep = (x0 < mid) & (mid < x1)
    mid = mid[keep]
    out = []
    for lo, hi in ((la, ha), (lb, hb)):
        o = np.argsort(lo, kind="stable")
        k = np.searchsorted(lo[o], mid, side="right") - 1
        k = np.clip(k, 0, o.size - 1)
        inside = (lo[o][k] <= mid) & (mid <= hi[o][k])
        out.append((o[k], inside))
    ok = out[0][1] & out[1][1]
    return pa[out[0][0][ok]], pb[out[1][0][ok]]


def _border_pairs(grid, S: list):
    """Every inner border once (each tile with the one to its right, its LEFT side, and the one above, its
    BOTTOM), as ``(k, j, side, oside, ia, ib, ka, kb, same)``: tiles ``k`` and ``j`` (row-major indices into
    ``S``), their sides on the border, the overlapping piece pairs ``(ia, ib)`` (:func:`_overlapping`), their
    rows ``(ka, kb)`` in each summary's border arrays, and whether each pair carries the same code. The one
    walk :func:`merge_tiles` and :func:`certify_merge` share."""
    rows, cols = grid
    for r in range(rows):
        for c in range(cols):
            k = r * cols + c
            for side, (r2, c2), oside in ((RIGHT, (r, c + 1), LEFT), (TOP, (r + 1, c), BOTTOM)):
                if r2 >= rows or c2 >= cols:
                    continue
                j = r2 * cols + c2
                a, b = S[k], S[j]
                ia, ib = _overlapping(a.sides[side], b.sides[oside])
                ka, kb = np.searchsorted(a.border, ia), np.searchsorted(b.border, ib)
                same = np.all(a.codes[ka] == b.codes[kb], axis=1)
                yield k, j, side, oside, ia, ib, ka, kb, same


def _same_code_edges(S: list, piece0: np.ndarray, lin0: np.ndarray):
    """Cell and linear-region edges joining the border pieces of all tiles that carry the same code.

    The plane engine's pieces are convex and so is each code's set (every decision is one linear
    inequality given the earlier ones; the engine refuses curved boundaries), so the pieces of one code
    in different tiles are one cell: two such pieces hold points a and b of the code's open convex set,
    and the segment ab crosses every border between them inside that set. A piece that touches no inner
    side is a whole cell. The merge is decided by the codes alone: no geometry, no threshold."""
    have = [k for k, s in enumerate(S) if s.border.size]
    if not have:
        return np.zeros((0, 2), np.int64), np.zeros((0, 2), np.int64)
    C = np.ascontiguousarray(np.concatenate([S[k].codes for k in have]), dtype=np.uint8)
    piece = np.concatenate([piece0[k] + S[k].border for k in have])
    lin = np.concatenate([lin0[k] + S[k].linear[S[k].border] for k in have])
    if C.shape[1] == 0:
        inv = np.zeros(C.shape[0], np.int64)
    else:
        key = C.view(np.dtype((np.void, C.shape[1]))).ravel()
        _, inv = np.unique(key, return_inverse=True)
        inv = inv.ravel()
    first = np.full(int(inv.max()) + 1, piece.size, np.int64)
    np.minimum.at(first, inv, np.arange(piece.size))
    f = first[inv]
    return np.stack([piece[f], piece], 1), np.stack([lin[f], lin], 1)


def merge_tiles(
    domain, grid, summaries: dict, *, rtol: float | None = None, seconds: float = 0.0, program=None
) -> TiledCount:
    """Merge tile summaries (``{(row, col): TileSummary}``, every tile of ``grid``) into exact counts.

    Linear regions: where every tile decided its own exactly and ``program`` (the lowered network) is given, the
    pieces of different codes that share a border segment are joined where their output maps are equal in exact
    arithmetic (:func:`~regioncount.results._linear.same_maps`); otherwise by the float rule with ``rtol``
    (default 1e-9), and :attr:`TiledCount.linear_exact` says False."""
    rows, cols = grid
    order = [(r, c) for r in range(rows) for c in range(cols)]
    missing = [i for i in order if i not in summaries]
    if missing:
        raise ValueError(f"tiles {missing} have no summary")
    S = [summaries[i] for i in order]
    piece0 = np.cumsum([0] + [s.pieces for s in S])
    lin0 = np.cumsum([0] + [s.n_linear for s in S])
    # cells: the pieces of one code (see _same_code_edges); linear regions: those, and pieces of different
    # codes whose maps agree across a border segment they share (a boundary that runs along the border)
    same_cells, same_lin = _same_code_edges(S, piece0, lin0)
    cell_edges, lin_edges = [same_cells], [same_lin]
    exact = rtol is None and program is not None and all(x.linear_exact for x in S)
    ask = []  # exact mode: (k, j, ka, kb, lin edges) of the different-code pairs, decided together below
    for k, j, _, _, ia, ib, ka, kb, same in _border_pairs(grid, S):
        if ia.size == 0:
            continue
        a, b = S[k], S[j]
        edge = np.stack([lin0[k] + a.linear[ia], lin0[j] + b.linear[ib]], 1)
        if exact:
            d = ~same
            if d.any():
                ask.append((k, j, ka[d], kb[d], edge[d]))
            continue
        join = ~same & maps_agree(a.maps[ka], b.maps[kb], 1e-9 if rtol is None else rtol)
        lin_edges.append(edge[join])
    if ask:
        lin_edges.append(_exact_border_joins(domain, program, S, ask))
    cells, cell_lab = _count_components(int(piece0[-1]), cell_edges)
    lins, lin_lab = _count_components(int(lin0[-1]), lin_edges)
    out = TiledCount(
        regions=cells,
        linear_regions=lins,
        pieces=int(piece0[-1]),
        tiles=(rows, cols),
        seconds=seconds,
        tile_seconds=[s.seconds for s in S],
        linear_exact=exact,
        tests=tuple(int(v) for v in np.sum([x.tests for x in S], axis=0)) if all(x.tests for x in S) else None,
    )
    if all(s.partition is not None for s in S):
        out.partition = _merged_partition(domain, grid, [s.partition for s in S])
        out.cell_of_piece = cell_lab
        out.linear_of_piece = lin_lab[np.concatenate([lin0[k] + s.linear for k, s in enumerate(S)])]
    return out


def _exact_border_joins(domain, program, S: list, ask: list) -> np.ndarray:
    """The linear-region edges of ``ask`` (see :func:`merge_tiles`) whose two pieces' output maps are equal in
    exact arithmetic: the tiles' float maps with their rigorous bounds (:func:`_maps_in_u`) first, rationals
    from the two codes where those cannot decide. Such pairs are many: besides boundaries that run along a
    border, pieces whose ends differ by rounding touch across it."""
    from ..results._linear import same_maps

    # every pair's two pieces, stacked: (tile, row in its border arrays)
    side = [(k, ka) for k, j, ka, kb, _ in ask for k, ka in ((k, ka), (j, kb))]
    n_pairs = [ka.size for _, _, ka, _, _ in ask]
    firsts = np.cumsum([0] + [2 * n for n in n_pairs])[:-1]
    pairs = np.concatenate(
        [np.stack([f + np.arange(n), f + n + np.arange(n)], 1) for f, n in zip(firsts, n_pairs, strict=True)]
    )
    fm = None
    if all(S[k].fmaps is not None for k, _ in side):
        fm = (np.concatenate([S[k].fmaps[ka] for k, ka in side]), np.concatenate([S[k].ferr[ka] for k, ka in side]))
    starts = np.cumsum([0] + [ka.size for _, ka in side])

    def codes(index):  # only the pieces the float maps leave undecided are expanded, side by side
        index = np.asarray(index, np.int64)
        t = np.searchsorted(starts, index, "right") - 1
        out = np.empty((index.size, 0), np.int32)
        for u in np.unique(t).tolist():
            k, ka = side[u]
            at = np.flatnonzero(t == u)
            rows = _code_rows(S[k].layout, S[k].codes[ka[index[at] - starts[u]]])
            if out.shape[1] != rows.shape[1]:
                out = np.empty((index.size, rows.shape[1]), np.int32)
            out[at] = rows
        return out

    x0, V = domain.input_map()
    keep = same_maps(pairs, program, codes if fm is not None else codes(np.arange(starts[-1])), x0, V, None, fm)
    return np.concatenate([e for *_, e in ask])[keep]


def _count_components(n: int, edges: list) -> tuple[int, np.ndarray]:
    """Number of components of ``n`` nodes under ``edges`` and the ``(n,)`` labels (smallest member);
    union-find runs only on the nodes that edges touch."""
    E = np.concatenate(edges) if edges else np.zeros((0, 2), np.int64)
    labels = np.arange(n)
    if E.size == 0:
        return n, labels
    nodes, inv = np.unique(E, return_inverse=True)
    comp = _components(nodes.size, inv.reshape(-1, 2))
    labels[nodes] = nodes[comp]
    return n - nodes.size + int(np.unique(comp).size), labels


def _merged_partition(domain, grid, parts: list[Partition]) -> Partition:
    """All pieces as one :class:`Partition` of ``domain``: a tile side's edges get the tag of its border
    line (shared by both neighbours, so ``adjacency`` sees across borders), cut tags are kept apart."""
    rows, cols = grid
    order = [(r, c) for r in range(rows) for c in range(cols)]
    # border lines: u1 = x_c for c = 0..cols, then u2 = y_r for r = 0..rows
    base = cols + 1 + rows + 1
    tags = []
    for (r, c), p in zip(order, parts, strict=True):
        side_tag = np.array([cols + 1 + r, c + 1, cols + 1 + r + 1, c])
        t = p.edge_tags
        if t is None:
            raise ValueError("a tile's partition has no edge tags (the plane engine always writes them)")
        g = np.where(t < 4, side_tag[np.clip(t, 0, 3)], base + t)
        tags.append(g)
        base += int(t.max(initial=0)) + 1
    # the compact code blocks, concatenated as they are (expanding them would cost 4 bytes per entry)
    blocks = []
    for b, (kind, w, _) in enumerate(parts[0]._blocks):
        blocks.append((kind, w, np.concatenate([p._blocks[b][2] for p in parts])))
    nv = np.concatenate([np.diff(p.offsets) for p in parts])
    offsets = np.zeros(nv.size + 1, np.int64)
    np.cumsum(nv, out=offsets[1:])
    return Partition(
        domain,
        np.concatenate([p.vertices for p in parts]),
        offsets,
        np.concatenate([p.maps for p in parts]),
        np.concatenate([p.areas for p in parts]),
        blocks,
        edge_tags=np.concatenate(tags),
    )


def shard_name(index) -> str:
    """File name of tile ``(row, col)``'s shard."""
    return f"tile-{int(index[0])}-{int(index[1])}.npz"


def write_shard(path, part: Partition) -> None:
    """Write a tile's :class:`Partition` (its arrays, compact codes and its domain) to the ``.npz`` file
    ``path``, whole or not at all."""
    from .._io import write_atomic

    dom = part.domain
    meta = {"blocks": [(kind, w) for kind, w, _ in part._blocks], "domain": type(dom).__name__}
    arrays = dict(
        vertices=part.vertices,
        offsets=part.offsets,
        maps=part.maps,
        areas=part.areas,
        lo=np.asarray(dom.param_lo),
        hi=np.asarray(dom.param_hi),
    )
    if part.edge_tags is not None:
        arrays["edge_tags"] = part.edge_tags
    if isinstance(dom, Slice):
        arrays.update(x0=dom.x0, v1=dom.v1, v2=dom.v2)
    for i, (_, _, a) in enumerate(part._blocks):
        arrays[f"block{i}"] = a
    buf = io.BytesIO()
    # numpy's stub checks **kwds against savez's allow_pickle: bool; every value here is an array
    np.savez(buf, meta=np.array(json.dumps(meta)), **arrays)  # type: ignore[arg-type]
    write_atomic(path, buf.getvalue())


def read_shard(path) -> Partition:
    """The :class:`Partition` written by :func:`write_shard` (its domain is the tile)."""
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        dom: Box | Slice
        if meta["domain"] == "Slice":
            dom = Slice(z["x0"], z["v1"], z["v2"], z["lo"], z["hi"])
        else:
            dom = Box(z["lo"], z["hi"])
        blocks = [(kind, w, z[f"block{i}"]) for i, (kind, w) in enumerate(meta["blocks"])]
        tags = z["edge_tags"] if "edge_tags" in z.files else None
        return Partition(dom, z["vertices"], z["offsets"], z["maps"], z["areas"], blocks, edge_tags=tags)
