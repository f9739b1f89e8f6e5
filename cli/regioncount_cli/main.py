"""``regioncount``: count, bound, build, scan. Commands parse, call the library, render, write files."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from regioncount._count import METHODS, count_regions
from regioncount._domain import Box, Segment
from regioncount._errors import DomainError, RegionCountError
from regioncount._io import load_model, save_model, write_atomic

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


def _domain(net_dim: int, lo: float, hi: float, origin, dir1, dir2, start, end):
    if lo >= hi:
        raise DomainError(f"LO must be below HI, got LO={lo}, HI={hi}")
    if start is not None or end is not None:
        if start is None or end is None:
            raise DomainError("give both --from and --to for a segment")
        return Segment(start, end)
    return slice_from_options(lo, hi, origin, dir1, dir2) or Box(lo, hi, net_dim)


@app.command()
def count(
    model: ModelArg,
    method: Annotated[
        str,
        typer.Option(
            help="exact: exact 2D partition (or exact 1D for one input); line: exact pieces along a segment; sample: distinct codes of sampled points, a lower bound."
        ),
    ] = "exact",
    box: Annotated[
        tuple[float, float],
        typer.Option(help="LO HI: the box [LO, HI] in every input coordinate (or in u1, u2 for a slice)."),
    ] = (-1.0, 1.0),
    grid: Annotated[
        int | None, typer.Option(help="sample: R points per axis (R^dim cell centres). Default 1000 for 1D/2D domains.")
    ] = None,
    samples: Annotated[
        int | None, typer.Option(help="sample: this many uniform random points instead of a grid.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for random points.")] = 0,
    origin: OriginOpt = None,
    dir1: Dir1Opt = None,
    dir2: Dir2Opt = None,
    start: Annotated[
        str | None,
        typer.Option("--from", help="Segment start, comma-separated (line method; default: the box diagonal)."),
    ] = None,
    end: Annotated[str | None, typer.Option("--to", help="Segment end, comma-separated.")] = None,
    memory_cap: Annotated[
        float,
        typer.Option(
            help="Memory cap in GiB: bounds the distinct-code table of a sampled count and the regions of an exact 2D partition."
        ),
    ] = 4.0,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")] = False,
    out: Annotated[
        Path | None, typer.Option(help="Also write the JSON result to this file (whole or not at all).")
    ] = None,
    tiles: TilesOpt = None,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    shards: ShardsOpt = None,
):
    """Count the regions of a model on a box, a 2D slice or a segment."""
    if method not in METHODS:
        fail(f"--method must be one of {', '.join(METHODS)}, got {method!r}", 2)
    if grid is not None and samples is not None:
        fail("give --grid or --samples, not both", 2)
    n_tiles = parse_tiles(tiles)
    check_cluster_options(method, n_tiles, workers, scheduler, shards)

    def run():
        net = load_model(model)
        dom = _domain(
            net.input_dim,
            box[0],
            box[1],
            parse_vector(origin, "--origin"),
            parse_vector(dir1, "--dir1"),
            parse_vector(dir2, "--dir2"),
            parse_vector(start, "--from"),
            parse_vector(end, "--to"),
        )
        with cluster(workers, scheduler) as client, LazyProgress(f"counting ({method})") as bar:
            return count_regions(
                net,
                dom,
                method=method,
                grid=grid,
                samples=samples,
                seed=seed,
                memory_cap=int(memory_cap * 2**30),
                progress=bar,
                tiles=n_tiles,
                client=client,
                shards=shards,
            )

    res = guarded(run)
    res["model"] = str(model)
    if out is not None:
        write_atomic(out, dump_json(res) + "\n")
    if json_out:
        print(dump_json(res))
        return
    table = Table(title=f"{model.name}: {res['kind']}", show_header=False)
    label = f"{res['kind']} ({'exact' if res['exact'] else 'lower bound'})"
    table.add_row(label, f"{res['regions']:,}")
    if res.get("linear_regions") is not None:
        table.add_row(
            "linear regions" if res["kind"] == "activation regions" else "pieces, equal polynomials merged",
            f"{res['linear_regions']:,}",
        )
    for key in ("samples", "f1", "f2", "chao1", "coverage", "ties"):
        if key in res:
            v = res[key]
            table.add_row(
                key,
                f"{v:,.1f}"
                if isinstance(v, float) and key == "chao1"
                else (f"{v:.6f}" if isinstance(v, float) else f"{v:,}"),
            )
    if "tiles" in res:
        table.add_row("tiles (pieces merged)", f"{res['tiles'][0]} x {res['tiles'][1]} ({res['pieces']:,})")
    table.add_row("method", res["method"])
    table.add_row("seconds", f"{res['seconds']:.2f}")
    stdout.print(table)


@app.command()
def bound(
    name: Annotated[str | None, typer.Argument(help="Bound to evaluate; omit to list them all.")] = None,
    widths: Annotated[
        str | None, typer.Option(help="Hidden widths n_1..n_L, comma-separated (ReLU and Maxout bounds).")
    ] = None,
    n0: Annotated[int | None, typer.Option(help="Input dimension n0.")] = None,
    k: Annotated[int | None, typer.Option(help="Maxout rank k.")] = None,
    n: Annotated[int | None, typer.Option(help="Number of hyperplanes / ReLU units (zaslavsky).")] = None,
    m: Annotated[int | None, typer.Option("--m", help="Per-token width m (transformer bound).")] = None,
    tokens: Annotated[int | None, typer.Option("--T", help="Number of tokens T (transformer bound).")] = None,
    q: Annotated[int | None, typer.Option("--q", help="Input dimension q (transformer bound).")] = None,
    depth: Annotated[int | None, typer.Option("--D", help="Number of blocks D (transformer bound).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
):
    """Evaluate a region bound of the literature in exact integer arithmetic (DESIGN §4)."""
    from regioncount.theory._bounds import BOUNDS

    if name is None:
        rows = [
            {
                "name": s.name,
                "kind": s.kind,
                "architecture": s.architecture,
                "params": list(s.params),
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
            table.add_row(r["name"], r["kind"], " ".join("--" + p for p in r["params"]), r["citation"])
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
        "q": q,
        "D": depth,
    }
    try:
        value = spec(**options)
    except ValueError as e:
        fail(str(e))
    used = {p: options[p] for p in spec.params}
    if json_out:
        print(dump_json({"bound": name, "value": value, "kind": spec.kind, "citation": spec.citation, **used}))
        return
    args = ", ".join(f"{p}={v}" for p, v in used.items())
    stdout.print(f"{name}({args}) = [bold]{value:,}[/bold]   ({spec.kind} bound; {spec.citation})")


def _save(net, out: Path):
    if out.suffix != ".npz":
        fail(f"--out must end in .npz, got {out}", 2)
    save_model(net, out)
    print(f"wrote {out}")


def _widths(text: str) -> list[int]:
    from ._common import parse_ints

    w = parse_ints(text, "--widths")
    if min(w) < 1:
        fail("--widths must be positive", 2)
    return w


@build_app.command("random-mlp")
def build_random_mlp(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    inputs: Annotated[int, typer.Option(help="Input dimension q.")] = 2,
    widths: Annotated[str, typer.Option(help="Hidden widths, comma-separated, e.g. 32,32,32.")] = "32,32,32",
    outputs: Annotated[int, typer.Option(help="Output dimension.")] = 1,
    init: Annotated[
        str,
        typer.Option(
            help="torch: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) like nn.Linear; normal: He weights, N(0,1) biases."
        ),
    ] = "torch",
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
):
    """A seeded random ReLU MLP."""
    from regioncount import random_mlp

    w = _widths(widths)
    guarded(lambda: _save(random_mlp(inputs, w, outputs, seed=seed, init=init), out))


@build_app.command("random-maxout")
def build_random_maxout(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    inputs: Annotated[int, typer.Option(help="Input dimension q.")] = 2,
    widths: Annotated[str, typer.Option(help="Widths (units per layer), comma-separated.")] = "8,8",
    k: Annotated[int, typer.Option(help="Maxout rank (pieces per unit), at least 2.")] = 2,
    outputs: Annotated[int, typer.Option(help="Output dimension.")] = 1,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
):
    """A seeded random Maxout network."""
    from regioncount import random_maxout

    w = _widths(widths)
    guarded(lambda: _save(random_maxout(inputs, w, k=k, output_dim=outputs, seed=seed), out))


@build_app.command("random-transformer")
def build_random_transformer(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    inputs: Annotated[int, typer.Option(help="Input dimension q.")] = 2,
    tokens: Annotated[int, typer.Option(help="Number of tokens T.")] = 4,
    d_model: Annotated[int, typer.Option(help="Model width d.")] = 8,
    depth: Annotated[int, typer.Option(help="Number of blocks (attention + FFN each).")] = 2,
    heads: Annotated[int, typer.Option(help="Heads per block.")] = 1,
    d_ff: Annotated[int | None, typer.Option(help="FFN width (default 2 d_model).")] = None,
    attention: Annotated[str, typer.Option(help="hardmax, relu or softmax.")] = "hardmax",
    causal: Annotated[bool, typer.Option(help="Causal mask.")] = False,
    scale_by_t: Annotated[bool, typer.Option("--scale-by-t", help="Divide ReLU attention by T.")] = False,
    inv_temperature: Annotated[float, typer.Option(help="Softmax inverse temperature lambda.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
):
    """A seeded random Transformer (no layer norm)."""
    from regioncount import random_transformer

    if attention not in ("hardmax", "relu", "softmax"):
        fail(f"--attention must be hardmax, relu or softmax, got {attention!r}", 2)
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
):
    """The ReLU fold on R composed over layers (DESIGN §5): exactly prod (n_l + 1) pieces on [0, 1]."""
    from regioncount.theory import fold_relu_network

    w = _widths(widths)
    guarded(lambda: _save(_theory_call(fold_relu_network, w), out))


@build_app.command("fold-maxout")
def build_fold_maxout(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    widths: Annotated[str, typer.Option(help="Units per layer, comma-separated (even when k >= 3).")] = "2,2",
    k: Annotated[int, typer.Option(help="Maxout rank.")] = 3,
):
    """The Maxout fold on R composed over layers (DESIGN §5): prod (n_l (k-1) + 1) pieces on [0, 1]."""
    from regioncount.theory import fold_maxout_network

    w = _widths(widths)
    guarded(lambda: _save(_theory_call(fold_maxout_network, w, k), out))


@build_app.command("product-relu")
def build_product_relu(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    widths: Annotated[
        str, typer.Option(help="Widths, comma-separated; floor(n_l / n0) >= 3 for hidden layers.")
    ] = "6,3",
    n0: Annotated[int, typer.Option(help="Input dimension.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed for the last layer's general-position forms.")] = 0,
):
    """ReLU product construction in R^n0 attaining Serra et al.'s lower bound on [-1, 2]^n0."""
    from regioncount.theory import product_relu

    w = _widths(widths)
    guarded(lambda: _save(_theory_call(product_relu, w, n0, seed=seed), out))


