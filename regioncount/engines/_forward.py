"""JAX forward pass that records every discrete decision (the ``sample`` engine's op implementations).

Per example: ``H (T, q)`` is the input repeated on ``T`` rows; each op of the
:class:`~regioncount.networks.Program` is applied once here, appending to the flat int32 code in the
layout documented in ``networks/_ops.py``. Batches go through ``jax.vmap``; ``jax.jit`` sits only at
the public entry points :func:`forward_codes` and :func:`forward_keys`, which run (and are traced) in 64 bits
inside :func:`regioncount._config.in_x64`, whatever the caller's ``jax_enable_x64``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._config import in_x64, x64
from ..networks._ops import Affine, Attention, GroupMax, Program, ReLU, Residual
from ._protocol import Kernels


def _attention(op: Attention, H, codes: list, ties: list):
    T = H.shape[0]
    allowed = (jnp.tril(jnp.ones((T, T), bool)) if op.causal else jnp.ones((T, T), bool))[None]  # (1, T, T)
    Q = jnp.einsum("td,hde->hte", H, op.Wq)
    K = jnp.einsum("td,hde->hte", H, op.Wk)
    V = jnp.einsum("td,hde->hte", H, op.Wv)
    S = jnp.einsum("hie,hje->hij", Q, K)
    if op.sigma == "hardmax":
        Sm = jnp.where(allowed, S, -jnp.inf)
        top = jnp.max(Sm, axis=-1, keepdims=True)
        tied = Sm == top
        count = jnp.sum(tied, axis=-1, keepdims=True)
        A = tied.astype(H.dtype) / count.astype(H.dtype)  # explicit casts: the tests run strict promotion
        codes.append(jnp.argmax(Sm, axis=-1).ravel().astype(jnp.int32))
        ties.append(jnp.sum(count > 1))
    elif op.sigma == "relu":
        pos = (S > 0) & allowed
        A = jnp.where(pos, S, 0.0) / (T if op.scale_by_T else 1.0)
        codes.append(pos.ravel().astype(jnp.int32))
    else:
        A = jax.nn.softmax(jnp.where(allowed, op.inv_temperature * S, -jnp.inf), axis=-1)
    return jnp.einsum("hij,hje,hed->id", A, V, op.Wo)


def _apply(ops, H, codes: list, ties: list):
    for op in ops:
        H = KERNELS.lookup(op)(op, H, codes, ties)
    return H


#: The sample engine's kernels (its row of the op protocol): ``kernel(op, H, codes, ties) -> H`` for one
#: example's ``H (T, d)``, appending the op's code entries. They run while ``jax.jit`` traces, so the lookup
#: costs nothing per example.
KERNELS = Kernels("sample")
KERNELS.register("attention/hardmax", "attention/relu", "attention/softmax")(_attention)


@KERNELS.register("affine")
def _affine(op: Affine, H, codes: list, ties: list):
    b = op.b if op.b.ndim == H.ndim else op.b[None, :]  # one bias row per token, or one for all (explicit)
    return H @ op.W.T + b


@KERNELS.register("relu")
def _relu(op: ReLU, H, codes: list, ties: list):
    codes.append((H > 0).ravel().astype(jnp.int32))
    return jnp.maximum(H, 0.0)


@KERNELS.register("groupmax")
def _group_max(op: GroupMax, H, codes: list, ties: list):
    G = H.reshape(H.shape[0], -1, op.k)
    codes.append(jnp.argmax(G, axis=-1).ravel().astype(jnp.int32))
    return jnp.max(G, axis=-1)


@KERNELS.register("residual")
def _residual(op: Residual, H, codes: list, ties: list):
    return H + _apply(op.body, H, codes, ties)


def forward_one(program: Program, x):
    """One example ``x (q,)`` -> ``(y (out,), code (C,) int32, ties ())``; not jitted."""
    codes: list = []
    ties: list = []
    H = jnp.broadcast_to(x, (program.tokens, x.shape[0]))
    H = _apply(program.ops, H, codes, ties)
    code = jnp.concatenate(codes) if codes else jnp.zeros((0,), jnp.int32)
    return H[program.out_token], code, (sum(ties) if ties else jnp.zeros((), jnp.int32))


@jax.jit
def _forward_codes(program: Program, X):
    return jax.vmap(forward_one, in_axes=(None, 0))(program, X)


def forward_codes(program: Program, X):
    """Batch ``X (N, q)`` -> outputs ``(N, out)``, codes ``(N, C) int32``, hardmax ties per example ``(N,)``.

    Runs in float64 (``X`` converted) whatever the caller's ``jax_enable_x64``."""
    with x64():
        return _forward_codes(program, jnp.asarray(X, dtype=jnp.float64))


