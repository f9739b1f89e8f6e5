"""regioncount beside edge subdivision (Berzins 2023) on the networks of issue 21, in one run: regions from
both, CPU seconds, wall seconds and ratios.

Edge subdivision is ``benchmarks/edge_subdivision.py``, our own float32 NumPy implementation of the method,
run on this machine's CPU (Berzins published a GPU implementation and a GPU claim, which this does not
reproduce). Each measurement is its own fresh process, one after the other:

- ``rc process``: the whole ``regioncount count MODEL --box LO HI --json --no-linear`` command (start-up,
  imports, loading, the activation regions: what edge subdivision computes), and the default command with
  linear regions too (``rc process + linear``);
- ``rc library``: ``partition_plane`` (2D) / ``partition_space`` (3D, 4D) alone, in-process, after a
  warm-up call on a small network of the same input dimension (lazy imports, not this network's caches); its
  CPU seconds include those of the worker processes the engine forks;
- ``es library``: ``edge_subdivision`` alone, in-process (NumPy only), after the same warm-up.

CPU seconds of a process are its user + system time as the parent's children's times (``os.times``: the
``getrusage(RUSAGE_CHILDREN)`` figures, in clock ticks of 10 ms); in-process they are ``time.process_time``.
Ratios are edge subdivision's CPU seconds over regioncount's (above 1:
regioncount is faster). The load average is recorded with every row: on a shared machine wall time moves
with it, CPU time much less.

    OPENBLAS_NUM_THREADS=1 python benchmarks/side_by_side.py            # table, and benchmarks/side_by_side.json
    python benchmarks/side_by_side.py --only 3→ --json /tmp/s.json       # some rows, elsewhere
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from _machine import ROOT, child_env, load_average, machine, write_json
from peers import _fmt, _run  # _run: a fresh process timed from outside (its JSON, wall, children's CPU s)

DATA = ROOT.parent / "shared" / "data"
HERE = Path(__file__).resolve().parent

#: (name, input dim, hidden widths, seed, box half-width, shared data file or None). Nets without a file are
#: torch-default init drawn in NumPy (``random_mlp(..., init="torch")``: weights and biases U(±1/sqrt(fan_in))).
NETS = [
    ("torch 2→100×5", 2, (100,) * 5, 0, 2.0, "torch_mlp_w100_d5_s0.npz"),
    ("torch 2→16×3", 2, (16,) * 3, 0, 2.0, "torch_mlp_w16_d3_s0.npz"),
    ("2→128×3 s0", 2, (128,) * 3, 0, 2.0, None),
    ("2→256×2 s0", 2, (256,) * 2, 0, 2.0, None),
    ("2→256×2 s1", 2, (256,) * 2, 1, 2.0, None),
    ("2→256×2 s2", 2, (256,) * 2, 2, 2.0, None),
    ("3→16×3 s0", 3, (16,) * 3, 0, 2.0, None),
    ("4→10×2 s0", 4, (10,) * 2, 0, 2.0, None),
    ("3→8×4 s0", 3, (8,) * 4, 0, 2.0, None),
    ("3→32×3 s0", 3, (32,) * 3, 0, 1.0, None),
]

#: Regions the issue names for its files (a changed file or box would show here first).
EXPECTED = {"torch 2→100×5": 46122}

_RC_LIBRARY = r"""
import json, resource, sys, time
import regioncount as rc
net = rc.load_network(sys.argv[1])
q, r = net.input_dim, float(sys.argv[2])
engine = rc.partition_plane if q == 2 else rc.partition_space
engine(rc.random_mlp(q, (4, 4), seed=99, init="torch"), rc.Box([-1.0] * q, [1.0] * q))  # warm-up
def kids():  # CPU seconds of the worker processes the engine forked and reaped
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime
t, c, k = time.perf_counter(), time.process_time(), kids()
part = engine(net, rc.Box([-r] * q, [r] * q))
cpu = time.process_time() - c + kids() - k
print(json.dumps({"regions": int(part.n_regions), "wall": time.perf_counter() - t, "cpu": cpu}))
"""

_ES_LIBRARY = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[3])
from edge_subdivision import edge_subdivision, hidden_layers, timed
weights, biases = hidden_layers(sys.argv[1])
q, r = weights[0].shape[1], float(sys.argv[2])
rng = np.random.default_rng(99)
edge_subdivision([rng.uniform(-1, 1, (4, q)), rng.uniform(-1, 1, (4, 4))], [np.zeros(4)] * 2, [-1.0] * q, [1.0] * q)
print(json.dumps(timed(weights, biases, [-r] * q, [r] * q)))
"""


def model_file(name: str, q: int, widths, seed: int, shared: str | None, folder: Path) -> Path:
    """The shared data file the issue names, else the torch-init net saved as a Sequential state dict."""
    if shared:
        path = DATA / shared
        if not path.exists():
            raise SystemExit(f"error: {path} is not here")
        return path
    import regioncount as rc

    net = rc.random_mlp(q, widths, seed=seed, init="torch")
    path = folder / f"net{len(list(folder.iterdir()))}.npz"
    arrays = {}
    for i, (W, b) in enumerate(zip(net.weights, net.biases, strict=True)):
        arrays[f"{2 * i}.weight"], arrays[f"{2 * i}.bias"] = np.asarray(W), np.asarray(b)
    np.savez(path, **arrays)
    return path


