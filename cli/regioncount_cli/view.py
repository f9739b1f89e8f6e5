"""``regioncount view``: parse, compute the atlas (:func:`regioncount.atlas_data`), write the page
(:func:`regioncount.plotting.atlas_html`) and its JSON sidecar, both whole or neither."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from regioncount import load_network

from . import _validate as checks
from ._common import (
    Dir1Opt,
    Dir2Opt,
    LazyProgress,
    ModelArg,
    OriginOpt,
    PlaneBoxOpt,
    dump_json,
    guarded,
)
from ._data import ThroughOpt, domain_from_options
from ._files import write_files
from ._validate import MemoryCapOpt, at_least, one_of


def _check_files(model: Path, out: Path) -> Path:
    """The model and both outputs, checked before any work; the sidecar may only replace our own."""
    import json

    if out.suffix.lower() not in (".html", ".htm"):
        raise checks.UsageError(f"--out must end in .html, got {out}")
    sidecar = out.with_suffix(".json")
    checks.check_model_file(model)
    checks.check_outputs({"--out": out, "the sidecar of --out": sidecar}, {"MODEL": model})
    if sidecar.exists():
        try:
            old = json.loads(sidecar.read_text())
            ours = isinstance(old, dict) and "atlas" in old
        except (OSError, ValueError):
            ours = False
        if not ours:
            raise checks.OutputFileError(
                f"the sidecar {sidecar} of --out exists and was not written by regioncount view; move it or "
                "choose another --out"
            )
    return sidecar


def view(
    model: ModelArg,
    out: Annotated[
        Path,
        typer.Option(
            help="The page (.html): one self-contained file that works offline. A JSON file with the same stem "
            "records the counts it shows."
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
            help="Add a view of the decision regions (one colour per predicted class, the class boundary bold), "
            "exact, from the partition of the network followed by the argmax of its outputs.",
        ),
    ] = False,
    layers: Annotated[
        bool,
        typer.Option(
            "--layers/--no-layers",
            help="A layer slider: the regions of the network cut after each layer (MLP, Maxout) or block "
            "(Transformer), read off the partition's code prefixes.",
        ),
    ] = True,
    levels: Annotated[
        int, typer.Option(callback=at_least(0, 1000), help="Level sets of output 0 the page can show (0: none).")
    ] = 12,
    max_regions: Annotated[
        int,
        typer.Option(
            callback=at_least(1),
            help="Refuse partitions above this many regions (curved cells: trapezoids); a page of 10^6 regions "
            "is about 100 MB.",
        ),
    ] = 2_000_000,
    title: Annotated[str | None, typer.Option(help="The page's heading (default: the model file's name).")] = None,
    memory_cap: MemoryCapOpt = 4.0,
    activation: Annotated[
        str,
        typer.Option(
            callback=one_of("relu"),
            help="The activation between the Linear layers of a PyTorch state dict, which does not record it: "
            "relu, the only one drawn.",
        ),
    ] = "relu",
):
    """Write an atlas of a model's exact regions on a 2D box or slice: one HTML page to zoom, pan and hover.

    Hover or click a region for its activation code (by layer), its affine map, area, vertices, neighbours and linear region; find a point by its coordinates; step through the layers; switch to linear or decision regions and level sets. Straight boundaries come from the plane engine, conic ones from the curved engine; the page is never sampled.
    """  # noqa: E501  (one line per paragraph: --help rewraps it)
    sidecar = guarded(lambda: _check_files(model, out))
    from regioncount import PLANE_BYTES_PER_REGION

    guarded(
        lambda: checks.refuse_over_cap(
            max_regions * PLANE_BYTES_PER_REGION, memory_cap, f"an exact partition of --max-regions {max_regions:,}"
        )
    )

    def run():
        from regioncount import atlas_data
        from regioncount.plotting import atlas_html

        net = load_network(model)
        dom = domain_from_options(net, box, origin, dir1, dir2, through, plane=True)[0]
        with LazyProgress("partitioning (exact), then the atlas") as bar:
            atlas = atlas_data(
                net, dom, decision=decision, layers=layers, levels=levels, max_regions=max_regions, progress=bar
            )
        page = atlas_html(atlas, title=title or model.name)
        return atlas.summary, page

    summary, page = guarded(run)
    data = page.encode("utf-8")
    info = {
        "atlas": str(out),
        "model": str(model),
        **summary,
        "page_bytes": len(data),
        "version": checks.tool_version(),
    }
    write_files({out: data, sidecar: dump_json(info) + "\n"})
    print(f"wrote {out} ({len(data):,} bytes, {summary['regions']:,} regions) and {sidecar}")
