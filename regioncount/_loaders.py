"""Models from elsewhere (DESIGN §9): ONNX files, torch state dicts (npz, safetensors), torch modules.

Everything is lowered to the op vocabulary by :mod:`regioncount.networks._conv` and comes back as a
:class:`~regioncount.networks.ConvNet` (which stores the input shape) or, for a state dict of Linear
layers, an :class:`~regioncount.networks.MLP`. Weights are read into float64 exactly (a float32 weight
is a float64 number), so counts are exact for the float64 network with the file's weights; a runtime
that computes in float32 agrees with it to float32 precision only.

ONNX (optional extra ``onnx``): the nodes Gemm, MatMul, Add, Relu, LeakyRelu, Abs, Clip (bounds as inputs or
attributes), PRelu (one slope), Conv, MaxPool, AveragePool,
BatchNormalization, Flatten, Reshape and Max are read (plus Constant and Identity, which only carry data).
Any other node raises one :class:`ModelFileError` that names it. The graph takes one input whose first
axis is the batch axis; ``Add`` of two computed tensors must be a skip connection ``x + f(x)`` (or of two
affine branches), and ``Max`` of computed tensors needs them to be affine maps of one common tensor
(maxout units).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ._errors import ModelFileError
from ._io import _from_torch, load_model
from .networks._conv import (
    AvgPool2d,
    BatchNorm,
    Conv2d,
    ConvNet,
    Flatten,
    Linear,
    MaxPool2d,
    Reshape,
    fuse_affines,
    lower_layer,
    lower_layers,
)
from .networks._ops import (
    Affine,
    GroupMax,
    PiecewiseLinear,
    Program,
    ReLU,
    Residual,
    abs_op,
    as_f64,
    hardtanh,
    leaky_relu,
    walk_widths,
)

ONNX_NODES = (
    "Gemm",
    "MatMul",
    "Add",
    "Relu",
    "Conv",
    "MaxPool",
    "AveragePool",
    "BatchNormalization",
    "Flatten",
    "Reshape",
    "Max",
    "LeakyRelu",
    "Clip",
    "Abs",
    "PRelu",
)


def _clip(lo: float, hi: float) -> PiecewiseLinear:
    """ONNX Clip as a piecewise-linear op (a missing bound is infinite)."""
    if np.isfinite(lo) and np.isfinite(hi):
        if lo >= hi:
            raise ValueError(f"Clip needs min < max, not {lo}, {hi}")
        return hardtanh(lo, hi)
    if np.isfinite(lo):
        return PiecewiseLinear((lo,), (0.0, 1.0), lo)
    if np.isfinite(hi):
        return PiecewiseLinear((hi,), (1.0, 0.0))
    raise ValueError("Clip without bounds is the identity: not supported")


def load_network(path):
    """Read any model file by its suffix: ``.onnx``, ``.safetensors``, else ``.npz`` (:func:`load_model`)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".onnx":
        return load_onnx(path)
    if suffix == ".safetensors":
        return load_safetensors(path)
    return load_model(path)


# ------------------------------------------------------------------------------------------------
# state dicts


def load_safetensors(path):
    """A torch ``nn.Sequential`` state dict of Linear layers saved with ``safetensors`` -> MLP."""
    p = Path(path)
    if not p.is_file():
        raise ModelFileError(f"{path}: no such model file")
    try:
        from safetensors.numpy import load_file
    except ImportError:
        raise ModelFileError(f"{path}: reading .safetensors needs the safetensors package") from None
    try:
        data = load_file(str(p))
    except Exception as e:  # the reader raises several types for damaged files
        raise ModelFileError(f"{path}: not a readable .safetensors file ({type(e).__name__}: {e})") from None
    for key, value in data.items():
        if value.dtype.kind not in "fiu" or not np.all(np.isfinite(value.astype(np.float64))):
            raise ModelFileError(f"{path}: tensor {key!r} is not finite real numbers")
    try:
        return _from_torch({k: v.astype(np.float64) for k, v in data.items()}, path)
    except ModelFileError:
        raise
    except (ValueError, TypeError, IndexError) as e:
        raise ModelFileError(f"{path}: {e}") from None


# ------------------------------------------------------------------------------------------------
# torch modules (optional: torch is never required)


def _numpy(t) -> np.ndarray:
    return np.asarray(t.detach().cpu().numpy(), dtype=np.float64)


def _maybe(t) -> np.ndarray | None:
    return None if t is None else _numpy(t)


