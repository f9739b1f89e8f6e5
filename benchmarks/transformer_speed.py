"""The Gu-Yang-Zhou Thm 4.4 construction (m, T, q, D) = (4, 3, 2, 9) against the Maxout network it emulates,
in the exact plane engine (issue 21): the same regions, and the time and memory each takes.

Each measurement runs in a fresh process: wall seconds timed from outside, CPU seconds (user + system of the
process and of its tile workers, start-up and imports included) and its peak RSS (and its workers' largest).
Cases:

- ``sub-maxout`` / ``sub-transformer``: ``partition_plane`` on the sub-box [0.5, 0.6875]^2 (289,012 regions
  for both), then the exact linear-region count (timed on its own: ``linear_cpu_s``);
- ``whole-maxout`` / ``whole-transformer``: the whole box [-1, 2]^2 (8,254,129 regions by the formula) by
  ``count_tiled`` on ``--tiles`` x ``--tiles`` tiles, on ``--workers`` worker processes where ``count_tiled``
  takes them (one process otherwise).

    python benchmarks/transformer_speed.py                 # the two sub-box cases
    python benchmarks/transformer_speed.py --whole         # and the two whole-box cases (long)
    python benchmarks/transformer_speed.py --cases sub-transformer --json-out out.json

Prints one line per case and writes the rows with the machine and its load to ``--json-out``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import subprocess
import sys
import time

from _machine import ROOT, child_env, cpu_seconds, load_average, machine, write_json

HERE = os.path.dirname(os.path.abspath(__file__))
SUB = (0.5, 0.6875)
CASES = ("sub-maxout", "sub-transformer", "whole-maxout", "whole-transformer")


def _network(kind: str):
    from regioncount import bound_attaining_transformer

    tf, info = bound_attaining_transformer(4, 3, 2, 9, "paper")
    return tf if kind == "transformer" else info["maxout"], info


def run_case(case: str, tiles: int, workers: int) -> dict:
    """One case in this process (meant to run in a fresh one); prints its row as JSON."""
    from regioncount import Box, count_tiled, partition_plane

    where, kind = case.split("-")
    net, info = _network(kind)
    row: dict = {"case": case, "formula": info["construction_regions"]}
    t0, c0 = time.perf_counter(), cpu_seconds()
    if where == "sub":
        part = partition_plane(net, Box(*SUB, 2))
        row["partition_wall_s"] = round(time.perf_counter() - t0, 2)
        row["partition_cpu_s"] = round(cpu_seconds() - c0, 2)
        row["regions"] = part.n_regions
        c1 = cpu_seconds()
        row["linear_regions"] = part.linear_regions()
        row["linear_cpu_s"] = round(cpu_seconds() - c1, 2)
        row["exact_predicates"] = part.stats["exact_predicates"]
        row["predicates"] = part.stats["predicates"]
        row["box"] = [SUB[0], SUB[1]]
    else:
        kw = {}
        if "workers" in inspect.signature(count_tiled).parameters:
            kw["workers"] = workers
        row["workers"] = kw.get("workers", 1)
        res = count_tiled(net, Box(-1.0, 2.0, 2), (tiles, tiles), **kw)
        row["regions"], row["linear_regions"], row["tiles"] = res.regions, res.linear_regions, tiles * tiles
        row["box"] = [-1.0, 2.0]
    row["in_process_wall_s"] = round(time.perf_counter() - t0, 2)
    # the whole process, start-up and imports included, and its tile workers (reaped by now)
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    row["cpu_s"] = round(me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, 2)
    row["peak_rss_mb"] = round(me.ru_maxrss / 1024, 1)
    row["worker_peak_rss_mb"] = round(kids.ru_maxrss / 1024, 1)
    return row


def measure(case: str, tiles: int, workers: int, timeout: float) -> dict:
    """Run ``case`` in a child process; its row plus wall, CPU and peak RSS measured from outside."""
    cmd = [sys.executable, os.path.join(HERE, "transformer_speed.py"), "--one", case]
    cmd += ["--tiles", str(tiles), "--workers", str(workers)]
    load0 = load_average()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=child_env())
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return {"case": case, "error": f"timed out after {timeout} s", "loadavg": [load0, load_average()]}
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"case": case, "error": err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}"}
    row = json.loads(out.strip().splitlines()[-1])
    row["wall_s"] = round(wall, 2)
    row["loadavg"] = [load0, load_average()]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="*", choices=CASES, help="cases to run (default: the sub-box ones)")
    ap.add_argument("--whole", action="store_true", help="add the whole-box cases (8.25 million regions)")
    ap.add_argument("--tiles", type=int, default=8, help="tiles per side for the whole box (default 8)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes for the tiles (default 2)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per case before it is stopped")
    ap.add_argument("--json-out", default=None, help="write the rows and the machine here")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_case(args.one, args.tiles, args.workers)))
        return
    cases = args.cases or list(CASES[:2]) + (list(CASES[2:]) if args.whole else [])
    rows = []
    for case in cases:
        row = measure(case, args.tiles, args.workers, args.timeout)
        rows.append(row)
        print(json.dumps(row), flush=True)
    by = {r["case"]: r for r in rows if "error" not in r}
    for where in ("sub", "whole"):
        m, t = by.get(f"{where}-maxout"), by.get(f"{where}-transformer")
        if m and t:
            print(
                f"{where}: transformer / maxout = {t['cpu_s'] / m['cpu_s']:.2f}x CPU, "
                f"{t['wall_s'] / m['wall_s']:.2f}x wall, {t['peak_rss_mb'] / m['peak_rss_mb']:.2f}x peak RSS; "
                f"regions {t['regions']} / {m['regions']}"
            )
    if args.json_out:
        write_json(args.json_out, {"machine": machine(), "rows": rows}, newline=True)


if __name__ == "__main__":
    main()
