"""Retrieval cells of a relation model for a fixed key set on a 2D domain, exactly (DESIGN §8).

A query ``x`` retrieves ``argmax_j <phi(x), psi(y_j)> + b_j`` (ties to the lower index, like ``argmax``).
The model's retrieval program (phi, key rows, argmax; see :meth:`RelationModel.lower`) is split by the
exact ``plane`` engine into convex activation regions; each retrieves one key, and on each every score
is affine in the domain's parameters ``(u1, u2)``. Areas are in those parameters (for a box: the inputs).

Against a target preorder given by a utility ``u(x, y)`` (Debreu's representation; Altabaa and Lafferty
2024, Sec. 5) the retrieval error is the area where the model retrieves a key the target does not rank
first. Where the target's cells are polygons (a relation model, or a target with an affine utility) the
two partitions are overlaid convex piece by convex piece with shapely and the area is exact; otherwise
points drawn by the sample engine's forward pass estimate it, labelled as sampled, with its standard error.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time

import numpy as np

from .. import _tolerances as tol
from .._domain import Box, Slice
from .._enums import Method
from .._errors import DomainError, KeySetError, MemoryCapError, RegionCountError
from ..engines import forward_codes, partition_plane
from ..networks import RelationModel
from ..networks._ops import Program, walk_widths
from ..results import Partition
from ..results._partition import _components
from ._targets import as_target, utility_program

#: Points per forward pass of a sampled estimate (one compiled shape).
_CHUNK = 1 << 15
#: Peak bytes per squared key of a retrieval partition and its summary above the process's base, measured
#: with a 2 -> 32 -> 8 relation model on [-1, 1]^2 (100 keys: 52 MB, 200 keys: 217 MB; benchmarks/README.md),
#: rounded up: the up-front estimate that :func:`retrieval_partition` holds against a memory cap.
RETRIEVAL_BYTES_PER_KEY2 = 8192
#: Peak bytes per region of the plane engine (``_count.PLANE_BYTES_PER_REGION``), for the region cap.
_PLANE_BYTES_PER_REGION = 1536


def _score_maps(program: Program, domain, codes: np.ndarray) -> np.ndarray:
    """Affine maps ``(R, n, 3)`` from ``(u1, u2, 1)`` to the scores entering the final GroupMax of
    ``program`` on each region, from the regions' codes ``codes (R, C)`` (code layout of ``_ops``): the one
    interpreter of codes (:func:`~regioncount.networks._interpret.float_maps`) on the ops before it."""
    from ..networks._interpret import float_maps
    from ..networks._ops import code_length
    from ..networks._protocol import refuse_unsupported

    refuse_unsupported("retrieval", (op for op, _, _ in walk_widths(program)))
    ops = list(program.ops)
    last = max((i for i, op in enumerate(ops) if op.key == "groupmax"), default=len(ops))
    head = Program(program.tokens, program.input_dim, tuple(ops[:last]))
    x0, V = domain.input_map()
    A, _, _ = float_maps(head, codes[:, : code_length(head)], x0, V)
    return A[:, :, program.out_token, :].transpose(0, 2, 1)


def _param_box(domain: Box | Slice) -> tuple[np.ndarray, np.ndarray]:
    """The rectangle ``lo, hi (2,)`` of a domain's parameters ``(u1, u2)``, as float64."""
    return np.asarray(domain.param_lo, dtype=np.float64), np.asarray(domain.param_hi, dtype=np.float64)


def _evaluate(maps: np.ndarray, U: np.ndarray) -> np.ndarray:
    """``maps (N, ..., 3)`` at points ``U (N, 2)`` -> ``(N, ...)``."""
    shape = (U.shape[0],) + (1,) * (maps.ndim - 2)
    return maps[..., 0] * U[:, 0].reshape(shape) + maps[..., 1] * U[:, 1].reshape(shape) + maps[..., 2]


