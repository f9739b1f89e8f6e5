"""Relation models ``r(x, y) = <phi(x), psi(y)>`` with ReLU MLP feature maps (Altabaa and Lafferty 2024,
arXiv 2402.08856); with ``psi = phi`` the model is symmetric and positive semi-definite.

For a fixed key set ``y_1..y_n`` (and an optional per-key bias ``b_j``) the retrieval map
``x -> argmax_j <phi(x), psi(y_j)> + b_j`` lowers to the op vocabulary: phi's ops, then an
:class:`Affine` whose rows are the key features ``psi(y_j)`` (bias ``b``), then a :class:`GroupMax` of
rank ``n``. Its code is phi's ReLU bits followed by one digit, the retrieved key.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._errors import KeySetError
from ._mlp import MLP
from ._ops import Affine, GroupMax, Program, _pytree, as_f64


def mlp_forward(mlp: MLP, X) -> np.ndarray:
    """``mlp`` applied to the rows of ``X (N, in)`` in NumPy float64 -> ``(N, out)``."""
    H = np.asarray(X, dtype=np.float64)
    for i, (W, b) in enumerate(zip(mlp.weights, mlp.biases)):
        H = H @ W.T + b
        if i < len(mlp.weights) - 1:
            H = np.maximum(H, 0.0)
    return H


@dataclasses.dataclass(frozen=True, eq=False)
class RelationModel:
    """``r(x, y) = <phi(x), psi(y)>``; ``psi=None`` means ``psi = phi`` (the symmetric case).

    ``phi`` maps queries ``R^q -> R^d`` and ``psi`` keys ``R^p -> R^d`` (MLPs whose last layer is affine).
    """

    phi: MLP
    psi: MLP | None = None

    def __post_init__(self):
        if self.psi is not None and self.psi.output_dim != self.phi.output_dim:
            raise ValueError(
                f"phi gives {self.phi.output_dim} features and psi {self.psi.output_dim}: an inner product needs equal"
            )

    @property
    def symmetric(self) -> bool:
        return self.psi is None

    @property
    def key_net(self) -> MLP:
        return self.phi if self.psi is None else self.psi

    @property
    def input_dim(self) -> int:
        """Query dimension ``q``."""
        return self.phi.input_dim

    @property
    def key_dim(self) -> int:
        return self.key_net.input_dim

    @property
    def feature_dim(self) -> int:
        return self.phi.output_dim

    def check_keys(self, keys, key_bias=None) -> tuple[np.ndarray, np.ndarray]:
        """Keys as ``(n, p)`` float64 and the bias as ``(n,)`` (zeros when None); raises :class:`KeySetError`."""
        K = np.asarray(keys, dtype=np.float64)
        if K.ndim == 1 and self.key_dim == 1:
            K = K[:, None]
        if K.ndim != 2 or K.shape[0] == 0:
            raise KeySetError(f"the key set is empty or not a table of keys (got shape {K.shape})")
        if K.shape[1] != self.key_dim:
            raise KeySetError(f"keys have dimension {K.shape[1]} but the model's keys have dimension {self.key_dim}")
        if not np.all(np.isfinite(K)):
            bad = int(np.flatnonzero(~np.all(np.isfinite(K), axis=1))[0])
            raise KeySetError(f"key {bad} is not finite (NaN or inf): {K[bad].tolist()}")
        if key_bias is None:
            return K, np.zeros(K.shape[0])
        b = np.asarray(key_bias, dtype=np.float64).reshape(-1)
        if b.shape != (K.shape[0],):
            raise KeySetError(f"{b.size} key biases for {K.shape[0]} keys")
        if not np.all(np.isfinite(b)):
            raise KeySetError("a key bias is not finite (NaN or inf)")
        return K, b

    def query_features(self, X) -> np.ndarray:
        """``phi(X)``: ``(N, q) -> (N, d)``."""
        return mlp_forward(self.phi, X)

    def key_features(self, Y) -> np.ndarray:
        """``psi(Y)``: ``(n, p) -> (n, d)``."""
        return mlp_forward(self.key_net, Y)

    def relation(self, X, Y) -> np.ndarray:
        """``r(x_i, y_j)`` for ``X (N, q)``, ``Y (M, p)`` -> ``(N, M)``."""
        return self.query_features(X) @ self.key_features(Y).T

    def scores(self, X, keys, key_bias=None) -> np.ndarray:
        """Retrieval scores ``r(x_i, y_j) + b_j`` -> ``(N, n)``."""
        K, b = self.check_keys(keys, key_bias)
        return self.relation(X, K) + b

    def lower(self, keys=None, key_bias=None) -> Program:
        """The retrieval :class:`Program` for ``keys (n, p)`` (and bias ``(n,)``): phi, key rows, argmax."""
        if keys is None:
            raise KeySetError(
                "a relation model has regions only for a fixed key set: use `regioncount retrieval MODEL --keys FILE`"
            )
        K, b = self.check_keys(keys, key_bias)
        ops = self.phi.lower().ops + (Affine(as_f64(self.key_features(K)), as_f64(b)), GroupMax(K.shape[0]))
        return Program(tokens=1, input_dim=self.input_dim, ops=ops)


_pytree(RelationModel, ("phi", "psi"), ())


def linear_map(W, b=None) -> MLP:
    """An MLP with no hidden layer: ``x -> W x + b`` (``W (d, q)``); the identity when ``W`` is ``I``."""
    W = np.asarray(W, dtype=np.float64)
    return MLP((W,), (np.zeros(W.shape[0]) if b is None else b,))


def attention_head_relation(Wq, Wk) -> RelationModel:
    """The relation of one hardmax attention head, ``r(x, y) = (x Wq)(y Wk)^T``; ``Wq, Wk`` are ``(d, d_k)``
    (one head of :class:`~regioncount.networks.Attention`): query and key features are linear maps."""
    Wq, Wk = np.asarray(Wq, dtype=np.float64), np.asarray(Wk, dtype=np.float64)
    return RelationModel(linear_map(Wq.T), linear_map(Wk.T))


def random_relation(
    input_dim: int,
    widths,
    features: int,
    *,
    key_dim: int | None = None,
    symmetric: bool = True,
    seed: int = 0,
    init: str = "torch",
) -> RelationModel:
    """A seeded random relation model (``init`` as in :func:`random_mlp`): phi ``input_dim -> widths ->
    features``; psi the same shape on ``key_dim`` (default ``input_dim``) inputs, or phi itself when
    ``symmetric``."""
    from ._mlp import random_mlp

    phi = random_mlp(input_dim, widths, features, seed=seed, init=init)
    if symmetric:
        if key_dim not in (None, input_dim):
            raise ValueError("a symmetric relation model has keys of the query dimension")
        return RelationModel(phi)
    return RelationModel(phi, random_mlp(key_dim or input_dim, widths, features, seed=seed + 1, init=init))