def measure(name, q, widths, seed, r, shared, folder: Path, timeout: float, linear: bool) -> dict:
    path = model_file(name, q, widths, seed, shared, folder)
    env = child_env()
    row: dict = {"network": name, "input_dim": q, "widths": list(widths), "seed": seed, "box": [-r, r]}
    row["model"] = shared or f"random_mlp({q}, {tuple(widths)}, seed={seed}, init='torch')"
    row["load_before"] = load_average()
    cli = [sys.executable, "-m", "regioncount_cli.main", "count", str(path), "--box", str(-r), str(r), "--json"]
    proc = _run([*cli, "--no-linear"], env, timeout)
    row.update(rc_regions=proc.get("regions"), rc_exact=proc.get("exact"))
    row.update(rc_process_cpu=proc.get("process_cpu"), rc_process_wall=proc.get("process_wall"))
    if "error" in proc:
        row["rc_error"] = proc["error"]
    if linear:
        full = _run(cli, env, timeout)
        row.update(rc_linear_regions=full.get("linear_regions"))
        row.update(rc_full_process_cpu=full.get("process_cpu"), rc_full_process_wall=full.get("process_wall"))
        if "error" in full:
            row["rc_full_error"] = full["error"]
    lib = _run([sys.executable, "-c", _RC_LIBRARY, str(path), str(r)], env, timeout)
    row.update(rc_library_cpu=lib.get("cpu"), rc_library_wall=lib.get("wall"))
    es = _run([sys.executable, "-c", _ES_LIBRARY, str(path), str(r), str(HERE)], env, timeout)
    row.update(es_regions=es.get("regions"), es_library_cpu=es.get("cpu"), es_library_wall=es.get("wall"))
    row.update({f"es_{k}": es.get(k) for k in ("face_anomalies", "vertex_anomalies", "ties", "vertices", "edges")})
    if "error" in es:
        row["es_error"] = es["error"]
    if row["es_library_cpu"] and row["rc_process_cpu"]:
        row["ratio_process"] = row["es_library_cpu"] / row["rc_process_cpu"]
    if row["es_library_cpu"] and row["rc_library_cpu"]:
        row["ratio_library"] = row["es_library_cpu"] / row["rc_library_cpu"]
    if row["rc_regions"] and row["rc_library_cpu"]:
        row["rc_library_us_per_region"] = 1e6 * row["rc_library_cpu"] / row["rc_regions"]
    row["counts_agree"] = row["rc_regions"] is not None and row["rc_regions"] == row["es_regions"]
    if name in EXPECTED and row["rc_regions"] != EXPECTED[name]:
        row["unexpected"] = f"expected {EXPECTED[name]} regions"
    row["load_after"] = load_average()
    return row


def table(rows: list[dict]) -> str:
    head = (
        "| network | box | regions (rc) | regions (es) | rc process CPU s / wall | rc process + linear CPU s / wall "
        "| rc library CPU s / wall | es library CPU s / wall | es ÷ rc (process, library CPU) | rc µs/region (library CPU) | load |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        es_regions = _fmt(r.get("es_regions"))
        if not r["counts_agree"]:
            es_regions += " **differs**"
        for key in ("rc_error", "es_error", "unexpected"):
            if r.get(key):
                es_regions += f" ({key}: {r[key]})"
        lo, hi = r["box"]
        lines.append(
            f"| {r['network']} | [{lo:g}, {hi:g}]^{r['input_dim']} | {_fmt(r.get('rc_regions'))} | {es_regions} | "
            f"{_fmt(r.get('rc_process_cpu'), 2)} / {_fmt(r.get('rc_process_wall'), 2)} | "
            f"{_fmt(r.get('rc_full_process_cpu'), 2)} / {_fmt(r.get('rc_full_process_wall'), 2)} | "
            f"{_fmt(r.get('rc_library_cpu'))} / {_fmt(r.get('rc_library_wall'))} | "
            f"{_fmt(r.get('es_library_cpu'))} / {_fmt(r.get('es_library_wall'))} | "
            f"{_fmt(r.get('ratio_process'), 2)}×, {_fmt(r.get('ratio_library'), 2)}× | "
            f"{_fmt(r.get('rc_library_us_per_region'), 1)} | {r['load_before'][0]:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description="regioncount beside edge subdivision on issue 21's networks, in one run")
    ap.add_argument("--only", help="only networks whose name contains this")
    ap.add_argument("--no-linear-run", action="store_true", help="skip the default command (with linear regions)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per measurement")
    ap.add_argument(
        "--json",
        default=None,
        help="where to write the records (default: side_by_side.json beside this script, for a run of every network; "
        "a run with --only writes a file only when this is given)",
    )
    args = ap.parse_args()
    nets = [n for n in NETS if not args.only or args.only in n[0]]
    start = machine()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, q, widths, seed, r, shared in nets:
            row = measure(name, q, widths, seed, r, shared, Path(tmp), args.timeout, not args.no_linear_run)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    text = table(rows)
    print(text)
    doc = {"machine": start, "load_at_end": load_average(), "command": sys.argv, "rows": rows, "table": text}
    out = args.json if args.json or args.only else str(HERE / "side_by_side.json")  # a partial run keeps the record
    if out:
        write_json(out, doc, newline=True)
    ok = all(r["counts_agree"] and "unexpected" not in r for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
