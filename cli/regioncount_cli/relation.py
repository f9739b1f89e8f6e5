"""``regioncount relation fit`` and ``regioncount retrieval``: parse, call regioncount.relations, render,
write files whole."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Annotated

import typer

from regioncount import DomainError, RegionCountError, load_model

from . import _validate as checks
from ._common import (
    Dir1Opt,
    Dir2Opt,
    JsonFileOpt,
    JsonOpt,
    LazyProgress,
    ModelArg,
    OriginOpt,
    console,
    dump_json,
    fail,
    guarded,
    parse_ints,
    parse_vector,
)
from ._data import slice_from_options
from ._files import write_files
from ._validate import MemoryCapOpt, finite

relation_app = typer.Typer(
    help="Relation models r(x, y) = <phi(x), psi(y)> with ReLU MLP feature maps (Altabaa and Lafferty 2024).",
    no_args_is_help=True,
)

TargetOpt = Annotated[
    str,
    typer.Option(
        help="Target relation: gaussian (exp(-|x-y|^2 / 2 sigma^2), symmetric), prefers (x prefers keys near M x, "
        "M a turn by 60 degrees scaled by 0.9; asymmetric) or bilinear (<x, A y>, A = [[1, 2], [-1, 0.5]]; 2D)."
    ),
]
SigmaOpt = Annotated[float, typer.Option(help="Width sigma of the gaussian and prefers targets.")]


def _target(name: str, sigma: float):
    from regioncount.relations import as_target

    return as_target(name, sigma=sigma) if name in ("gaussian", "prefers") else as_target(name)


@relation_app.command("fit")
def fit(
    out: Annotated[Path, typer.Option(help="Write the fitted model here (.npz, regioncount's layout).")],
    target: TargetOpt = "gaussian",
    sigma: SigmaOpt = 1.0,
    widths: Annotated[str, typer.Option(help="Hidden widths of phi (and psi), comma-separated.")] = "32",
    features: Annotated[int, typer.Option(help="Feature dimension d of phi(x) and psi(y).")] = 8,
    symmetric: Annotated[
        bool | None,
        typer.Option(
            "--symmetric/--asymmetric",
            help="psi = phi (positive semi-definite) or two MLPs; default: symmetric for the gaussian target only.",
        ),
    ] = None,
    dim: Annotated[int, typer.Option(help="Dimension of queries x and keys y.")] = 2,
    box: Annotated[
        tuple[float, float], typer.Option(help="LO HI: train on x, y in [LO, HI]^dim, and report errors there.")
    ] = (-1.0, 1.0),
    steps: Annotated[int, typer.Option(help="Adam steps.")] = 2000,
    batch: Annotated[int, typer.Option(help="Pairs per step.")] = 256,
    lr: Annotated[float, typer.Option(callback=finite(0, open_min=True), help="Adam learning rate.")] = 1e-2,
    seed: Annotated[int, typer.Option(help="Seed for weights, training pairs and minibatches.")] = 0,
    grid: Annotated[
        int, typer.Option(help="Report errors over every pair of a grid with this many points per axis.")
    ] = 21,
    json_out: JsonOpt = False,
    report: JsonFileOpt = None,
):
    """Fit a relation model to a target relation (Adam on MSE) and report the sup and mean error on a grid."""
    from regioncount.relations import fit_relation

    ws = parse_ints(widths, "--widths")
    guarded(lambda: checks.check_outputs({"--out": out, "--report": report}))

    def run():
        tgt = _target(target, sigma)
        with LazyProgress("fitting (steps)", delay=0.5) as bar:
            return fit_relation(
                tgt,
                input_dim=dim,
                widths=ws,
                features=features,
                symmetric=symmetric,
                box=box,
                steps=steps,
                batch=batch,
                learning_rate=lr,
                seed=seed,
                grid=grid,
                progress=bar,
            )

    res = guarded(run)
    from regioncount import model_bytes

    d = res.as_dict()
    d.update(model=str(out), domain={"box": {"lo": [box[0]] * dim, "hi": [box[1]] * dim}})
    d["version"] = checks.tool_version()
    files: dict[Path, bytes | str] = {out: model_bytes(res.model)}
    if report is not None:
        files[report] = dump_json(d) + "\n"
    write_files(files)  # the model and its report, both or neither
    if json_out:
        print(dump_json(d))
        return
    from rich.table import Table

    table = Table(title=f"relation model fitted to {d['target']} ({'symmetric' if d['symmetric'] else 'asymmetric'})")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("widths / features", f"{d['widths']} / {d['features']}")
    table.add_row(f"sup |error| on a {grid}-point grid", f"{d['sup_error']:.4g}")
    table.add_row("mean |error|", f"{d['mean_error']:.4g}")
    table.add_row("final training loss (MSE)", f"{d['final_loss']:.4g}")
    table.add_row("seconds", f"{d['seconds']:.2f}")
    table.add_row("model file", str(out))
    console().print(table)


def _retrieval_target(text: str | None, sigma: float):
    """A built-in name, or a model file (a relation model as the target)."""
    if text is None:
        return None
    from regioncount.networks import RelationModel
    from regioncount.relations import BUILTINS

    if text in BUILTINS:
        return _target(text, sigma)
    if not Path(text).suffix:
        raise RegionCountError(f"--target {text!r} is neither a built-in ({', '.join(BUILTINS)}) nor a model file")
    net = load_model(text)
    if not isinstance(net, RelationModel):
        raise RegionCountError(f"--target {text}: holds a {type(net).__name__}, not a relation model")
    return net


def _per_key_csv(ret, err_keys) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    p = ret.keys.shape[1]
    areas = ret.key_areas
    cells = [int(len(set(ret.cell_labels[ret.key_of_region == j].tolist()))) for j in range(ret.n_keys)]
    w.writerow(["key", *[f"y{i + 1}" for i in range(p)], "bias", "area", "fraction", "cells", "target_area"])
    total = float(ret.partition.areas.sum())
    for j in range(ret.n_keys):
        t = "" if err_keys is None else f"{err_keys[j]:.12g}"
        row = [j, *[f"{v:.12g}" for v in ret.keys[j]], f"{ret.key_bias[j]:.12g}"]
        w.writerow(row + [f"{areas[j]:.12g}", f"{areas[j] / total:.12g}", cells[j], t])
    return buf.getvalue()


def retrieval(
    model: ModelArg,
    keys: Annotated[
        Path,
        typer.Option(
            help="Keys file: text/CSV (one key a row, numbers separated by commas or spaces), .npy or .json "
            "(a list of keys)."
        ),
    ],
    key_bias: Annotated[
        Path | None, typer.Option(help="Per-key score bias b_j: a file with one number per key, in key order.")
    ] = None,
    voronoi: Annotated[
        bool,
        typer.Option(
            "--voronoi",
            help="Add -|psi(y_j)|^2 / 2 to key j's score (with identity features: the keys' Voronoi cells).",
        ),
    ] = False,
    box: Annotated[
        tuple[float, float],
        typer.Option(help="LO HI: queries in [LO, HI]^2 (2D queries), or [LO, HI]^2 in (u1, u2) for a slice."),
    ] = (-1.0, 1.0),
    origin: OriginOpt = None,
    dir1: Dir1Opt = None,
    dir2: Dir2Opt = None,
    target: Annotated[
        str | None,
        typer.Option(
            help="Target preorder to compare with: gaussian, prefers, bilinear, or a relation model file (keys "
            "ranked by its <phi(x), psi(y)>, no bias). Exact where its cells are polygons (all of these), else sampled."
        ),
    ] = None,
    sigma: SigmaOpt = 1.0,
    method: Annotated[
        str, typer.Option(help="Mistake area: auto (exact where possible), exact, or sample (a labelled estimate).")
    ] = "auto",
    samples: Annotated[int, typer.Option(help="sample: uniform random query points.")] = 100_000,
    seed: Annotated[int, typer.Option(help="Seed for sampled points.")] = 0,
    margins: Annotated[
        str,
        typer.Option(help="Score margins (best minus second best), comma-separated: the exact area where each holds."),
    ] = "0.05,0.1,0.25",
    weight: Annotated[
        float,
        typer.Option(help="Softmax weight on the retrieved key for which to report the inverse temperature needed."),
    ] = 0.99,
    json_out: JsonOpt = False,
    out: JsonFileOpt = None,
    csv_out: Annotated[
        Path | None, typer.Option("--csv", help="Write one row per key (area, cells, target area) to this CSV file.")
    ] = None,
    figure: Annotated[
        Path | None,
        typer.Option(help="Draw the cells coloured by key, target boundaries and hatched mistakes (.png/.svg/.pdf)."),
    ] = None,
    memory_cap: MemoryCapOpt = 4.0,
):
    """Exact retrieval cells of a relation model for a key set: which key each query retrieves, areas, score
    margins, and the area where it retrieves a key the target does not rank first."""
    from regioncount.networks import RelationModel
    from regioncount.relations import (
        load_keys,
        retrieval_error,
        retrieval_partition,
        voronoi_bias,
    )

    margin_list = parse_vector(margins, "--margins") or []
    if any(not m > 0 for m in margin_list):
        fail("--margins must be positive numbers", 2)
    if not 0 < weight < 1:
        fail(f"--weight must lie strictly between 0 and 1, got {weight}", 2)
    target_file = None if target is None or not Path(target).suffix else Path(target)
    guarded(
        lambda: checks.check_outputs(
            {"--out": out, "--csv": csv_out, "--figure": figure},
            {"MODEL": model, "--keys": keys, "--key-bias": key_bias, "--target": target_file},
        )
    )
    drawing: tuple[Path, str] | None = None  # --figure and its format, checked before any work
    if figure is not None:
        from ._plot import _image_format

        drawing = figure, _image_format(figure, "--figure")

    def run():
        from regioncount import Box

        net = load_model(model)
        if not isinstance(net, RelationModel):
            raise RegionCountError(f"{model}: holds a {type(net).__name__}, not a relation model")
        if box[0] >= box[1]:
            raise DomainError(f"LO must be below HI, got LO={box[0]}, HI={box[1]}")
        dom = slice_from_options(
            box[0], box[1], parse_vector(origin, "--origin"), parse_vector(dir1, "--dir1"), parse_vector(dir2, "--dir2")
        ) or Box(box[0], box[1], 2)
        K = load_keys(keys)
        b = None if key_bias is None else load_keys(key_bias).reshape(-1)
        K, b = net.check_keys(K, b)
        if voronoi:
            b = b + voronoi_bias(net, K)
        tgt = _retrieval_target(target, sigma)
        with LazyProgress("retrieval cells (ops)") as bar:
            ret = retrieval_partition(net, K, dom, key_bias=b, progress=bar, memory_cap=int(memory_cap * 2**30))
        err = None if tgt is None else retrieval_error(ret, tgt, method=method, samples=samples, seed=seed)
        return ret, err, ret.summary(tuple(margin_list), weight)

    ret, err, res = guarded(run)
    res["model"] = str(model)
    res["keys_file"] = str(keys)
    res["domain"] = _domain_json(ret.domain)
    res["version"] = checks.tool_version()
    if err is not None:
        res["target"] = target
        res.update(err.as_dict())
    files: dict[Path, bytes | str] = {}
    if drawing is not None:
        from regioncount.plotting import plot_retrieval

        files[drawing[0]] = plot_retrieval(ret, err, fmt=drawing[1])
    if csv_out is not None:
        tareas = None
        if err is not None and err.target_cells is not None:
            tareas = [float(c.area) for c in err.target_cells]
        files[csv_out] = _per_key_csv(ret, tareas)
    if out is not None:
        files[out] = dump_json(res) + "\n"
    if files:
        write_files(files)  # every file or none
    if json_out:
        print(dump_json(res))
        return
    from rich.table import Table

    table = Table(title=f"{model.name}: retrieval cells for {res['keys']} keys (exact)", show_header=False)
    table.add_row("keys retrieved (positive area)", f"{res['retrieved_keys']} of {res['keys']}")
    table.add_row("connected retrieval cells", f"{res['cells']:,}")
    table.add_row("activation regions", f"{res['activation_regions']:,}")
    for row in res["margins"]:
        table.add_row(
            f"area with margin >= {row['margin']:g}",
            f"{100 * row['fraction']:.2f}%  (softmax weight {weight:g} from λ = {row['inverse_temperature']:.3g})",
        )
    if err is not None:
        how = "exact" if err.exact else f"sampled from {err.samples:,} points, ± {err.std_error:.2g}"
        table.add_row(f"mistake area vs {target}", f"{err.area:.6g}  ({100 * err.fraction:.3f}%, {how})")
    table.add_row("seconds", f"{res['seconds']:.2f}")
    console().print(table)


def _domain_json(dom) -> dict:
    """The domain the retrieval cells were computed on, for the JSON record (the layout of ``count``'s)."""
    from regioncount import Slice

    if isinstance(dom, Slice):
        return {
            "slice": {
                "origin": dom.x0.tolist(),
                "dir1": dom.v1.tolist(),
                "dir2": dom.v2.tolist(),
                "lo": dom.lo.tolist(),
                "hi": dom.hi.tolist(),
            }
        }
    return {"box": {"lo": dom.lo.tolist(), "hi": dom.hi.tolist()}}
