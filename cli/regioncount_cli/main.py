"""``regioncount``: count, bound, build, scan. Commands parse, call the library, render, write files."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from regioncount._count import METHODS, PLANE_BYTES_PER_REGION, count_regions
from regioncount._domain import Box, Segment, Slice
from regioncount._errors import DomainError, RegionCountError
from regioncount._io import is_state_dict, load_model, save_model
from regioncount._loaders import load_network

from . import _validate as checks
from ._cluster import (
    SchedulerOpt,
    ShardsOpt,
    TilesOpt,
    WorkersOpt,
    check_cluster_options,
    cluster,
    counted_line,
    parse_tiles,
)
from ._common import (
    Dir1Opt,
    Dir2Opt,
    LazyProgress,
    ModelArg,
    OriginOpt,
    dump_json,
    fail,
    guarded,
    parse_vector,
    slice_from_options,
    stdout,
)
from ._data import DecisionOpt, ThroughOpt, through_slice, vector_arg
from ._files import write_files
from ._validate import MemoryCapOpt, at_least, box_callback, finite, one_of

#: Help text shared by the commands that read a model file.
ActivationOpt = Annotated[
    str,
    typer.Option(
        callback=one_of("relu"),
        help="The activation between the Linear layers of a PyTorch state dict, which does not record it: "
        "relu, the only one counted (a network with another activation has no linear regions to count).",
    ),
]

app = typer.Typer(
    name="regioncount",
    help="Count, certify and draw the regions of piecewise networks (ReLU MLPs, Maxout, hardmax/ReLU-attention "
    "Transformers) and set the counts beside the theory's bounds.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
build_app = typer.Typer(
    help="Write a network to an .npz model file: random networks and constructions.", no_args_is_help=True
)
app.add_typer(build_app, name="build")


def _show_version(value: bool):
    if value:
        print(f"regioncount {checks.tool_version()}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, metavar="", help="Print the version and exit."
        ),
    ] = False,
):
    """Count, certify and draw the regions of piecewise networks (ReLU MLPs, Maxout, hardmax/ReLU-attention
    Transformers) and set the counts beside the theory's bounds."""


def _domain(net_dim: int, lo: float, hi: float, origin, dir1, dir2, start, end, dirs=None):
    if lo >= hi:
        raise DomainError(f"--box takes LO HI with LO below HI, got LO={lo:g}, HI={hi:g}")
    if start is not None or end is not None:
        if start is None or end is None:
            raise DomainError("give both --from and --to for a segment")
        return Segment(start, end)
    if dirs:
        from regioncount._domain import AffineSlice

        if origin is None or dir1 is not None or dir2 is not None:
            raise DomainError("a slice with --dir needs --origin and no --dir1/--dir2")
        if len({len(d) for d in dirs} | {len(origin)}) != 1:
            raise DomainError("--origin and every --dir must have the same number of entries")
        return AffineSlice(origin, np.array(dirs).T, lo, hi)
    return slice_from_options(lo, hi, origin, dir1, dir2) or Box(lo, hi, net_dim)


