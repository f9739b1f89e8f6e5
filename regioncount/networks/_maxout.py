"""Maxout network of rank k: unit i of a layer is ``max_r (W[r, i] . h + b[r, i])``."""

from __future__ import annotations

import dataclasses

import numpy as np

from ._ops import Affine, GroupMax, Program, _pytree, as_f64


@dataclasses.dataclass(frozen=True, eq=False)
class Maxout:
    """A Maxout network. ``weights[l]`` is ``(k, n_{l+1}, n_l)``, ``biases[l]`` is ``(k, n_{l+1})``;
    ``readout_W`` is ``(out, n_L)`` and ``readout_b`` is ``(out,)`` (affine, adds no region)."""

    weights: tuple
    biases: tuple
    readout_W: np.ndarray
    readout_b: np.ndarray

    def __post_init__(self):
        ws = tuple(as_f64(w) for w in self.weights)
        bs = tuple(as_f64(b) for b in self.biases)
        if len(ws) != len(bs) or not ws:
            raise ValueError("a Maxout network needs as many biases as weights, and at least one layer")
        k = ws[0].shape[0] if ws[0].ndim == 3 else 0
        if k < 2:
            raise ValueError("maxout weights must be (k, n_out, n_in) with rank k >= 2")
        for i, (w, b) in enumerate(zip(ws, bs)):
            if w.ndim != 3 or w.shape[0] != k or b.shape != w.shape[:2]:
                raise ValueError(f"layer {i}: weight {w.shape} and bias {b.shape} do not fit rank {k}")
            if i and w.shape[2] != ws[i - 1].shape[1]:
                raise ValueError(f"layer {i}: expects {w.shape[2]} inputs, previous layer gives {ws[i - 1].shape[1]}")
        rw, rb = as_f64(self.readout_W), as_f64(self.readout_b)
        if rw.ndim != 2 or rw.shape[1] != ws[-1].shape[1] or rb.shape != (rw.shape[0],):
            raise ValueError(f"readout weight {rw.shape} and bias {rb.shape} do not fit width {ws[-1].shape[1]}")
        object.__setattr__(self, "weights", ws)
        object.__setattr__(self, "biases", bs)
        object.__setattr__(self, "readout_W", rw)
        object.__setattr__(self, "readout_b", rb)

    @property
    def k(self) -> int:
        return int(self.weights[0].shape[0])

    @property
    def input_dim(self) -> int:
        return int(self.weights[0].shape[2])

    @property
    def widths(self) -> tuple[int, ...]:
        return tuple(int(w.shape[1]) for w in self.weights)

    @property
    def output_dim(self) -> int:
        return int(self.readout_W.shape[0])

    def lower(self) -> Program:
        ops: list = []
        for w, b in zip(self.weights, self.biases):
            k, n, n_in = w.shape
            # unit-major rows: row i*k + r is piece r of unit i
            ops += [Affine(w.transpose(1, 0, 2).reshape(n * k, n_in), b.T.reshape(n * k)), GroupMax(k)]
        ops.append(Affine(self.readout_W, self.readout_b))
        return Program(tokens=1, input_dim=self.input_dim, ops=tuple(ops))


_pytree(Maxout, ("weights", "biases", "readout_W", "readout_b"), ())


def random_maxout(input_dim: int, widths, k: int = 2, output_dim: int = 1, seed: int = 0) -> Maxout:
    """A seeded random Maxout network with PyTorch-style U(-1/sqrt(fan_in), 1/sqrt(fan_in)) pieces."""
    rng = np.random.default_rng(seed)
    dims = [int(input_dim), *(int(w) for w in widths)]
    if min(dims) < 1 or k < 2:
        raise ValueError("widths must be at least 1 and the rank k at least 2")
    ws, bs = [], []
    for fan_in, fan_out in zip(dims[:-1], dims[1:]):
        s = 1.0 / np.sqrt(fan_in)
        ws.append(rng.uniform(-s, s, (k, fan_out, fan_in)))
        bs.append(rng.uniform(-s, s, (k, fan_out)))
    s = 1.0 / np.sqrt(dims[-1])
    return Maxout(tuple(ws), tuple(bs), rng.uniform(-s, s, (output_dim, dims[-1])), rng.uniform(-s, s, output_dim))