@build_app.command("product-maxout")
def build_product_maxout(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    widths: Annotated[str, typer.Option(help="Widths, comma-separated.")] = "4,2",
    n0: Annotated[int, typer.Option(help="Input dimension.")] = 2,
    k: Annotated[int, typer.Option(help="Maxout rank.")] = 3,
    seed: Annotated[int, typer.Option(help="Seed for the last layer's general-position forms.")] = 0,
):
    """Maxout product construction in R^n0 attaining the maxout lower bound on [-1, 2]^n0 (even floor(n_l/n0) or k = 2)."""
    from regioncount.theory import product_maxout

    w = _widths(widths)
    guarded(lambda: _save(_theory_call(product_maxout, w, n0, k, seed=seed), out))


@build_app.command("compile")
def build_compile(
    model: Annotated[Path, typer.Argument(help="A Maxout model file (.npz).")],
    out: Annotated[Path, typer.Option(help="Output .npz file for the hardmax Transformer.")],
    box: Annotated[tuple[float, float], typer.Option(help="LO HI: the box the compiled model must be exact on.")] = (
        -1.0,
        2.0,
    ),
    layout: Annotated[
        str, typer.Option(help="paper: 3 blocks per maxout layer (Thm 4.4's count); compact: L + 1 blocks.")
    ] = "paper",
):
    """Compile a Maxout network into a hardmax Transformer that equals it on the box (DESIGN §5)."""
    from regioncount import Maxout
    from regioncount.theory import compile_maxout

    if layout not in ("paper", "compact"):
        fail(f"--layout must be paper or compact, got {layout!r}", 2)
    if box[0] >= box[1]:
        fail(f"LO must be below HI, got LO={box[0]}, HI={box[1]}", 2)

    def run():
        net = load_model(model)
        if not isinstance(net, Maxout):
            raise RegionCountError(f"{model}: holds a {type(net).__name__}, compile takes a Maxout network")
        _save(compile_maxout(net, box[0], box[1], layout), out)

    guarded(run)


