"""``regioncount track``: count every checkpoint of a training run (:func:`regioncount.track`) and write the
table (track.json, track.csv) and its figure (track.png) together; a run cut short resumes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from . import _validate as checks
from ._cluster import SchedulerOpt, WorkersOpt, cluster
from ._common import (
    BoxOpt,
    Dir1Opt,
    Dir2Opt,
    JsonOpt,
    LazyProgress,
    NoLinearOpt,
    OriginOpt,
    console,
    dump_json,
    fail,
    guarded,
    parse_vector,
)
from ._data import domain_from_options
from ._files import write_files
from ._validate import MemoryCapOpt, at_least, finite, one_of


def track(
    checkpoints: Annotated[
        list[str],
        typer.Argument(
            metavar="CKPT...",
            help="Checkpoints: model files in the order given, a glob pattern (quote it), or a folder (its .npz, "
            ".safetensors and .onnx files, ordered by the step number in their names, else by name).",
        ),
    ],
    out: Annotated[Path, typer.Option(help="Folder for track.json, track.csv and track.png.")] = Path("track_out"),
    method: Annotated[
        str,
        typer.Option(
            callback=one_of("exact", "sample"),
            help="exact: exact partition of the box or slice; sample: distinct codes of sampled points (a lower "
            "bound). The same as count's --method.",
        ),
    ] = "exact",
    box: BoxOpt = (-1.0, 1.0),
    origin: OriginOpt = None,
    dir1: Dir1Opt = None,
    dir2: Dir2Opt = None,
    points: Annotated[
        Path | None,
        typer.Option(
            help="Data points (.csv of comma-separated coordinates, a header line allowed, or .npy of shape "
            "(N, inputs)): count the regions meeting the L-infinity ball of --radius around each one (local "
            "complexity)."
        ),
    ] = None,
    radius: Annotated[
        float | None,
        typer.Option(callback=finite(0.0, open_min=True), help="Half-width of the ball around each point."),
    ] = None,
    local_slice: Annotated[
        bool,
        typer.Option(
            "--local-slice",
            help="Count a 2D slice through each point (the square [-r, r]^2 along two orthonormal directions) "
            "instead of the ball itself; the default for inputs of dimension above 3.",
        ),
    ] = False,
    local_dirs: Annotated[
        list[str] | None,
        typer.Option(
            "--local-dir",
            help="A slice direction, comma-separated; give it twice (orthonormal). Default: random orthonormal "
            "directions per point, seeded by --local-seed.",
        ),
    ] = None,
    local_seed: Annotated[
        int, typer.Option(callback=at_least(0), help="Seed of the random slice directions and sampled balls.")
    ] = 0,
    local_method: Annotated[
        str,
        typer.Option(
            callback=one_of("auto", "exact", "sample"),
            help="Local complexity: exact; sample (distinct codes of random points in each ball, lower bounds); "
            "auto: exact, else the sampled estimate for that point (marked not exact).",
        ),
    ] = "auto",
    no_decision: Annotated[
        bool,
        typer.Option(
            "--no-decision",
            metavar="",
            help="Skip decision regions and their Betti numbers (counted by default with --method exact on a 2D "
            "domain or a 3D box).",
        ),
    ] = False,
    no_linear: NoLinearOpt = False,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh", metavar="", help="Count every checkpoint again instead of reusing the rows already in --out."
        ),
    ] = False,
    processes: Annotated[
        int | None,
        typer.Option(
            callback=at_least(1, 256),
            help="Worker processes counting checkpoints side by side (at most one per core). Default: one per core.",
        ),
    ] = None,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    memory_cap: MemoryCapOpt = 4.0,
    max_regions: Annotated[
        int | None,
        typer.Option(callback=at_least(1), help="Stop an exact partition once it passes this many regions."),
    ] = None,
    json_out: JsonOpt = False,
):
    """Count the regions of every checkpoint of a training run: regions, linear regions, decision regions and
    their topology (holes, decision boundary components), local complexity around data points.

    Each row is what `count` gives for that checkpoint alone. The three files in --out are replaced together; a
    run that is interrupted keeps its finished rows in --out, and a rerun skips them.
    """
    from regioncount import finish_track, track as run_track, track_tables
    from regioncount.plotting import plot_track

    if workers is not None and scheduler is not None:
        fail("give --workers or --scheduler, not both", 2)
    if workers is not None and processes is not None:
        fail("give --processes (worker processes) or --workers (a Dask cluster), not both", 2)
    if (points is None) != (radius is None):
        fail("local complexity needs both --points and --radius", 2)
    if points is None and (local_slice or local_dirs):
        checks.not_applicable("--local-slice/--local-dir", "they shape the ball around --points, and none is given")
    if local_dirs is not None and len(local_dirs) != 2:
        fail(f"--local-dir takes two directions (give it twice), got {len(local_dirs)}", 2)
    guarded(lambda: checks.check_output_dir("--out", out))
    if points is not None:
        guarded(lambda: checks.check_model_file(points, "--points"))

    def run():
        from regioncount import DomainError, checkpoint_files, default_workers, load_network, read_points

        files = checkpoint_files(checkpoints)
        net0 = load_network(files[0])
        dom = domain_from_options(net0, box, origin, dir1, dir2)[0]
        P = None
        local: dict[str, Any] = {"seed": local_seed, "method": local_method}
        if points is not None:
            P = read_points(points)
            if P.shape[1] != net0.input_dim:
                raise DomainError(
                    f"--points has {P.shape[1]} coordinates per point; the network takes {net0.input_dim}"
                )
            if local_dirs:
                import numpy as np

                local["directions"] = np.array([parse_vector(d, "--local-dir") for d in local_dirs]).T
            elif local_slice:
                local["slice_2d"] = True
        n_proc = processes if processes is not None else default_workers()
        with cluster(workers, scheduler) as client, LazyProgress("counting checkpoints") as bar:
            return run_track(
                files,
                dom,
                method=method,
                points=P,
                radius=radius,
                local=local,
                decision=not no_decision,
                linear=not no_linear,
                memory_cap=int(memory_cap * 2**30),
                max_regions=max_regions,
                workers=n_proc,
                client=client,
                out=out,
                resume=not fresh,
                progress=bar,
            )

    rows = guarded(run)
    version = checks.tool_version()
    for r in rows:
        r["version"] = version
    tables = track_tables(rows)
    png = plot_track(rows, title=f"{len(rows)} checkpoints, box [{box[0]:g}, {box[1]:g}]")
    write_files(
        {out / "track.json": tables["track.json"], out / "track.csv": tables["track.csv"], out / "track.png": png}
    )
    finish_track(out)
    if json_out:
        print(dump_json(rows))
        return
    console().print(track_table(rows))
    reused = sum(1 for r in rows if r.get("reused"))
    if reused:
        console().print(f"{reused} of {len(rows)} rows reused from {out} (same checkpoint, same settings)")
    console().print(f"wrote {out / 'track.json'}, {out / 'track.csv'}, {out / 'track.png'}")


def track_table(rows: list[dict]):
    """The table ``track`` prints without --json."""
    from rich.table import Table

    cols = [
        ("step", "step"),
        ("regions", "regions"),
        ("linear_regions", "linear"),
        ("decision_regions", "decision"),
        ("decision_holes", "holes"),
        ("decision_cavities", "cavities"),
        ("boundary_components", "boundary parts"),
        ("local_complexity", "local (mean)"),
        ("seconds", "seconds"),
    ]
    present = [(k, h) for k, h in cols if any(r.get(k) is not None for r in rows)]
    table = Table(title="regions through training" + ("" if all(r["exact"] for r in rows) else " (not all exact)"))
    for _, h in present:
        table.add_column(h, justify="right")
    for r in rows:
        cells = []
        for k, _ in present:
            v = r.get(k)
            cells.append("" if v is None else (f"{v:,.2f}" if isinstance(v, float) else f"{v:,}"))
        table.add_row(*cells)
    return table