@functools.lru_cache(maxsize=64)
def hash_multipliers(length: int, seed: int = 0x5EED) -> np.ndarray:
    """Two lanes of random odd 64-bit multipliers, shape ``(2, length)`` uint64."""
    rng = np.random.default_rng(seed)
    m = rng.integers(0, 2**63, size=(2, length), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    m.setflags(write=False)
    return m


@in_x64  # uint64 lanes: called inside forward_keys, and directly by the tests
def hash_codes(codes, multipliers):
    """Codes ``(N, C)`` -> keys ``(N, 2)`` uint64: ``sum_i c_i m_i mod 2^64`` in two lanes.

    Collision risk (DESIGN §3): two different codes collide in a lane only if
    ``sum_i d_i m_i = 0 mod 2^64`` with ``d = c - c'``. Take ``j`` with ``d_j`` of least 2-adic valuation
    ``v``; of the ``2^63`` odd values of ``m_j`` at most ``2^v`` satisfy it, so a lane collides with
    probability at most ``2^(v-63)``. With every ``|d_i| < 2^s`` (so ``v <= s - 1``) that is ``2^(s-64)``
    per lane, ``2^(2s-128)`` for both, and below ``S^2 2^(2s-129)`` for ``S`` distinct codes. A ReLU bit
    differs by 1, which is not below ``2^0``: ``s = 1`` for ReLU bits, ``s = ceil(log2 k)`` for argmax
    digits ``0..k-1``, ``s = ceil(log2 (k+1))`` for the pieces ``0..k`` of a piecewise-linear op (the sample
    engine hashes those: its multipliers are mapped through the program's ``CodeMap``).
    """
    c = codes.astype(jnp.uint64)
    return jnp.stack([c @ multipliers[0], c @ multipliers[1]], axis=-1)


def forward_keys(program: Program, X, multipliers, prefixes: tuple[int, ...] | None = None):
    """:func:`_forward_keys` in float64 (``X`` converted) whatever the caller's ``jax_enable_x64``."""
    with x64():
        return _forward_keys(program, jnp.asarray(X, dtype=jnp.float64), multipliers, prefixes)


@functools.partial(jax.jit, static_argnames=("prefixes",))
def _forward_keys(program: Program, X, multipliers, prefixes: tuple[int, ...] | None = None):
    """Batch ``X (N, q)`` -> keys ``(N, P, 2) uint64``, run heads ``(N, P) bool`` (key differs from the
    previous point's), hardmax ties ``(N,)``.

    ``prefixes`` are code lengths: key ``p`` hashes the first ``prefixes[p]`` code entries (default: the
    whole code, ``P = 1``). Because the hash is linear, a prefix key is a partial sum, so the codes of
    every truncation of a network (its first blocks) are hashed in one pass. Run heads let the host
    skip runs of equal codes on grids.
    """
    _, codes, ties = jax.vmap(forward_one, in_axes=(None, 0))(program, X)
    c = codes.astype(jnp.uint64)
    if prefixes is None:
        keys = hash_codes(codes, multipliers)[:, None, :]
    else:
        lanes = []
        for lane in range(2):
            partial = jnp.cumsum(c * multipliers[lane][None, :], axis=1)
            partial = jnp.concatenate([jnp.zeros((c.shape[0], 1), jnp.uint64), partial], axis=1)
            lanes.append(partial[:, jnp.asarray(prefixes)])
        keys = jnp.stack(lanes, axis=-1)
    head = jnp.concatenate([jnp.ones((1, keys.shape[1]), bool), jnp.any(keys[1:] != keys[:-1], axis=-1)])
    return keys, head, ties
