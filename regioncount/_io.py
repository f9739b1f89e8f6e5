"""Model files (``.npz``, DESIGN §6) and whole-or-nothing writes of results files.

Two layouts are read: a PyTorch ``nn.Sequential`` state dict of Linear layers, with ReLU assumed between
them since a state dict does not record activations (keys ``0.weight`` (out x in), ``0.bias``, ``2.weight``,
..., or named modules ``fc1.weight``, ``fc2.weight``, ... in the file's order; the last Linear is the
readout), and
regioncount's own layout, which stores its config as JSON under ``__regioncount__`` and is written by
:func:`save_model` for every architecture.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ._errors import ModelFileError
from .networks import MLP, Block, ConvNet, Maxout, RelationModel, Transformer
from .networks._ops import Affine, GroupMax, ReLU, Residual, as_f64

FORMAT_VERSION = 1
#: The most bytes a model file's arrays may hold once inflated (all members together), checked against the
#: sizes the zip directory and the .npy headers declare before anything is inflated: a larger file, or a
#: compressed "zip bomb", is refused instead of filling memory.
MAX_MODEL_BYTES = 2 * 2**30
_CONFIG_KEY = "__regioncount__"
_BLOCK_FIELDS = ("Wq", "Wk", "Wv", "Wo", "W1", "b1", "W2", "b2")


def write_atomic(path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` whole or not at all (temporary file in the same folder, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    tmp = None
    try:
        # SIGINT/SIGTERM held while the temporary file is made, so none lands before its cleanup is armed
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        # mkstemp makes the file 0600; give it the mode an ordinary open() would have
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


def _arrays_and_config(net) -> tuple[dict[str, np.ndarray], dict]:
    if isinstance(net, MLP):
        arrays = {f"weights.{i}": w for i, w in enumerate(net.weights)}
        arrays.update({f"biases.{i}": b for i, b in enumerate(net.biases)})
        return arrays, {"arch": "mlp", "layers": len(net.weights)}
    if isinstance(net, Maxout):
        arrays = {f"weights.{i}": w for i, w in enumerate(net.weights)}
        arrays.update({f"biases.{i}": b for i, b in enumerate(net.biases)})
        arrays.update(readout_W=net.readout_W, readout_b=net.readout_b)
        return arrays, {"arch": "maxout", "layers": len(net.weights)}
    if isinstance(net, Transformer):
        arrays = {"E": net.E, "P": net.P, "readout_W": net.readout_W, "readout_b": net.readout_b}
        for i, blk in enumerate(net.blocks):
            arrays.update({f"blocks.{i}.{f}": getattr(blk, f) for f in _BLOCK_FIELDS})
        config = {
            "arch": "transformer",
            "layers": len(net.blocks),
            "attention": net.attention,
            "causal": net.causal,
            "scale_by_T": net.scale_by_T,
            "inv_temperature": net.inv_temperature,
            "readout_token": net.readout_token,
            "valid_box": None if net.valid_box is None else [list(net.valid_box[0]), list(net.valid_box[1])],
        }
        return arrays, config
    if isinstance(net, RelationModel):
        # phi and psi as two MLPs under prefixes; no psi arrays means psi = phi (symmetric)
        arrays, config = {}, {"arch": "relation", "symmetric": net.symmetric}
        for name, mlp in (("phi", net.phi), ("psi", net.psi)):
            if mlp is not None:
                arrays.update({f"{name}.weights.{i}": w for i, w in enumerate(mlp.weights)})
                arrays.update({f"{name}.biases.{i}": b for i, b in enumerate(mlp.biases)})
                config[f"{name}_layers"] = len(mlp.weights)
        return arrays, config
    if isinstance(net, ConvNet):
        return convnet_arrays(net)
    raise TypeError(f"cannot save a {type(net).__name__}")


def model_bytes(net) -> bytes:
    """The ``.npz`` file :func:`save_model` writes for ``net``, as bytes (to write it with other files as a set)."""
    arrays, config = _arrays_and_config(net)
    config["format"] = FORMAT_VERSION
    buf = io.BytesIO()
    payload: dict[str, Any] = {_CONFIG_KEY: np.array(json.dumps(config)), **arrays}
    np.savez(buf, **payload)
    return buf.getvalue()


def save_model(net, path) -> None:
    """Write ``net`` (MLP, Maxout, Transformer, ConvNet or RelationModel) to ``path`` in regioncount's own ``.npz``
    layout, atomically."""
    write_atomic(path, model_bytes(net))


def _need(data: dict, key: str, path) -> np.ndarray:
    if key not in data:
        raise ModelFileError(f"{path}: missing array {key!r}")
    return data[key]


def _from_own(data: dict, config: dict, path):
    arch, n = config.get("arch"), int(config.get("layers", 0))
    if arch in ("mlp", "maxout"):
        ws = tuple(_need(data, f"weights.{i}", path) for i in range(n))
        bs = tuple(_need(data, f"biases.{i}", path) for i in range(n))
        if arch == "mlp":
            return MLP(ws, bs)
        return Maxout(ws, bs, _need(data, "readout_W", path), _need(data, "readout_b", path))
    if arch == "transformer":
        blocks = tuple(Block(**{f: _need(data, f"blocks.{i}.{f}", path) for f in _BLOCK_FIELDS}) for i in range(n))
        vb = config.get("valid_box")
        return Transformer(
            E=_need(data, "E", path),
            P=_need(data, "P", path),
            blocks=blocks,
            readout_W=_need(data, "readout_W", path),
            readout_b=_need(data, "readout_b", path),
            attention=config.get("attention", "hardmax"),
            causal=bool(config.get("causal", False)),
            scale_by_T=bool(config.get("scale_by_T", False)),
            inv_temperature=float(config.get("inv_temperature", 1.0)),
            readout_token=int(config.get("readout_token", 0)),
            valid_box=None if vb is None else (tuple(vb[0]), tuple(vb[1])),
        )
    if arch == "relation":

        def mlp(name: str) -> MLP:
            m = int(config.get(f"{name}_layers", 0))
            ws = tuple(_need(data, f"{name}.weights.{i}", path) for i in range(m))
            return MLP(ws, tuple(_need(data, f"{name}.biases.{i}", path) for i in range(m)))

        return RelationModel(mlp("phi"), None if config.get("symmetric", False) else mlp("psi"))
    if arch == "convnet":
        return convnet_from(data, config, path)
    raise ModelFileError(f"{path}: unknown architecture {arch!r} in its config")


_TORCH_KEY = re.compile(r"^(.+)\.(weight|bias)$")


def _from_torch(data: dict, path) -> MLP:
    """A state dict of Linear layers: ``<module>.weight`` (out x in) and ``<module>.bias`` per layer, taken in
    the order the file stores them (numeric module names, ``0``, ``2``, ``10``, in numeric order). ReLU is
    assumed between the layers: a state dict does not record its activations."""
    layers: dict[str, dict[str, np.ndarray]] = {}
    for key, value in data.items():
        m = _TORCH_KEY.match(key)
        if not m:
            raise ModelFileError(
                f"{path}: key {key!r} is neither regioncount's layout nor a Linear layer of a state dict "
                "(<module>.weight, <module>.bias)"
            )
        layers.setdefault(m.group(1), {})[m.group(2)] = value
    if not layers:
        raise ModelFileError(f"{path}: holds no layers")
    names = list(layers)
    if all(n.isdigit() for n in names):
        names.sort(key=int)
    ws, bs = [], []
    for name in names:
        if "weight" not in layers[name]:
            raise ModelFileError(f"{path}: layer {name!r} has a bias but no weight")
        w = layers[name]["weight"]
        if w.ndim != 2:
            raise ModelFileError(f"{path}: {name}.weight has shape {w.shape}; a Linear weight is (out, in)")
        b = layers[name].get("bias", np.zeros(w.shape[0]))
        if b.shape != (w.shape[0],):
            raise ModelFileError(f"{path}: {name}.bias has shape {b.shape}, {name}.weight needs ({w.shape[0]},)")
        ws.append(w)
        bs.append(b)
    return MLP(tuple(ws), tuple(bs))


def _check_declared_sizes(p: Path, limit: int | None = None) -> None:
    """Refuse, before anything is inflated, members whose .npy header declares more data than the member
    holds (a corrupt or hostile file would otherwise make NumPy allocate the declared size before failing),
    and files whose members declare more than ``limit`` bytes (default :data:`MAX_MODEL_BYTES`) once
    inflated, whatever their compressed size (a zip bomb). Only the zip directory and each member's first
    bytes (the .npy header) are read."""
    limit = MAX_MODEL_BYTES if limit is None else limit
    try:
        with zipfile.ZipFile(p) as zf:
            infos = zf.infolist()
            total = sum(i.file_size for i in infos)
            if total > limit:
                packed = sum(i.compress_size for i in infos)
                raise ModelFileError(
                    f"{p}: its arrays declare {total:,} bytes once inflated ({packed:,} bytes compressed), more "
                    f"than the {limit:,} bytes a model file may hold: refused before inflating it"
                )
            for info in infos:
                with zf.open(info) as f:
                    version = np.lib.format.read_magic(f)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
                    else:
                        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
                    declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
                    if declared > info.file_size:
                        raise ModelFileError(
                            f"{p}: array {info.filename!r} declares shape {shape} ({declared:,} bytes) but holds "
                            f"{info.file_size:,} bytes: the file is corrupt"
                        )
    except ModelFileError:
        raise
    except Exception as e:
        raise ModelFileError(f"{p}: not a readable .npz file ({type(e).__name__}: {e})") from None


def _check_format(config: dict, path) -> None:
    """Refuse a config whose format version is not one this regioncount reads (a file written by a newer
    regioncount, or a damaged version field); a config without one predates the field and is format 1."""
    version = config.get("format", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        raise ModelFileError(f"{path}: its config gives the format version {version!r}, not an integer")
    if version != FORMAT_VERSION:
        newer = " (written by a newer regioncount: upgrade to read it)" if version > FORMAT_VERSION else ""
        raise ModelFileError(
            f"{path}: model file format {version}; this regioncount reads format {FORMAT_VERSION}{newer}"
        )


def _check_widths(net, path) -> None:
    if isinstance(net, (MLP, Maxout)):
        for i, w in enumerate(net.weights):
            if 0 in w.shape:
                raise ModelFileError(f"{path}: layer {i} has a weight of shape {tuple(w.shape)}: a layer of width 0")


def load_model(path):
    """Read a model file (either layout) into an MLP, Maxout, Transformer or RelationModel.

    Raises :class:`ModelFileError` with one clear sentence for a missing or unreadable file, missing
    keys, shapes that do not fit, layers of width 0, or NaN/inf entries.
    """
    p = Path(path)
    if p.is_dir():
        raise ModelFileError(f"{path} is a directory, not a model file")
    if not p.is_file():
        raise ModelFileError(f"{path}: no such model file")
    try:
        is_zip = zipfile.is_zipfile(p)
    except OSError as e:
        raise ModelFileError(f"{path}: cannot be read ({e.strerror or e})") from None
    if not is_zip:
        raise ModelFileError(f"{path}: not an .npz file (not a zip archive of .npy arrays)")
    _check_declared_sizes(p)
    try:
        with np.load(p, allow_pickle=False) as f:
            data = {k: f[k] for k in f.files}
    except ValueError as e:
        if "pickle" in str(e):
            raise ModelFileError(f"{path}: holds pickled (object) arrays, which are never loaded") from None
        raise ModelFileError(f"{path}: not a readable .npz file ({e})") from None
    except Exception as e:
        raise ModelFileError(f"{path}: not a readable .npz file ({type(e).__name__}: {e})") from None
    for key, value in data.items():
        if key != _CONFIG_KEY and value.dtype.kind == "b":
            raise ModelFileError(f"{path}: array {key!r} holds booleans, not weights (store numbers, e.g. float64)")
        if key != _CONFIG_KEY and (value.dtype.kind not in "fiu" or not np.all(np.isfinite(value))):
            raise ModelFileError(f"{path}: array {key!r} is not finite real numbers (NaN, inf or non-numeric)")
    try:
        if _CONFIG_KEY in data:
            try:
                config = json.loads(str(data.pop(_CONFIG_KEY)))
            except json.JSONDecodeError as e:
                raise ModelFileError(f"{path}: config is not valid JSON ({e})") from None
            if not isinstance(config, dict):
                raise ModelFileError(f"{path}: config is not a JSON object")
            _check_format(config, path)
            net = _from_own(data, config, path)
        else:
            net = _from_torch(data, path)
    except ModelFileError:
        raise
    except Exception as e:
        raise ModelFileError(f"{path}: {e}") from None
    _check_widths(net, path)
    return net


def is_state_dict(path) -> bool:
    """Whether a readable model file is a torch state dict (no regioncount config): its activations were
    not recorded, ReLU is assumed."""
    try:
        with np.load(Path(path), allow_pickle=False) as f:
            return _CONFIG_KEY not in f.files
    except Exception:
        return False


# ------------------------------------------------------------------------------------------------
# regioncount's own .npz layout for a ConvNet (read and written by load_model / save_model)


def convnet_arrays(net: ConvNet) -> tuple[dict[str, np.ndarray], dict]:
    """Arrays and JSON config of a :class:`ConvNet`: its ops as a nested list, its input shape."""
    arrays: dict[str, np.ndarray] = {}

    def affine(op, key: str) -> dict:
        arrays[f"{key}.W"], arrays[f"{key}.b"] = op.W, op.b
        return {"op": "affine"}

    # one saver per op key (the op protocol's keys); a residual is a block of ops
    savers = {"affine": affine, "relu": lambda op, key: {"op": "relu"}}
    savers["groupmax"] = lambda op, key: {"op": "groupmax", "k": int(op.k)}

    def encode(ops, prefix: str) -> list[dict]:
        out: list[dict] = []
        for i, op in enumerate(ops):
            key = f"{prefix}{i}"
            if op.body_ops is not None:
                out.append({"op": "residual", "body": encode(op.body_ops, f"{key}.")})
            elif op.key in savers:
                out.append(savers[op.key](op, key))
            else:
                raise TypeError(f"cannot save a {type(op).__name__} op of a ConvNet")
        return out

    ops = encode(net.ops, "ops.")
    return arrays, {"arch": "convnet", "input_shape": list(net.input_shape), "ops": ops, "source": net.source}


def convnet_from(data: dict, config: dict, path) -> ConvNet:
    """The :class:`ConvNet` that :func:`convnet_arrays` wrote."""

    def decode(items, prefix: str) -> tuple:
        ops: list = []
        for i, item in enumerate(items):
            key, kind = f"{prefix}{i}", item.get("op")
            if kind == "affine":
                for part in ("W", "b"):
                    if f"{key}.{part}" not in data:
                        raise ModelFileError(f"{path}: missing array {key}.{part}")
                ops.append(Affine(as_f64(data[f"{key}.W"]), as_f64(data[f"{key}.b"])))
            elif kind == "relu":
                ops.append(ReLU())
            elif kind == "groupmax":
                ops.append(GroupMax(int(item["k"])))
            elif kind == "residual":
                ops.append(Residual(decode(item["body"], f"{key}.")))
            else:
                raise ModelFileError(f"{path}: unknown op {kind!r} in its config")
        return tuple(ops)

    if "input_shape" not in config:
        raise ModelFileError(f"{path}: its config has no input shape")
    return ConvNet(decode(config.get("ops", []), "ops."), tuple(config["input_shape"]), str(config.get("source", "")))
