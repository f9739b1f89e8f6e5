"""Convolutional networks lowered to the op vocabulary (DESIGN §9): every layer becomes Affine, ReLU or GroupMax.

A :class:`ConvNet` holds the lowered ops and the input shape (e.g. ``(C, H, W)``) that its flat input
``x (q,)`` is read in: ``x`` is the image flattened in C order, and every intermediate tensor is kept
flattened in C order too, so Flatten and Reshape are index maps that move no entry (they change only the
tracked shape and add no op).

Lowering (all maps float64; float32 weights convert exactly):

- ``Conv2d`` (stride, padding, dilation, groups) and ``AvgPool2d`` are **materialised as dense matrices**
  ``(C_out H_out W_out, C_in H_in W_in)``: the engines then see one Affine whatever the layer was, and
  for the small images these tools can partition exactly a dense product is faster than a structured one.
- eval-mode ``BatchNorm`` is the per-channel affine map ``gamma (x - mean) / sqrt(var + eps) + beta``;
  :func:`fuse_affines` folds it (and any other run of consecutive Affines) into one map.
- ``MaxPool2d`` is a :class:`GroupMax` over each window. GroupMax takes groups of consecutive entries, so
  a 0/1 selection Affine first copies the entries of each window next to each other (windows of
  overlapping pools share entries, so rows repeat). A window cut by the padding repeats one of its own
  entries instead of a ``-inf`` pad: the max is unchanged and the engines' tie rule (the lowest index
  wins) keeps the code well defined.
- a residual addition ``y = x + f(x)`` is :class:`Residual` ``(f,)``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ._ops import Affine, GroupMax, Program, Residual, as_f64, walk_widths


def _pair(v: Any, name: str) -> tuple[int, int]:
    t = (int(v), int(v)) if np.ndim(v) == 0 else tuple(int(a) for a in v)
    if len(t) != 2:
        raise ValueError(f"{name} must be one int or two, got {v!r}")
    return t  # type: ignore[return-value]


def _pads(v: Any) -> tuple[int, int, int, int]:
    """Padding as ``(top, left, bottom, right)`` from an int, ``(ph, pw)`` or ONNX's ``(t, l, b, r)``."""
    if np.ndim(v) == 0:
        return (int(v),) * 4  # type: ignore[return-value]
    t = tuple(int(a) for a in v)
    if len(t) == 2:
        return (t[0], t[1], t[0], t[1])
    if len(t) == 4:
        return t  # type: ignore[return-value]
    raise ValueError(f"padding must be 1, 2 or 4 ints, got {v!r}")


