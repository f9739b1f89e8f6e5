"""``regioncount count``: parse, call :func:`regioncount.count_regions` (or the whole-plane and decision
counts), render the table or JSON, write --out whole."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from regioncount import (
    METHODS,
    PLANE_BYTES_PER_REGION,
    Slice,
    count_regions,
    is_state_dict,
    load_network,
)

from . import _validate as checks
from ._cluster import (
    SchedulerOpt,
    ShardsOpt,
    TilesOpt,
    WorkersOpt,
    check_cluster_options,
    cluster,
    parse_tiles,
)
from ._common import (
    BoxOpt,
    Dir1Opt,
    Dir2Opt,
    JsonFileOpt,
    JsonOpt,
    LazyProgress,
    ModelArg,
    NoLinearOpt,
    OriginOpt,
    console,
    dump_json,
    fail,
    guarded,
)
from ._data import DecisionOpt, ThroughOpt, domain_from_options
from ._export import ExportOpt, check_export, export_domain, export_file_bytes
from ._files import write_files
from ._validate import MemoryCapOpt, at_least, one_of

if TYPE_CHECKING:
    from rich.table import Table

#: The --activation option of ``count`` (``plot`` has its own wording).
ActivationOpt = Annotated[
    str | None,
    typer.Option(
        help="The activation between the Linear layers of a PyTorch state dict, which does not record it: relu "
        "(assumed when this is not given), leaky_relu[:a] (a = 0.01 by default), abs or hardtanh[:lo,hi] "
        "(-1,1 by default). Other model files record their own.",
    ),
]


def count(
    model: ModelArg,
    method: Annotated[
        str,
        typer.Option(
            callback=one_of(*METHODS),
            help="exact: exact partition of the box or slice (any dimension: 1D pieces, 2D polygons, polytopes for 3 or more); line: exact pieces along a segment; sample: distinct codes of sampled points, a lower bound.",
        ),
    ] = "exact",
    box: BoxOpt = (-1.0, 1.0),
    grid: Annotated[
        int | None,
        typer.Option(
            callback=at_least(1),
            help="sample: R points per axis (R^dim cell centres). Default 1000 for 1D/2D domains.",
        ),
    ] = None,
    samples: Annotated[
        int | None,
        typer.Option(callback=at_least(1), help="sample: this many uniform random points instead of a grid."),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(callback=at_least(0), help="sample: seed for --samples random points (default 0).")
    ] = None,
    origin: OriginOpt = None,
    dir1: Dir1Opt = None,
    dir2: Dir2Opt = None,
    through: ThroughOpt = None,
    decision: DecisionOpt = False,
    dirs: Annotated[
        list[str] | None,
        typer.Option(
            "--dir",
            help="Slice direction, comma-separated; repeat it for a k-dimensional slice x = origin + v1 dir + v2 dir + ... over [LO, HI]^k (with --origin).",
        ),
    ] = None,
    start: Annotated[
        str | None,
        typer.Option("--from", help="Segment start, comma-separated (line method; default: the box diagonal)."),
    ] = None,
    end: Annotated[str | None, typer.Option("--to", help="Segment end, comma-separated.")] = None,
    memory_cap: MemoryCapOpt = 4.0,
    max_regions: Annotated[
        int | None,
        typer.Option(
            help="Stop an exact partition (2 or more dimensions) once it passes this many regions (curved cells: "
            "trapezoids, which bound the cells from above)."
        ),
    ] = None,
    json_out: JsonOpt = False,
    out: JsonFileOpt = None,
    no_linear: NoLinearOpt = False,
    per_layer: Annotated[
        bool,
        typer.Option(
            "--per-layer",
            metavar="",
            help="Also count the network cut after each layer (MLP, Maxout) or block (Transformer).",
        ),
    ] = False,
    activation: ActivationOpt = None,
    certify: Annotated[
        bool,
        typer.Option(
            "--certify",
            help="exact 2D: check the partition independently (areas, witness codes, neighbours, Euler, "
            "halfplanes) and report each check under 'certificate'; a failed check is an error.",
        ),
    ] = False,
    whole_plane: Annotated[
        bool,
        typer.Option(
            "--whole-plane",
            help="exact, 2-input ReLU MLP or Maxout: find a box holding every vertex of the partition of R^2 "
            "and count it, i.e. every region of the plane (--box is then ignored).",
        ),
    ] = False,
    tiles: TilesOpt = None,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    shards: ShardsOpt = None,
    export: ExportOpt = None,
):
    """Count the regions of a model on a box, a slice (2D or k-dimensional) or a segment.

    A PyTorch state dict is read as Linear layers with ReLU between them: it does not record its activations.
    """
    if grid is not None and samples is not None:
        fail("give --grid or --samples, not both", 2)
    if whole_plane and (method != "exact" or origin or dir1 or dir2 or start or end):
        fail("--whole-plane counts with --method exact on the whole input plane: drop --method/--origin/--from", 2)
    if decision and method != "exact":
        fail("--decision needs --method exact (decision regions are read off the exact 2D partition)", 2)
    guarded(
        lambda: _check_count_options(
            method, grid, samples, seed, origin, dir1, dir2, start, end, model, out, max_regions, certify
        )
    )
    exported: dict[Path, bytes] = {}
    if export is not None:
        guarded(lambda: check_export(export, out, model, method, decision, whole_plane, tiles))
    n_tiles = parse_tiles(tiles)
    check_cluster_options(method, n_tiles, workers, scheduler, shards, memory_cap=memory_cap)
    if shards is not None:
        guarded(lambda: _check_shards(shards, model, out, n_tiles))

    # the count_regions options the count and its --per-layer counts share
    act_op = None
    if activation is not None:
        from regioncount.networks import parse_activation

        try:
            act_op = parse_activation(activation)
        except ValueError as e:
            fail(str(e), 2)
        if not is_state_dict(model):
            fail("--activation is for torch state dicts (.npz of Linear layers): other model files record theirs", 2)
    options: dict[str, Any] = dict(
        method=method,
        grid=grid,
        samples=samples,
        seed=seed or 0,
        memory_cap=int(memory_cap * 2**30),
        linear=not no_linear,
    )

    def run():
        net = load_network(model)
        if act_op is not None:
            from regioncount.networks import with_activation

            net = with_activation(net, act_op)
        if whole_plane:
            from regioncount.engines import whole_plane_box

            with LazyProgress("finding a box that holds every region") as bar:
                cap = max(1, int(memory_cap * 2**30) // PLANE_BYTES_PER_REGION)
                wp = whole_plane_box(net, max_regions=cap, progress=bar)
            with LazyProgress("counting (exact)") as bar:
                res = count_regions(
                    net,
                    wp.box,
                    method="exact",
                    memory_cap=int(memory_cap * 2**30),
                    progress=bar,
                    certify=certify,
                    linear=not no_linear,
                )
            res["whole_plane"] = {"box": [-wp.half_width, wp.half_width], "rounds": list(wp.rounds)}
            return res
        dom = domain_from_options(net, box, origin, dir1, dir2, through, start=start, end=end, dirs=dirs)[0]
        if export is not None:
            export_domain(dom)
        if decision:
            from regioncount import count_decisions

            with LazyProgress("counting decision regions") as bar:
                return count_decisions(net, dom, memory_cap=int(memory_cap * 2**30), progress=bar, linear=not no_linear)
        with cluster(workers, scheduler) as client, LazyProgress(f"counting ({method})") as bar:
            res = count_regions(
                net,
                dom,
                **options,
                max_regions=max_regions,
                progress=bar,
                certify=certify,
                tiles=n_tiles,
                client=client,
                shards=shards,
            )
            if res.get("mode") == "grid":  # the grid the sampled count used (the default where none was given)
                res["grid"] = grid or round(res["samples"] ** (1 / (2 if isinstance(dom, Slice) else dom.dim)))
            if per_layer:
                res["per_layer"] = _per_layer(net, dom, options)
            if export is not None:
                exported[export] = export_file_bytes(net, dom, export, max_regions, res["regions"])
            return res

    if max_regions is not None and max_regions < 1:
        fail(f"--max-regions must be positive, got {max_regions}", 2)
    res = guarded(run)
    res["model"] = str(model)
    res.setdefault("grid", None)
    res.update(seed=(seed or 0) if samples is not None else None, version=checks.tool_version())
    if activation is not None:
        res["activation"] = activation
    elif is_state_dict(model):
        res["activation"] = "relu (assumed: a state dict does not record its activations)"
    if out is not None or exported:
        write_files({**({out: dump_json(res) + "\n"} if out is not None else {}), **exported})
    if json_out:
        print(dump_json(res))
        return
    console().print(count_table(res, model))


def count_table(res: dict, model: Path) -> Table:
    """The table ``count`` prints without --json."""
    from rich.table import Table

    table = Table(title=f"{model.name}: {res['kind']}", show_header=False)
    if res.get("engine") == "curved":
        # connected cells: exact unless an arc-order check or an area integral failed
        label = f"{res['kind']}, connected cells ({'exact' if res['exact'] else 'NOT certified exact'})"
    else:
        label = f"{res['kind']} ({'exact' if res['exact'] else 'lower bound'})"
        if not res["exact"] and res["method"] != "sample":
            label = f"{res['kind']} (float64 decisions with tolerances, not exact)"
    table.add_row(label, f"{res['regions']:,}")
    for key in ("codes", "trapezoids"):
        if key in res:
            table.add_row("distinct codes" if key == "codes" else key, f"{res[key]:,}")
    if res.get("linear_regions") is not None:
        table.add_row(
            "linear regions" if res["kind"] == "activation regions" else "pieces, equal polynomials merged",
            f"{res['linear_regions']:,}",
        )
    if "decision_regions" in res:
        table.add_row("decision regions (exact)", f"{res['decision_regions']:,}")
        table.add_row("cells with the predicted class", f"{res['decision_cells']:,}")
    for key in ("samples", "f1", "f2", "chao1", "coverage", "ties"):
        if key in res:
            v = res[key]
            table.add_row(
                key,
                f"{v:,.1f}"
                if isinstance(v, float) and key == "chao1"
                else (f"{v:.6f}" if isinstance(v, float) else f"{v:,}"),
            )
    if "exact_predicates" in res:
        table.add_row("sign tests decided exactly", f"{res['exact_predicates']:,} of {res.get('predicates', 0):,}")
        if res.get("smallest_area") is not None:
            table.add_row("smallest region area", f"{res['smallest_area']:.3g}")
        if res.get("assumed_identities"):
            table.add_row("attention identities assumed, not proven", f"{res['assumed_identities']:,}")
    if "certificate" in res:
        for name, chk in res["certificate"]["checks"].items():
            word = "not checked: " if chk["passed"] is None else ("passed: " if chk["passed"] else "FAILED: ")
            table.add_row(f"certificate: {name}", word + chk["detail"].removeprefix("not checked: "))
    if "whole_plane" in res:
        lo, hi = res["whole_plane"]["box"]
        table.add_row("whole plane", f"every region meets [{lo:g}, {hi:g}]^2")
    for row in res.get("per_layer", ()):
        extra = "" if row["linear_regions"] is None else f" ({row['linear_regions']:,} linear)"
        table.add_row(f"after {row['layer']}", f"{row['regions']:,}{extra}")
    if "tiles" in res:
        table.add_row("tiles (pieces merged)", f"{res['tiles'][0]} x {res['tiles'][1]} ({res['pieces']:,})")
    table.add_row("method", res["method"])
    table.add_row("seconds", f"{res['seconds']:.2f}")
    return table


def _check_count_options(
    method, grid, samples, seed, origin, dir1, dir2, start, end, model, out, max_regions=None, certify=False
) -> None:
    """Options that would be ignored are refused; files are checked before any work."""
    if method != "sample":
        for opt, val in (("--grid", grid), ("--samples", samples), ("--seed", seed)):
            if val is not None:
                checks.not_applicable(opt, f"it sets the points of --method sample, and this run is --method {method}")
    elif seed is not None and samples is None:
        checks.not_applicable("--seed", "it seeds --samples random points; a --grid has no randomness")
    if max_regions is not None and method != "exact":
        checks.not_applicable("--max-regions", f"it caps an exact partition, and this run is --method {method}")
    if certify and method != "exact":
        checks.not_applicable("--certify", f"it checks an exact 2D partition, and this run is --method {method}")
    if method == "line" and any(x is not None for x in (origin, dir1, dir2)):
        checks.not_applicable("--origin/--dir1/--dir2", "--method line counts along a segment (--from/--to)")
    if any(x is not None for x in (origin, dir1, dir2)) and any(x is not None for x in (start, end)):
        checks.usage("give a slice (--origin/--dir1/--dir2) or a segment (--from/--to), not both")
    checks.check_model_file(model)
    checks.check_outputs({"--out": out}, {"MODEL": model})


def _check_shards(shards: Path, model: Path, out: Path | None, tiles) -> None:
    """``--shards`` must be a folder this run can fill with its own files: not an existing file, not a
    read-only folder, not the model's own folder (its tile-ROW-COL.npz files would sit beside, or be, the
    input), and not the folder that receives --out under a shard's name."""
    import os

    from regioncount.engines import shard_name, tile_grid

    checks.check_output_dir("--shards", shards)
    here = Path(os.path.realpath(shards))
    if here == Path(os.path.realpath(model)).parent:
        raise checks.OutputFileError(
            f"--shards {shards} is the folder of the model {model}; the shards go to a folder of their own"
        )
    rows, cols = tile_grid(tiles)
    names = {shard_name((r, c)) for r in range(rows) for c in range(cols)}
    if out is not None and Path(os.path.realpath(out)).parent == here and Path(out).name in names:
        raise checks.OutputFileError(f"--out {out} is the name of one of the shards in {shards}: choose another path")


def _per_layer(net, dom, options: dict[str, Any]) -> list[dict]:
    """Counts of the network cut after each layer or block, with the same domain and ``count_regions`` options
    (method, points, memory cap, linear)."""
    from regioncount.plotting import truncations

    rows = []
    for label, sub in truncations(net):
        r = count_regions(sub, dom, **options)
        rows.append({"layer": label, "regions": r["regions"], "linear_regions": r["linear_regions"]})
    return rows
