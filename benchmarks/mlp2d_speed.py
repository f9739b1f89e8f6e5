"""Speed of exact 2D counts of ReLU MLPs (issue 21): the whole ``regioncount count`` process on the torch
2->100x5 net, the engine's steps in-library, and 10^6 / 10^7 regions whole and by tiles.

Every row runs in a fresh process, timed from outside: wall seconds, CPU seconds (user + system of the process
and of the worker processes it forked and waited for, from ``wait4``) and peak RSS (the largest of the process
and its workers). Rows:

- ``cli``: ``regioncount count shared/data/torch_mlp_w100_d5_s0.npz --box -2 2 --json`` (46,122 regions, linear
  regions included), as given, with ``--no-linear``, and with ``REGIONCOUNT_WORKERS=1`` (no worker processes);
- ``steps``: in-library CPU seconds of ``partition_plane`` and ``linear_regions`` on that net (best of 3);
- ``1e6``: the 2->1800 one-layer torch-init net on [-2, 2]^2 (1,030,468 regions): one partition, 16 tiles,
  ``count_regions`` as it chooses (tiles=-1 in the row: auto tiles) and the whole ``regioncount count`` process;
- ``1e7`` (with ``--big``): the 2->5700 net (~10^7 regions) as ``count_regions`` chooses and by 16 tiles.

Children get one BLAS thread (``OPENBLAS_NUM_THREADS=1``) unless ``--blas-threads`` says otherwise (0: the
variable unset, as a user's shell has it; the command then sets one thread itself), and may
write bytecode caches (``PYTHONDONTWRITEBYTECODE`` is dropped: a user's installed package has them; without
them every process compiles the library again). Record the load average beside the numbers (it is printed).

    python benchmarks/mlp2d_speed.py              # cli, steps, 1e6
    python benchmarks/mlp2d_speed.py --only cli   # one group
    python benchmarks/mlp2d_speed.py --big        # also 10^7 by tiles (minutes)
    python benchmarks/mlp2d_speed.py --only 1e7   # just 10^7
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from _machine import ROOT, child_env, cpu_seconds, machine

NPZ = "/work/shared/data/torch_mlp_w100_d5_s0.npz"
ME = os.path.abspath(__file__)


def _env(blas: int | None, workers: int | None = None) -> dict:
    env = child_env(ROOT)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if blas is not None:
        env["OPENBLAS_NUM_THREADS"] = str(blas)
    else:
        env.pop("OPENBLAS_NUM_THREADS", None)
    if workers is not None:
        env["REGIONCOUNT_WORKERS"] = str(workers)
    return env


def _usage_of(cmd: list[str], env: dict, timeout: float = 900) -> dict:
    """Wall, CPU and peak RSS of ``cmd`` from ``wait4`` (its own and its waited-for children's)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    # read the pipes in full first (a large output would otherwise block the child), then reap with rusage
    out = p.stdout.read() if p.stdout else b""
    err = p.stderr.read() if p.stderr else b""
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return {
        "rc": p.returncode,
        "wall_s": round(wall, 3),
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
        "peak_rss_mb": round(ru.ru_maxrss / 1024, 1),
        "stdout": out.decode(),
        "stderr": err.decode()[-2000:],
    }


#: The command as a user runs it (``python -m``: the module is the command, so its start-up settings apply).
CLI = [sys.executable, "-m", "regioncount_cli.main"]


def cli_rows(blas: int | None, repeat: int) -> list[dict]:
    cli = CLI
    base = [*cli, "count", NPZ, "--box", "-2", "2", "--json"]
    _usage_of(base, _env(blas))  # one warm-up run: bytecode caches written, files in the page cache
    rows = []
    for name, cmd, workers in [
        ("cli", base, None),
        ("cli --no-linear", [*base, "--no-linear"], None),
        ("cli, REGIONCOUNT_WORKERS=1", base, 1),
    ]:
        best = None
        for _ in range(repeat):
            r = _usage_of(cmd, _env(blas, workers))
            if r["rc"] != 0:
                raise SystemExit(f"{name} failed: {r['stderr']}")
            if best is None or r["wall_s"] < best["wall_s"]:
                best = r
        assert best is not None
        doc = json.loads(best.pop("stdout"))
        best.pop("stderr")
        best.update(row=name, regions=doc["regions"], linear_regions=doc["linear_regions"], seconds=doc["seconds"])
        rows.append(best)
    return rows


# -- child modes: one measurement in this process --------------------------------------------------------------


def child_steps() -> dict:
    import regioncount as rc

    net = rc.load_model(NPZ)
    box = rc.Box(-2, 2, 2)
    best: dict = {}
    for _ in range(3):
        c0 = cpu_seconds()
        part = rc.partition_plane(net, box)
        c1 = cpu_seconds()
        adj = part.adjacency()
        c2 = cpu_seconds()
        lin = part.linear_regions()
        c3 = cpu_seconds()
        got = {"partition_plane_cpu_s": c1 - c0, "adjacency_cpu_s": c2 - c1, "linear_merge_cpu_s": c3 - c2}
        best = got if not best else {k: min(best[k], v) for k, v in got.items()}
    out = {k: round(v, 3) for k, v in best.items()}
    out.update(regions=part.n_regions, linear_regions=lin, pairs=int(adj.shape[0]))
    out.update({k: part.stats.get(k) for k in ("linear_float", "linear_exact")})
    return out


def child_big(width: int, tiles: int) -> dict:
    import regioncount as rc

    net = rc.random_mlp(2, [width], seed=0, init="torch")
    box = rc.Box(-2.0, 2.0, 2)
    t0 = time.perf_counter()
    if tiles < 0:  # the library's default: count_regions chooses (tiles where the count is large)
        res = rc.count_regions(net, box)
        regions, linear = res["regions"], res["linear_regions"]
        extra = {k: res.get(k) for k in ("tiles", "tiles_chosen", "pieces", "linear_exact")}
    elif tiles:
        res = rc.count_tiled(net, box, tiles)
        regions, linear, extra = res.regions, res.linear_regions, {"pieces": res.pieces}
    else:
        part = rc.partition_plane(net, box)
        t1 = time.perf_counter()
        regions, linear = part.n_regions, part.linear_regions()
        extra = {"partition_wall_s": round(t1 - t0, 3), "linear_wall_s": round(time.perf_counter() - t1, 3)}
    return {"width": width, "tiles": tiles, "regions": regions, "linear_regions": linear, **extra}


def cli_big_row(width: int, blas: int | None) -> dict:
    """The whole ``regioncount count`` process on the 2->width net, saved to a temporary .npz first."""
    import tempfile

    import regioncount as rc

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"w{width}.npz")
        rc.save_model(rc.random_mlp(2, [width], seed=0, init="torch"), path)
        r = _usage_of([*CLI, "count", path, "--box", "-2", "2", "--json"], _env(blas), timeout=1800)
    if r["rc"] != 0:
        return {"row": f"cli 2->{width}", "error": r["stderr"]}
    doc = json.loads(r["stdout"])
    keep = ("regions", "linear_regions", "exact", "tiles", "tiles_chosen", "linear_exact")
    return {k: doc.get(k) for k in keep} | dict(
        wall_s=r["wall_s"], cpu_s=r["cpu_s"], peak_rss_mb=r["peak_rss_mb"], row=f"cli count 2->{width}"
    )