def _halfplanes(W: np.ndarray, centre: np.ndarray, reach: float):
    """Halfplanes ``{u : W[i] . (u, 1) >= 0}`` (``W (N, 3)``) on a domain within ``reach / 2`` of ``centre``:
    shapely squares ``(N,)`` that cover the positive side over the domain, and ``whole (N,)``: +1 where the
    halfplane holds the whole domain, -1 where it misses it, 0 where the square is needed."""
    import shapely

    a, c = W[:, :2], W[:, 2]
    norm = np.hypot(a[:, 0], a[:, 1])
    safe = np.where(norm > 0, norm, 1.0)
    off = np.where(norm > 0, (a @ centre + c) / safe, np.where(c >= 0, np.inf, -np.inf))  # centre to line
    whole = np.where(off >= reach, 1, np.where(off <= -reach, -1, 0))
    n = np.where((norm > 0)[:, None], a / safe[:, None], [[1.0, 0.0]])
    p0 = centre - np.where(whole == 0, off, 0.0)[:, None] * n  # the line's point nearest the centre
    t = np.stack([-n[:, 1], n[:, 0]], 1)
    L = 4.0 * reach
    quad = np.stack([p0 + L * t, p0 - L * t, p0 - L * t + L * n, p0 + L * t + L * n], 1)
    return shapely.polygons(quad), whole


def softmax_inverse_temperature(margin: float, n_keys: int, weight: float = 0.99) -> float:
    """The inverse temperature ``lambda`` at which softmax attention puts at least ``weight`` on the
    retrieved key wherever the score margin (best minus second best) is at least ``margin``:
    the weight is at least ``1 / (1 + (n - 1) exp(-lambda m))``, so ``lambda = ln((n - 1) w / (1 - w)) / m``."""
    if n_keys < 2:
        return 0.0
    if not 0 < weight < 1 or not margin > 0:
        raise ValueError("need 0 < weight < 1 and a positive margin")
    return math.log((n_keys - 1) * weight / (1 - weight)) / margin


