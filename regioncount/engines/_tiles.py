"""Exact 2D counts by tiles (DESIGN §9): split the domain into rectangles, partition each independently,
merge the cells that continue across tile borders.

A tile's partition (the ``plane`` engine on the tile as its own domain) cuts every region that crosses
a tile border into pieces, one per tile it meets. Two pieces in neighbouring tiles belong to the same
cell when they have the same activation code and share a segment of the border of positive length;
the cells are the connected components of that relation, so their number equals the single-process
count for convex regions and for curved cells alike. Linear regions (Montúfar et al. 2014) are the
components of the region graph over edges whose affine maps agree (the rule of
:meth:`Partition.linear_region_labels`, with maps normalised on the whole domain): inside a tile the
tile's own adjacency gives those edges, across a border the border segments do.

Each tile is reduced where it is computed to a :class:`TileSummary`: its piece and linear-component
counts and the pieces on its inner sides (interval on the border, code bytes, normalised map). Only
summaries travel, so tiles can run one after the other in this process or as Dask tasks (see
``_distributed``), and memory holds one tile's partition per worker, not the whole partition.

Borders may pass through vertices and run along region boundaries: a unit whose line is a tile
border does not cut either tile (its values vanish on that side), and its two sides show up as
different codes across the border, which are not merged as cells but are merged as linear regions
when the maps agree.

Caveat, measured (benchmarks/README.md): while the plane engine drops slivers below an area threshold
relative to its domain, a tile (a smaller domain) can keep a sliver the whole-domain run drops, so on
networks with near-concurrent lines the tiled count can exceed the whole one by such slivers (0.1% at
10^6 regions). Without the threshold the two agree exactly.
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
from .._errors import DomainError
from ..results._partition import Partition, _components, maps_agree, normalised_maps
from ._plane import partition_plane

#: Edge tags of a plane partition's domain sides, counter-clockwise from the bottom: u2 = lo, u1 = hi,
#: u2 = hi, u1 = lo (``partition_plane`` tags its starting square so).
BOTTOM, RIGHT, TOP, LEFT = 0, 1, 2, 3
#: The border coordinate that runs along each side: u1 along the bottom and top, u2 along the others.
_ALONG = {BOTTOM: 0, RIGHT: 1, TOP: 0, LEFT: 1}
#: Borders shorter than this fraction of the domain's diameter are not shared (as in Partition.adjacency).
_EPS = 1e-9


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


def summarise_tile(
    net, domain, index, tile, grid, *, max_regions=None, keep=False, rtol=1e-9, shards=None
) -> TileSummary:
    """Partition ``tile`` (one of ``split_domain(domain, grid)``'s, at ``index = (row, col)``) and reduce it
    to a :class:`TileSummary`. Runs anywhere (a Dask task): it needs only its arguments. With ``shards`` (a
    folder the task can write to) the tile's partition is also written there, see :func:`write_shard`."""
    t0 = time.perf_counter()
    part = partition_plane(net, tile, max_regions=max_regions)
    if shards is not None:
        write_shard(os.path.join(os.fspath(shards), shard_name(index)), part)
    out = _summarise(part, domain, index, grid, rtol)
    out.seconds = time.perf_counter() - t0
    out.partition = part if keep else None
    return out


def _summarise(part: Partition, domain, index, grid, rtol: float) -> TileSummary:
    """A tile's partition reduced to what the merge needs (see :class:`TileSummary`)."""
    rows, cols = grid
    R = part.n_regions
    lo, hi = np.asarray(domain.param_lo, float), np.asarray(domain.param_hi, float)
    # the tile's region graph under the whole domain's rules: its adjacency tolerance and map normalisation
    whole = Partition(domain, part.vertices, part.offsets, part.maps, part.areas, [], edge_tags=part.edge_tags)
    _, linear = np.unique(whole.linear_region_labels(rtol), return_inverse=True)
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
    border = np.unique(np.concatenate([v[0] for v in sides.values()])) if sides else np.zeros(0, np.int64)
    maps = normalised_maps(part.maps[border], lo, hi)
    codes = part.code_bytes()[border]
    return TileSummary(
        index=(int(r), int(c)),
        pieces=R,
        n_linear=int(linear.max(initial=-1)) + 1,
        linear=linear,
        sides=sides,
        border=border,
        codes=codes,
        maps=maps,
        seconds=0.0,
    )


@dataclasses.dataclass
class TiledCount:
    """An exact count by tiles. ``regions``: cells (activation regions; connected cells where they are
    curved) of the whole domain; ``linear_regions``: linear regions; both equal the single-process counts
    (up to the plane engine's sliver threshold, see the module docstring).
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

    def as_dict(self) -> dict:
        return {
            "regions": self.regions,
            "linear_regions": self.linear_regions,
            "pieces": self.pieces,
            "tiles": list(self.tiles),
        }


def count_tiled(
    net,
    domain,
    tiles=4,
    *,
    client=None,
    max_regions: int | None = None,
    keep: bool = False,
    shards=None,
    rtol: float = 1e-9,
    progress: Callable[[int, int], None] | None = None,
) -> TiledCount:
    """Exact regions and linear regions of ``net`` on a 2D ``domain`` from ``tiles`` partitioned
    independently (``tiles``: N or ``(rows, cols)``, see :func:`tile_grid`).

    ``client``: a ``dask.distributed.Client`` to run the tiles as tasks on its cluster; None runs them one
    after the other here. ``max_regions``: the region cap of each tile's partition. ``keep``: also return
    the merged pieces (see :class:`TiledCount`; holds the whole partition in this process). ``shards``: a
    folder (created if needed; on a cluster, one every worker can write to) that receives each tile's
    partition as ``tile-ROW-COL.npz``, written whole or not at all: the partition is kept on disk, never
    in memory all at once (read a shard back with :func:`read_shard`).
    ``progress(done, total)`` is called as tiles finish.
    """
    t0 = time.perf_counter()
    grid = tile_grid(tiles)
    parts = split_domain(domain, grid)
    if shards is not None:
        shards = os.path.abspath(os.fspath(shards))
        os.makedirs(shards, exist_ok=True)
    kw = dict(max_regions=max_regions, keep=keep, rtol=rtol, shards=shards)
    if client is None:
        summaries: Iterable[TileSummary] = (summarise_tile(net, domain, i, t, grid, **kw) for i, t in parts)
    else:
        from ._distributed import map_tasks

        summaries = map_tasks(client, summarise_tile, net, domain, [(i, t, grid) for i, t in parts], kw)
    done: dict[tuple[int, int], TileSummary] = {}
    for s in summaries:
        done[s.index] = s
        if progress is not None:
            progress(len(done), len(parts))
    return merge_tiles(domain, grid, done, rtol=rtol, seconds=time.perf_counter() - t0)


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


def _shared_segments(a: tuple, b: tuple, eps: float):
    """Pairs ``(piece_a, piece_b)`` whose edges on one border (``a``, ``b``: ``(piece, lo, hi)`` of the
    two sides) overlap in a segment longer than ``eps``. Each side's edges tile the border, so every
    elementary interval between consecutive endpoints of either side lies in one edge of each."""
    pa, la, ha = a
    pb, lb, hb = b
    if pa.size == 0 or pb.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pts = np.unique(np.concatenate([la, ha, lb, hb]))
    x0, x1 = pts[:-1], pts[1:]
    keep = (x1 - x0) > eps
    x0, x1 = x0[keep], x1[keep]
    mid = (x0 + x1) / 2
    out = []
    for lo, hi in ((la, ha), (lb, hb)):
        o = np.argsort(lo, kind="stable")
        k = np.searchsorted(lo[o], mid, side="right") - 1
        k = np.clip(k, 0, o.size - 1)
        inside = (lo[o][k] <= mid) & (mid <= hi[o][k])
        out.append((o[k], inside))
    ok = out[0][1] & out[1][1]
    return pa[out[0][0][ok]], pb[out[1][0][ok]]


def merge_tiles(domain, grid, summaries: dict, *, rtol: float = 1e-9, seconds: float = 0.0) -> TiledCount:
    """Merge tile summaries (``{(row, col): TileSummary}``, every tile of ``grid``) into exact counts."""
    rows, cols = grid
    order = [(r, c) for r in range(rows) for c in range(cols)]
    missing = [i for i in order if i not in summaries]
    if missing:
        raise ValueError(f"tiles {missing} have no summary")
    S = [summaries[i] for i in order]
    piece0 = np.cumsum([0] + [s.pieces for s in S])
    lin0 = np.cumsum([0] + [s.n_linear for s in S])
    lo, hi = np.asarray(domain.param_lo, float), np.asarray(domain.param_hi, float)
    eps = _EPS * float(np.hypot(*(hi - lo)))
    cell_edges, lin_edges = [], []
    for k, (r, c) in enumerate(order):
        # each border once: with the tile to the right (its LEFT) and the one above (its BOTTOM)
        for side, other, oside in ((RIGHT, (r, c + 1), LEFT), (TOP, (r + 1, c), BOTTOM)):
            if other not in summaries:
                continue
            j = other[0] * cols + other[1]
            a, b = S[k], S[j]
            ia, ib = _shared_segments(a.sides[side], b.sides[oside], eps)
            if ia.size == 0:
                continue
            ka, kb = np.searchsorted(a.border, ia), np.searchsorted(b.border, ib)
            same_code = np.all(a.codes[ka] == b.codes[kb], axis=1)
            same_map = same_code | maps_agree(a.maps[ka], b.maps[kb], rtol)
            cell_edges.append(np.stack([piece0[k] + ia, piece0[j] + ib], 1)[same_code])
            lin_edges.append(np.stack([lin0[k] + a.linear[ia], lin0[j] + b.linear[ib]], 1)[same_map])
    cells, cell_lab = _count_components(int(piece0[-1]), cell_edges)
    lins, lin_lab = _count_components(int(lin0[-1]), lin_edges)
    out = TiledCount(
        regions=cells,
        linear_regions=lins,
        pieces=int(piece0[-1]),
        tiles=(rows, cols),
        seconds=seconds,
        tile_seconds=[s.seconds for s in S],
    )
    if all(s.partition is not None for s in S):
        out.partition = _merged_partition(domain, grid, [s.partition for s in S])
        out.cell_of_piece = cell_lab
        out.linear_of_piece = lin_lab[np.concatenate([lin0[k] + s.linear for k, s in enumerate(S)])]
    return out


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
