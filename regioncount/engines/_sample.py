"""The ``sample`` engine (DESIGN §3): count distinct activation codes over a grid or random points.

Forward passes and hashing run jitted in JAX (:func:`~regioncount.engines._forward.forward_keys`), in
chunks so that peak memory does not grow with the sample count. Distinct 128-bit keys are merged on the
host with NumPy (sorting, not hashing into Python objects). A sampled count is a lower bound on the
number of activation regions; alongside it we report the abundance statistics species-richness
estimators use: f1 and f2 (codes seen once and twice), the Good–Turing unseen mass f1/N and coverage
1 - f1/N (Good 1953), and Chao1 (Chao 1984; bias-corrected form when f2 = 0).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from .._config import DEFAULT_MEMORY_CAP
from .._domain import AffineSlice, Box, Segment, Slice
from .._errors import DomainError, MemoryCapError
from ..networks import check_domain, lower, walk_widths
from ..networks._ops import code_length
from ._forward import forward_keys, hash_multipliers

#: Bytes one distinct code costs while merging: two uint64 key lanes, an int64 count, and sort scratch.
BYTES_PER_DISTINCT = 3 * 24
#: Activation memory a chunk may use (bytes); sets the chunk size.
CHUNK_BUDGET = 256 * 2**20


@dataclasses.dataclass(frozen=True)
class SampleCount:
    """Result of a sampled count. ``regions`` is a LOWER BOUND on the activation regions of the domain."""

    regions: int
    samples: int
    f1: int
    f2: int
    chao1: float
    coverage: float
    unseen_mass: float
    ties: int
    mode: str
    seconds: float = 0.0
    exact: bool = False
    #: the domain sampled (not part of :meth:`as_dict`, which a count record completes)
    domain: Box | Slice | AffineSlice | Segment | None = dataclasses.field(default=None, compare=False)

    def as_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "domain"}
        d["lower_bound"] = True
        return d

    # -- the result protocol (results/_protocol.py): a sampled count keeps hashes, not codes or points

    def linear_regions(self) -> None:
        return None

    @property
    def region_codes(self) -> None:
        return None

    @property
    def witnesses(self) -> None:
        return None


def chao1(distinct: int, f1: int, f2: int) -> float:
    """Chao1 richness estimate: ``S + f1^2 / (2 f2)``, or ``S + f1 (f1 - 1) / (2 (f2 + 1))`` when f2 = 0."""
    if f2 > 0:
        return distinct + f1 * f1 / (2.0 * f2)
    return distinct + f1 * (f1 - 1) / (2.0 * (f2 + 1))


def _unique_weighted(ka: np.ndarray, kb: np.ndarray, w: np.ndarray):
    """Distinct 128-bit keys ``(ka, kb)`` with summed weights; output sorted by ``(ka, kb)``."""
    if ka.size == 0:
        return ka, kb, w
    order = np.argsort(ka, kind="stable")
    ka_s, kb_s = ka[order], kb[order]
    same_a = ka_s[1:] == ka_s[:-1]
    if np.any(same_a & (kb_s[1:] != kb_s[:-1])):
        # Two codes share the first lane: order by both lanes (rare, ~S^2 / 2^65).
        order = np.lexsort((kb, ka))
        ka_s, kb_s = ka[order], kb[order]
        same_a = ka_s[1:] == ka_s[:-1]
    new = np.ones(ka_s.size, bool)
    new[1:] = ~(same_a & (kb_s[1:] == kb_s[:-1]))
    starts = np.flatnonzero(new)
    return ka_s[starts], kb_s[starts], np.add.reduceat(w[order], starts)


class _DistinctCounter:
    """Accumulates distinct keys with multiplicities across chunks, merging lazily (amortised n log n)."""

    def __init__(self):
        self.ka = np.zeros(0, np.uint64)
        self.kb = np.zeros(0, np.uint64)
        self.n = np.zeros(0, np.int64)
        self.pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.pending_size = 0

    def add(self, ka, kb, w):
        self.pending.append(_unique_weighted(ka, kb, w))
        self.pending_size += self.pending[-1][0].size
        if self.pending_size > max(self.ka.size, 1 << 16):
            self._merge()

    def _merge(self):
        if not self.pending:
            return
        parts = [(self.ka, self.kb, self.n), *self.pending]
        self.ka, self.kb, self.n = _unique_weighted(*(np.concatenate(p) for p in zip(*parts)))
        self.pending, self.pending_size = [], 0

    def counts(self) -> np.ndarray:
        self._merge()
        return self.n


def _activation_floats(program) -> int:
    """Floats one example keeps live in the forward pass (a generous estimate for chunk sizing)."""
    T = program.tokens
    total = T * program.input_dim
    for op, w_in, w_out in walk_widths(program):
        total += T * (w_in + w_out) + op.work_floats(T)
    return total + 3 * code_length(program)


def _grid_points(start: int, n: int, grid: int, lo: np.ndarray, step: np.ndarray) -> np.ndarray:
    """Cell centres ``start .. start+n-1`` of a ``grid**dim`` grid in C order, shape ``(n, dim)``."""
    ids = np.arange(start, start + n)
    U = np.empty((n, lo.size))
    for axis in range(lo.size - 1, -1, -1):
        ids, r = np.divmod(ids, grid)
        U[:, axis] = lo[axis] + (r + 0.5) * step[axis]
    return U


def _param_box(domain):
    if isinstance(domain, (Box, Slice, AffineSlice, Segment)):
        return domain.param_lo, domain.param_hi
    raise DomainError(f"unknown domain {domain!r}")


def _input_bbox(domain):
    """Bounding box of the domain in input space (for checking a compiled model's valid box)."""
    lo, hi = _param_box(domain)
    x0, V = domain.input_map()
    corners = np.stack(np.meshgrid(*[[a, b] for a, b in zip(lo, hi)], indexing="ij"), -1).reshape(-1, lo.size)
    X = x0 + corners @ V.T
    return X.min(0), X.max(0)


def count_sampled(net, domain, **options) -> SampleCount:
    """Count distinct activation codes of ``net`` over ``domain`` (a lower bound on its regions).

    Exactly one of ``grid`` (``grid`` points per parameter axis, cell centres, ``grid**dim`` points in
    all) and ``samples`` (that many uniform random points, seeded by ``seed``) is given. ``domain`` is a
    :class:`Box` in R^q, a 2D :class:`Slice`, or a :class:`Segment`. Other options: ``chunk`` (points
    per forward pass), ``memory_cap`` (bytes), ``progress(done, total)`` called after each chunk.
    Raises :class:`MemoryCapError` before any work when the distinct-code table could outgrow the cap.
    """
    return count_sampled_prefixes(net, domain, None, **options)[0]


def count_sampled_prefixes(
    net,
    domain,
    prefixes: tuple[int, ...] | None,
    *,
    grid: int | None = None,
    samples: int | None = None,
    seed: int = 0,
    chunk: int | None = None,
    memory_cap: int = DEFAULT_MEMORY_CAP,
    progress: Callable[[int, int], None] | None = None,
    client=None,
) -> list[SampleCount]:
    """As :func:`count_sampled`, for several code prefixes at once: entry ``p`` of the result counts the
    distinct values of the first ``prefixes[p]`` code entries (``None``: the whole code). With a
    Transformer, the prefix ending after block ``D`` is the code of the network truncated to its first
    ``D`` blocks, so one forward pass counts every depth.

    ``client``: a ``dask.distributed.Client``; the points are then split into ranges counted as Dask tasks
    on its cluster (the same points as without it, so the same counts), their distinct keys merged here."""
    import time

    t0 = time.perf_counter()
    program = lower(net)
    x0, V = domain.input_map()
    if V.shape[0] != program.input_dim:
        raise DomainError(f"the domain lives in R^{V.shape[0]} but the network takes {program.input_dim} inputs")
    check_domain(net, *_input_bbox(domain))
    if (grid is None) == (samples is None):
        raise ValueError("give exactly one of grid= and samples=")
    lo, hi = _param_box(domain)
    dim = lo.size
    if grid is not None:
        if grid < 1:
            raise ValueError("grid must be at least 1 point per axis")
        total = int(grid) ** dim
    else:
        assert samples is not None  # exactly one of grid and samples, checked above
        if samples < 1:
            raise ValueError("samples must be at least 1")
        total = int(samples)
    n_keys = 1 if prefixes is None else len(prefixes)
    need = total * BYTES_PER_DISTINCT * n_keys
    if need > memory_cap:
        raise MemoryCapError(
            f"{total:,} samples may need {need / 2**30:.1f} GiB to hold their distinct codes, over the "
            f"{memory_cap / 2**30:.1f} GiB cap: lower --grid/--samples or raise --memory-cap"
        )
    per_point = 8 * _activation_floats(program)
    if chunk is None:
        chunk = int(min(1 << 18, max(1024, CHUNK_BUDGET // per_point)))
    # never pad a small run up to a big batch; powers of two keep the compiled shapes few
    chunk = min(chunk, 1 << max(10, (total - 1).bit_length()))

    counters = [_DistinctCounter() for _ in range(n_keys)]
    ties = 0
    spec = (grid, seed, chunk, prefixes)
    if client is None:
        for done in range(0, total, chunk):
            ties += _sample_points(program, domain, done, min(done + chunk, total), spec, counters)
            if progress is not None:
                progress(min(done + chunk, total), total)
    else:
        from ._distributed import map_tasks, n_workers

        # a few tasks per worker balance the load; each returns its distinct keys, merged here
        per_task = max(chunk, -(-total // (4 * n_workers(client))) // chunk * chunk)
        ranges = [(a, min(a + per_task, total), spec) for a in range(0, total, per_task)]
        done = 0
        for (a, b), t, parts in map_tasks(client, _sample_range, program, domain, ranges, {}):
            ties += t
            for counter, part in zip(counters, parts, strict=True):
                counter.add(*part)
            done += b - a
            if progress is not None:
                progress(done, total)
    seconds = time.perf_counter() - t0
    out = []
    for counter in counters:
        counts = counter.counts()
        f1 = int(np.sum(counts == 1))
        f2 = int(np.sum(counts == 2))
        distinct = int(counts.size)
        out.append(
            SampleCount(
                regions=distinct,
                samples=total,
                f1=f1,
                f2=f2,
                chao1=chao1(distinct, f1, f2),
                coverage=1.0 - f1 / total,
                unseen_mass=f1 / total,
                ties=ties,
                mode="grid" if grid is not None else "random",
                seconds=seconds,
                domain=domain,
            )
        )
    return out


def op_multipliers(program) -> np.ndarray:
    """The hash multipliers of ``program``'s code: those of the code its ops record (pieces of a
    piecewise-linear op, not its ReLU form's bits; :meth:`~regioncount.networks.CodeMap.form_multipliers`), as
    multipliers of the lowered code the forward pass computes."""
    cm = program.code_map
    return hash_multipliers(code_length(program)) if cm is None else cm.form_multipliers(hash_multipliers(cm.op_length))


def _sample_points(program, domain, start: int, stop: int, spec, counters) -> int:
    """Forward points ``start:stop`` (one chunk) of the sample ``spec = (grid, seed, chunk, prefixes)``
    and add their keys to ``counters`` (one per prefix); returns the number of ties.

    Point ``i`` of a grid is its ``i``-th cell centre; of a random sample, the ``i``-th uniform point of
    ``default_rng(seed)`` (the generator is advanced past the earlier points, one 64-bit draw per
    coordinate), so any split of the sample into ranges visits the same points."""
    grid, seed, chunk, prefixes = spec
    lo, hi = _param_box(domain)
    x0, V = domain.input_map()
    n = stop - start
    if grid is not None:
        U = _grid_points(start, n, grid, lo, (hi - lo) / grid)
    else:
        rng = np.random.default_rng(seed)
        rng.bit_generator.advance(start * lo.size)  # type: ignore[attr-defined]
        U = rng.uniform(lo, hi, size=(n, lo.size))
    X = x0 + U @ V.T
    if n < chunk:  # pad to the compiled batch size; padded rows are dropped below
        X = np.concatenate([X, np.repeat(X[-1:], chunk - n, 0)])
    keys, head, tie = forward_keys(program, X, op_multipliers(program), prefixes)
    keys, head = np.asarray(keys)[:n], np.asarray(head)[:n]
    for p, counter in enumerate(counters):
        starts = np.flatnonzero(head[:, p])
        runs = np.diff(np.append(starts, n))
        counter.add(keys[starts, p, 0], keys[starts, p, 1], runs)
    return int(np.asarray(tie)[:n].sum())


def _sample_range(program, domain, start: int, stop: int, spec):
    """A Dask task: the points ``start:stop`` chunk by chunk; returns ``((start, stop), ties, [(ka, kb,
    counts) per prefix])``, the distinct keys of the range with their multiplicities."""
    chunk, n_keys = spec[2], 1 if spec[3] is None else len(spec[3])
    counters = [_DistinctCounter() for _ in range(n_keys)]
    ties = 0
    for a in range(start, stop, chunk):
        ties += _sample_points(program, domain, a, min(a + chunk, stop), spec, counters)
    for c in counters:
        c.counts()  # merge pending chunks
    return (start, stop), ties, [(c.ka, c.kb, c.n) for c in counters]


def grid_codes(net, domain, grid: int) -> tuple[np.ndarray, np.ndarray]:
    """Parameter points ``(grid**dim, dim)`` (cell centres) and their full codes ``(grid**dim, C)``.

    Unchunked; meant for tests and pictures of small grids.
    """
    from ._forward import forward_codes

    program = lower(net)
    lo, hi = _param_box(domain)
    U = _grid_points(0, grid**lo.size, grid, lo, (hi - lo) / grid)  # the very points count_sampled visits
    _, codes, _ = forward_codes(program, domain.to_input(U))
    return U, np.asarray(codes)