@build_app.command("bound-transformer")
def build_bound_transformer(
    out: Annotated[Path, typer.Option(help="Output .npz file.")],
    m: Annotated[int, typer.Option("--m", help="Per-token width m.")] = 1,
    tokens: Annotated[int, typer.Option("--T", help="Tokens T (maxout rank).")] = 4,
    q: Annotated[int, typer.Option("--q", help="Input dimension q.")] = 2,
    depth: Annotated[int, typer.Option("--D", help="Blocks D >= 3.")] = 9,
    layout: Annotated[str, typer.Option(help="paper (D blocks) or compact (floor(D/3) + 1 blocks).")] = "paper",
):
    """The hardmax Transformer attaining Thm 4.4 (Gu, Yang, Zhou 2026) on [-1, 2]^q where the construction can."""
    from regioncount.theory import bound_attaining_transformer

    if layout not in ("paper", "compact"):
        fail(f"--layout must be paper or compact, got {layout!r}", 2)

    def run():
        tf, info = _theory_call(bound_attaining_transformer, m, tokens, q, depth, layout)
        _save(tf, out)
        note = (
            "" if info["attainable"] else " (floor(mT/q) odd with T >= 3: this construction falls short of the bound)"
        )
        print(f"Thm 4.4 bound {info['bound']:,}; this construction has {info['construction_regions']:,} regions{note}")

    guarded(run)


