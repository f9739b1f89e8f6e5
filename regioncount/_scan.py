"""``scan``: region counts against depth beside the Thm 4.4 lower bound (Gu, Yang, Zhou 2026,
arXiv 2603.03084) for Maxout emulation by hardmax Transformers.

For each depth D = 1..depth a row holds:

- ``bound``: Thm 4.4, ``[floor(mT/q)(T-1)+1]^(q(floor(D/3)-1)) * sum_j C(mT, j)(T-1)^j`` (None for D < 3);
- ``constructed`` (activation regions) and ``constructed_linear`` (linear regions, what Thm 4.4 bounds):
  exact counts of the bound-attaining Transformer in the paper layout (3 blocks per maxout
  layer, padded to D blocks), by the plane engine (q = 2) or the line engine (q = 1);
- ``compact``: the compact layout (L + 1 blocks for L layers) fits D - 1 maxout layers of the same
  product construction in D blocks; counted exactly while the construction's formula stays under
  ``region_cap`` (by tiles above ``TILE_REGIONS``, so the cap is a time budget, not a memory one), else
  None with the formula value in ``compact_formula`` (:func:`counted_cells` lists which cells were counted
  and which remain formulas); ``compact_linear`` its linear
  regions; ``compact_beats_bound`` says whether the measured linear-region count exceeds Thm 4.4 there;
- ``random``: mean and spread over ``seeds`` random hardmax Transformers of depth D: exact pieces along
  the box diagonal (line engine) and sampled 2D counts (lower bounds) with Chao1;
- ``random_exact``: for D up to ``exact_depth``, exact connected cells and linear regions of the same random
  Transformers on the 2D box by the curved engine (one run per seed at depth ``exact_depth`` gives every
  shallower depth: its cells are components of equal code prefixes), mean and spread over seeds;
- ``relu_attention``: sampled spline pieces of random ReLU-attention Transformers of depth D (a lower bound,
  ``relu_attention_mean``), and for D up to ``relu_exact_depth`` the exact connected spline pieces of the
  same networks on the 2D box by the certified curved engine (``relu_exact_mean``: cells; ``relu_poly_mean``:
  maximal pieces of one polynomial; ``relu_exact_degree``: the largest wall degree met; ``relu_exact`` in
  the row holds the per-seed values and ``exact: true``). ReLU-attention cells are spline pieces, never
  linear regions. Past a depth the certified engine refuses (wall degree ``3^D`` over its cap) or cannot
  finish in a scan's time, the sampled lower bound is the only column;
- ``seconds`` for the row (the random columns are timed together, once, and shared out evenly).

The random Transformer of depth D with seed s is the first D blocks of one seeded depth-``depth``
Transformer: nested networks, so that a row differs from the one above by one block, and one forward
pass hashes the codes of every depth (prefix keys, see ``count_sampled_prefixes``).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import _memory
from ._domain import Box, Segment
from .engines._line import walk_line
from .networks import depth_code_ends, random_transformer, truncate
from .theory._bounds import transformer_maxout_lower
from .theory._compile import bound_attaining_transformer, compile_maxout
from .theory._constructions import product_maxout, product_maxout_regions

CSV_COLUMNS = (
    "depth",
    "bound",
    "constructed",
    "constructed_linear",
    "constructed_formula",
    "compact",
    "compact_linear",
    "compact_layers",
    "compact_formula",
    "random_line_mean",
    "random_line_std",
    "random_sample_mean",
    "random_sample_std",
    "random_chao1_mean",
    "random_exact_mean",
    "random_exact_std",
    "random_exact_linear_mean",
    "random_exact_linear_std",
    "relu_attention_mean",
    "relu_attention_std",
    "relu_exact_mean",
    "relu_exact_std",
    "relu_poly_mean",
    "relu_exact_degree",
    "seconds",
)


#: A 2D cell whose formula exceeds this many regions is counted by tiles of about this many regions each,
#: so memory holds one tile's partition, not the whole one.
TILE_REGIONS = 500_000


def _exact_count(net, box: Box, expected: int = 0) -> tuple[int, int]:
    """Exact (activation regions, linear regions) of ``net`` on ``box``: the plane engine for q = 2 (by
    tiles when ``expected``, the construction's formula, exceeds ``TILE_REGIONS``), the line engine for
    q = 1. Thm 4.4 bounds linear regions, so both are reported. The plane engine's linear regions are exact
    (:meth:`Partition.linear_region_labels`: the float filter with rigorous bounds for every op, attention
    included, and rational arithmetic for the pairs it leaves); above ``TILE_REGIONS`` they are the tiled
    count's."""
    if box.dim == 1:
        pieces = walk_line(net, Segment(box.lo, box.hi))
        return pieces.activation_pieces, pieces.linear_pieces
    if box.dim == 2:
        if expected > TILE_REGIONS:
            from .engines._tiles import count_tiled

            k = math.isqrt(-(-expected // TILE_REGIONS) - 1) + 1  # k x k tiles, k^2 >= expected / TILE_REGIONS
            res = count_tiled(net, box, (k, k))
            return res.regions, res.linear_regions
        from .engines._plane import partition_plane

        part = partition_plane(net, box)
        return part.n_regions, part.linear_regions()
    raise ValueError("exact scan counts need q = 1 or q = 2")


def counted_cells(rows: list[dict]) -> dict:
    """Which construction cells of a scan were counted exactly and which remain formulas (over the region
    cap): ``{"counted": {"paper": [D, ...], "compact": [...]}, "formulas": {...}}``."""
    out: dict = {"counted": {"paper": [], "compact": []}, "formulas": {"paper": [], "compact": []}}
    for r in rows:
        for name, key in (("paper", "constructed"), ("compact", "compact")):
            if r.get(key + "_formula") is None:
                continue
            out["counted" if r[key] is not None else "formulas"][name].append(r["depth"])
    return out


def _exact_random(net, box: Box, out: list[dict]) -> None:
    """Append to ``out`` the exact 2D counts of every truncation D = 1..depth of ``net`` on ``box``, from
    one run of the curved engine (cells of a truncation: components of equal code prefixes)."""
    from .engines._curved import partition_curved

    snaps = tuple(len(truncate(net, D).lower().ops) - 1 for D in range(1, net.depth + 1))
    cells = partition_curved(net, box, snapshots=snaps)
    ok = bool(cells.exact)
    for end, k in zip(depth_code_ends(net), snaps):
        res = cells.truncated_counts(end, cells.prefix_maps.get(k))
        res["exact"] = ok
        out.append(res)


def _relu_exact_seed(
    q: int, tokens: int, d_model: int, depth: int, relu_exact_depth: int, seed: int, lo: float, hi: float
) -> list[dict]:
    """Exact spline pieces of the truncations D = 1..relu_exact_depth of the seeded random ReLU-attention
    Transformer of depth ``depth`` (the scan's ``relu_attention`` networks) on the 2D box, by the certified
    curved engine: per depth ``{"cells", "polynomial_pieces", "largest_degree", "exact"}``. Stops at the
    first depth the engine refuses (its walls' degree over the cap), which it says up front."""
    from ._errors import CurvedBoundaryError
    from .engines._curved_exact import partition_curved_exact

    out: list[dict] = []
    rnet = random_transformer(q, tokens, d_model, depth, attention="relu", scale_by_T=True, seed=seed)
    for D in range(1, min(relu_exact_depth, depth) + 1):
        try:
            cells = partition_curved_exact(truncate(rnet, D), Box(lo, hi, q))
        except CurvedBoundaryError:
            break
        out.append(
            {
                "cells": cells.n_cells,
                "polynomial_pieces": cells.polynomial_pieces() if cells.kind == "spline" else cells.linear_regions(),
                "largest_degree": int(cells.degree),
                "exact": bool(cells.exact),
            }
        )
    return out


def _mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return float(statistics.fmean(values)), float(statistics.pstdev(values)) if len(values) > 1 else 0.0


def constructed_row(
    D: int, *, tokens: int = 4, m: int = 1, q: int = 2, lo: float = -1.0, hi: float = 2.0, region_cap: int = 200_000
) -> dict:
    """The bound and the exact counts of the constructions at depth ``D`` (see the module docstring)."""
    box = Box(lo, hi, q)
    width = m * tokens
    row: dict = {"depth": D, "tokens": tokens, "m": m, "q": q}
    row["bound"] = transformer_maxout_lower(m, tokens, q, D) if D >= 3 else None

    # Paper layout: floor(D/3) maxout layers in 3 blocks each, padded to D blocks.
    L = D // 3
    row["constructed_formula"] = product_maxout_regions((width,) * L, q, tokens) if L else None
    row["constructed"] = row["constructed_linear"] = None
    if L and row["constructed_formula"] <= region_cap:
        net, _ = bound_attaining_transformer(m, tokens, q, D, "paper", lo=box.lo, hi=box.hi)
        row["constructed"], row["constructed_linear"] = _exact_count(net, box, row["constructed_formula"])

    # Compact layout: D - 1 maxout layers in D blocks.
    Lc = D - 1
    row["compact_layers"] = Lc
    row["compact_formula"] = product_maxout_regions((width,) * Lc, q, tokens) if Lc else None
    row["compact"] = row["compact_linear"] = None
    if Lc and row["compact_formula"] <= region_cap:
        net = compile_maxout(product_maxout((width,) * Lc, q, tokens), box.lo, box.hi, "compact")
        row["compact"], row["compact_linear"] = _exact_count(net, box, row["compact_formula"])
    # A measured claim only: None where the compact count was not computed or there is no bound.
    row["compact_beats_bound"] = (
        None if row["compact"] is None or row["bound"] is None else bool(row["compact_linear"] > row["bound"])
    )
    return row


def _exact_random_seed(
    q: int, tokens: int, d_model: int, depth: int, exact_depth: int, seed: int, lo: float, hi: float
) -> list[dict]:
    """Exact 2D counts (:func:`_exact_random`) of the truncations D = 1..exact_depth of the seeded random
    Transformer of depth ``depth``: one job of a scan, run in a worker process (it builds its network from
    the seed)."""
    out: list[dict] = []
    net = random_transformer(q, tokens, d_model, depth, seed=seed)
    _exact_random(truncate(net, min(exact_depth, depth)), Box(lo, hi, q), out)
    return out


def _sampled_columns(depth: int, *, tokens: int, q: int, lo: float, hi: float, seeds: int, d_model: int, grid: int):
    """Per depth and seed: exact line pieces, sampled counts and Chao1 of the random hardmax Transformers, and
    sampled spline pieces of the random ReLU-attention ones."""
    from .engines._sample import count_sampled_prefixes  # JAX: imported only where sampling runs

    box = Box(lo, hi, q)
    seg = Segment(box.lo, box.hi)
    cols: dict[str, list[list]] = {k: [[] for _ in range(depth)] for k in ("line", "sampled", "chao", "relu")}
    for s in range(seeds):
        net = random_transformer(q, tokens, d_model, depth, seed=s)
        for D, res in enumerate(count_sampled_prefixes(net, box, depth_code_ends(net), grid=grid)):
            cols["sampled"][D].append(res.regions)
            cols["chao"][D].append(res.chao1)
            cols["line"][D].append(walk_line(truncate(net, D + 1), seg).activation_pieces)
        rnet = random_transformer(q, tokens, d_model, depth, attention="relu", scale_by_T=True, seed=s)
        for D, res in enumerate(count_sampled_prefixes(rnet, box, depth_code_ends(rnet), grid=grid)):
            cols["relu"][D].append(res.regions)
    return cols


def _random_table(
    cols: dict,
    exact: list[list[dict]],
    *,
    depth: int,
    box: Box,
    seeds: int,
    d_model: int,
    grid: int,
    relu: list[list[dict]] | None = None,
):
    """The random columns of each row from :func:`_sampled_columns`, the exact counts per seed and the exact
    ReLU-attention spline pieces per seed (:func:`_relu_exact_seed`)."""
    rows = []
    for D in range(depth):
        row: dict[str, object] = {}
        row["random_line_mean"], row["random_line_std"] = _mean_std(cols["line"][D])
        row["random_sample_mean"], row["random_sample_std"] = _mean_std(cols["sampled"][D])
        row["random_chao1_mean"], _ = _mean_std(cols["chao"][D])
        row["relu_attention_mean"], row["relu_attention_std"] = _mean_std(cols["relu"][D])
        ex = [e[D] for e in exact if len(e) > D]
        row["random_exact_mean"], row["random_exact_std"] = _mean_std([e["regions"] for e in ex])
        row["random_exact_linear_mean"], row["random_exact_linear_std"] = _mean_std([e["linear_regions"] for e in ex])
        if ex:
            row["random_exact"] = {
                "cells": [e["regions"] for e in ex],
                "codes": [e["codes"] for e in ex],
                "linear_regions": [e["linear_regions"] for e in ex],
                "exact": all(e["exact"] for e in ex),
                "box": [box.lo.tolist(), box.hi.tolist()],
            }
        row["random"] = {
            "seeds": seeds,
            "d_model": d_model,
            "line_pieces": cols["line"][D],
            "sampled": cols["sampled"][D],
            "chao1": cols["chao"][D],
            "grid": grid,
            "segment": [box.lo.tolist(), box.hi.tolist()],
        }
        row["relu_attention"] = {"sampled_spline_pieces": cols["relu"][D], "grid": grid, "lower_bound": True}
        rx = [e[D] for e in (relu or []) if len(e) > D]
        if len(rx) != len(relu or []):
            rx = []  # a depth some seed did not reach: no exact mean over part of the seeds
        row["relu_exact_mean"], row["relu_exact_std"] = _mean_std([e["cells"] for e in rx])
        row["relu_poly_mean"], _ = _mean_std([e["polynomial_pieces"] for e in rx])
        row["relu_exact_degree"] = max((e["largest_degree"] for e in rx), default=None)
        if rx:
            row["relu_exact"] = {
                "spline_pieces": [e["cells"] for e in rx],
                "polynomial_pieces": [e["polynomial_pieces"] for e in rx],
                "largest_degree": row["relu_exact_degree"],
                "exact": all(e["exact"] for e in rx),
                "box": [box.lo.tolist(), box.hi.tolist()],
            }
        rows.append(row)
    return rows


def random_rows(
    depth: int,
    *,
    tokens: int = 4,
    q: int = 2,
    lo: float = -1.0,
    hi: float = 2.0,
    seeds: int = 3,
    d_model: int = 8,
    grid: int = 200,
    exact_depth: int = 0,
    relu_exact_depth: int = 0,
) -> list[dict]:
    """Random-network columns for D = 1..depth (see the module docstring)."""
    exact = [
        _exact_random_seed(q, tokens, d_model, depth, exact_depth, s, lo, hi) if exact_depth and q == 2 else []
        for s in range(seeds)
    ]
    relu = [
        _relu_exact_seed(q, tokens, d_model, depth, relu_exact_depth, s, lo, hi)
        for s in range(seeds)
        if relu_exact_depth and q == 2
    ]
    cols = _sampled_columns(depth, tokens=tokens, q=q, lo=lo, hi=hi, seeds=seeds, d_model=d_model, grid=grid)
    return _random_table(
        cols, exact, depth=depth, box=Box(lo, hi, q), seeds=seeds, d_model=d_model, grid=grid, relu=relu
    )


def _timed(fn, *args, **kwargs):
    """``(fn(*args, **kwargs), seconds)``: a job that reports its own time."""
    t = time.perf_counter()
    return fn(*args, **kwargs), time.perf_counter() - t


def _construction_regions(D: int, *, tokens: int, m: int, q: int, region_cap: int, **_) -> int:
    """Regions the exact counts of :func:`constructed_row` at depth ``D`` will visit (their formulas, where
    under the cap): how a scan sizes its jobs."""
    width = m * tokens
    n = 0
    for L in (D // 3, D - 1):
        f = product_maxout_regions((width,) * L, q, tokens) if L else 0
        n += f if f <= region_cap else 0
    return n


def _constructed_rows(depths: list[int], **kw) -> dict[int, tuple[dict, float]]:
    """``{D: (constructed_row(D), seconds)}`` for ``depths``: the small constructions as one job."""
    return {D: _timed(constructed_row, D, **kw) for D in depths}


def _worker_init(limit: int | None) -> None:
    """Worker processes hold the caller's memory limit (each checks itself where the engines grow; the
    caller checks the sum). A worker runs one job and exits, so glibc may keep what the job frees instead of
    returning it and faulting it in again for the next large temporary."""
    _memory.set_rss_limit(limit)
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: keep freed memory at the top of the heap
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD: serve blocks up to 32 MiB from the heap, not mmap
    except (OSError, AttributeError):  # not glibc: the defaults stay
        pass


def default_workers() -> int:
    """Worker processes a scan uses by default: one per core this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def scan(
    depth: int = 9,
    *,
    tokens: int = 4,
    m: int = 1,
    q: int = 2,
    lo: float = -1.0,
    hi: float = 2.0,
    seeds: int = 3,
    d_model: int = 8,
    grid: int = 200,
    region_cap: int = 200_000,
    progress: Callable[[int, int], None] | None = None,
    exact_depth: int = 0,
    workers: int = 1,
    relu_exact_depth: int = 0,
) -> list[dict]:
    """Rows for D = 1..depth. ``progress(done, total)`` is called as the work advances.
    ``exact_depth``: count the random hardmax Transformers exactly (curved engine) up to this depth.
    ``relu_exact_depth``: count the random ReLU-attention Transformers' spline pieces exactly (certified curved
    engine) up to this depth (q = 2 only).
    ``workers``: processes for the NumPy jobs (the exact counts of each construction and of each seed's random
    Transformers), which run beside the sampled counts (JAX) of this process; 1 runs everything here, in
    order. The rows are the same for every ``workers``. A memory limit set in :mod:`regioncount._memory`
    holds for each worker and for this process and its workers together."""
    if depth < 1:
        raise ValueError("depth must be at least 1")
    if workers < 1:
        raise ValueError("workers must be at least 1")
    kw: dict[str, Any] = dict(tokens=tokens, m=m, q=q, lo=lo, hi=hi, region_cap=region_cap)
    exact_seeds = list(range(seeds)) if exact_depth and q == 2 else []
    relu_seeds = list(range(seeds)) if relu_exact_depth and q == 2 else []
    total = depth + 1 + len(exact_seeds) + len(relu_seeds)  # progress steps
    done = 0

    def tick():
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    sample_kw: dict[str, Any] = dict(tokens=tokens, q=q, lo=lo, hi=hi, seeds=seeds, d_model=d_model, grid=grid)
    table_kw: dict[str, Any] = dict(depth=depth, box=Box(lo, hi, q), seeds=seeds, d_model=d_model, grid=grid)
    if workers == 1:
        t0 = time.perf_counter()
        exact = []
        for s in exact_seeds:
            exact.append(_exact_random_seed(q, tokens, d_model, depth, exact_depth, s, lo, hi))
            tick()
        relu = []
        for s in relu_seeds:
            relu.append(_relu_exact_seed(q, tokens, d_model, depth, relu_exact_depth, s, lo, hi))
            tick()
        random = _random_table(_sampled_columns(depth, **sample_kw), exact, relu=relu, **table_kw)
        shared = (time.perf_counter() - t0) / depth
        tick()
        constructed = {}
        for D in range(1, depth + 1):
            constructed[D] = _timed(constructed_row, D, **kw)
            tick()
    else:
        import multiprocessing

        # Every job runs in a fresh worker process (spawn; one job per process, so each one's memory is
        # returned when it ends, and JAX is only imported by the sampling job); this process only waits,
        # holding the memory limit over itself and its workers together.
        big = [D for D in range(depth, 0, -1) if _construction_regions(D, **kw) > 10_000]
        total = len(exact_seeds) + len(relu_seeds) + len(big) + 2  # jobs: the small constructions are one
        ctx = multiprocessing.get_context("spawn")
        pool = ctx.Pool(min(workers, total), _worker_init, (_memory.LIMIT,), maxtasksperchild=1)
        try:
            # largest first: the random Transformers' exact counts, the deepest construction, the sampling
            jobs = [
                pool.apply_async(_timed, (_exact_random_seed, q, tokens, d_model, depth, exact_depth, s, lo, hi))
                for s in exact_seeds
            ]
            relu_jobs = [
                pool.apply_async(_timed, (_relu_exact_seed, q, tokens, d_model, depth, relu_exact_depth, s, lo, hi))
                for s in relu_seeds
            ]
            # the large constructions one job each (by default the paper layout at D = 9 and the compact one
            # at D = 4, both 160,867 regions), the sampling after the largest, then the small ones together
            deep = {D: pool.apply_async(_timed, (constructed_row, D), kw) for D in big[:1]}
            sampled = pool.apply_async(_timed, (_sampled_columns, depth), sample_kw)
            deep.update({D: pool.apply_async(_timed, (constructed_row, D), kw) for D in big[1:]})
            small = [D for D in range(1, depth + 1) if D not in big]  # one job: a process start each is more
            rest = pool.apply_async(_constructed_rows, (small,), kw)
            pool.close()

            def wait(job):
                while not job.ready():
                    _memory.check_rss(children=True)
                    job.wait(0.05)
                res = job.get()
                tick()
                return res

            ex_done = [wait(job) for job in jobs]
            relu_done = [wait(job) for job in relu_jobs]
            cols, sampled_s = wait(sampled)
            constructed = {D: wait(job) for D, job in deep.items()}
            constructed.update(wait(rest))
            pool.join()
        except BaseException:
            pool.terminate()
            pool.join()
            raise
        exact = [e for e, _ in ex_done]
        random = _random_table(cols, exact, relu=[r for r, _ in relu_done], **table_kw)
        shared = (sampled_s + sum(sec for _, sec in ex_done) + sum(sec for _, sec in relu_done)) / depth
    rows = []
    for D in range(1, depth + 1):
        row, seconds = constructed[D]
        row.update(random[D - 1])
        row["seconds"] = seconds + shared
        rows.append(row)
    return rows


def rows_to_csv(rows: list[dict]) -> str:
    lines = [",".join(CSV_COLUMNS)]
    for r in rows:
        cells = []
        for c in CSV_COLUMNS:
            v = r.get(c)
            cells.append("" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v)))
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"
