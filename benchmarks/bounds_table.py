"""Counts against bounds: the constructions of DESIGN §5 counted exactly, beside the formulas of DESIGN §4.

Every row builds a network that is meant to attain a lower bound (ReLU and Maxout products in R^2, the
Thm 4.4 transformer of Gu, Yang, Zhou 2026, arXiv 2603.03084), counts its activation regions on a box that
holds all its breakpoints, and prints the count beside the bound, the construction's own closed form and
the time taken (build + count, one cold run). Counts are exact: ``line`` engine for 1 input, ``plane``
for 2, ``space`` (polytopes) for 3.

    python benchmarks/bounds_table.py                    # the table
    python benchmarks/bounds_table.py --quick            # skip the slowest rows
    python benchmarks/bounds_table.py --json out.json    # also write the rows as JSON

Exit status 1 when an exact count differs from its construction's closed form.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable

from _machine import machine, write_json

from regioncount import Box, Segment, partition_plane, partition_space, walk_line
from regioncount.theory import (
    bound_attaining_transformer,
    maxout_lower,
    maxout_upper_mrz,
    product_maxout,
    product_maxout_regions,
    product_relu,
    product_relu_regions,
    relu_lower_serra,
    relu_upper_serra,
)

LO, HI = -1.0, 2.0  # the box [-1, 2]^n0 holds every crossing of the product constructions (DESIGN §5)


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the table: ``build()`` returns ``(network, n0, extra)``, the rest are exact ints."""

    name: str
    params: str
    build: Callable[[], tuple]
    bound_name: str
    bound: int
    formula: int  # the construction's own closed form
    upper_name: str | None = None
    upper: int | None = None
    slow: bool = False


def relu_row(widths, n0=2, slow=False) -> Row:
    return Row(
        name="ReLU product",
        params=f"widths {widths}, n0={n0}",
        build=lambda: (product_relu(widths, n0), n0, {}),
        bound_name="relu_lower_serra (Serra et al. 2018, Thm 6)",
        bound=relu_lower_serra(widths, n0),
        formula=product_relu_regions(widths, n0),
        upper_name="relu_upper_serra (Serra et al. 2018, Thm 1)",
        upper=relu_upper_serra(widths, n0),
        slow=slow,
    )


def maxout_row(widths, k=3, n0=2, slow=False) -> Row:
    return Row(
        name="Maxout product",
        params=f"widths {widths}, k={k}, n0={n0}",
        build=lambda: (product_maxout(widths, n0, k), n0, {}),
        bound_name="maxout_lower",
        bound=maxout_lower(widths, n0, k),
        formula=product_maxout_regions(widths, n0, k),
        upper_name="maxout_upper_mrz (Montufar, Ren, Zhang 2022)",
        upper=maxout_upper_mrz(widths, n0, k),
        slow=slow,
    )


def transformer_row(m, T, q, D, layout="paper", slow=False) -> Row:
    _, info = bound_attaining_transformer(m, T, q, D, layout=layout)

    def build():
        tf, inf = bound_attaining_transformer(m, T, q, D, layout=layout)
        extra = {"blocks": tf.depth, "d_model": tf.d_model, "attainable": inf["attainable"], "layout": layout}
        return tf, q, extra

    return Row(
        name=f"Thm 4.4 transformer ({layout})",
        params=f"m={m}, T={T}, q={q}, D={D}",
        build=build,
        bound_name="transformer_maxout_lower (Gu, Yang, Zhou 2026, Thm 4.4)",
        bound=info["bound"],
        formula=info["construction_regions"],
        slow=slow,
    )


