"""``regioncount scan``: region counts against depth beside the Thm 4.4 bound; writes scan.json, scan.csv and
scan.png together."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from . import _validate as checks
from ._cluster import counted_line
from ._common import LazyProgress, console, dump_json, fail, guarded
from ._files import write_files
from ._validate import MemoryCapOpt, at_least, box_callback

if TYPE_CHECKING:
    from rich.table import Table

#: The default --relu-exact-depth: off. Depth 1 (walls of degree 3) costs 77-244 CPU s per seed at the scan's
#: default sizes and took the default scan from about 2 to 11.7 minutes on the shared machine; depth 2
#: (degree 9) is out of reach (benchmarks/README.md, the depth scan).
RELU_EXACT_DEPTH = 0


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
    memory_cap: MemoryCapOpt = 8.0,  # the whole run: this process and its worker processes together
    exact_depth: Annotated[
        int | None,
        typer.Option(
            help="Count the random hardmax Transformers exactly on the 2D box (connected cells and linear regions) up to this depth, beside their sampled counts; 0: sampled only. Default: every depth."
        ),
    ] = None,
    relu_exact_depth: Annotated[
        int,
        typer.Option(
            callback=at_least(0, 60),
            help="Count the random ReLU-attention Transformers' spline pieces exactly on the 2D box (certified curved engine: connected cells, maximal polynomial pieces, largest wall degree) up to this depth; deeper rows keep the sampled lower bound. 0: sampled only. Depth 1 (walls of degree 3) takes 1.5-4 CPU minutes per seed at the default sizes (off by default); depth 2 (degree 9) does not finish in a scan's time.",
        ),
    ] = RELU_EXACT_DEPTH,
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
    from regioncount import PLANE_BYTES_PER_REGION, counted_cells, default_workers, rows_to_csv, scan as run_scan
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
                relu_exact_depth=relu_exact_depth,
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
    console().print(scan_table(rows, title))
    console().print(counted_line(counted_cells(rows), region_cap))
    console().print(f"wrote {out / 'scan.json'}, {out / 'scan.csv'}, {out / 'scan.png'}")


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


def _relu_cell(r: dict) -> str:
    """Exact spline pieces (mean over seeds, '/ polynomial pieces') where counted, else the sampled lower bound."""
    if r.get("relu_exact_mean") is not None:
        return f"{_fmt(r['relu_exact_mean'])}±{_fmt(r['relu_exact_std'])} / {_fmt(r['relu_poly_mean'])}"
    return f"≥{_fmt(r['relu_attention_mean'])}"


def scan_table(rows: list[dict], title: str) -> Table:
    from rich.table import Table

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
            _relu_cell(r),
            f"{r['seconds']:.1f}",
        )
    table.caption = (
        "Exact: Thm 4.4 bound (on linear regions); paper = bound-attaining Transformer (3 blocks per maxout "
        "layer), activation regions, '/ linear regions' where fewer; compact = same "
        "construction with D-1 maxout layers in D blocks, (formula) where over --region-cap; rand. line = exact "
        "pieces of random hardmax Transformers on the box diagonal. Lower bounds (≥): sampled 2D counts of random "
        "hardmax Transformers, sampled spline pieces of random ReLU-attention ones; mean±sd over seeds."
    )
    if any(r.get("relu_exact_mean") is not None for r in rows):
        table.caption += (
            " ReLU-att. without ≥: exact connected spline pieces / maximal pieces of one polynomial on the 2D box"
            " (certified curved engine, up to --relu-exact-depth; walls of degree 3^D)."
        )
    if exact:
        table.caption += (
            " rand. exact = connected cells / linear regions of the same random Transformers on the 2D box (curved"
            " engine: certified up to 2,000 trapezoids, else float with exact: false in the JSON)."
        )
    return table
