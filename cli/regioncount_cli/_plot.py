"""``regioncount plot`` and ``regioncount plot-line``: parse, call regioncount.plotting, write files whole."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from regioncount import Box, DomainError, RegionCountError, Segment, load_network

from . import _validate as checks
from ._common import (
    Dir1Opt,
    Dir2Opt,
    ModelArg,
    OriginOpt,
    PlaneBoxOpt,
    dump_json,
    fail,
    guarded,
    parse_vector,
)
from ._data import ThroughOpt, domain_from_options
from ._files import write_files
from ._validate import MemoryCapOpt, at_least, box_callback, one_of

#: Largest --dpi: a 6 x 5 inch figure at 1200 dpi is 43 million pixels.
MAX_DPI = 1200
DpiOpt = Annotated[int, typer.Option(callback=at_least(10, MAX_DPI), help="Resolution of .png output (dots per inch).")]
ActivationOpt = Annotated[
    str,
    typer.Option(
        callback=one_of("relu"),
        help="The activation between the Linear layers of a PyTorch state dict, which does not record it: "
        "relu, the only one drawn.",
    ),
]


def _sidecar_free(sidecar: Path) -> None:
    """The JSON sidecar may replace an earlier sidecar of regioncount, never an unrelated file."""
    import json

    if not sidecar.exists():
        return
    try:
        old = json.loads(sidecar.read_text())
        ours = isinstance(old, dict) and "figure" in old and "format" in old
    except (OSError, ValueError):
        ours = False
    if not ours:
        raise checks.OutputFileError(
            f"the sidecar {sidecar} of --out exists and was not written by regioncount; move it or choose another --out"
        )


def _check_files(model: Path, outputs: dict[str, Path | None]) -> Path:
    """Check the model and every output (with the sidecar of --out) before any work; return the sidecar."""
    out = outputs["--out"]
    if out is None:
        raise ValueError("plot needs --out")  # typer always gives --out a value (it has a default)
    sidecar = out.with_suffix(".json")
    checks.check_model_file(model)
    checks.check_outputs({**outputs, "the sidecar of --out": sidecar}, {"MODEL": model})
    _sidecar_free(sidecar)
    return sidecar


def _no_method_advice(reason: str) -> str:
    """Engine reasons advise `count --method ...`, which `plot` does not have."""
    import re

    return re.sub(r"[;:,]? *(use|or count with|count with) --method.*$", "", reason or "").strip()


def _image_format(path: Path, option: str) -> str:
    from regioncount.plotting import format_of

    try:
        return format_of(path)
    except RegionCountError as e:
        fail(f"{option}: {e}", 2)


def plot(
    model: ModelArg,
    out: Annotated[
        Path,
        typer.Option(
            help="Picture file; its suffix picks the format: .png, .svg or .pdf. A JSON file with the same stem "
            "records the counts and what was drawn."
        ),
    ],
    box: PlaneBoxOpt = (-1.0, 1.0),
    origin: OriginOpt = None,
    dir1: Dir1Opt = None,
    dir2: Dir2Opt = None,
    through: ThroughOpt = None,
    decision: Annotated[
        bool,
        typer.Option(
            "--decision",
            help="Three panels, all exact: activation regions, linear regions, and decision regions (one colour "
            "per predicted class, the decision boundary drawn bold, holes of decision regions ringed and marked; the JSON "
            "holds their Betti numbers under topology).",
        ),
    ] = False,
    levels: Annotated[
        int, typer.Option(help="Draw N level sets of output 0, evenly spaced over its range on the domain.")
    ] = 0,
    zero: Annotated[
        bool, typer.Option("--zero", metavar="", help="Draw the zero set of output 0 (the decision boundary).")
    ] = False,
    layers: Annotated[
        bool,
        typer.Option(
            "--layers",
            metavar="",
            help="One panel per layer (MLP, Maxout) or block (Transformer): the partition of the network cut "
            "after it. Level sets go on the last panel (the whole network).",
        ),
    ] = False,
    sampled: Annotated[
        bool,
        typer.Option(
            "--sampled",
            metavar="",
            help="Draw from a grid of sampled codes even where the exact partition is possible. Without it the "
            "picture is exact where the plane engine can split the network and sampled (said in the title) "
            "where boundaries are curved or there are more than --max-regions regions.",
        ),
    ] = False,
    grid: Annotated[
        int | None,
        typer.Option(
            callback=at_least(2, 4000),
            help="Force a sampled picture on an R x R grid (default for sampled pictures: 400).",
        ),
    ] = None,
    linear: Annotated[
        bool,
        typer.Option(
            "--linear",
            metavar="",
            help="Colour linear regions (neighbours with equal affine maps merged) instead of activation "
            "regions; needs an exact partition of a piecewise-linear network.",
        ),
    ] = False,
    max_regions: Annotated[
        int,
        typer.Option(
            "--region-cap",
            callback=at_least(1),
            help="Exact partitions above this many regions are drawn from samples instead.",
        ),
    ] = 200_000,
    dpi: DpiOpt = 150,
    stats: Annotated[
        Path | None,
        typer.Option(help="Also write histograms of region areas and vertices per region (.png/.svg/.pdf)."),
    ] = None,
    graph: Annotated[
        Path | None,
        typer.Option(help="Also draw the region graph at the region centroids (.png/.svg/.pdf; small partitions)."),
    ] = None,
    graphml: Annotated[
        Path | None, typer.Option(help="Also write the region graph as GraphML (nodes: area, code; edges: neighbours).")
    ] = None,
    sections: Annotated[
        int,
        typer.Option(
            help="A model with 3 or more inputs and no slice: draw this many cross-sections x_axis = value of the "
            "box [LO, HI]^q, spanned by two other inputs; the title gives the exact count of the whole box."
        ),
    ] = 3,
    section_axis: Annotated[
        int | None, typer.Option(help="Input (1-based) held fixed in each cross-section (default: the last).")
    ] = None,
    memory_cap: MemoryCapOpt = 4.0,
    activation: ActivationOpt = "relu",
):
    """Draw the regions of a model on a 2D box or slice: neighbours never share a colour, boundaries drawn.

    Exact (plane engine) where possible, else sampled and labelled so. --stats, --graph and --graphml need the exact partition. A model with 3 or more inputs and no slice gets labelled cross-sections of its box (--sections). For the output along a segment use `regioncount plot-line`.
    """  # noqa: E501  (one line per paragraph: --help rewraps it)
    fmt = _image_format(out, "--out")
    extra = {"stats": stats, "graph": graph}
    extra_fmt = {k: _image_format(p, f"--{k}") for k, p in extra.items() if p is not None}
    if graphml is not None and graphml.suffix.lower() != ".graphml":
        fail(f"--graphml must end in .graphml, got {graphml}", 2)
    if levels < 0 or levels > 1000:
        fail(f"Invalid value for '--levels': must be an integer from 0 to 1,000, got {levels}", 2)
    need_exact = bool(extra_fmt) or graphml is not None
    if decision and (need_exact or sampled or grid is not None or linear or layers or levels or zero):
        fail(
            "--decision draws its own three exact panels: drop --stats/--graph/--graphml/--sampled/--grid/"
            "--linear/--layers/--levels/--zero",
            2,
        )
    if need_exact and (sampled or grid is not None):
        fail("--stats, --graph and --graphml need the exact partition: drop --sampled/--grid", 2)
    if linear and (sampled or grid is not None):
        fail("--linear needs the exact partition: drop --sampled/--grid", 2)
    sidecar = guarded(
        lambda: _check_files(model, {"--out": out, "--stats": stats, "--graph": graph, "--graphml": graphml})
    )
    from regioncount import PLANE_BYTES_PER_REGION

    guarded(
        lambda: checks.refuse_over_cap(
            max_regions * PLANE_BYTES_PER_REGION,
            memory_cap,
            f"an exact partition of --region-cap {max_regions:,} regions",
        )
    )

    def _sections(net):
        from regioncount import exact_solid
        from regioncount.plotting import figure_bytes, figure_sections

        if layers or need_exact or linear:
            raise DomainError(
                "--layers, --linear, --stats, --graph and --graphml draw one 2D domain: give a slice with "
                "--origin, --dir1 and --dir2"
            )
        if sections < 1:
            raise RegionCountError(f"--sections must be at least 1, got {sections}")
        if section_axis is not None and not 1 <= section_axis <= net.input_dim:
            raise RegionCountError(f"--section-axis must be in 1..{net.input_dim}, got {section_axis}")
        box3 = Box(box[0], box[1], net.input_dim)
        solid = exact_solid(net, box3, max_regions=max_regions) if not sampled and grid is None else None
        axis = None if section_axis is None else section_axis - 1
        fig, info = figure_sections(
            net,
            box3,
            count=sections,
            axis=axis,
            solid=solid,
            levels=levels,
            zero=zero,
            sampled=sampled,
            grid=grid,
            max_regions=max_regions,
        )
        return info, {out: figure_bytes(fig, fmt, dpi)}, None

    def run():
        from regioncount.plotting import (
            figure_bytes,
            figure_region_graph,
            figure_region_stats,
            figure_regions,
        )

        net = load_network(model)
        if net.input_dim >= 3 and origin is None and dir1 is None and dir2 is None and through is None:
            return _sections(net)
        for opt, name in (("--sections", "sections"), ("--section-axis", "section_axis")):
            if checks.explicit(name):
                why = "the model has 2 inputs" if net.input_dim == 2 else "a slice is drawn"
                raise checks.UsageError(
                    f"{opt} does not apply here: it draws cross-sections of a model with 3 or more inputs and no "
                    f"slice, and {why}"
                )
        if net.input_dim == 1 and origin is None and dir1 is None and dir2 is None and through is None:
            raise DomainError("the model takes 1 input: draw its output along a segment with `regioncount plot-line`")
        dom, points = domain_from_options(net, box, origin, dir1, dir2, through, plane=True)
        if decision:
            from regioncount.plotting import figure_decision

            names = [p.stem for p in through] if through is not None else None
            fig, info = figure_decision(net, dom, points=points, point_names=names, max_regions=max_regions)
            return info, {out: figure_bytes(fig, fmt, dpi)}, None
        part = source = None
        if need_exact:  # refuse before drawing anything; the figure then draws this partition, not a new one
            from regioncount import RegionSource, exact_partition

            part, why_not = exact_partition(net, dom, max_regions=max_regions)
            if part is None:
                raise RegionCountError(
                    "--stats, --graph and --graphml need the exact partition, and this one can only be sampled "
                    f"({_no_method_advice(why_not or '')})"
                )
            source = RegionSource(net, dom, partition=part)
        fig, info = figure_regions(
            net,
            dom,
            linear=linear,
            levels=levels,
            zero=zero,
            layers=layers,
            sampled=sampled,
            grid=grid,
            max_regions=max_regions,
            source=source,
        )
        files = {out: figure_bytes(fig, fmt, dpi)}
        if part is not None:
            if stats is not None:
                f, info["stats"] = figure_region_stats(part)
                files[stats] = figure_bytes(f, extra_fmt["stats"], dpi)
            if graph is not None:
                f, info["graph"] = figure_region_graph(part)
                files[graph] = figure_bytes(f, extra_fmt["graph"], dpi)
        return info, files, part

    info, files, part = guarded(run)
    info = {"model": str(model), "figure": str(out), "format": fmt, **info}
    for entry in (info, *info.get("panels", ())):
        if entry.get("why_sampled"):
            entry["why_sampled"] = _no_method_advice(entry["why_sampled"])
    info.update(domain_box=list(box), grid=grid, version=checks.tool_version())
    if graphml is not None:
        files[graphml] = guarded(lambda: _graphml_bytes(part))
        info["graphml"] = str(graphml)
    for key, path in (("stats_figure", stats), ("graph_figure", graph)):
        if path is not None:
            info[key] = str(path)
    files[sidecar] = dump_json(info) + "\n"
    write_files(files)  # every file or none
    print(f"wrote {', '.join(str(p) for p in files)}")


def _graphml_bytes(part) -> bytes:
    import io

    import networkx as nx

    try:
        G = part.to_networkx()
    except ValueError as e:
        raise checks.LimitError(f"--graphml: {e}") from None
    buf = io.BytesIO()
    nx.write_graphml(G, buf)
    return buf.getvalue()


def plot_line(
    model: ModelArg,
    out: Annotated[
        Path,
        typer.Option(help="Picture file: .png, .svg or .pdf. A JSON file with the same stem records the pieces."),
    ],
    start: Annotated[
        str | None, typer.Option("--from", help="Segment start A, comma-separated (default: LO in every input).")
    ] = None,
    end: Annotated[
        str | None, typer.Option("--to", help="Segment end B, comma-separated (default: HI in every input).")
    ] = None,
    box: Annotated[
        tuple[float, float],
        typer.Option(
            metavar="LO HI",
            callback=box_callback,
            help="LO HI: without --from/--to, draw along the diagonal of [LO, HI]^q.",
        ),
    ] = (-1.0, 1.0),
    output: Annotated[int, typer.Option(callback=at_least(0), help="Which network output to draw.")] = 0,
    dpi: DpiOpt = 150,
    memory_cap: MemoryCapOpt = 4.0,
    activation: ActivationOpt = "relu",
):
    """Draw a model's output along a segment x = A + t (B - A): exact pieces (line engine), each coloured, every breakpoint marked.

    Filled dots: the output's slope (or polynomial) changes there; hollow dots: only the activation code does. ReLU attention gives spline pieces, labelled so, never linear regions.
    """  # noqa: E501  (one line per paragraph: --help rewraps it)
    fmt = _image_format(out, "--out")
    if (start is None) != (end is None):
        fail("give both --from and --to, or neither (the box diagonal)", 2)
    if start is not None and checks.explicit("box"):
        fail("--box does not apply here: it sets the diagonal drawn without --from/--to", 2)
    sidecar = guarded(lambda: _check_files(model, {"--out": out}))

    def run():
        from regioncount.plotting import figure_bytes, figure_line

        net = load_network(model)
        if output >= net.output_dim:
            raise checks.UsageError(f"--output must be below the model's {net.output_dim} outputs, got {output}")
        if start is None:
            seg = Segment([box[0]] * net.input_dim, [box[1]] * net.input_dim)
        else:
            seg = Segment(parse_vector(start, "--from"), parse_vector(end, "--to"))
        fig, info = figure_line(net, seg, output=output)
        return info, figure_bytes(fig, fmt, dpi)

    info, data = guarded(run)
    info = {"model": str(model), "figure": str(out), "format": fmt, **info, "version": checks.tool_version()}
    write_files({out: data, sidecar: dump_json(info) + "\n"})  # both or neither
    print(f"wrote {out}, {sidecar}")