def big_row(width: int, tiles: int, blas: int | None) -> dict:
    r = _usage_of([sys.executable, ME, "--child", "big", str(width), str(tiles)], _env(blas), timeout=1800)
    if r["rc"] != 0:
        return {"row": f"{width} tiles={tiles}", "error": r["stderr"]}
    doc = json.loads(r["stdout"].strip().splitlines()[-1])
    how = "count_regions (auto)" if tiles < 0 else f"tiles={tiles}"
    doc.update(wall_s=r["wall_s"], cpu_s=r["cpu_s"], peak_rss_mb=r["peak_rss_mb"], row=f"2->{width}, {how}")
    return doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["cli", "steps", "1e6", "1e7"], help="one group of rows")
    ap.add_argument("--big", action="store_true", help="also the 10^7-region net by 16 tiles (minutes)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per cli row (the fastest is kept)")
    ap.add_argument("--blas-threads", type=int, default=1, help="OPENBLAS_NUM_THREADS of the children (0: unset)")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind = args.child[0]
        doc = child_steps() if kind == "steps" else child_big(int(args.child[1]), int(args.child[2]))
        print(json.dumps(doc))
        return
    blas = args.blas_threads or None
    groups = [args.only] if args.only else ["cli", "steps", "1e6"] + (["1e7"] if args.big else [])
    print(json.dumps({"machine": machine(), "blas_threads": blas}))
    for g in groups:
        if g == "cli":
            rows = cli_rows(blas, args.repeat)
        elif g == "steps":
            r = _usage_of([sys.executable, ME, "--child", "steps"], _env(blas))
            rows = [dict(json.loads(r["stdout"].strip().splitlines()[-1]), row="steps")]
        elif g == "1e6":
            rows = [big_row(1800, 0, blas), big_row(1800, 16, blas), big_row(1800, -1, blas), cli_big_row(1800, blas)]
        else:
            rows = [big_row(5700, -1, blas), big_row(5700, 16, blas)]
        for row in rows:
            print(json.dumps(row | {"loadavg": [round(x, 2) for x in os.getloadavg()]}), flush=True)


if __name__ == "__main__":
    main()