def torch_layers(module) -> list:
    """The layers of a torch ``nn.Sequential`` (nested Sequentials flattened), in eval-mode semantics.

    Reads Linear, Conv2d, ReLU, LeakyReLU, Hardtanh, PReLU (one slope), MaxPool2d, AvgPool2d, BatchNorm1d/2d, Flatten, Identity and Dropout (the
    identity in eval mode) by class name, so torch is imported by the caller only."""
    out: list = []
    for m in module.children() if hasattr(module, "children") else module:
        name = type(m).__name__
        if name == "Sequential":
            out += torch_layers(m)
        elif name == "Linear":
            out.append(Linear(_numpy(m.weight), _maybe(m.bias)))
        elif name == "Conv2d":
            if getattr(m, "padding_mode", "zeros") != "zeros" or isinstance(m.padding, str):
                raise ModelFileError(f"Conv2d with padding {m.padding!r} / mode {m.padding_mode!r} is not supported")
            out.append(Conv2d(_numpy(m.weight), _maybe(m.bias), m.stride, m.padding, m.dilation, m.groups))
        elif name == "ReLU":
            out.append(ReLU())
        elif name == "LeakyReLU":
            out.append(leaky_relu(float(m.negative_slope)))
        elif name == "Hardtanh":
            out.append(hardtanh(float(m.min_val), float(m.max_val)))
        elif name == "PReLU":
            a = _numpy(m.weight).ravel()
            if a.size != 1:
                raise ModelFileError("PReLU with one slope per channel is not supported (one slope only)")
            out.append(leaky_relu(float(a[0])))
        elif name == "MaxPool2d":
            out.append(MaxPool2d(m.kernel_size, m.stride, m.padding, m.dilation, bool(m.ceil_mode)))
        elif name == "AvgPool2d":
            if getattr(m, "divisor_override", None) is not None:
                raise ModelFileError("AvgPool2d with divisor_override is not supported")
            out.append(AvgPool2d(m.kernel_size, m.stride, m.padding, bool(m.ceil_mode), bool(m.count_include_pad)))
        elif name in ("BatchNorm1d", "BatchNorm2d"):
            n = m.num_features
            gamma = _numpy(m.weight) if m.weight is not None else np.ones(n)
            beta = _numpy(m.bias) if m.bias is not None else np.zeros(n)
            out.append(BatchNorm(gamma, beta, _numpy(m.running_mean), _numpy(m.running_var), float(m.eps)))
        elif name == "Flatten":
            if (m.start_dim, m.end_dim) != (1, -1):
                raise ModelFileError("Flatten other than nn.Flatten() (start_dim=1, end_dim=-1) is not supported")
            out.append(Flatten())
        elif name in ("Identity", "Dropout"):
            continue
        else:
            raise ModelFileError(
                f"torch layer {name} is not supported: regioncount reads Linear, Conv2d, ReLU, LeakyReLU, Hardtanh, "
                "PReLU, MaxPool2d, "
                "AvgPool2d, BatchNorm1d/2d, Flatten, Identity and Dropout"
            )
    return out


def from_torch(module, input_shape) -> ConvNet:
    """A torch ``nn.Sequential`` MLP or CNN on inputs of ``input_shape`` (one example, e.g. ``(1, 8, 8)``)."""
    try:
        return lower_layers(torch_layers(module), tuple(input_shape), source="torch")
    except ValueError as e:
        raise ModelFileError(f"torch module: {e}") from None


# ------------------------------------------------------------------------------------------------
# ONNX


class _Val:
    """A computed tensor: the ops that produce it from the graph input, and its shape per example."""

    def __init__(self, ops: tuple, shape: tuple):
        self.ops = ops
        self.shape = tuple(int(s) for s in shape)


def _attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _common_prefix(lists) -> int:
    n = min(len(x) for x in lists)
    for i in range(n):
        if any(x[i] is not lists[0][i] for x in lists[1:]):
            return i
    return n


