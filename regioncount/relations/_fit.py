"""Fitting a relation model ``<phi(x), psi(y)>`` to a target relation function with JAX and optax.

Training pairs ``(x, y)`` are drawn uniformly from a box once (seeded) and the target is evaluated on them
in NumPy, so any Python callable can be a target; Adam then minimises the mean squared error on
minibatches of that pool. The reported errors are on a grid: every pair of ``grid`` points per axis for
``x`` and for ``y`` over the box (the sup and the mean of ``|r_model - r_target|``).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable

import numpy as np

from .._config import in_x64
from .._errors import RegionCountError
from ..networks import MLP, RelationModel, random_mlp
from ._targets import as_target

#: Steps per reported loss (their mean) and progress call.
_STEPS_PER_BLOCK = 100


@dataclasses.dataclass(frozen=True, eq=False)
class FitResult:
    """A fitted model with its errors on the grid (``sup_error``, ``mean_error``) and the mean training
    loss of each 100 steps (``losses``)."""

    model: RelationModel
    target: str
    sup_error: float
    mean_error: float
    losses: np.ndarray
    steps: int
    grid: int
    seed: int
    seconds: float

    def as_dict(self) -> dict:
        return {
            "target": self.target,
            "symmetric": self.model.symmetric,
            "widths": list(self.model.phi.widths),
            "features": self.model.feature_dim,
            "sup_error": self.sup_error,
            "mean_error": self.mean_error,
            "final_loss": float(self.losses[-1]) if self.losses.size else None,
            "steps": self.steps,
            "grid": self.grid,
            "seed": self.seed,
            "seconds": self.seconds,
        }


def _grid(lo: float, hi: float, n: int, dim: int) -> np.ndarray:
    t = np.linspace(lo, hi, n)
    return np.stack(np.meshgrid(*([t] * dim), indexing="ij"), -1).reshape(-1, dim)


def relation_errors(model: RelationModel, target, box=(-1.0, 1.0), grid: int = 21) -> tuple[float, float]:
    """Sup and mean of ``|r_model(x, y) - r_target(x, y)|`` over all pairs of a ``grid``-per-axis lattice of
    ``box^q`` (queries) and of ``box^p`` (keys)."""
    target = as_target(target)
    X = _grid(box[0], box[1], grid, model.input_dim)
    Y = _grid(box[0], box[1], grid, model.key_dim)
    err = np.abs(model.relation(X, Y) - target.matrix(X, Y))
    return float(err.max()), float(err.mean())


@in_x64
def fit_relation(
    target,
    *,
    input_dim: int = 2,
    key_dim: int | None = None,
    widths=(32,),
    features: int = 8,
    symmetric: bool | None = None,
    box=(-1.0, 1.0),
    steps: int = 2000,
    batch: int = 256,
    pool: int = 8192,
    learning_rate: float = 1e-2,
    seed: int = 0,
    grid: int = 21,
    progress: Callable[[int, int], None] | None = None,
) -> FitResult:
    """Fit ``<phi(x), psi(y)>`` (phi: ``input_dim -> widths -> features``; psi the same on ``key_dim``
    inputs, or phi itself when ``symmetric``, default: the target's ``symmetric``) to ``target`` (a name of
    a built-in, a callable ``fn(X, Y) -> (N,)`` or a target object) on ``box^q x box^p``.

    Seeded by ``seed`` (initial weights, training pairs, minibatches). ``progress(done, total)`` is called
    every 100 steps; ``losses`` holds the mean loss of each 100 steps.
    """
    import jax
    import jax.numpy as jnp

    t0 = time.perf_counter()
    tgt = as_target(target)
    key_dim = input_dim if key_dim is None else key_dim
    symmetric = bool(getattr(tgt, "symmetric", False)) if symmetric is None else symmetric
    if symmetric and key_dim != input_dim:
        raise RegionCountError("a symmetric model needs keys of the query dimension")
    if steps < 1 or batch < 1 or pool < 1 or features < 1 or not widths or min(widths) < 1:
        raise RegionCountError("steps, batch, pool, features and every width must be at least 1")
    lo, hi = float(box[0]), float(box[1])
    if not lo < hi:
        raise RegionCountError(f"the box needs LO < HI, got {lo}, {hi}")
    rng = np.random.default_rng(seed)
    X = rng.uniform(lo, hi, (pool, input_dim))
    Y = rng.uniform(lo, hi, (pool, key_dim))
    r = _pairwise(tgt, X, Y)
    if not np.all(np.isfinite(r)):
        raise RegionCountError("the target relation is not finite on the training pairs")

    def init(dim: int, s: int):
        m = random_mlp(dim, widths, features, seed=s)
        return [(jnp.asarray(w), jnp.asarray(b)) for w, b in zip(m.weights, m.biases)]

    params = {"phi": init(input_dim, seed)}
    if not symmetric:
        params["psi"] = init(key_dim, seed + 1)
    opt = _optimiser()
    state = opt.init(params)
    state.hyperparams["learning_rate"] = jnp.asarray(learning_rate, dtype=jnp.float64)  # strong type: one trace
    Xj, Yj, rj = jnp.asarray(X), jnp.asarray(Y), jnp.asarray(r)
    batches = rng.integers(0, pool, (steps, batch))
    losses = []
    total, count = 0.0, 0
    for i in range(steps):
        # optax mixes its int32 step count with float64 moments: standard promotion, whatever the caller set
        with jax.numpy_dtype_promotion("standard"):
            params, state, val = _step(params, state, batches[i], Xj, Yj, rj)
        total, count = total + val, count + 1  # stays on the device until a block ends
        if count == _STEPS_PER_BLOCK or i == steps - 1:
            losses.append(float(total) / count)
            total, count = 0.0, 0
            if progress is not None:
                progress(i + 1, steps)

    def to_mlp(layers) -> MLP:
        return MLP(tuple(np.asarray(w) for w, _ in layers), tuple(np.asarray(b) for _, b in layers))

    model = RelationModel(to_mlp(params["phi"]), to_mlp(params["psi"]) if "psi" in params else None)
    sup, mean = relation_errors(model, tgt, (lo, hi), grid)
    return FitResult(
        model=model,
        target=getattr(tgt, "name", "callable"),
        sup_error=sup,
        mean_error=mean,
        losses=np.array(losses),
        steps=steps,
        grid=grid,
        seed=seed,
        seconds=time.perf_counter() - t0,
    )


@functools.lru_cache(maxsize=1)
def _optimiser():
    """Adam with its learning rate held in the optimiser state, so one compiled step serves every rate."""
    import optax

    return optax.inject_hyperparams(optax.adam)(learning_rate=1e-2)


def _apply(layers, H):
    import jax

    for i, (w, b) in enumerate(layers):
        H = H @ w.T + b[None, :]
        if i < len(layers) - 1:
            H = jax.nn.relu(H)
    return H


def _loss(p, xb, yb, rb):
    import jax.numpy as jnp

    fx = _apply(p["phi"], xb)
    fy = _apply(p["psi"] if "psi" in p else p["phi"], yb)
    return jnp.mean((jnp.sum(fx * fy, axis=1) - rb) ** 2)


def _step_impl(p, state, idx, X, Y, r):
    import jax
    import optax

    val, g = jax.value_and_grad(_loss)(p, X[idx], Y[idx], r[idx])
    upd, state = _optimiser().update(g, state, p)
    return optax.apply_updates(p, upd), state, val


@functools.cache
def _jitted_step():
    import jax

    return jax.jit(_step_impl)


def _step(p, state, idx, X, Y, r):
    """One Adam step on the minibatch ``idx`` of the pool ``(X, Y, r)``. Jitted once at module level, so fits
    with the same shapes share one compilation; the pool is an argument, not a constant baked into the
    compiled program (which would slow compilation down). Dispatch is asynchronous."""
    return _jitted_step()(p, state, idx, X, Y, r)


def _pairwise(target, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``r(x_i, y_i)`` for the rows of ``X`` and ``Y``: the target's own pairwise function where it has one,
    else the diagonal of blocks of its matrix."""
    fn = getattr(target, "fn", None)
    if fn is not None:
        out = np.asarray(fn(X, Y), dtype=np.float64)
        if out.shape != (X.shape[0],):
            raise RegionCountError(f"the target relation returned shape {out.shape} for {X.shape[0]} pairs")
        return out
    out = np.empty(X.shape[0])
    for s in range(0, X.shape[0], 512):
        out[s : s + 512] = np.diagonal(target.matrix(X[s : s + 512], Y[s : s + 512]))
    return out