@dataclasses.dataclass(frozen=True, eq=False)
class Retrieval:
    """The exact retrieval partition of a relation model for ``keys (n, p)`` (bias ``(n,)``) on ``domain``.

    ``partition``: its activation regions (convex polygons, code = phi's ReLU bits + retrieved key);
    ``key_of_region (R,)``; ``score_maps (R, n, 3)``: every key's score, affine on each region.
    """

    model: RelationModel
    keys: np.ndarray
    key_bias: np.ndarray
    domain: Box | Slice
    partition: Partition
    key_of_region: np.ndarray
    score_maps: np.ndarray
    seconds: float = 0.0
    exact = True

    @property
    def n_keys(self) -> int:
        return int(self.keys.shape[0])

    @property
    def key_areas(self) -> np.ndarray:
        """Area ``(n,)`` of the set of queries that retrieve each key."""
        return np.bincount(self.key_of_region, self.partition.areas, minlength=self.n_keys)

    @property
    def retrieved(self) -> np.ndarray:
        """Indices of the keys retrieved on a set of positive area."""
        return np.flatnonzero(np.bincount(self.key_of_region, minlength=self.n_keys) > 0)

    @functools.cached_property
    def cell_labels(self) -> np.ndarray:
        """Connected retrieval cell ``(R,)`` of each region: neighbours (sharing a segment) with one key merged."""
        E = self.partition.adjacency()
        return _components(self.partition.n_regions, E[self.key_of_region[E[:, 0]] == self.key_of_region[E[:, 1]]])

    @property
    def n_cells(self) -> int:
        """Number of connected retrieval cells (a key's cell may be disconnected when phi is not linear)."""
        return int(np.unique(self.cell_labels).size)

    @functools.cached_property
    def cells(self) -> list:
        """Per key, the set of queries that retrieve it as a shapely geometry (empty where none); vertices on
        a grid of 1e-13 of the domain's span."""
        return _cells_by_key(self.partition, self.key_of_region, self.n_keys)

    def scores(self, U) -> np.ndarray:
        """Scores ``(N, n)`` at parameter points ``U (N, 2)``, from the model."""
        return self.model.scores(self.domain.to_input(np.asarray(U, dtype=np.float64)), self.keys, self.key_bias)

    def margins(self, U) -> np.ndarray:
        """Best minus second-best score ``(N,)`` at parameter points ``U (N, 2)`` (inf for a single key)."""
        S = np.sort(self.scores(U), axis=1)
        return S[:, -1] - S[:, -2] if S.shape[1] > 1 else np.full(S.shape[0], np.inf)

    def margin_area(self, margin: float) -> float:
        """Exact area where the score margin is at least ``margin`` (> 0): on a region retrieving key ``j``
        it is the convex polygon where ``s_j - s_i >= margin`` for every ``i != j``."""
        if not margin > 0:
            raise ValueError(f"the margin must be positive, got {margin}")
        if self.n_keys == 1:
            return float(self.partition.areas.sum())
        import shapely

        R, n = self.partition.n_regions, self.n_keys
        j = self.key_of_region
        lo, hi = _param_box(self.domain)
        centre, reach = (lo + hi) / 2, float(np.hypot(*(hi - lo)))
        # the other keys of each region, in order: rival k of region r is others[r, k]
        others = np.argsort(np.arange(n)[None, :] == j[:, None], axis=1, kind="stable")[:, : n - 1]
        rows = np.arange(R)
        cells = self.partition.to_shapely()
        # a sliver's float polygon can be invalid for GEOS (a TopologyException at 70 keys): its valid form
        # has the same area up to rounding
        bad = ~shapely.is_valid(cells)
        cells[bad] = shapely.make_valid(cells[bad])
        for k in range(n - 1):
            W = self.score_maps[rows, j] - self.score_maps[rows, others[:, k]]
            W[:, 2] -= margin
            quads, whole = _halfplanes(W, centre, reach)
            cut = whole == 0
            cells[cut] = shapely.intersection(cells[cut], quads[cut])
            cells[whole < 0] = shapely.Polygon()
            bad = ~shapely.is_valid(cells)
            cells[bad] = shapely.make_valid(cells[bad])
        return float(shapely.area(cells).sum())

    def summary(self, margins=(0.05, 0.1, 0.25), weight: float = 0.99) -> dict:
        """JSON-ready: counts, areas per key, and per margin the area where it holds and the softmax
        inverse temperature that puts ``weight`` on the retrieved key there."""
        area = float(self.partition.areas.sum())
        rows = []
        for m in margins:
            a = self.margin_area(m)
            rows.append(
                {
                    "margin": m,
                    "area": a,
                    "fraction": a / area,
                    "inverse_temperature": softmax_inverse_temperature(m, self.n_keys, weight),
                }
            )
        return {
            "keys": self.n_keys,
            "retrieved_keys": int(self.retrieved.size),
            "cells": self.n_cells,
            "activation_regions": self.partition.n_regions,
            "area": area,
            "key_areas": self.key_areas.tolist(),
            "margins": rows,
            "softmax_weight": weight,
            "exact": True,
            "seconds": self.seconds,
        }


def _check_domain(model: RelationModel, domain):
    if isinstance(domain, Box) and (domain.dim != 2 or model.input_dim != 2):
        raise DomainError(
            f"retrieval cells are drawn on a 2D domain: a 2D box for 2D queries, or a slice for {model.input_dim}D ones"
        )
    if isinstance(domain, Slice) and domain.x0.shape[0] != model.input_dim:
        raise DomainError(f"the slice lives in R^{domain.x0.shape[0]} but queries have dimension {model.input_dim}")
    if not isinstance(domain, (Box, Slice)):
        raise DomainError("retrieval needs a 2D Box or a Slice")


def voronoi_bias(model: RelationModel, keys) -> np.ndarray:
    """Per-key bias ``-|psi(y_j)|^2 / 2``: with it the score ``<phi(x), psi(y_j)> - |psi(y_j)|^2 / 2`` ranks keys
    by ``-|phi(x) - psi(y_j)|^2 / 2`` plus a term common to all keys, so with ``phi = psi = identity`` the
    retrieval cells are the keys' Voronoi cells."""
    K, _ = model.check_keys(keys)
    return -0.5 * (model.key_features(K) ** 2).sum(axis=1)


