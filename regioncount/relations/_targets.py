"""Target relation functions ``r(x, y)`` and retrieval utilities ``u(x, y)`` (Altabaa and Lafferty 2024).

Every target is an object with ``matrix(X (N, q), Y (M, p)) -> (N, M)`` (NumPy float64) and ``symmetric``.
A target may also say that, for a fixed key set, its preorder on keys is that of affine utilities of the
query: ``affine_utility(keys) -> (a (n, q), c (n,))`` with ``argmax_j u(x, y_j) = argmax_j a_j . x + c_j``
(the cells are then polygons and retrieval errors against it are exact); targets that cannot say so
return None and are compared by sampling.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from .._errors import RegionCountError
from ..networks import RelationModel
from ..networks._ops import Affine, GroupMax, Program

#: Names of the built-in targets (for the CLI).
BUILTINS = ("gaussian", "prefers", "bilinear")


def _sq_dist(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    return np.maximum((X**2).sum(1)[:, None] + (Y**2).sum(1)[None, :] - 2.0 * X @ Y.T, 0.0)


@dataclasses.dataclass(frozen=True, eq=False)
class GaussianKernel:
    """``r(x, y) = exp(-|x - y|^2 / (2 sigma^2))``: symmetric positive-definite. Its retrieval preorder is
    nearest key first, i.e. the affine utility ``<x, y_j> - |y_j|^2 / 2`` (the keys' Voronoi cells)."""

    sigma: float = 1.0
    symmetric = True
    name = "gaussian"

    def matrix(self, X, Y) -> np.ndarray:
        return np.exp(-_sq_dist(np.asarray(X, float), np.asarray(Y, float)) / (2.0 * self.sigma**2))

    def affine_utility(self, keys):
        K = np.asarray(keys, float)
        return K, -0.5 * (K**2).sum(1)


def _default_turn(q: int) -> np.ndarray:
    """A non-symmetric map: a rotation by 60 degrees scaled by 0.9 in the first two coordinates."""
    M = np.eye(q)
    if q >= 2:
        c, s = 0.9 * np.cos(np.pi / 3), 0.9 * np.sin(np.pi / 3)
        M[:2, :2] = [[c, -s], [s, c]]
    return M


@dataclasses.dataclass(frozen=True, eq=False)
class Prefers:
    """ "x prefers y": ``r(x, y) = exp(-|y - M x|^2 / (2 sigma^2))`` with ``M`` not symmetric (default: a
    rotation by 60 degrees scaled by 0.9), so ``r(x, y) != r(y, x)``. Retrieval preorder: the key nearest
    ``M x``, the affine utility ``<M x, y_j> - |y_j|^2 / 2``."""

    M: np.ndarray | None = None
    sigma: float = 1.0
    symmetric = False
    name = "prefers"

    def _M(self, q: int) -> np.ndarray:
        return _default_turn(q) if self.M is None else np.asarray(self.M, float)

    def matrix(self, X, Y) -> np.ndarray:
        X = np.asarray(X, float)
        return np.exp(-_sq_dist(X @ self._M(X.shape[1]).T, np.asarray(Y, float)) / (2.0 * self.sigma**2))

    def affine_utility(self, keys):
        K = np.asarray(keys, float)
        return K @ self._M(K.shape[1]), -0.5 * (K**2).sum(1)


@dataclasses.dataclass(frozen=True, eq=False)
class Bilinear:
    """``r(x, y) = <x, A y>`` with ``A (q, p)``; default ``A = [[1, 2], [-1, 0.5]]`` (not symmetric) for
    ``q = p = 2``. Retrieval preorder: the affine utility ``(A y_j) . x``."""

    A: np.ndarray | None = None
    symmetric = False
    name = "bilinear"

    def _A(self, q: int, p: int) -> np.ndarray:
        if self.A is not None:
            return np.asarray(self.A, float)
        if (q, p) != (2, 2):
            raise RegionCountError("the default bilinear target is 2D: give A for other dimensions")
        return np.array([[1.0, 2.0], [-1.0, 0.5]])

    def matrix(self, X, Y) -> np.ndarray:
        X, Y = np.asarray(X, float), np.asarray(Y, float)
        return X @ self._A(X.shape[1], Y.shape[1]) @ Y.T

    def affine_utility(self, keys):
        K = np.asarray(keys, float)
        return K @ self._A(K.shape[1], K.shape[1]).T, np.zeros(K.shape[0])


@dataclasses.dataclass(frozen=True, eq=False)
class CallableRelation:
    """A Python callable ``fn(X (N, q), Y (N, p)) -> (N,)``, evaluated row by row (pairs ``x_i, y_i``).
    Its cells are not known to be polygons, so retrieval errors against it are sampled."""

    fn: Callable
    symmetric: bool = False
    name: str = "callable"

    def matrix(self, X, Y) -> np.ndarray:
        X, Y = np.asarray(X, float), np.asarray(Y, float)
        N, M = X.shape[0], Y.shape[0]
        out = np.asarray(self.fn(np.repeat(X, M, axis=0), np.tile(Y, (N, 1))), dtype=np.float64)
        if out.shape != (N * M,):
            raise RegionCountError(f"the target relation returned shape {out.shape} for {N * M} pairs, not ({N * M},)")
        return out.reshape(N, M)

    def affine_utility(self, keys):
        return None


@dataclasses.dataclass(frozen=True, eq=False)
class ModelUtility:
    """A relation model as a target, ``u(x, y_j) = <phi(x), psi(y_j)> + b_j``; its cells are polygons."""

    model: RelationModel
    key_bias: np.ndarray | None = None
    name = "model"

    @property
    def symmetric(self) -> bool:
        return self.model.symmetric

    def matrix(self, X, Y) -> np.ndarray:
        return self.model.scores(X, Y, self.key_bias)

    def affine_utility(self, keys):
        return None


def as_target(target, **options):
    """A target object from a name in :data:`BUILTINS` (``options`` go to its class), a
    :class:`RelationModel`, a callable ``fn(X, Y) -> (N,)``, or a target object (returned as is)."""
    if isinstance(target, str):
        classes = {"gaussian": GaussianKernel, "prefers": Prefers, "bilinear": Bilinear}
        if target not in classes:
            raise RegionCountError(f"unknown target relation {target!r}: use one of {', '.join(BUILTINS)}")
        return classes[target](**options)
    if isinstance(target, RelationModel):
        return ModelUtility(target, options.get("key_bias"))
    if hasattr(target, "matrix"):
        return target
    if callable(target):
        return CallableRelation(target, **options)
    raise RegionCountError(f"cannot use a {type(target).__name__} as a target relation")


def utility_program(target, keys) -> Program | None:
    """A :class:`Program` whose argmax cells are the target's retrieval cells for ``keys``, or None when the
    target's cells are not known to be polygons."""
    if isinstance(target, ModelUtility):
        return target.model.lower(keys, target.key_bias)
    form = target.affine_utility(keys)
    if form is None:
        return None
    a, c = form
    a = np.asarray(a, float)
    return Program(tokens=1, input_dim=a.shape[1], ops=(Affine(a, np.asarray(c, float)), GroupMax(a.shape[0])))