def _as_affine(ops, width: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The composition of ``ops`` when all are Affine (the identity when there are none), else None."""
    W, b = np.eye(width), np.zeros(width)
    for op in ops:
        if not op.is_affine:
            return None
        W, b = op.W @ W, op.W @ b + op.b
    return W, b


def _width(ops, input_dim: int) -> int:
    w = walk_widths(Program(tokens=1, input_dim=input_dim, ops=tuple(ops)))
    return w[-1][2] if w else input_dim


def _auto_pads(auto_pad, shape, kernel, strides, dilations):
    if auto_pad in ("", "NOTSET", "VALID"):
        return None if auto_pad in ("", "NOTSET") else [0, 0, 0, 0]
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ValueError(f"auto_pad {auto_pad!r} is not supported")
    begin, end = [], []
    for n, k, s, d in zip(shape[1:], kernel, strides, dilations):
        total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
        small = total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else total - small)
        end.append(total - begin[-1])
    return begin + end


class _OnnxReader:
    def __init__(self, model, path):
        from onnx import numpy_helper

        self.path = path
        g = model.graph
        self.consts: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        inputs = [i for i in g.input if i.name not in self.consts]
        if len(inputs) != 1:
            raise ModelFileError(f"{path}: the graph must take exactly one input, it takes {len(inputs)}")
        dims = inputs[0].type.tensor_type.shape.dim
        shape = [d.dim_value if d.HasField("dim_value") else None for d in dims]
        if len(shape) < 2:
            raise ModelFileError(f"{path}: the input needs a batch axis and at least one more, got shape {shape}")
        if shape[0] not in (None, 1):
            raise ModelFileError(f"{path}: the first input axis must be the batch axis (symbolic or 1), got {shape[0]}")
        if any(s is None or s < 1 for s in shape[1:]):
            raise ModelFileError(f"{path}: the input shape {shape} is not fully known (only the batch axis may vary)")
        self.input_shape = tuple(int(s) for s in shape[1:] if s is not None)
        self.input_dim = math.prod(self.input_shape)
        self.vals: dict[str, _Val | np.ndarray] = {inputs[0].name: _Val((), self.input_shape)}
        self.graph = g

    def read(self) -> ConvNet:
        for node in self.graph.node:
            if node.op_type not in ONNX_NODES + ("Constant", "Identity"):
                raise ModelFileError(
                    f"{self.path}: node {node.name or '(unnamed)'!r} of type {node.op_type} is not supported; "
                    f"regioncount reads {', '.join(ONNX_NODES)}"
                )
            try:
                outs = self.node(node, _attrs(node))
            except ModelFileError:
                raise
            except (ValueError, KeyError, IndexError, TypeError) as e:
                raise ModelFileError(f"{self.path}: node {node.name or '(unnamed)'!r} ({node.op_type}): {e}") from None
            for name, v in zip(node.output, outs):
                self.vals[name] = v
        if len(self.graph.output) != 1:
            raise ModelFileError(f"{self.path}: the graph must have one output, it has {len(self.graph.output)}")
        out = self.vals.get(self.graph.output[0].name)
        if not isinstance(out, _Val):
            raise ModelFileError(f"{self.path}: the graph output does not depend on its input")
        ops = fuse_affines(out.ops)
        for op, _, _ in walk_widths(Program(1, self.input_dim, ops)):
            for a in (getattr(op, "W", None), getattr(op, "b", None)):
                if a is not None and not np.all(np.isfinite(a)):
                    raise ModelFileError(f"{self.path}: the weights hold NaN or inf")
        return ConvNet(ops, self.input_shape, str(self.path))

    def get(self, name):
        if name not in self.vals and name not in self.consts:
            raise KeyError(f"input {name!r} is not produced by any earlier node")
        return self.vals[name] if name in self.vals else self.consts[name]

    def dyn(self, name) -> _Val:
        v = self.get(name)
        if not isinstance(v, _Val):
            raise ValueError(f"input {name!r} must be computed from the graph input, not a constant")
        return v

    def const(self, name) -> np.ndarray:
        v = self.get(name)
        if isinstance(v, _Val):
            raise ValueError(f"input {name!r} must be a constant (an initializer), not computed from the graph input")
        return np.asarray(v)

    def apply(self, x: _Val, layer) -> _Val:
        ops, shape = lower_layer(layer, x.shape)
        return _Val(x.ops + tuple(ops), shape)

    def node(self, node, at: dict) -> list:
        t = node.op_type
        ins = list(node.input)
        if t == "Constant":
            if "value" not in at:
                raise ValueError("only Constant nodes with a tensor 'value' are supported")
            from onnx import numpy_helper

            return [numpy_helper.to_array(at["value"])]
        if t == "Identity":
            return [self.get(ins[0])]
        if t in ("MaxPool", "BatchNormalization") and len([o for o in node.output if o]) > 1:
            raise ValueError("only the first output is supported (eval mode, no indices)")
        self.get(ins[0])  # a missing input is an error whatever the node
        if t == "Relu":
            return [self.apply(self.dyn(ins[0]), ReLU())]
        if t == "LeakyRelu":
            return [self.apply(self.dyn(ins[0]), leaky_relu(float(at.get("alpha", 0.01))))]
        if t == "Abs":
            return [self.apply(self.dyn(ins[0]), abs_op())]
        if t == "PRelu":
            slope = self.const(ins[1]).ravel()
            if slope.size != 1:
                raise ValueError("PRelu with more than one slope is not supported (one slope only)")
            return [self.apply(self.dyn(ins[0]), leaky_relu(float(slope[0])))]
        if t == "Clip":
            lo = self.const(ins[1]).item() if len(ins) > 1 and ins[1] else at.get("min", -np.inf)
            hi = self.const(ins[2]).item() if len(ins) > 2 and ins[2] else at.get("max", np.inf)
            return [self.apply(self.dyn(ins[0]), _clip(float(lo), float(hi)))]
        if t == "Gemm":
            x = self.dyn(ins[0])
            if at.get("transA", 0):
                raise ValueError("transA=1 is not supported")
            B = self.const(ins[1]).astype(np.float64)
            W = B if at.get("transB", 0) else B.T
            W = float(at.get("alpha", 1.0)) * W
            b = None
            if len(ins) > 2 and ins[2]:
                b = (
                    float(at.get("beta", 1.0))
                    * np.broadcast_to(self.const(ins[2]).astype(np.float64), (1, W.shape[0]))[0]
                )
            return [self.apply(x, Linear(W, b))]
        if t == "MatMul":
            B = self.const(ins[1]).astype(np.float64)
            if B.ndim != 2:
                raise ValueError(f"MatMul needs a 2D constant right factor, got shape {B.shape}")
            return [self.apply(self.dyn(ins[0]), Linear(B.T, None))]
        if t == "Add":
            return [self.add(self.get(ins[0]), self.get(ins[1]))]
        if t == "Max":
            return [self.max([self.get(i) for i in ins])]
        x = self.dyn(ins[0])
        if t == "Conv":
            W = self.const(ins[1]).astype(np.float64)
            if W.ndim != 4:
                raise ValueError(f"only 2D convolutions are supported, got a weight of shape {W.shape}")
            b = self.const(ins[2]) if len(ins) > 2 and ins[2] else None
            k = list(at.get("kernel_shape", W.shape[2:]))
            s, d = list(at.get("strides", [1, 1])), list(at.get("dilations", [1, 1]))
            pads = _auto_pads(at.get("auto_pad", b"NOTSET").decode(), x.shape, k, s, d)
            pads = pads if pads is not None else list(at.get("pads", [0, 0, 0, 0]))
            return [self.apply(x, Conv2d(W, b, s, pads, d, int(at.get("group", 1))))]
        if t in ("MaxPool", "AveragePool"):
            k = list(at["kernel_shape"])
            if len(k) != 2:
                raise ValueError(f"only 2D pools are supported, got kernel {k}")
            s, d = list(at.get("strides", [1, 1])), list(at.get("dilations", [1, 1]))
            pads = _auto_pads(at.get("auto_pad", b"NOTSET").decode(), x.shape, k, s, d)
            pads = pads if pads is not None else list(at.get("pads", [0, 0, 0, 0]))
            ceil = bool(at.get("ceil_mode", 0))
            if t == "MaxPool":
                return [self.apply(x, MaxPool2d(k, s, pads, d, ceil))]
            if d != [1, 1]:
                raise ValueError("AveragePool with dilations is not supported")
            return [self.apply(x, AvgPool2d(k, s, pads, ceil, bool(at.get("count_include_pad", 0))))]
        if t == "BatchNormalization":
            if at.get("training_mode", 0):
                raise ValueError("training_mode=1 is not supported: export the model in eval mode")
            g, beta, m, v = (self.const(i) for i in ins[1:5])
            return [self.apply(x, BatchNorm(g, beta, m, v, float(at.get("epsilon", 1e-5))))]
        if t == "Flatten":
            if int(at.get("axis", 1)) != 1:
                raise ValueError("only Flatten with axis=1 (keep the batch axis) is supported")
            return [self.apply(x, Flatten())]
        if t == "Reshape":
            target = [int(s) for s in self.const(ins[1]).reshape(-1)]
            full = (1, *x.shape)
            if not at.get("allowzero", 0):
                target = [full[i] if s == 0 and i < len(full) else s for i, s in enumerate(target)]
            if not target or target[0] not in (1, -1):
                raise ValueError(f"Reshape must keep the batch axis first, got target shape {target}")
            shape = tuple(int(s) for s in np.empty(full).reshape(target).shape)
            return [self.apply(x, Reshape(shape[1:]))]
        raise ValueError(f"{t} is not supported")  # unreachable: filtered in read()

    def _broadcast_const(self, c: np.ndarray, shape: tuple) -> np.ndarray:
        full = (1, *shape)
        c = np.asarray(c, dtype=np.float64)
        if np.broadcast_shapes(c.shape, full) != full:
            raise ValueError(f"a constant of shape {c.shape} does not broadcast to the tensor's shape {full}")
        return np.broadcast_to(c, full).reshape(-1)

    def add(self, a, b) -> _Val:
        if not isinstance(a, _Val):
            a, b = b, a
        if not isinstance(a, _Val):
            raise ValueError("Add of two constants")
        if not isinstance(b, _Val):
            n = math.prod(a.shape)
            return _Val(a.ops + (Affine(as_f64(np.eye(n)), as_f64(self._broadcast_const(b, a.shape))),), a.shape)
        if a.shape != b.shape:
            raise ValueError(f"Add of tensors of shapes {a.shape} and {b.shape} (broadcasting is not supported)")
        p = _common_prefix([a.ops, b.ops])
        ra, rb = a.ops[p:], b.ops[p:]
        if not ra or not rb:
            return _Val(a.ops[:p] + (Residual(tuple(rb or ra)),), a.shape)
        width = _width(a.ops[:p], self.input_dim)
        fa, fb = _as_affine(ra, width), _as_affine(rb, width)
        if fa is None or fb is None:
            raise ValueError(
                "Add of two branches that both transform their common input: only skip connections x + f(x) "
                "(or two affine branches) are supported"
            )
        return _Val(a.ops[:p] + (Affine(as_f64(fa[0] + fb[0]), as_f64(fa[1] + fb[1])),), a.shape)

    def max(self, items) -> _Val:
        dyn = [v for v in items if isinstance(v, _Val)]
        if not dyn:
            raise ValueError("Max of constants only")
        shape = dyn[0].shape
        if any(v.shape != shape for v in dyn):
            raise ValueError("Max of tensors of different shapes (broadcasting is not supported)")
        if len(items) == 1:
            return dyn[0]
        p = _common_prefix([v.ops for v in dyn])
        prefix = dyn[0].ops[:p]
        width = _width(prefix, self.input_dim)
        n = math.prod(shape)
        maps = []
        for v in items:
            if isinstance(v, _Val):
                f = _as_affine(v.ops[p:], width)
                if f is None:
                    raise ValueError("Max needs its inputs to be affine maps of one common tensor (maxout units)")
                maps.append(f)
            else:
                maps.append((np.zeros((n, width)), self._broadcast_const(v, shape)))
        k = len(maps)
        W = np.stack([m[0] for m in maps], axis=1).reshape(n * k, width)  # unit-major: the k pieces of unit u
        b = np.stack([m[1] for m in maps], axis=1).reshape(n * k)
        return _Val(prefix + (Affine(as_f64(W), as_f64(b)), GroupMax(k)), shape)


def load_onnx(path) -> ConvNet:
    """Read an ONNX file into a :class:`ConvNet` (see the module docstring for the nodes read)."""
    p = Path(path)
    if not p.is_file():
        raise ModelFileError(f"{path}: no such model file")
    try:
        import onnx
    except ImportError:
        raise ModelFileError(
            f"{path}: reading ONNX needs the optional extra: pip install 'regioncount[onnx]'"
        ) from None
    try:
        model = onnx.load(str(p))
    except Exception as e:  # protobuf raises DecodeError, RuntimeWarning-free; onnx raises its own types
        raise ModelFileError(f"{path}: not a readable ONNX file ({type(e).__name__})") from None
    try:
        return _OnnxReader(model, path).read()
    except ModelFileError:
        raise
    except Exception as e:  # a well-formed protobuf that is not a sensible graph
        raise ModelFileError(f"{path}: not a usable ONNX graph ({type(e).__name__}: {e})") from None