def load_keys(path) -> np.ndarray:
    """A key table ``(n, p)`` from a file: ``.npy``, ``.json`` (a list of keys, each a list of numbers), or
    text (``.csv``/``.txt``/other: one key a row, numbers separated by commas or spaces; ``#`` comments).
    Raises :class:`~regioncount._errors.KeySetError` with one sentence when it cannot be read."""
    import json
    import warnings
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise KeySetError(f"{path}: no such keys file")
    try:
        if p.suffix.lower() == ".npy":
            K = np.load(p, allow_pickle=False)
        elif p.suffix.lower() == ".json":
            K = np.asarray(json.loads(p.read_text()), dtype=np.float64)
        else:
            text = p.read_text()
            rows = [ln.split("#")[0].replace(",", " ").split() for ln in text.splitlines()]
            rows = [r for r in rows if r]
            if len({len(r) for r in rows}) > 1:
                raise KeySetError(f"{path}: rows have different numbers of entries")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                K = np.array([[float(v) for v in r] for r in rows], dtype=np.float64)
    except KeySetError:
        raise
    except (ValueError, TypeError, OSError, UnicodeDecodeError) as e:
        raise KeySetError(f"{path}: not a readable table of keys ({e})") from None
    K = np.asarray(K, dtype=np.float64)
    if K.ndim == 1 and K.size:
        K = K[:, None]
    if K.size == 0:
        raise KeySetError(f"{path}: the key set is empty")
    if K.ndim != 2:
        raise KeySetError(f"{path}: keys must be a table (one key a row), got shape {K.shape}")
    return K


def retrieval_memory(n_keys: int) -> int:
    """The bytes a retrieval partition of ``n_keys`` keys is estimated to need (:data:`RETRIEVAL_BYTES_PER_KEY2`)."""
    return RETRIEVAL_BYTES_PER_KEY2 * int(n_keys) ** 2