@app.command()
def count(
    model: ModelArg,
    method: Annotated[
        str,
        typer.Option(
            callback=one_of(*METHODS),
            help="exact: exact partition of the box or slice (any dimension: 1D pieces, 2D polygons, polytopes for 3 or more); line: exact pieces along a segment; sample: distinct codes of sampled points, a lower bound.",
        ),
    ] = "exact",
    box: Annotated[
        tuple[float, float],
        typer.Option(
            metavar="LO HI",
            callback=box_callback,
            help="LO HI: the box [LO, HI] in every input coordinate (or in u1, u2 for a slice).",
        ),
    ] = (-1.0, 1.0),
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
    json_out: Annotated[
        bool, typer.Option("--json", metavar="", help="Print one JSON object instead of a table.")
    ] = False,
    out: Annotated[
        Path | None, typer.Option(help="Also write the JSON result to this file (whole or not at all).")
    ] = None,
    no_linear: Annotated[
        bool,
        typer.Option(
            "--no-linear", metavar="", help="Skip linear regions (merging neighbours with equal affine maps)."
        ),
    ] = False,
    per_layer: Annotated[
        bool,
        typer.Option(
            "--per-layer",
            metavar="",
            help="Also count the network cut after each layer (MLP, Maxout) or block (Transformer).",
        ),
    ] = False,
    activation: ActivationOpt = "relu",
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
    guarded(lambda: _check_count_options(method, grid, samples, seed, origin, dir1, dir2, start, end, model, out))
    n_tiles = parse_tiles(tiles)
    check_cluster_options(method, n_tiles, workers, scheduler, shards)

    def run():
        net = load_network(model)
        if whole_plane:
            from regioncount.engines._whole_plane import whole_plane_box

            with LazyProgress("finding a box that holds every region") as bar:
                cap = max(1, int(memory_cap * 2**30) // PLANE_BYTES_PER_REGION)
                wp = whole_plane_box(net, max_regions=cap, progress=bar)
            with LazyProgress("counting (exact)") as bar:
                res = count_regions(
                    net, wp.box, method="exact", memory_cap=int(memory_cap * 2**30), progress=bar, certify=certify
                )
            res["whole_plane"] = {"box": [-wp.half_width, wp.half_width], "rounds": list(wp.rounds)}
            return res
        if through is not None:
            if origin is not None or dir1 is not None or dir2 is not None:
                raise DomainError("give --through or --origin/--dir1/--dir2, not both")
            dom = through_slice(net, through, box[0], box[1])[0]
        else:
            dom = _domain(
                net.input_dim,
                box[0],
                box[1],
                vector_arg(origin, "--origin", net),
                vector_arg(dir1, "--dir1", net),
                vector_arg(dir2, "--dir2", net),
                parse_vector(start, "--from"),
                parse_vector(end, "--to"),
                [parse_vector(d, "--dir") for d in dirs or []],
            )
        if decision:
            from regioncount._decide import count_decisions

            with LazyProgress("counting decision regions") as bar:
                return count_decisions(net, dom, memory_cap=int(memory_cap * 2**30), progress=bar)
        with cluster(workers, scheduler) as client, LazyProgress(f"counting ({method})") as bar:
            res = count_regions(
                net,
                dom,
                method=method,
                grid=grid,
                samples=samples,
                seed=seed or 0,
                memory_cap=int(memory_cap * 2**30),
                max_regions=max_regions,
                progress=bar,
                certify=certify,
                linear=not no_linear,
                tiles=n_tiles,
                client=client,
                shards=shards,
            )
            res["domain"] = _domain_json(dom)
            if res.get("mode") == "grid":  # the grid the sampled count used (the default where none was given)
                res["grid"] = grid or round(res["samples"] ** (1 / (2 if isinstance(dom, Slice) else dom.dim)))
            if per_layer:
                res["per_layer"] = _per_layer(net, dom, method, grid, samples, seed, memory_cap, no_linear)
            return res

    if max_regions is not None and max_regions < 1:
        fail(f"--max-regions must be positive, got {max_regions}", 2)
    res = guarded(run)
    res["model"] = str(model)
    res.setdefault("grid", None)
    res.update(seed=(seed or 0) if samples is not None else None, version=checks.tool_version())
    if is_state_dict(model):
        res["activation"] = "relu (assumed: a state dict does not record its activations)"
    if out is not None:
        write_files({out: dump_json(res) + "\n"})
    if json_out:
        print(dump_json(res))
        return
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
    stdout.print(table)


def _check_count_options(method, grid, samples, seed, origin, dir1, dir2, start, end, model, out) -> None:
    """Options that would be ignored are refused; files are checked before any work."""
    if method != "sample":
        for opt, val in (("--grid", grid), ("--samples", samples), ("--seed", seed)):
            if val is not None:
                checks.not_applicable(opt, f"it sets the points of --method sample, and this run is --method {method}")
    elif seed is not None and samples is None:
        checks.not_applicable("--seed", "it seeds --samples random points; a --grid has no randomness")
    if method == "line" and any(x is not None for x in (origin, dir1, dir2)):
        checks.not_applicable("--origin/--dir1/--dir2", "--method line counts along a segment (--from/--to)")
    if any(x is not None for x in (origin, dir1, dir2)) and any(x is not None for x in (start, end)):
        checks.usage("give a slice (--origin/--dir1/--dir2) or a segment (--from/--to), not both")
    checks.check_model_file(model)
    checks.check_outputs({"--out": out}, {"MODEL": model})


def _domain_json(dom) -> dict:
    """The domain a result was computed on, for its JSON record."""

    if isinstance(dom, Segment):
        return {"segment": {"from": dom.a.tolist(), "to": dom.b.tolist()}}
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


def _per_layer(net, dom, method, grid, samples, seed, memory_cap, no_linear) -> list[dict]:
    """Counts of the network cut after each layer or block, with the same method and domain."""
    from regioncount.plotting._regions import truncations

    rows = []
    for label, sub in truncations(net):
        r = count_regions(
            sub,
            dom,
            method=method,
            grid=grid,
            samples=samples,
            seed=seed or 0,
            memory_cap=int(memory_cap * 2**30),
            linear=not no_linear,
        )
        rows.append({"layer": label, "regions": r["regions"], "linear_regions": r["linear_regions"]})
    return rows


#: The option that sets each bound parameter (one name per quantity across commands).
BOUND_OPTION = {
    "widths": "--widths",
    "n0": "--inputs",
    "q": "--inputs",
    "k": "--k",
    "n": "--n",
    "m": "--m",
    "T": "--tokens",
    "D": "--depth",
}
#: Bounds whose value would have more digits than this, or need more arithmetic steps, are refused up front.
BOUND_MAX_DIGITS = 100_000
BOUND_MAX_STEPS = 1_000_000


@app.command()
def bound(
    name: Annotated[str | None, typer.Argument(help="Bound to evaluate; omit to list them all.")] = None,
    widths: Annotated[
        str | None, typer.Option(help="Hidden widths n_1..n_L, comma-separated (ReLU and Maxout bounds).")
    ] = None,
    n0: Annotated[
        int | None,
        typer.Option(
            "--inputs", callback=at_least(1), help="Input dimension (n0 in the ReLU/Maxout bounds, q in Thm 4.4)."
        ),
    ] = None,
    k: Annotated[int | None, typer.Option(callback=at_least(2), help="Maxout rank k.")] = None,
    n: Annotated[
        int | None, typer.Option(callback=at_least(0), help="Number of hyperplanes / ReLU units (zaslavsky).")
    ] = None,
    m: Annotated[
        int | None, typer.Option("--m", callback=at_least(1), help="Per-token width m (transformer bound).")
    ] = None,
    tokens: Annotated[
        int | None, typer.Option("--tokens", callback=at_least(2), help="Number of tokens T (transformer bound).")
    ] = None,
    depth: Annotated[
        int | None, typer.Option("--depth", callback=at_least(0), help="Number of blocks D (transformer bound).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", metavar="", help="Print JSON.")] = False,
    memory_cap: MemoryCapOpt = 4.0,
):
    """Evaluate a region bound of the literature in exact integer arithmetic."""
    from regioncount.theory._bounds import BOUNDS, estimate_size

    if name is None:
        given = [o for o, val in (("--widths", widths), ("--inputs", n0), ("--k", k), ("--n", n), ("--m", m),
                                  ("--tokens", tokens), ("--depth", depth)) if val is not None]  # fmt: skip
        if given:
            checks.not_applicable(given[0], "name a bound to evaluate (`regioncount bound` lists them)")
        rows = [
            {
                "name": s.name,
                "kind": s.kind,
                "architecture": s.architecture,
                "params": list(s.params),
                "options": [BOUND_OPTION[p] for p in s.params],
                "citation": s.citation,
                "description": s.description,
            }
            for s in BOUNDS.values()
        ]
        if json_out:
            print(dump_json(rows))
            return
        table = Table(title="bounds (regioncount bound NAME --help for options)")
        for col in ("name", "kind", "parameters", "source"):
            table.add_column(col)
        for r in rows:
            table.add_row(r["name"], r["kind"], " ".join(r["options"]), r["citation"])
        stdout.print(table)
        return
    if name not in BOUNDS:
        fail(f"unknown bound {name!r}; one of: {', '.join(BOUNDS)}", 2)
    spec = BOUNDS[name]
    from ._common import parse_ints

    options = {
        "widths": parse_ints(widths, "--widths") if widths else None,
        "n0": n0,
        "k": k,
        "n": n,
        "m": m,
        "T": tokens,
        "q": n0,
        "D": depth,
    }
    takes = {BOUND_OPTION[p] for p in spec.params}
    for p, val in options.items():
        if val is not None and BOUND_OPTION[p] not in takes:
            checks.not_applicable(BOUND_OPTION[p], f"bound {name!r} takes {', '.join(sorted(takes))}")
    missing = sorted({BOUND_OPTION[p] for p in spec.params if options[p] is None})
    if missing:
        fail(f"bound {name!r} needs {', '.join(missing)}", checks.USAGE)
    try:
        digits, steps = estimate_size(name, **options)
    except (ValueError, TypeError):
        digits, steps = 0.0, 0  # invalid parameters: the bound itself says which
    if digits > BOUND_MAX_DIGITS or steps > BOUND_MAX_STEPS:
        raise checks.LimitError(
            f"bound {name!r} with these parameters could have up to {digits:,.0f} digits and take {steps:,} "
            f"steps; the limits are {BOUND_MAX_DIGITS:,} digits and {BOUND_MAX_STEPS:,} steps"
        )
    sys.set_int_max_str_digits(max(sys.get_int_max_str_digits(), BOUND_MAX_DIGITS + 100))
    try:
        value = spec(**options)
    except ValueError as e:
        fail(str(e), checks.USAGE)
    used = {p: options[p] for p in spec.params}
    if json_out:
        print(dump_json({"bound": name, "value": value, "kind": spec.kind, "citation": spec.citation, **used}))
        return
    args = ", ".join(f"{p}={v}" for p, v in used.items())
    digits = len(str(value))
    shown = (
        f"{value:,}"
        if digits <= 1000
        else f"{str(value)[0]}.{str(value)[1:7]}e+{digits - 1} ({digits:,} digits; --json prints them all)"
    )
    stdout.print(f"{name}({args}) = [bold]{shown}[/bold]   ({spec.kind} bound; {spec.citation})")


def _save(net, out: Path):
    _check_build_out(out)
    save_model(net, out)
    print(f"wrote {out}")


def _check_build_out(out: Path, model: Path | None = None) -> None:
    """``build --out``: an .npz path that can be written and is not the input model."""
    if out.suffix != ".npz":
        fail(f"--out must end in .npz, got {out}", 2)
    guarded(lambda: checks.check_outputs({"--out": out}, {"MODEL": model}))


#: A build holds its arrays about three times at its peak (rows being stacked, the network, the .npz buffer).
BUILD_PEAK_FACTOR = 3


def _refuse_build_over_cap(floats: float, memory_cap: float, what: str) -> None:
    guarded(lambda: checks.refuse_over_cap(BUILD_PEAK_FACTOR * 8 * floats, memory_cap, what))


def _dense_floats(inputs: int, widths: list[int], outputs: int, k: int = 1) -> int:
    """Parameters of a dense network (weights and biases; ``k`` pieces per unit for Maxout)."""
    sizes = [inputs, *widths]
    return sum(k * (a + 1) * b for a, b in zip(sizes, sizes[1:])) + (sizes[-1] + 1) * outputs


#: No layer may be wider than this (a typo such as --widths 3200000 is refused before any work).
MAX_WIDTH = 1_000_000


def _widths(text: str) -> list[int]:
    from ._common import parse_ints

    w = parse_ints(text, "--widths")
    if min(w) < 1 or max(w) > MAX_WIDTH:
        fail(f"--widths must be integers from 1 to {MAX_WIDTH:,}, got {text}", 2)
    return w


@build_app.command("random-mlp")
def build_random_mlp(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    inputs: Annotated[int, typer.Option(callback=at_least(1), help="Input dimension q.")] = 2,
    widths: Annotated[str, typer.Option(help="Hidden widths, comma-separated, e.g. 32,32,32.")] = "32,32,32",
    outputs: Annotated[int, typer.Option(callback=at_least(1), help="Output dimension.")] = 1,
    init: Annotated[
        str,
        typer.Option(
            callback=one_of("torch", "normal"),
            help="torch: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) like nn.Linear; normal: He weights, N(0,1) biases.",
        ),
    ] = "torch",
    seed: Annotated[int, typer.Option(callback=at_least(0), help="Random seed.")] = 0,
    memory_cap: MemoryCapOpt = 4.0,
):
    """A seeded random ReLU MLP."""
    from regioncount import random_mlp

    w = _widths(widths)
    _check_build_out(out)
    _refuse_build_over_cap(_dense_floats(inputs, w, outputs), memory_cap, "this MLP")
    guarded(lambda: _save(random_mlp(inputs, w, outputs, seed=seed, init=init), out))


@build_app.command("random-maxout")
def build_random_maxout(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    inputs: Annotated[int, typer.Option(callback=at_least(1), help="Input dimension q.")] = 2,
    widths: Annotated[str, typer.Option(help="Widths (units per layer), comma-separated.")] = "8,8",
    k: Annotated[int, typer.Option(callback=at_least(2), help="Maxout rank (pieces per unit), at least 2.")] = 2,
    outputs: Annotated[int, typer.Option(callback=at_least(1), help="Output dimension.")] = 1,
    seed: Annotated[int, typer.Option(callback=at_least(0), help="Random seed.")] = 0,
    memory_cap: MemoryCapOpt = 4.0,
):
    """A seeded random Maxout network."""
    from regioncount import random_maxout

    w = _widths(widths)
    _check_build_out(out)
    _refuse_build_over_cap(_dense_floats(inputs, w, outputs, k), memory_cap, "this Maxout network")
    guarded(lambda: _save(random_maxout(inputs, w, k=k, output_dim=outputs, seed=seed), out))


@build_app.command("random-transformer")
def build_random_transformer(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    inputs: Annotated[int, typer.Option(callback=at_least(1), help="Input dimension q.")] = 2,
    tokens: Annotated[int, typer.Option(callback=at_least(1), help="Number of tokens T.")] = 4,
    d_model: Annotated[int, typer.Option(callback=at_least(1, MAX_WIDTH), help="Model width d.")] = 8,
    depth: Annotated[int, typer.Option(callback=at_least(1), help="Number of blocks (attention + FFN each).")] = 2,
    heads: Annotated[int, typer.Option(callback=at_least(1), help="Heads per block.")] = 1,
    d_ff: Annotated[
        int | None, typer.Option(callback=at_least(1, MAX_WIDTH), help="FFN width (default 2 d_model).")
    ] = None,
    attention: Annotated[
        str, typer.Option(callback=one_of("hardmax", "relu", "softmax"), help="hardmax, relu or softmax.")
    ] = "hardmax",
    causal: Annotated[bool, typer.Option(metavar="", help="Causal mask.")] = False,
    scale_by_t: Annotated[bool, typer.Option("--scale-by-t", metavar="", help="Divide ReLU attention by T.")] = False,
    inv_temperature: Annotated[
        float, typer.Option(callback=finite(0.0, open_min=True), help="Softmax inverse temperature lambda.")
    ] = 1.0,
    seed: Annotated[int, typer.Option(callback=at_least(0), help="Random seed.")] = 0,
    memory_cap: MemoryCapOpt = 4.0,
):
    """A seeded random Transformer (no layer norm)."""
    from regioncount import random_transformer

    if scale_by_t and attention != "relu":
        checks.not_applicable("--scale-by-t", f"it divides ReLU attention by T, and --attention is {attention}")
    if checks.explicit("inv_temperature") and attention != "softmax":
        checks.not_applicable("--inv-temperature", f"it sets softmax attention, and --attention is {attention}")
    _check_build_out(out)
    dh, ff = max(1, d_model // heads), d_ff or 2 * d_model
    per_block = 4 * heads * d_model * dh + 2 * d_model * ff + ff + d_model
    floats = depth * per_block + d_model * (inputs + tokens + 2)
    _refuse_build_over_cap(floats, memory_cap, "this Transformer")
    guarded(
        lambda: _save(
            random_transformer(
                inputs,
                tokens,
                d_model,
                depth,
                heads,
                d_ff=d_ff,
                attention=attention,
                causal=causal,
                scale_by_T=scale_by_t,
                inv_temperature=inv_temperature,
                seed=seed,
            ),
            out,
        )
    )


@build_app.command("fold-relu")
def build_fold_relu(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    widths: Annotated[
        str, typer.Option(help="Widths n_l >= 3, comma-separated: prod (n_l + 1) pieces on [0, 1].")
    ] = "4,4",
    memory_cap: MemoryCapOpt = 4.0,
):
    """The ReLU fold on R composed over layers: exactly prod (n_l + 1) pieces on [0, 1]."""
    from regioncount.theory import fold_relu_network

    w = _widths(widths)
    _check_build_out(out)
    _refuse_build_over_cap(_dense_floats(1, w, 1), memory_cap, "this fold network")
    guarded(lambda: _save(_theory_call(fold_relu_network, w), out))


@build_app.command("fold-maxout")
def build_fold_maxout(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    widths: Annotated[str, typer.Option(help="Units per layer, comma-separated (even when k >= 3).")] = "2,2",
    k: Annotated[int, typer.Option(callback=at_least(2), help="Maxout rank.")] = 3,
    memory_cap: MemoryCapOpt = 4.0,
):
    """The Maxout fold on R composed over layers: prod (n_l (k-1) + 1) pieces on [0, 1]."""
    from regioncount.theory import fold_maxout_network

    w = _widths(widths)
    _check_build_out(out)
    _refuse_build_over_cap(_dense_floats(1, w, 1, k), memory_cap, "this fold network")
    guarded(lambda: _save(_theory_call(fold_maxout_network, w, k), out))


@build_app.command("product-relu")
def build_product_relu(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    widths: Annotated[
        str, typer.Option(help="Widths, comma-separated; floor(n_l / n0) >= 3 for hidden layers.")
    ] = "6,3",
    n0: Annotated[int, typer.Option("--inputs", callback=at_least(1), help="Input dimension n0.")] = 2,
    seed: Annotated[
        int, typer.Option(callback=at_least(0), help="Seed for the last layer's general-position forms.")
    ] = 0,
    memory_cap: MemoryCapOpt = 4.0,
):
    """ReLU product construction in R^n0 attaining Serra et al.'s lower bound on [-1, 2]^n0."""
    from regioncount.theory import product_relu

    w = _widths(widths)
    _check_build_out(out)
    _refuse_build_over_cap(_dense_floats(n0, w, 1), memory_cap, "this product network")
    guarded(lambda: _save(_theory_call(product_relu, w, n0, seed=seed), out))


@build_app.command("product-maxout")
def build_product_maxout(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    widths: Annotated[str, typer.Option(help="Widths, comma-separated.")] = "4,2",
    n0: Annotated[int, typer.Option("--inputs", callback=at_least(1), help="Input dimension n0.")] = 2,
    k: Annotated[int, typer.Option(callback=at_least(2), help="Maxout rank.")] = 3,
    seed: Annotated[
        int, typer.Option(callback=at_least(0), help="Seed for the last layer's general-position forms.")
    ] = 0,
    memory_cap: MemoryCapOpt = 4.0,
):
    """Maxout product construction in R^n0 attaining the maxout lower bound on [-1, 2]^n0 (even floor(n_l/n0) or k = 2)."""
    from regioncount.theory import product_maxout

    w = _widths(widths)
    _check_build_out(out)
    _refuse_build_over_cap(_dense_floats(n0, w, 1, k), memory_cap, "this product network")
    guarded(lambda: _save(_theory_call(product_maxout, w, n0, k, seed=seed), out))


@build_app.command("compile")
def build_compile(
    model: Annotated[Path, typer.Argument(help="A Maxout model file (.npz).")],
    out: Annotated[Path, typer.Option(help="Output .npz file for the hardmax Transformer.")],
    box: Annotated[
        tuple[float, float],
        typer.Option(
            metavar="LO HI", callback=box_callback, help="LO HI: the box the compiled model must be exact on."
        ),
    ] = (-1.0, 2.0),
    layout: Annotated[
        str,
        typer.Option(
            callback=one_of("paper", "compact"),
            help="paper: 3 blocks per maxout layer (Thm 4.4's count); compact: L + 1 blocks.",
        ),
    ] = "paper",
    memory_cap: MemoryCapOpt = 4.0,
):
    """Compile a Maxout network into a hardmax Transformer that equals it on the box."""
    from regioncount import Maxout
    from regioncount._errors import ModelFileError
    from regioncount.theory import compile_maxout
    from regioncount.theory._compile import compiled_nbytes

    _check_build_out(out, model)

    def run():
        net = load_model(model)
        if not isinstance(net, Maxout):
            raise ModelFileError(f"{model}: holds a {type(net).__name__}, compile takes a Maxout network")
        need = BUILD_PEAK_FACTOR * compiled_nbytes(net.widths, net.input_dim, net.k, layout)
        checks.refuse_over_cap(need, memory_cap, "the compiled Transformer")
        _save(compile_maxout(net, box[0], box[1], layout), out)

    guarded(run)


@build_app.command("bound-transformer")
def build_bound_transformer(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    m: Annotated[int, typer.Option("--m", callback=at_least(1), help="Per-token width m.")] = 1,
    tokens: Annotated[int, typer.Option("--tokens", callback=at_least(2), help="Tokens T (maxout rank).")] = 4,
    q: Annotated[int, typer.Option("--inputs", callback=at_least(1), help="Input dimension q.")] = 2,
    depth: Annotated[int, typer.Option("--depth", callback=at_least(3), help="Blocks D >= 3.")] = 9,
    layout: Annotated[
        str,
        typer.Option(callback=one_of("paper", "compact"), help="paper (D blocks) or compact (floor(D/3) + 1 blocks)."),
    ] = "paper",
    memory_cap: MemoryCapOpt = 4.0,
):
    """The hardmax Transformer attaining Thm 4.4 (Gu, Yang, Zhou 2026) on [-1, 2]^q where the construction can."""
    from regioncount.theory import bound_attaining_transformer
    from regioncount.theory._compile import bound_attaining_nbytes

    _check_build_out(out)
    need = BUILD_PEAK_FACTOR * bound_attaining_nbytes(m, tokens, q, depth, layout)
    guarded(
        lambda: checks.refuse_over_cap(need, memory_cap, f"the Thm 4.4 construction (m={m}, T={tokens}, D={depth})")
    )

    def run():
        tf, info = _theory_call(bound_attaining_transformer, m, tokens, q, depth, layout)
        _save(tf, out)
        note = (
            "" if info["attainable"] else " (floor(mT/q) odd with T >= 3: this construction falls short of the bound)"
        )
        print(f"Thm 4.4 bound {info['bound']:,}; this construction has {info['construction_regions']:,} regions{note}")

    guarded(run)


def _theory_call(fn, *args, **kwargs):
    """Call a construction; its ValueErrors (parameters outside the construction's range) are usage errors."""
    try:
        return fn(*args, **kwargs)
    except RegionCountError:
        raise
    except ValueError as e:
        raise checks.UsageError(str(e)) from None


@app.command()
def scan(
    depth: Annotated[
        int, typer.Option(callback=at_least(1, 60), help="Largest depth D (blocks); rows for D = 1..depth.")
    ] = 9,
    tokens: Annotated[
        int, typer.Option("--tokens", callback=at_least(2, 64), help="Tokens T (= maxout rank emulated).")
    ] = 4,
    m: Annotated[int, typer.Option(callback=at_least(1, 64), help="Per-token width m (maxout width mT).")] = 1,
    q: Annotated[
        int, typer.Option("--inputs", callback=at_least(1, 2), help="Input dimension q: 1 or 2 (exact counts).")
    ] = 2,
    box: Annotated[
        tuple[float, float], typer.Option(metavar="LO HI", callback=box_callback, help="LO HI: the box [LO, HI]^q.")
    ] = (-1.0, 2.0),
    seeds: Annotated[int, typer.Option(callback=at_least(1, 1000), help="Random Transformers per depth.")] = 3,
    d_model: Annotated[int, typer.Option(callback=at_least(1, 4096), help="Width of the random Transformers.")] = 8,
    grid: Annotated[
        int,
        typer.Option(callback=at_least(2, 20_000), help="Grid points per axis for sampled counts of random networks."),
    ] = 200,
    region_cap: Annotated[
        int,
        typer.Option(
            callback=at_least(1), help="Count constructions exactly only while their formula is at most this."
        ),
    ] = 200_000,
    out: Annotated[Path, typer.Option(help="Folder for scan.json, scan.csv and scan.png.")] = Path("scan_out"),
    json_out: Annotated[
        bool, typer.Option("--json", metavar="", help="Print the rows as JSON instead of a table.")
    ] = False,
    memory_cap: MemoryCapOpt = 4.0,
    exact_depth: Annotated[
        int | None,
        typer.Option(
            help="Count the random hardmax Transformers exactly on the 2D box (connected cells and linear regions) up to this depth, beside their sampled counts; 0: sampled only. Default: every depth."
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            callback=at_least(1, 256),
            help="Processes for the exact counts (constructions, random Transformers); 1: all in this process. Default: one per core.",
        ),
    ] = None,
):
    """Region counts against depth beside the Thm 4.4 lower bound for Maxout emulation (Gu, Yang, Zhou 2026).

    The three files in --out are replaced together: an interrupted scan leaves the old set or the new one.
    """
    from regioncount._count import PLANE_BYTES_PER_REGION
    from regioncount._scan import counted_cells, default_workers, rows_to_csv, scan as run_scan
    from regioncount.plotting import plot_scan

    guarded(lambda: checks.check_output_dir("--out", out))
    guarded(
        lambda: checks.refuse_over_cap(
            region_cap * PLANE_BYTES_PER_REGION, memory_cap, f"an exact count of --region-cap {region_cap:,} regions"
        )
    )

    def run():
        with LazyProgress("scanning depths") as bar:
            return run_scan(
                depth,
                tokens=tokens,
                m=m,
                q=q,
                lo=box[0],
                hi=box[1],
                seeds=seeds,
                d_model=d_model,
                grid=grid,
                region_cap=region_cap,
                progress=bar,
                exact_depth=depth if exact_depth is None else exact_depth,
                workers=default_workers() if workers is None else workers,
            )

    if exact_depth is not None and exact_depth < 0:
        fail(f"--exact-depth must be >= 0, got {exact_depth}", 2)
    rows = guarded(run)
    run_info = {"box": list(box), "inputs": q, "tokens": tokens, "m": m, "seeds": seeds, "d_model": d_model}
    run_info.update(grid=grid, region_cap=region_cap, seed_first=0, version=checks.tool_version())
    for row in rows:
        row["run"] = run_info
    title = f"T={tokens}, m={m}, q={q}, box [{box[0]:g}, {box[1]:g}]^{q}"
    png = plot_scan(rows, title=title)
    write_files({out / "scan.json": dump_json(rows) + "\n", out / "scan.csv": rows_to_csv(rows), out / "scan.png": png})
    if json_out:
        print(dump_json(rows))
        return
    stdout.print(scan_table(rows, title))
    stdout.print(counted_line(counted_cells(rows), region_cap))
    stdout.print(f"wrote {out / 'scan.json'}, {out / 'scan.csv'}, {out / 'scan.png'}")


def _fmt(v, digits: int = 0) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}"


def _exact_or_formula(row: dict, key: str) -> str:
    """An exact count (activation regions, then '/ linear' where merging leaves fewer), or the formula."""
    if row[key] is not None:
        linear = row.get(key + "_linear")
        return _fmt(row[key]) + (f" / {_fmt(linear)}" if linear is not None and linear != row[key] else "")
    return f"[dim]({row[key + '_formula']:.2g})[/dim]" if row[key + "_formula"] else ""


def scan_table(rows: list[dict], title: str) -> Table:
    table = Table(title=f"regions against depth ({title})")
    exact = any(r.get("random_exact_mean") is not None for r in rows)
    cols = ["D", "Thm 4.4", "paper", "compact", "rand. line", "rand. sampled", "Chao1"]
    cols += ["rand. exact cells / linear"] if exact else []
    for col in cols + ["ReLU-att.", "s"]:
        table.add_column(col, justify="right")
    for r in rows:
        ex = []
        if exact:
            ex = [
                ""
                if r.get("random_exact_mean") is None
                else f"{_fmt(r['random_exact_mean'])}±{_fmt(r['random_exact_std'])} / "
                f"{_fmt(r['random_exact_linear_mean'])}"
            ]
        table.add_row(
            str(r["depth"]),
            _fmt(r["bound"]),
            _exact_or_formula(r, "constructed"),
            _exact_or_formula(r, "compact"),
            f"{_fmt(r['random_line_mean'], 0)}±{_fmt(r['random_line_std'], 0)}",
            f"≥{_fmt(r['random_sample_mean'])}±{_fmt(r['random_sample_std'])}",
            _fmt(r["random_chao1_mean"]),
            *ex,
            f"≥{_fmt(r['relu_attention_mean'])}",
            f"{r['seconds']:.1f}",
        )
    table.caption = (
        "Exact: Thm 4.4 bound (on linear regions); paper = bound-attaining Transformer (3 blocks per maxout "
        "layer), activation regions, '/ linear regions' where fewer; compact = same "
        "construction with D-1 maxout layers in D blocks, (formula) where over --region-cap; rand. line = exact "
        "pieces of random hardmax Transformers on the box diagonal. Lower bounds (≥): sampled 2D counts of random "
        "hardmax Transformers, sampled spline pieces of random ReLU-attention ones; mean±sd over seeds."
    )
    if exact:
        table.caption += (
            " rand. exact = exact connected cells / linear regions of the same random Transformers on the 2D box."
        )
    return table


from ._plot import plot, plot_line  # noqa: E402

app.command("plot")(plot)
app.command("plot-line")(plot_line)

from .relation import relation_app, retrieval  # noqa: E402

app.add_typer(relation_app, name="relation")
app.command("retrieval")(retrieval)


def main(argv: list[str] | None = None) -> int:
    """Console entry point. Every error is one line ``regioncount: error: ...`` on stderr with the exit status
    of its class (``_validate.EXIT_CODES``), never a traceback; SIGINT and SIGTERM stop the run cleanly."""
    from typer._click import exceptions as click_exc

    from . import _files

    args = checks.rewrite_aliases(list(sys.argv[1:] if argv is None else argv))
    code = 0
    guard = None
    with _files.signals_as_exceptions():
        try:
            try:
                rv = app(args=args, prog_name="regioncount", standalone_mode=False)
                code = rv if isinstance(rv, int) else 0
            finally:
                guard = checks.stop_guard()
            if guard is not None:
                guard.raise_if_tripped()
            if _files.received is not None or code == checks.SIGINT_EXIT:
                # typer turns an interrupt into exit status 130; say which signal it was
                raise _files.Interrupted(_files.received or signal.SIGINT)
        except KeyboardInterrupt as e:
            code = _interrupted(e, guard)
        except typer.Exit as e:
            code = e.exit_code
        except click_exc.NoArgsIsHelpError as e:  # the help is printed; say in one line what was missing
            checks.print_error(f"no command given: run `{e.ctx.command_path if e.ctx else 'regioncount'} --help`")
            code = checks.USAGE
        except typer.Abort:
            checks.print_error("aborted")
            code = checks.SIGINT_EXIT
        except click_exc.ClickException as e:  # usage errors: unknown option, bad value, missing argument
            checks.print_error(e.format_message())
            code = e.exit_code if e.exit_code else checks.USAGE
        except (RegionCountError, MemoryError) as e:
            checks.print_error(checks.message_for(e) or "out of memory")
            code = checks.exit_code_for(e)
        except Exception as e:  # a bug: still one line, with what to report
            checks.print_error(f"internal error, please report it: {type(e).__name__}: {e}")
            code = checks.INTERNAL
    if argv is None:
        # The run is over: a signal now has nothing left to stop (and would kill with no message).
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)
        if code in (checks.SIGINT_EXIT, checks.SIGTERM_EXIT, checks.LIMIT):
            # stopped mid-computation: leave without tearing down half-finished compiled code (XLA can crash
            # at interpreter exit then); every file was already written whole or removed
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        sys.exit(code)
    return code


def _interrupted(e: KeyboardInterrupt, guard) -> int:
    """An interrupt is the memory guard's stop, SIGTERM or SIGINT; each gets its own line and status."""
    from ._files import Interrupted

    if guard is not None and guard.tripped_at:
        try:
            guard.raise_if_tripped()
        except RegionCountError as err:
            checks.print_error(str(err))
        return checks.LIMIT
    if isinstance(e, Interrupted) and e.signum == signal.SIGTERM:
        checks.print_error("terminated (SIGTERM); no file was half-written")
        return checks.SIGTERM_EXIT
    checks.print_error("interrupted; no file was half-written")
    return checks.SIGINT_EXIT


if __name__ == "__main__":
    main()