def _out_size(n: int, k: int, s: int, p0: int, p1: int, d: int, ceil_mode: bool = False) -> int:
    span = n + p0 + p1 - d * (k - 1) - 1
    if span < 0:
        raise ValueError(f"a window of size {k} (dilation {d}) does not fit an input of size {n} with padding")
    out = (-(-span // s) if ceil_mode else span // s) + 1
    # PyTorch and ONNX: with ceil_mode the last window must start inside the input or left padding
    if ceil_mode and (out - 1) * s >= n + p0:
        out -= 1
    return out


def _chw(shape: tuple[int, ...], layer: str) -> tuple[int, int, int]:
    if len(shape) != 3:
        raise ValueError(f"{layer} needs a (channels, height, width) input, got shape {shape}")
    return shape  # type: ignore[return-value]


def conv2d_affine(weight, bias, in_shape, *, stride=1, padding=0, dilation=1, groups=1):
    """Conv2d as a dense Affine. ``weight (C_out, C_in / groups, kh, kw)``, ``bias (C_out,)`` or None,
    ``in_shape (C_in, H, W)`` -> ``(Affine, out_shape (C_out, H_out, W_out))``. Zero padding."""
    Wt = np.asarray(weight, dtype=np.float64)
    C, H, Wd = _chw(tuple(in_shape), "Conv2d")
    if Wt.ndim != 4:
        raise ValueError(f"Conv2d weight must be 4D (out, in/groups, kh, kw), got shape {Wt.shape}")
    Co, Cg, kh, kw = Wt.shape
    g = int(groups)
    if g < 1 or C % g or Co % g or Cg != C // g:
        raise ValueError(f"Conv2d weight {Wt.shape} with groups={g} does not fit {C} input channels")
    (sh, sw), (dh, dw) = _pair(stride, "stride"), _pair(dilation, "dilation")
    pt, pl, pb, pr = _pads(padding)
    Ho, Wo = _out_size(H, kh, sh, pt, pb, dh), _out_size(Wd, kw, sw, pl, pr, dw)
    M = np.zeros((Co, Ho, Wo, C, H, Wd))
    oh, ow = np.arange(Ho), np.arange(Wo)
    for co in range(Co):
        c0 = (co // (Co // g)) * Cg  # first input channel of this output channel's group
        for i in range(kh):
            ih = oh * sh - pt + i * dh
            okh = (ih >= 0) & (ih < H)
            for j in range(kw):
                iw = ow * sw - pl + j * dw
                okw = (iw >= 0) & (iw < Wd)
                rows, cols = np.ix_(oh[okh], ow[okw])
                for ci in range(Cg):
                    M[co, rows, cols, c0 + ci, ih[okh][:, None], iw[okw][None, :]] += Wt[co, ci, i, j]
    b = np.zeros(Co) if bias is None else np.asarray(bias, dtype=np.float64).reshape(Co)
    out = (Co, Ho, Wo)
    return Affine(as_f64(M.reshape(Co * Ho * Wo, C * H * Wd)), as_f64(np.repeat(b, Ho * Wo))), out


def _windows(in_shape, kernel, stride, padding, dilation, ceil_mode):
    """Flat input index of every window entry ``(C, Ho, Wo, kh*kw)`` (-1 where it falls in the padding)."""
    C, H, W = _chw(tuple(in_shape), "pool")
    kh, kw = _pair(kernel, "kernel")
    sh, sw = _pair(kernel if stride is None else stride, "stride")
    dh, dw = _pair(dilation, "dilation")
    pt, pl, pb, pr = _pads(padding)
    Ho, Wo = _out_size(H, kh, sh, pt, pb, dh, ceil_mode), _out_size(W, kw, sw, pl, pr, dw, ceil_mode)
    ih = (np.arange(Ho) * sh - pt)[:, None] + np.arange(kh) * dh  # (Ho, kh)
    iw = (np.arange(Wo) * sw - pl)[:, None] + np.arange(kw) * dw  # (Wo, kw)
    I = ih[:, None, :, None]
    J = iw[None, :, None, :]
    ok = (I >= 0) & (I < H) & (J >= 0) & (J < W)  # (Ho, Wo, kh, kw)
    flat = np.where(ok, I * W + J, -1).reshape(Ho, Wo, kh * kw)
    idx = np.where(flat[None] >= 0, np.arange(C)[:, None, None, None] * H * W + flat[None], -1)
    return idx, (C, Ho, Wo)


def maxpool2d_ops(in_shape, kernel, *, stride=None, padding=0, dilation=1, ceil_mode=False):
    """MaxPool2d as ``[Affine (selection), GroupMax(k)]`` with ``k = kh * kw``; -> ``(ops, out_shape)``.

    Row ``(c, oh, ow, r)`` of the selection copies entry ``r`` of window ``(c, oh, ow)``; an entry in the
    padding copies the window's first valid entry (the max is unchanged)."""
    idx, out = _windows(in_shape, kernel, stride, padding, dilation, ceil_mode)
    k = idx.shape[-1]
    if np.any(np.all(idx < 0, axis=-1)):
        raise ValueError("a max-pool window lies wholly in the padding")
    first = np.take_along_axis(idx, np.argmax(idx >= 0, axis=-1)[..., None], -1)
    idx = np.where(idx >= 0, idx, first).reshape(-1)
    n_in = int(np.prod(in_shape))
    S = np.zeros((idx.size, n_in))
    S[np.arange(idx.size), idx] = 1.0
    if k == 1:
        return [Affine(as_f64(S), as_f64(np.zeros(idx.size)))], out
    return [Affine(as_f64(S), as_f64(np.zeros(idx.size))), GroupMax(k)], out


def avgpool2d_affine(in_shape, kernel, *, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """AvgPool2d as a dense Affine -> ``(Affine, out_shape)``. ``count_include_pad`` divides every window
    by ``kh * kw`` (PyTorch's default); otherwise by its entries inside the input (ONNX's default).
    With ``ceil_mode`` a window running past the right padding is divided by its part inside input + padding.
    """
    C, H, W = _chw(tuple(in_shape), "AvgPool2d")
    idx, out = _windows(in_shape, kernel, stride, padding, 1, ceil_mode)
    kh, kw = _pair(kernel, "kernel")
    if count_include_pad:
        # entries inside input + padding (they differ from kh*kw only for ceil_mode windows)
        sh, sw = _pair(kernel if stride is None else stride, "stride")
        pt, pl, pb, pr = _pads(padding)
        _, Ho, Wo = out
        rows = np.minimum(np.arange(Ho) * sh - pt + kh, H + pb) - (np.arange(Ho) * sh - pt)
        cols = np.minimum(np.arange(Wo) * sw - pl + kw, W + pr) - (np.arange(Wo) * sw - pl)
        div = np.broadcast_to((rows[:, None] * cols[None, :])[None], out).reshape(-1)
    else:
        div = np.sum(idx >= 0, axis=-1).reshape(-1)
    n_out = int(np.prod(out))
    M = np.zeros((n_out, C * H * W))
    flat = idx.reshape(n_out, -1)
    r, e = np.nonzero(flat >= 0)
    np.add.at(M, (r, flat[r, e]), 1.0 / div[r])
    return Affine(as_f64(M), as_f64(np.zeros(n_out))), out


def batchnorm_affine(shape, gamma, beta, mean, var, eps: float = 1e-5) -> Affine:
    """Eval-mode batch norm over channel axis 0 of ``shape`` as a diagonal Affine."""
    C = int(shape[0]) if len(shape) else 1
    rest = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    g, bt, m, v = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (gamma, beta, mean, var))
    if not (g.size == bt.size == m.size == v.size == C):
        raise ValueError(f"batch norm parameters have {g.size} channels, the input has {C}")
    s = g / np.sqrt(v + float(eps))
    return Affine(as_f64(np.diag(np.repeat(s, rest))), as_f64(np.repeat(bt - s * m, rest)))


def fuse_affines(ops) -> tuple:
    """Compose every run of consecutive Affines (inside residual bodies too) into one Affine.

    ``W2 (W1 h + b1) + b2 = (W2 W1) h + (W2 b1 + b2)``: the same map, rounded once per product."""
    out: list = []
    for op in ops:
        if isinstance(op, Residual):
            op = Residual(fuse_affines(op.body))
        if op.is_affine and out and out[-1].is_affine:
            prev = out.pop()
            op = Affine(as_f64(op.W @ prev.W), as_f64(op.W @ prev.b + op.b))
        out.append(op)
    return tuple(out)


@dataclasses.dataclass(frozen=True, eq=False)
class ConvNet:
    """A network given by lowered ``ops`` and the ``input_shape`` its flat input is read in (C order).

    ``input_dim = prod(input_shape)``; ``ops`` end in the logits (width ``output_dim``). ``source`` says
    where it came from (a file name, "torch", ...). Built by the loaders and :func:`lower_layers`."""

    ops: tuple
    input_shape: tuple
    source: str = ""

    def __post_init__(self):
        shape = tuple(int(s) for s in self.input_shape)
        if not shape or min(shape) < 1:
            raise ValueError(f"input shape must be positive ints, got {self.input_shape!r}")
        object.__setattr__(self, "input_shape", shape)
        object.__setattr__(self, "ops", tuple(self.ops))
        walk_widths(self.lower())  # raises on widths that do not fit

    @property
    def input_dim(self) -> int:
        return math.prod(self.input_shape)

    @property
    def output_dim(self) -> int:
        w = walk_widths(self.lower())
        return w[-1][2] if w else self.input_dim

    def lower(self) -> Program:
        return Program(tokens=1, input_dim=self.input_dim, ops=self.ops)


# ------------------------------------------------------------------------------------------------
# layers: a small description of Sequential stacks, lowered by lower_layers


@dataclasses.dataclass(frozen=True)
class Conv2d:
    weight: np.ndarray
    bias: np.ndarray | None = None
    stride: object = 1
    padding: object = 0
    dilation: object = 1
    groups: int = 1


@dataclasses.dataclass(frozen=True)
class Linear:
    """``y = W x + b`` on the last axis; ``weight (out, in)``."""

    weight: np.ndarray
    bias: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class MaxPool2d:
    kernel: object
    stride: object = None
    padding: object = 0
    dilation: object = 1
    ceil_mode: bool = False


@dataclasses.dataclass(frozen=True)
class AvgPool2d:
    kernel: object
    stride: object = None
    padding: object = 0
    ceil_mode: bool = False
    count_include_pad: bool = True


@dataclasses.dataclass(frozen=True)
class BatchNorm:
    """Eval-mode batch norm over the channel axis (BatchNorm1d on features, BatchNorm2d on channels)."""

    gamma: np.ndarray
    beta: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    eps: float = 1e-5


@dataclasses.dataclass(frozen=True)
class Flatten:
    """Flatten every axis into one (PyTorch's ``nn.Flatten()`` on one example)."""


@dataclasses.dataclass(frozen=True)
class Reshape:
    shape: tuple


@dataclasses.dataclass(frozen=True)
class Skip:
    """A residual block ``x + body(x)`` over a list of layers."""

    body: tuple


def linear_affine(weight, bias, in_shape) -> tuple[Affine, tuple]:
    """``y = W x + b`` on the last axis of ``in_shape`` as a dense Affine (Kronecker with I over the other axes)."""
    W = np.asarray(weight, dtype=np.float64)
    if W.ndim != 2 or W.shape[1] != in_shape[-1]:
        raise ValueError(f"a linear map of weight {W.shape} does not fit input shape {tuple(in_shape)}")
    b = np.zeros(W.shape[0]) if bias is None else np.asarray(bias, dtype=np.float64).reshape(W.shape[0])
    lead = int(np.prod(in_shape[:-1])) if len(in_shape) > 1 else 1
    out = (*tuple(in_shape[:-1]), W.shape[0])
    if lead == 1:
        return Affine(as_f64(W), as_f64(b)), out
    return Affine(as_f64(np.kron(np.eye(lead), W)), as_f64(np.tile(b, lead))), out


def reshape_shape(in_shape, shape) -> tuple:
    """The shape ``in_shape`` takes under ``reshape(shape)`` (one -1 allowed)."""
    n = int(np.prod(in_shape))
    try:
        return tuple(int(s) for s in np.empty(n).reshape(tuple(int(s) for s in shape)).shape)
    except ValueError:
        raise ValueError(f"cannot reshape {tuple(in_shape)} ({n} entries) to {tuple(shape)}") from None


def lower_layer(layer, shape: tuple) -> tuple[list, tuple]:
    """One layer on an input of per-example ``shape`` -> ``(ops, out_shape)``."""
    if getattr(layer, "entrywise", False):  # an entrywise op (ReLU, a piecewise-linear one) keeps the shape
        return [layer], shape
    if isinstance(layer, Conv2d):
        op, out = conv2d_affine(
            layer.weight,
            layer.bias,
            shape,
            stride=layer.stride,
            padding=layer.padding,
            dilation=layer.dilation,
            groups=layer.groups,
        )
        return [op], out
    if isinstance(layer, Linear):
        op, out = linear_affine(layer.weight, layer.bias, shape)
        return [op], out
    if isinstance(layer, MaxPool2d):
        return maxpool2d_ops(
            shape,
            layer.kernel,
            stride=layer.stride,
            padding=layer.padding,
            dilation=layer.dilation,
            ceil_mode=layer.ceil_mode,
        )
    if isinstance(layer, AvgPool2d):
        op, out = avgpool2d_affine(
            shape,
            layer.kernel,
            stride=layer.stride,
            padding=layer.padding,
            ceil_mode=layer.ceil_mode,
            count_include_pad=layer.count_include_pad,
        )
        return [op], out
    if isinstance(layer, BatchNorm):
        return [batchnorm_affine(shape, layer.gamma, layer.beta, layer.mean, layer.var, layer.eps)], shape
    if isinstance(layer, Flatten):
        return [], (int(np.prod(shape)),)
    if isinstance(layer, Reshape):
        return [], reshape_shape(shape, layer.shape)
    if isinstance(layer, Skip):
        body, out = lower_stack(layer.body, shape)
        if out != shape:
            raise ValueError(f"a residual body must keep the shape {shape}, it gives {out}")
        return [Residual(tuple(body))], shape
    raise ValueError(f"cannot lower a {type(layer).__name__} layer")


def lower_stack(layers, shape) -> tuple[list, tuple]:
    """Layers in order on per-example ``shape`` -> ``(ops, out_shape)`` (not yet fused)."""
    ops: list = []
    shape = tuple(int(s) for s in shape)
    for layer in layers:
        new, shape = lower_layer(layer, shape)
        ops += new
    return ops, shape


def lower_layers(layers, input_shape, source: str = "") -> ConvNet:
    """A Sequential stack of layers (:class:`Conv2d`, :class:`Linear`, :class:`ReLU`, :class:`MaxPool2d`,
    :class:`AvgPool2d`, :class:`BatchNorm`, :class:`Flatten`, :class:`Reshape`, :class:`Skip`) on inputs of
    ``input_shape`` -> a :class:`ConvNet` with consecutive affine maps fused."""
    ops, _ = lower_stack(layers, input_shape)
    return ConvNet(fuse_affines(ops), tuple(input_shape), source)
