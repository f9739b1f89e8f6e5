"""Local complexity (DESIGN §12): how many regions meet a small ball around each data point.

For a point x and a radius r the ball is the L∞ ball ``[x - r, x + r]^q``. With input dimension 2 or 3 it is
partitioned itself (the exact plane or space engine, through :func:`count_regions`); in any dimension a 2D
slice through x can be taken instead: ``x + u1 v1 + u2 v2`` over ``[-r, r]^2`` with orthonormal ``v1, v2``
(given, or drawn per point from a seeded generator), which for coordinate directions is the ball's own 2D
section. Where an exact count is out of reach (over the memory cap, an engine that cannot split the network)
the number of distinct codes of seeded uniform points in the same ball or square stands in, a lower bound,
and the point is marked not exact.
"""

from __future__ import annotations

import numpy as np

from ._domain import Box, Slice
from ._enums import Method
from ._errors import DomainError, MemoryCapError, RegionCountError

#: Uniform points per ball for the sampled estimate.
DEFAULT_SAMPLES = 4096


def read_points(path) -> np.ndarray:
    """Points ``(N, q)`` float64 from a ``.npy`` file or a comma-separated ``.csv`` (a header line of names is
    skipped). A wrong shape or a non-finite entry is a :class:`DomainError`."""
    from pathlib import Path

    p = Path(path)
    try:
        if p.suffix.lower() == ".npy":
            X = np.load(p, allow_pickle=False)
        else:
            text = p.read_text().strip().splitlines()
            rows = [ln for ln in text if ln.strip()]
            if rows and not _numeric(rows[0]):
                rows = rows[1:]
            X = np.array([[float(v) for v in ln.split(",")] for ln in rows], dtype=np.float64)
    except (OSError, ValueError) as e:
        raise DomainError(f"cannot read points from {p}: {e}") from None
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X.reshape(1, -1)
    if X.ndim != 2 or X.shape[0] == 0:
        raise DomainError(f"{p}: points must be a table of N rows of coordinates, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise DomainError(f"{p}: points contain a non-finite value")
    return X


def _numeric(line: str) -> bool:
    try:
        [float(v) for v in line.split(",")]
    except ValueError:
        return False
    return True


def slice_directions(q: int, n: int, seed: int = 0) -> np.ndarray:
    """``(n, q, 2)`` orthonormal direction pairs, one per point, from ``numpy.random.default_rng(seed)``
    (the Q factor of a Gaussian ``(q, 2)`` matrix)."""
    if q < 2:
        raise DomainError("a 2D slice needs inputs of dimension 2 or more")
    rng = np.random.default_rng(seed)
    out = np.empty((n, q, 2))
    for i in range(n):
        Qm, Rm = np.linalg.qr(rng.normal(size=(q, 2)))
        out[i] = Qm * np.sign(np.diag(Rm))
    return out


def ball_domains(points, radius: float, *, directions=None, slice_2d: bool | None = None, seed: int = 0):
    """The domain around each point: a :class:`Box` (the L∞ ball) or a :class:`Slice` through it."""
    X = np.asarray(points, dtype=np.float64)
    if radius <= 0 or not np.isfinite(radius):
        raise DomainError(f"the radius must be positive, got {radius}")
    q = X.shape[1]
    use_slice = directions is not None or ((q > 3) if slice_2d is None else bool(slice_2d))
    if directions is not None:
        V = np.asarray(directions, dtype=np.float64)
        if V.shape == (q, 2):
            V = np.broadcast_to(V, (X.shape[0], q, 2))
        if V.shape != (X.shape[0], q, 2):
            raise DomainError(f"directions must be (q, 2) or (N, q, 2) with q = {q}, got {V.shape}")
        G = np.einsum("nqi,nqj->nij", V, V)
        if not np.allclose(G, np.eye(2), atol=1e-9):
            raise DomainError("slice directions must be orthonormal")
    elif use_slice:
        V = slice_directions(q, X.shape[0], seed)
    if use_slice:
        return [Slice(x, V[i, :, 0], V[i, :, 1], (-radius, -radius), (radius, radius)) for i, x in enumerate(X)], V
    if q > 3:
        raise DomainError(f"an exact ball of dimension {q} is out of reach: use a 2D slice through each point")
    return [Box(x - radius, x + radius) for x in X], None


def local_complexity(
    net,
    points,
    radius: float,
    *,
    directions=None,
    slice_2d: bool | None = None,
    seed: int = 0,
    method: Method | str = "auto",
    samples: int = DEFAULT_SAMPLES,
    max_regions: int | None = None,
    memory_cap: int | None = None,
    progress=None,
) -> dict:
    """Regions of ``net`` meeting the L∞ ball of ``radius`` around each of ``points (N, q)``.

    ``method``: ``"exact"`` (an error where an exact count is out of reach), ``"sample"`` (distinct codes of
    ``samples`` seeded uniform points per ball, lower bounds) or ``"auto"`` (exact, else the sampled estimate
    for that point). ``slice_2d`` / ``directions (q, 2)`` or ``(N, q, 2)``: count a 2D slice through each
    point (the default for q > 3; directions drawn from ``seed`` when not given). ``max_regions`` caps each
    exact partition. Returns a JSON-ready dict: ``per_point`` counts ``(N,)``, ``exact_per_point``,
    summary statistics (``mean``, ``median``, ``std``, ``min``, ``max``), ``exact`` (every point exact),
    ``radius``, ``ball`` (``"box"`` or ``"slice"``), ``seed`` and, for slices, ``directions``."""
    from ._count import count_regions

    X = np.asarray(points, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != net.input_dim:
        raise DomainError(f"points must be (N, {net.input_dim}) for this network, got {X.shape}")
    if method not in ("auto", "exact", "sample"):
        raise RegionCountError(f"unknown local-complexity method {method!r}: use auto, exact or sample")
    doms, V = ball_domains(X, radius, directions=directions, slice_2d=slice_2d, seed=seed)
    counts = np.zeros(len(doms), np.int64)
    exact = np.zeros(len(doms), bool)
    for i, dom in enumerate(doms):
        res = None
        if method != "sample":
            try:
                res = count_regions(
                    net, dom, method="exact", linear=False, max_regions=max_regions, memory_cap=memory_cap
                )
            except (MemoryCapError, RegionCountError) as e:
                if method == "exact" or isinstance(e, DomainError):
                    raise
                res = None
        if res is None:
            res = count_regions(net, dom, method="sample", samples=samples, seed=seed + i, memory_cap=memory_cap)
        counts[i] = int(res["regions"])
        exact[i] = bool(res["exact"])
        if progress is not None:
            progress(i + 1, len(doms))
    out = {
        "radius": float(radius),
        "points": int(X.shape[0]),
        "ball": "slice" if V is not None else "box",
        "per_point": counts.tolist(),
        "exact_per_point": exact.tolist(),
        "exact": bool(exact.all()),
        **summary_stats(counts),
        "seed": int(seed),
    }
    if V is not None:
        out["directions"] = np.asarray(V).tolist()
    if not exact.all():
        out["sampled_points"] = int((~exact).sum())
        out["samples_per_ball"] = int(samples)
    return out


def summary_stats(values) -> dict:
    """``mean``, ``median``, ``std``, ``min``, ``max`` of ``values`` (None when empty)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return dict.fromkeys(("mean", "median", "std", "min", "max"))
    return {
        "mean": float(v.mean()),
        "median": float(np.median(v)),
        "std": float(v.std()),
        "min": float(v.min()),
        "max": float(v.max()),
    }
