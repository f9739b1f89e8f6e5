"""The cost curve of exact 2D counts from 10^4 to 10^7 regions, whole and by tiles, and the speed-up of
tiles on 1 and 2 Dask workers (issue 10).

Networks: one ReLU layer of ``n`` units with PyTorch's default init (``random_mlp(2, [n], init="torch")``)
on [-2, 2]^2, whose region count grows like n^2 (n = 180 -> ~10^4, 1800 -> ~10^6, 5700 -> ~10^7). Each
measurement runs in a fresh process, so its peak RSS is its own: regions, linear regions, wall seconds,
regions/s, peak RSS and its growth over the process before counting, bytes per region (that growth over
the regions). With Dask workers the peak is the largest worker's (``client.run``), plus the client's.

    python benchmarks/scale.py                  # the curve (10^4..10^6 whole, 10^4..10^7 by 16 tiles) + speed-up
    python benchmarks/scale.py --quick          # 10^4 and 10^5 only, speed-up at 10^5
    python benchmarks/scale.py --sizes 1800 --tiles 16 --workers 2    # one measurement
    python benchmarks/scale.py --speedup 1800   # 16 tiles on 1, 2, 1, 2 workers (alternating, against drift)
    python benchmarks/scale.py --construction 4,3,2,9,paper --tiles 16   # Thm 4.4 construction, 8.25e6
    python benchmarks/scale.py --construction 4,3,2,9,maxout --tiles 16  # the Maxout net it emulates
    python benchmarks/scale.py --plot out.json  # redraw the figure from a saved run

Writes the rows as JSON lines to ``--json-out`` and the figure to ``--figure``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from _machine import Clock, load_average, machine

HERE = os.path.dirname(os.path.abspath(__file__))
WIDTHS = {"1e4": 180, "1e5": 570, "1e6": 1800, "1e7": 5700}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_one(width: int, tiles: int | None, workers: int | None, seed: int = 0) -> dict:
    """One count in this process (meant to run in a fresh one)."""
    from regioncount import Box, count_tiled, partition_plane, random_mlp

    net = random_mlp(2, [width], seed=seed, init="torch")
    box = Box(-2.0, 2.0, 2)
    row = {"width": width, "tiles": tiles, "workers": workers}
    if workers:
        from regioncount.engines import dask_client

        t_start = time.perf_counter()
        with dask_client(workers=workers) as client:
            # workers up and the library imported in each before the clock starts
            client.run(lambda: __import__("regioncount.engines._tiles"))
            row["cluster_start_s"] = round(time.perf_counter() - t_start, 2)
            base_w = max(client.run(_rss_mb).values())
            base = _rss_mb()
            cpu_w = sum(client.run(time.process_time).values())
            t0, c0 = time.perf_counter(), time.process_time()
            res = count_tiled(net, box, tiles, client=client)
            wall = time.perf_counter() - t0
            cpu = time.process_time() - c0 + sum(client.run(time.process_time).values()) - cpu_w
            peak_w = max(client.run(_rss_mb).values())
        peak = _rss_mb()
        row.update(peak_worker_rss_mb=round(peak_w, 1), growth_mb=round(peak - base + peak_w - base_w, 1))
        regions, linear = res.regions, res.linear_regions
        row["pieces"] = res.pieces
    else:
        with Clock() as c:
            if tiles:
                res = count_tiled(net, box, tiles)
                regions, linear = res.regions, res.linear_regions
                row["pieces"] = res.pieces
            else:
                part = partition_plane(net, box)
                regions, linear = part.n_regions, part.linear_regions()
                row["partition_mb"] = round(part.nbytes / 2**20, 1)
        wall, cpu, peak = c.wall, c.cpu, c.rss1 / 1024
        row["growth_mb"] = round(peak - c.rss0 / 1024, 1)
    row.update(
        regions=regions,
        linear_regions=linear,
        seconds=round(wall, 2),
        cpu_seconds=round(cpu, 2),
        regions_per_s=round(regions / wall),
        peak_rss_mb=round(peak, 1),
        bytes_per_region=round(row["growth_mb"] * 2**20 / regions),
        loadavg=load_average(),
    )
    return row


def measure_construction(spec: str, tiles: int) -> dict:
    """The Thm 4.4 construction ``"m,T,q,D,layout"`` (layout paper, compact, or maxout for the Maxout network
    it emulates) counted by ``tiles`` in this process."""
    from regioncount import Box, bound_attaining_transformer, count_tiled

    m, T, q, D, layout = spec.split(",")
    # layout "maxout": the Maxout network the construction emulates (same regions, by DESIGN's compiler)
    net, info = bound_attaining_transformer(
        int(m), int(T), int(q), int(D), layout="paper" if layout == "maxout" else layout
    )
    if layout == "maxout":
        net = info["maxout"]
    with Clock() as c:
        res = count_tiled(net, Box(*info["box"]), tiles)
    wall, cpu, base, peak = c.wall, c.cpu, c.rss0 / 1024, c.rss1 / 1024
    return {
        "construction": spec,
        "tiles": tiles,
        "regions": res.regions,
        "linear_regions": res.linear_regions,
        "formula": info["construction_regions"],
        "bound": info["bound"],
        "pieces": res.pieces,
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "peak_rss_mb": round(peak, 1),
        "bytes_per_region": round((peak - base) * 2**20 / res.regions),
        "loadavg": load_average(),
    }


def run_child(width: int, tiles: int | None, workers: int | None) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", str(width), str(tiles or 0), str(workers or 0)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=HERE)
    return json.loads(out.stdout.strip().splitlines()[-1])


def plot(rows: list[dict], path: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for label, sel, mk in (
        ("whole domain", lambda r: not r["tiles"], "o"),
        ("16 tiles, one after the other", lambda r: r["tiles"] and not r["workers"], "s"),
    ):
        pts = sorted(((r["regions"], r) for r in rows if sel(r)), key=lambda p: p[0])
        if not pts:
            continue
        x = [p[0] for p in pts]
        (line,) = axes[0].plot(x, [p[1]["regions_per_s"] for p in pts], mk + "-", label=f"{label}: per wall s")
        if all("cpu_seconds" in p[1] for p in pts):
            cps = [p[0] / p[1]["cpu_seconds"] for p in pts]
            axes[0].plot(x, cps, mk + "--", color=line.get_color(), label=f"{label}: per CPU s")
        axes[1].plot(x, [p[1]["peak_rss_mb"] for p in pts], mk + "-", label=label)
        axes[2].plot(x, [p[1]["bytes_per_region"] for p in pts], mk + "-", label=label)
    titles = ("exact 2D count speed (2 cores, shared)", "peak RSS", "peak RSS growth per region")
    ylabels = ("regions per second", "MB", "bytes")
    for ax, t, y in zip(axes, titles, ylabels, strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("regions")
        ax.set_ylabel(y)
        ax.set_title(t)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[1].set_yscale("log")
    axes[2].set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=3, type=int, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", type=int, nargs="*", help="layer widths to run (default: the curve)")
    ap.add_argument("--tiles", type=int, default=None, help="with --sizes: tiles (default: whole domain)")
    ap.add_argument("--workers", type=int, default=None, help="with --sizes: Dask workers")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--construction", help="m,T,q,D,layout: count the Thm 4.4 construction by --tiles (default 16)")
    ap.add_argument(
        "--speedup", type=int, metavar="WIDTH", help="only the worker speed-up at this width: 1, 2, 1, 2 workers"
    )
    ap.add_argument("--no-1e7", action="store_true", help="skip the 10^7-region run (minutes)")
    ap.add_argument("--json-out", default=os.path.join(HERE, "scale.json"))
    ap.add_argument("--figure", default=os.path.join(HERE, "scale.png"))
    ap.add_argument("--plot", help="redraw the figure from a saved --json-out file and exit")
    args = ap.parse_args()
    if args.child:
        w, t, k = args.child
        print(json.dumps(measure_one(w, t or None, k or None)))
        return
    if args.construction:
        print(json.dumps(measure_construction(args.construction, args.tiles or 16) | {"machine": machine()}))
        return
    if args.plot:
        with open(args.plot) as f:
            rows = [json.loads(line) for line in f if line.strip() and '"width"' in line]
        plot(rows, args.figure)
        return
    if args.speedup:
        plan = [(args.speedup, args.tiles or 16, k) for k in (1, 2, 1, 2)]
    elif args.sizes:
        plan = [(w, args.tiles, args.workers) for w in args.sizes]
    elif args.quick:
        plan = [(w, t, None) for w in (180, 570) for t in (None, 16)] + [(570, 16, 1), (570, 16, 2)]
    else:
        plan = [(w, t, None) for w in (180, 570, 1800) for t in (None, 16)]
        plan += [(1800, 16, 1), (1800, 16, 2)]
        if not args.no_1e7:
            plan.append((5700, 16, None))
    print(json.dumps({"machine": machine()}))
    rows = []
    for w, t, k in plan:
        r = run_child(w, t, k)
        rows.append(r)
        print(json.dumps(r), flush=True)
    with open(args.json_out, "w") as f:
        f.write(json.dumps({"machine": machine()}) + "\n")
        for r in rows:
            f.write(json.dumps(r) + "\n")
    if len(rows) > 1 and not args.speedup:
        plot(rows, args.figure)


if __name__ == "__main__":
    main()