def rows() -> list[Row]:
    return [
        relu_row((6, 3)),
        relu_row((6, 6, 3)),
        maxout_row((4, 2)),
        maxout_row((4, 4, 2)),
        # the known values of DESIGN §4
        transformer_row(1, 2, 1, 6),
        transformer_row(2, 2, 1, 6),
        transformer_row(1, 2, 2, 6),
        transformer_row(4, 3, 2, 6, slow=True),
        transformer_row(2, 3, 3, 6, slow=True),
        # n0 = 3 (space engine): the product constructions and Thm 4.4 in both layouts
        relu_row((9, 4), n0=3),
        maxout_row((6, 6), n0=3, slow=True),
        # the same constructions in the compact layout: L + 1 blocks instead of 3L
        transformer_row(1, 2, 2, 6, layout="compact"),
        transformer_row(4, 3, 2, 6, layout="compact", slow=True),
        transformer_row(2, 3, 3, 6, layout="compact", slow=True),
        # DESIGN §4's caveat: p = floor(mT/q) odd with T >= 3, the construction falls short of the formula
        transformer_row(1, 3, 1, 6),
        transformer_row(2, 3, 2, 6),
    ]


def count(net, n0: int) -> dict:
    box = Box(LO, HI, dim=n0)
    if n0 == 1:
        return {"count": walk_line(net, Segment(box.lo, box.hi)).activation_pieces, "method": "line", "exact": True}
    if n0 == 2:
        return {"count": partition_plane(net, box).n_regions, "method": "plane", "exact": True}
    return {"count": partition_space(net, box).n_regions, "method": "space", "exact": True}


def measure(row: Row) -> dict:
    t0 = time.perf_counter()
    net, n0, extra = row.build()
    res = count(net, n0)
    seconds = time.perf_counter() - t0
    out = {
        "name": row.name,
        "params": row.params,
        "bound_name": row.bound_name,
        "bound": row.bound,
        "construction_formula": row.formula,
        "upper_name": row.upper_name,
        "upper": row.upper,
        **res,
        **extra,
        "seconds": round(seconds, 3),
    }
    out["equals_bound"] = bool(res["exact"] and res["count"] == row.bound)
    out["matches_formula"] = bool(res["count"] == row.formula) if res["exact"] else None
    return out


def render(results: list[dict]) -> str:
    head = (
        f"{'construction':<30} {'parameters':<28} {'blocks':>6} {'bound':>9} {'formula':>9} {'count':>12} "
        f"{'method':<16} {'= bound':>7} {'s':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        cnt = f"{r['count']:,}" if r["exact"] else f">= {r['count']:,}"
        eq = "yes" if r["equals_bound"] else ("no" if r["exact"] else "n/a")
        lines.append(
            f"{r['name']:<30} {r['params']:<28} {r.get('blocks', ''):>6} {r['bound']:>9,} {r['construction_formula']:>9,} "
            f"{cnt:>12} {r['method']:<16} {eq:>7} {r['seconds']:>7.2f}"
        )
    lines.append("")
    lines.append(
        "bound: the lower bound the construction targets; formula: the construction's own closed form; count: exact "
        "activation regions on [-1, 2]^n0 (line: 1 input, plane: 2, space: 3)."
    )
    for r in results:
        if r.get("upper") is not None:
            lines.append(f"  {r['name']} {r['params']}: upper bound {r['upper_name']} = {r['upper']:,}")
        if r.get("attainable") is False:
            lines.append(
                f"  {r['name']} {r['params']}: p = floor(mT/q) odd with T >= 3, the construction cannot attain the bound "
                "(DESIGN §4 caveat); its count is compared with its own formula"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the slowest rows (tens of thousands of regions)")
    ap.add_argument("--json", default=None, metavar="FILE", help="write the rows and the machine as JSON to FILE")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    todo = [r for r in rows() if not (args.quick and r.slow)]
    results = [measure(r) for r in todo]
    total = time.perf_counter() - t0
    print(render(results))
    print(f"\n{len(results)} rows in {total:.1f} s" + (" (--quick: slow rows skipped)" if args.quick else ""))
    if args.json:
        doc = {
            "benchmark": "bounds_table",
            "quick": args.quick,
            "machine": machine(),
            "seconds": total,
            "rows": results,
        }
        write_json(args.json, doc)
    bad = [r for r in results if r["matches_formula"] is False]
    for r in bad:
        print(
            f"MISMATCH: {r['name']} {r['params']}: counted {r['count']:,}, the construction's formula says {r['construction_formula']:,}"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
