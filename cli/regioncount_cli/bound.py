"""``regioncount bound``: list the bounds of the literature or evaluate one in exact integer arithmetic.

Imports neither NumPy nor JAX: the bounds are pure Python."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from . import _validate as checks
from ._common import console, dump_json, fail, parse_ints
from ._validate import MemoryCapOpt, at_least

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
    from regioncount.theory import BOUNDS, estimate_size

    if name is None:
        given = [o for o, val in (("--widths", widths), ("--inputs", n0), ("--k", k), ("--n", n), ("--m", m),
                                  ("--tokens", tokens), ("--depth", depth)) if val is not None]  # fmt: skip
        if given:
            checks.not_applicable(given[0], "name a bound to evaluate (`regioncount bound` lists them)")
        rows: list[dict[str, Any]] = [
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
        from rich.table import Table

        table = Table(title="bounds (regioncount bound NAME --help for options)")
        for col in ("name", "kind", "parameters", "source"):
            table.add_column(col)
        for r in rows:
            table.add_row(r["name"], r["kind"], " ".join(r["options"]), r["citation"])
        console().print(table)
        return
    if name not in BOUNDS:
        fail(f"unknown bound {name!r}; one of: {', '.join(BOUNDS)}", 2)
    spec = BOUNDS[name]
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
    console().print(f"{name}({args}) = [bold]{shown}[/bold]   ({spec.kind} bound; {spec.citation})")
