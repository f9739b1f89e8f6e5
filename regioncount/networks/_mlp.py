"""ReLU MLP: ``h <- relu(W h + b)`` per hidden layer, then an affine readout."""

from __future__ import annotations

import dataclasses

import numpy as np

from ._ops import Affine, Program, ReLU, _pytree, as_f64


@dataclasses.dataclass(frozen=True, eq=False)
class MLP:
    """A ReLU MLP. ``weights[l]`` is ``(n_{l+1}, n_l)`` (PyTorch's layout), ``biases[l]`` is ``(n_{l+1},)``.

    The last pair is the readout (affine, adds no region); all others are followed by a ReLU.
    """

    weights: tuple
    biases: tuple

    def __post_init__(self):
        if len(self.weights) != len(self.biases) or not self.weights:
            raise ValueError("an MLP needs as many biases as weights, and at least one layer")
        ws = tuple(as_f64(w) for w in self.weights)
        bs = tuple(as_f64(b) for b in self.biases)
        for i, (w, b) in enumerate(zip(ws, bs)):
            if w.ndim != 2 or b.shape != (w.shape[0],):
                raise ValueError(f"layer {i}: weight {w.shape} and bias {b.shape} do not fit")
            if i and w.shape[1] != ws[i - 1].shape[0]:
                raise ValueError(f"layer {i}: expects {w.shape[1]} inputs, previous layer gives {ws[i - 1].shape[0]}")
        object.__setattr__(self, "weights", ws)
        object.__setattr__(self, "biases", bs)

    @property
    def input_dim(self) -> int:
        return int(self.weights[0].shape[1])

    @property
    def widths(self) -> tuple[int, ...]:
        """Hidden widths ``(n_1, ..., n_L)``."""
        return tuple(int(w.shape[0]) for w in self.weights[:-1])

    @property
    def output_dim(self) -> int:
        return int(self.weights[-1].shape[0])

    def lower(self) -> Program:
        ops: list = []
        for w, b in zip(self.weights[:-1], self.biases[:-1]):
            ops += [Affine(w, b), ReLU()]
        ops.append(Affine(self.weights[-1], self.biases[-1]))
        return Program(tokens=1, input_dim=self.input_dim, ops=tuple(ops))


_pytree(MLP, ("weights", "biases"), ())


def random_mlp(input_dim: int, widths, output_dim: int = 1, seed: int = 0, init: str = "torch") -> MLP:
    """A seeded random MLP ``input_dim -> widths... -> output_dim``.

    ``init="torch"`` draws weights and biases from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's
    default for ``nn.Linear``; ``init="normal"`` draws weights N(0, 2/fan_in) (He) and biases N(0, 1).
    """
    rng = np.random.default_rng(seed)
    dims = [int(input_dim), *(int(w) for w in widths), int(output_dim)]
    if min(dims) < 1:
        raise ValueError("every width must be at least 1")
    ws, bs = [], []
    for fan_in, fan_out in zip(dims[:-1], dims[1:]):
        if init == "torch":
            s = 1.0 / np.sqrt(fan_in)
            ws.append(rng.uniform(-s, s, (fan_out, fan_in)))
            bs.append(rng.uniform(-s, s, fan_out))
        elif init == "normal":
            ws.append(rng.normal(0.0, np.sqrt(2.0 / fan_in), (fan_out, fan_in)))
            bs.append(rng.normal(0.0, 1.0, fan_out))
        else:
            raise ValueError(f"unknown init {init!r}: use 'torch' or 'normal'")
    return MLP(tuple(ws), tuple(bs))
