"""The small vocabulary of piecewise ops that every architecture is lowered to.

A lowered network is a :class:`Program`: the input ``x`` (shape ``(q,)``) is copied onto
``tokens`` rows to form ``H`` of shape ``(T, q)``, the ops are applied in order to ``H``, and
the output is row ``out_token`` of the final ``H``. An MLP or Maxout network has ``T = 1``.

Every engine (sample, line, plane) implements each op here once. Each op appends its
discrete decisions to the activation code in a fixed layout (see :func:`code_length`):

- :class:`Affine` records nothing (adds no region);
- :class:`ReLU` records one bit per entry (``T * width``), 1 where the input is > 0;
- :class:`GroupMax` records the argmax index per unit (``T * n``);
- :class:`Attention` with ``sigma="hardmax"`` records the argmax key per head and query
  (``heads * T``); with ``sigma="relu"`` one bit per head, query and key (``heads * T * T``,
  masked entries 0); with ``sigma="softmax"`` nothing (it is smooth);
- :class:`Residual` records what its body records.

Arrays are NumPy float64 and never change after construction. The dataclasses are JAX pytrees
(registered when JAX is imported; this module does not import it), so programs pass through ``jax.jit``
and ``jax.grad`` as arguments.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._config import when_jax_imported

SIGMAS = ("hardmax", "relu", "softmax")


def _pytree(cls, data: tuple[str, ...], meta: tuple[str, ...]):
    """Register the frozen dataclass ``cls`` as a pytree with leaves ``data`` and static ``meta`` fields.

    Unflatten builds the instance field by field without calling ``__init__``/``__post_init__`` (as
    equinox does): validation and the read-only float64 copies belong to construction by the user, and
    re-running them on tracers inside ``jax.jit``/``jax.grad`` would try to convert tracers to NumPy.
    """
    data, meta = tuple(data), tuple(meta)
    fields = {f.name for f in dataclasses.fields(cls)}
    if set(data) | set(meta) != fields or set(data) & set(meta):
        raise TypeError(f"{cls.__name__}: pytree fields {data} + {meta} must partition {sorted(fields)}")

    def flatten(obj):
        return [getattr(obj, n) for n in data], tuple(getattr(obj, n) for n in meta)

    def unflatten(aux, children):
        obj = object.__new__(cls)
        for name, value in zip(data, children):
            object.__setattr__(obj, name, value)
        for name, value in zip(meta, aux):
            object.__setattr__(obj, name, value)
        return obj

    def register(jax) -> None:
        keys = tuple(jax.tree_util.GetAttrKey(name) for name in data)

        def flatten_with_keys(obj):
            return [(k, getattr(obj, n)) for k, n in zip(keys, data)], tuple(getattr(obj, n) for n in meta)

        jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)

    # registered when JAX is imported (now, if it is): building networks needs no JAX
    when_jax_imported(register)
    return cls


def as_f64(a) -> np.ndarray:
    """A read-only float64 copy of ``a`` (NumPy)."""
    out = np.array(a, dtype=np.float64)
    out.setflags(write=False)
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class Affine:
    """``H <- H @ W.T + b``; ``W`` is ``(d_out, d_in)``, ``b`` is ``(d_out,)`` or per token ``(T, d_out)``."""

    W: np.ndarray
    b: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)
class ReLU:
    """Entrywise ``max(H, 0)``."""


@dataclasses.dataclass(frozen=True, eq=False)
class GroupMax:
    """Maxout: ``H`` of shape ``(T, n*k)`` read as ``(T, n, k)`` (unit-major), max over the last axis."""

    k: int


@dataclasses.dataclass(frozen=True, eq=False)
class Attention:
    """Multi-head attention ``sum_h sigma(S_h) (H Wv_h) Wo_h`` with ``S_h = (H Wq_h)(H Wk_h)^T``.

    Shapes: ``Wq, Wk`` are ``(heads, d, d_k)``, ``Wv`` is ``(heads, d, d_v)``, ``Wo`` is
    ``(heads, d_v, d)``. ``sigma`` is ``"hardmax"`` (one-hot argmax per row, ties averaged),
    ``"relu"`` (entrywise, divided by ``T`` when ``scale_by_T``) or ``"softmax"`` with inverse
    temperature ``inv_temperature``. ``causal`` masks keys after the query.
    """

    Wq: np.ndarray
    Wk: np.ndarray
    Wv: np.ndarray
    Wo: np.ndarray
    sigma: str = "hardmax"
    causal: bool = False
    scale_by_T: bool = False
    inv_temperature: float = 1.0

    @property
    def heads(self) -> int:
        return int(self.Wq.shape[0])


@dataclasses.dataclass(frozen=True, eq=False)
class Residual:
    """``H <- H + body(H)`` for a tuple of ops ``body``."""

    body: tuple


Op = Affine | ReLU | GroupMax | Attention | Residual

_pytree(Affine, ("W", "b"), ())
_pytree(ReLU, (), ())
_pytree(GroupMax, (), ("k",))
# inv_temperature is data, not static: a sweep over lambda reuses one compiled forward pass
_pytree(Attention, ("Wq", "Wk", "Wv", "Wo", "inv_temperature"), ("sigma", "causal", "scale_by_T"))
_pytree(Residual, ("body",), ())


@dataclasses.dataclass(frozen=True, eq=False)
class Program:
    """A lowered network: ``tokens`` rows, ``ops`` in order, output row ``out_token``.

    ``valid_box = ((lo...), (hi...))`` is the input box a compiled model is exact on (None: everywhere);
    lowering keeps it, so every engine refuses a domain outside it (:func:`check_domain`).
    """

    tokens: int
    input_dim: int
    ops: tuple
    out_token: int = 0
    valid_box: tuple | None = None


_pytree(Program, ("ops",), ("tokens", "input_dim", "out_token", "valid_box"))


def walk_widths(program: Program) -> list[tuple[Op, int, int]]:
    """Each leaf op (residual bodies flattened) with its input and output width, in order."""
    out: list[tuple[Op, int, int]] = []

    def visit(ops, width: int) -> int:
        for op in ops:
            if isinstance(op, Residual):
                w = visit(op.body, width)
                if w != width:
                    raise ValueError(f"residual body maps width {width} to {w}")
            elif isinstance(op, Affine):
                if op.W.shape[1] != width:
                    raise ValueError(f"affine expects width {op.W.shape[1]}, gets {width}")
                out.append((op, width, op.W.shape[0]))
                width = op.W.shape[0]
            elif isinstance(op, GroupMax):
                if width % op.k:
                    raise ValueError(f"group max of rank {op.k} on width {width}")
                out.append((op, width, width // op.k))
                width //= op.k
            elif isinstance(op, Attention):
                if op.Wq.shape[1] != width or op.Wo.shape[2] != width:
                    raise ValueError(f"attention expects width {op.Wq.shape[1]}, gets {width}")
                out.append((op, width, width))
            else:
                out.append((op, width, width))
        return width

    visit(program.ops, program.input_dim)
    return out


def op_code_length(op: Op, width_in: int, tokens: int) -> int:
    """Number of code entries a leaf op writes (see module docstring)."""
    if isinstance(op, ReLU):
        return tokens * width_in
    if isinstance(op, GroupMax):
        return tokens * (width_in // op.k)
    if isinstance(op, Attention):
        if op.sigma == "hardmax":
            return op.heads * tokens
        if op.sigma == "relu":
            return op.heads * tokens * tokens
    return 0


def code_length(program: Program) -> int:
    """Length of the flat activation code of ``program``."""
    return sum(op_code_length(op, w, program.tokens) for op, w, _ in walk_widths(program))


def is_piecewise_linear(program: Program) -> bool:
    """True when no op is ReLU or softmax attention (those make the map non-linear on pieces)."""
    return all(not (isinstance(op, Attention) and op.sigma != "hardmax") for op, _, _ in walk_widths(program))


def max_code_digit(program: Program) -> int:
    """The largest value any code entry can take (1 for bits, k-1 or T-1 for argmax indices)."""
    m = 1
    for op, _, _ in walk_widths(program):
        if isinstance(op, GroupMax):
            m = max(m, op.k - 1)
        elif isinstance(op, Attention) and op.sigma == "hardmax":
            m = max(m, program.tokens - 1)
    return m