def _theory_call(fn, *args, **kwargs):
    """Call a construction; its ValueErrors (invalid parameters) become one-line errors."""
    try:
        return fn(*args, **kwargs)
    except ValueError as e:
        raise RegionCountError(str(e)) from None


@app.command()
def scan(
    depth: Annotated[int, typer.Option(help="Largest depth D (blocks); rows for D = 1..depth.")] = 9,
    tokens: Annotated[int, typer.Option("--tokens", "-T", help="Tokens T (= maxout rank emulated).")] = 4,
    m: Annotated[int, typer.Option(help="Per-token width m (maxout width mT).")] = 1,
    q: Annotated[int, typer.Option(help="Input dimension q (1 or 2 for exact counts).")] = 2,
    box: Annotated[tuple[float, float], typer.Option(help="LO HI: the box [LO, HI]^q.")] = (-1.0, 2.0),
    seeds: Annotated[int, typer.Option(help="Random Transformers per depth.")] = 3,
    d_model: Annotated[int, typer.Option(help="Width of the random Transformers.")] = 8,
    grid: Annotated[int, typer.Option(help="Grid points per axis for sampled counts of random networks.")] = 200,
    region_cap: Annotated[
        int, typer.Option(help="Count constructions exactly only while their formula is at most this.")
    ] = 200_000,
    out: Annotated[Path, typer.Option(help="Folder for scan.json, scan.csv and scan.png.")] = Path("scan_out"),
    json_out: Annotated[bool, typer.Option("--json", help="Print the rows as JSON instead of a table.")] = False,
):
    """Region counts against depth beside the Thm 4.4 lower bound for Maxout emulation (Gu, Yang, Zhou 2026)."""
    from regioncount._scan import counted_cells, rows_to_csv, scan as run_scan
    from regioncount.plotting import plot_scan

    if depth < 1:
        fail("--depth must be at least 1", 2)
    if box[0] >= box[1]:
        fail(f"LO must be below HI, got LO={box[0]}, HI={box[1]}", 2)

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
            )

    rows = guarded(run)
    title = f"T={tokens}, m={m}, q={q}, box [{box[0]:g}, {box[1]:g}]^{q}"
    png = plot_scan(rows, title=title)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "scan.json", dump_json(rows) + "\n")
    write_atomic(out / "scan.csv", rows_to_csv(rows))
    write_atomic(out / "scan.png", png)
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
    for col in ("D", "Thm 4.4", "paper", "compact", "rand. line", "rand. sampled", "Chao1", "ReLU-att.", "s"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            str(r["depth"]),
            _fmt(r["bound"]),
            _exact_or_formula(r, "constructed"),
            _exact_or_formula(r, "compact"),
            f"{_fmt(r['random_line_mean'], 0)}±{_fmt(r['random_line_std'], 0)}",
            f"≥{_fmt(r['random_sample_mean'])}±{_fmt(r['random_sample_std'])}",
            _fmt(r["random_chao1_mean"]),
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
    return table


from ._plot import plot, plot_line  # noqa: E402

app.command("plot")(plot)
app.command("plot-line")(plot_line)


def main(argv: list[str] | None = None) -> int:
    """Console entry point: usage errors and library errors become one line on stderr, never a traceback."""
    try:
        rv = app(args=argv, prog_name="regioncount", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except typer.Exit as e:
        code = e.exit_code
    except typer.Abort:
        print("regioncount: aborted", file=sys.stderr)
        code = 130
    except typer.TyperException as e:  # usage errors: unknown option, bad value, missing argument
        print(f"regioncount: error: {e.format_message()}", file=sys.stderr)
        code = getattr(e, "exit_code", 2)
    except RegionCountError as e:
        print(f"regioncount: error: {e}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        print("regioncount: interrupted; nothing half-written was left", file=sys.stderr)
        code = 130
    if argv is None:
        sys.exit(code)
    return code


if __name__ == "__main__":
    main()