def retrieval_partition(
    model, keys, domain, *, key_bias=None, max_regions=None, progress=None, memory_cap: int | None = None
) -> Retrieval:
    """The exact retrieval partition of ``model`` (a :class:`RelationModel`, e.g. from
    :func:`~regioncount.networks.attention_head_relation`) for ``keys (n, p)`` on a 2D ``domain``.

    ``memory_cap`` (bytes): refuse up front, with :class:`~regioncount._errors.MemoryCapError`, a key set
    whose estimated memory (:func:`retrieval_memory`) is over it, and stop the partition once its regions
    pass what fits (``max_regions`` lowers that further).

    Raises :class:`~regioncount._errors.KeySetError` for an empty key set, keys of the wrong dimension or
    non-finite keys, and :class:`~regioncount._errors.DomainError` for a domain that does not fit.
    """
    if not isinstance(model, RelationModel):
        raise RegionCountError(f"retrieval needs a relation model, got a {type(model).__name__}")
    t0 = time.perf_counter()
    K, b = model.check_keys(keys, key_bias)
    _check_domain(model, domain)
    if memory_cap is not None:
        need = retrieval_memory(K.shape[0])
        if need > memory_cap:
            raise MemoryCapError(
                f"{K.shape[0]:,} keys need about {need / 2**30:.2f} GiB for their retrieval cells "
                f"({RETRIEVAL_BYTES_PER_KEY2:,} bytes per squared key, measured), over the "
                f"{memory_cap / 2**30:.2f} GiB memory cap: raise --memory-cap or give fewer keys"
            )
        fits = max(1, memory_cap // _PLANE_BYTES_PER_REGION)
        max_regions = fits if max_regions is None else min(int(max_regions), fits)
    program = model.lower(K, b)
    P = partition_plane(program, domain, max_regions=max_regions, progress=progress)
    codes = P.codes
    return Retrieval(
        model=model,
        keys=K,
        key_bias=b,
        domain=domain,
        partition=P,
        key_of_region=codes[:, -1].astype(np.int64),
        score_maps=_score_maps(program, domain, codes),
        seconds=time.perf_counter() - t0,
    )


@dataclasses.dataclass(frozen=True, eq=False)
class RetrievalError:
    """Area where the model retrieves a key the target does not rank first.

    ``exact``: True for the polygon overlay; False for a sampled estimate, which comes with ``samples`` and
    ``std_error`` (of the area). ``mistakes``: shapely polygons of the mistaken pieces (exact only);
    ``target_cells``: per key the target's cell (exact) or None; ``target_grid``: the target's argmax on a
    grid of cell centres (sampled only, row ``i`` is ``u2``), for pictures.
    """

    area: float
    domain_area: float
    exact: bool
    method: Method
    samples: int | None = None
    std_error: float | None = None
    mistakes: list | None = None
    target_cells: list | None = None
    target_grid: np.ndarray | None = None
    seconds: float = 0.0

    @property
    def fraction(self) -> float:
        return self.area / self.domain_area

    def as_dict(self) -> dict:
        """JSON-ready, every key prefixed ``mistake_`` (so it sits beside a partition's own fields)."""
        d = {
            "mistake_area": self.area,
            "mistake_fraction": self.fraction,
            "mistake_exact": self.exact,
            "mistake_method": self.method,
            "mistake_seconds": self.seconds,
            "domain_area": self.domain_area,
        }
        if not self.exact:
            d.update(mistake_samples=self.samples, mistake_std_error=self.std_error)
        return d


def _cells_by_key(part: Partition, keys: np.ndarray, n: int) -> list:
    """Per key, the union of the convex regions retrieving it (a shapely geometry, empty where none)."""
    import shapely

    polys = part.to_shapely()
    # two sides of a cut may subdivide it differently (a vertex of one lies on the other's edge only to
    # rounding): a union on a grid of 1e-13 of the domain's span merges them without gaps or slits
    span = np.asarray(part.domain.param_hi) - np.asarray(part.domain.param_lo)
    grid = tol.RETRIEVAL_GRID * float(np.max(span))
    tiny = tol.RETRIEVAL_SLIT * float(np.prod(span))  # the plane engine makes no region below this (its area_tol)
    out = []
    for j in range(n):
        u = shapely.union_all(polys[keys == j], grid_size=grid)
        # the union can keep zero-area slits where cuts met; drop rings that enclose no area
        parts = [
            shapely.Polygon(p.exterior, [r for r in p.interiors if shapely.Polygon(r).area > tiny])
            for p in getattr(u, "geoms", [u])
            if p.geom_type == "Polygon" and p.area > tiny
        ]
        out.append(shapely.MultiPolygon(parts) if len(parts) > 1 else (parts[0] if parts else shapely.Polygon()))
    return out


def retrieval_error(
    retrieval: Retrieval,
    target,
    *,
    method: Method | str = Method.AUTO,
    samples: int = 100_000,
    seed: int = 0,
    grid: int = 200,
    tie_tol: float = tol.RETRIEVAL_TIE,
) -> RetrievalError:
    """The retrieval error of ``retrieval`` against ``target`` (see :func:`~regioncount.relations.as_target`).

    ``method``: ``"exact"`` (polygon overlay; only where the target's cells are polygons), ``"sample"``
    (``samples`` uniform points, seeded by ``seed``), or ``"auto"`` (exact where possible). Keys the
    target ties with its best within ``tie_tol`` (relative) count as ranked first.
    """
    if method not in (Method.AUTO, Method.EXACT, Method.SAMPLE):
        raise RegionCountError(f"unknown method {method!r}: use auto, exact or sample")
    t0 = time.perf_counter()
    target = as_target(target)
    lo, hi = _param_box(retrieval.domain)
    centre = (lo + hi) / 2
    try:
        probe = np.asarray(target.matrix(retrieval.domain.to_input(centre[None]), retrieval.keys))
    except (ValueError, TypeError, IndexError) as e:
        raise RegionCountError(f"the target cannot rank these keys for these queries ({e})") from None
    if probe.shape != (1, retrieval.n_keys):
        raise RegionCountError(f"the target gives {probe.shape} utilities for 1 query and {retrieval.n_keys} keys")
    program = utility_program(target, retrieval.keys) if method != Method.SAMPLE else None
    if program is None and method == Method.EXACT:
        raise RegionCountError(
            "the target's retrieval cells are not known to be polygons, so its error cannot be exact: use method sample"
        )
    if program is not None:
        if program.input_dim != retrieval.model.input_dim:
            raise RegionCountError(
                f"the target takes {program.input_dim}D queries, the model {retrieval.model.input_dim}D ones"
            )
        out = _exact_error(retrieval, program, tie_tol)
    else:
        out = _sampled_error(retrieval, target, samples, seed, grid, tie_tol)
    return dataclasses.replace(out, seconds=time.perf_counter() - t0)


def _exact_error(ret: Retrieval, program: Program, tie_tol: float) -> RetrievalError:
    import shapely

    TP = partition_plane(program, ret.domain)
    tcodes = TP.codes
    tkey = tcodes[:, -1].astype(np.int64)
    tmaps = _score_maps(program, ret.domain, tcodes)  # (Rt, n, 3): the target's utilities, affine per region
    mp, tp = ret.partition.to_shapely(), TP.to_shapely()
    qi, ti = shapely.STRtree(tp).query(mp, predicate="intersects")
    mk, tk = ret.key_of_region[qi], tkey[ti]
    differ = mk != tk
    qi, ti, mk, tk = qi[differ], ti[differ], mk[differ], tk[differ]
    pieces = shapely.intersection(mp[qi], tp[ti])
    # on a piece the target's best key tk beats the model's mk, unless they tie there; the gap is affine on
    # the piece and >= 0, so it is zero on the whole piece exactly when it is zero at every vertex
    coords, owner = shapely.get_coordinates(pieces, return_index=True)
    gap = _evaluate((tmaps[ti, tk] - tmaps[ti, mk])[owner], coords)
    lo, hi = _param_box(ret.domain)
    size = np.abs(tmaps[..., :2]).sum(-1).max() * np.abs(hi - lo).max() + np.abs(tmaps[..., 2]).max()
    worst = np.full(len(pieces), -np.inf)
    np.maximum.at(worst, owner, gap)
    wrong = worst > tie_tol * max(size, 1.0)
    areas = shapely.area(pieces)
    mistakes = pieces[wrong & (areas > 0)]
    return RetrievalError(
        area=float(areas[wrong].sum()),
        domain_area=float(np.prod(hi - lo)),
        exact=True,
        method=Method.EXACT,
        mistakes=list(mistakes),
        target_cells=_cells_by_key(TP, tkey, ret.n_keys),
    )


def _sampled_error(ret: Retrieval, target, samples: int, seed: int, grid: int, tie_tol: float) -> RetrievalError:
    if samples < 1:
        raise RegionCountError("samples must be at least 1")
    lo, hi = _param_box(ret.domain)
    program = ret.model.lower(ret.keys, ret.key_bias)
    rng = np.random.default_rng(seed)
    wrong = 0
    done = 0
    while done < samples:
        n = min(_CHUNK, samples - done)
        U = rng.uniform(lo, hi, size=(n, 2))
        X = ret.domain.to_input(U)
        Xp = np.concatenate([X, np.repeat(X[-1:], _CHUNK - n, 0)]) if n < _CHUNK else X
        _, codes, _ = forward_codes(program, Xp)
        mk = np.asarray(codes)[:n, -1]
        u = np.asarray(target.matrix(X, ret.keys), dtype=np.float64)
        if not np.all(np.isfinite(u)):
            raise RegionCountError("the target's utility is not finite (NaN or inf) at some sampled queries")
        best = u.max(axis=1)
        wrong += int(np.sum(u[np.arange(n), mk] < best - tie_tol * (1.0 + np.abs(best))))
        done += n
    p = wrong / samples
    A = float(np.prod(hi - lo))
    # the target's argmax on a grid of cell centres, for pictures of its cell boundaries
    g = (np.arange(grid) + 0.5) / grid
    G = np.stack(np.meshgrid(lo[0] + g * (hi[0] - lo[0]), lo[1] + g * (hi[1] - lo[1])), -1).reshape(-1, 2)
    labels = np.argmax(target.matrix(ret.domain.to_input(G), ret.keys), axis=1).reshape(grid, grid)
    return RetrievalError(
        area=A * p,
        domain_area=A,
        exact=False,
        method=Method.SAMPLE,
        samples=samples,
        std_error=A * math.sqrt(p * (1 - p) / samples),
        target_grid=labels,
    )
