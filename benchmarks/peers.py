"""regioncount beside a peer, on the same networks, in one run: counts, CPU seconds, wall seconds and ratios.

The peer is relucent (Gaines, Bi 2026, "Characterizing the discrete geometry of ReLU networks"; PyPI
``relucent``, AGPL, with gurobipy's size-limited free licence), which finds every activation region of a
ReLU MLP by local search with one LP per region. It is optional here and never a dependency of regioncount:
install it into any Python (a separate virtual environment is fine, its numpy need not be ours) and name that
interpreter with ``--peer-python``. Both sides count the activation regions that meet the box [lo, hi]^q
(relucent: ``bfs(cube_radius=r, cube_mode="intersect")`` on a centred cube; regioncount: the exact partition
of the same box), so the counts must agree; a row whose counts differ is marked.

Each measurement is its own fresh process, timed from outside:

- ``rc process``: the whole ``regioncount count MODEL --box LO HI --json --no-linear`` command, start-up,
  imports and loading included (what a user waits for);
- ``rc library``: ``partition_plane`` / ``partition_space`` alone, in-process after a warm-up call;
- ``peer library``: relucent's ``Complex(layers).bfs(...)`` alone, in-process (its imports excluded).

CPU seconds are the process's user + system time (``time.process_time`` in-process), which moves much less
than wall time on a shared machine; the load average is recorded beside each row.

    python benchmarks/peers.py --peer-python /path/to/venv/bin/python            # the table
    python benchmarks/peers.py --peer-python ... --json benchmarks/peers.json    # and the records
    python benchmarks/peers.py --quick                                          # the small nets only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _machine import ROOT, child_env, load_average, machine, write_json

DATA = ROOT.parent / "shared" / "data"

#: (name, input dim, hidden widths, seed, box half-width). torch-default init (U(±1/sqrt(fan_in))).
NETS = [
    ("torch 2→16×3", 2, (16, 16, 16), 0, 2.0),
    ("torch 2→100×5", 2, (100,) * 5, 0, 2.0),
    ("torch 2→128×3", 2, (128,) * 3, 0, 2.0),
    ("torch 2→256×2", 2, (256,) * 2, 0, 2.0),
    ("torch 3→16×3", 3, (16,) * 3, 0, 2.0),
    ("torch 3→32×3", 3, (32,) * 3, 0, 1.0),
    ("torch 4→10×2", 4, (10,) * 2, 0, 2.0),
    ("torch 3→8×4", 3, (8,) * 4, 0, 2.0),
]
QUICK = {"torch 2→16×3", "torch 3→8×4", "torch 4→10×2"}

_RC_LIBRARY = r"""
import json, sys, time
import regioncount as rc
net = rc.load_network(sys.argv[1])
q, r = net.input_dim, float(sys.argv[2])
box = rc.Box([-r] * q, [r] * q)
engine = rc.partition_plane if q == 2 else rc.partition_space
engine(net, box)  # warm-up: caches and lazy imports
t, c = time.perf_counter(), time.process_time()
part = engine(net, box)
print(json.dumps({"regions": int(part.n_regions), "wall": time.perf_counter() - t, "cpu": time.process_time() - c}))
"""

_PEER_LIBRARY = r"""
import json, sys, time
import numpy as np
import relucent
d = np.load(sys.argv[1])
names = sorted({k.rsplit(".", 1)[0] for k in d.files}, key=lambda s: int(s) if s.isdigit() else s)
layers = [(d[n + ".weight"], d[n + ".bias"]) for n in names]
t, c = time.perf_counter(), time.process_time()
cplx = relucent.Complex(layers)
cplx.bfs(cube_radius=float(sys.argv[2]), cube_mode="intersect", nworkers=1, verbose=0)
print(json.dumps({"regions": len(cplx), "wall": time.perf_counter() - t, "cpu": time.process_time() - c}))
"""


def _children_cpu() -> float:
    r = os.times()
    return r.children_user + r.children_system


def _run(cmd: list[str], env: dict, timeout: float) -> dict:
    """Run ``cmd``; its last stdout line is JSON (library rows) or regioncount's JSON object (process rows).
    Adds ``process_wall`` and ``process_cpu`` (the child's user + system seconds)."""
    c0, t0 = _children_cpu(), time.perf_counter()
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if res.returncode != 0:
        tail = (res.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {res.returncode}: {tail}"}
    text = res.stdout.strip()
    try:
        out = json.loads(text)  # regioncount's JSON object (indented)
    except json.JSONDecodeError:
        out = json.loads(text.splitlines()[-1])  # the library scripts' one line
    out.update(process_wall=wall, process_cpu=cpu)
    return out


def model_file(name: str, q: int, widths, seed: int, folder: Path) -> Path:
    """The network as a torch state-dict ``.npz`` (the layout both tools read); the shared data file where
    the issue names one."""
    shared = {"torch 2→100×5": "torch_mlp_w100_d5_s0.npz", "torch 2→16×3": "torch_mlp_w16_d3_s0.npz"}.get(name)
    if shared and (DATA / shared).exists():
        return DATA / shared
    import regioncount as rc

    net = rc.random_mlp(q, widths, seed=seed, init="torch")
    path = folder / f"{name.replace(' ', '_').replace('→', '-').replace('×', 'x')}.npz"
    arrays = {}
    for i, (W, b) in enumerate(zip(net.weights, net.biases, strict=True)):
        arrays[f"{2 * i}.weight"], arrays[f"{2 * i}.bias"] = np.asarray(W), np.asarray(b)
    np.savez(path, **arrays)
    return path


def measure(name, q, widths, seed, r, folder, peer_python, timeout) -> dict:
    path = model_file(name, q, widths, seed, folder)
    env = child_env()
    row: dict = {"network": name, "box": [-r, r], "load_before": load_average()}
    cli = [sys.executable, "-m", "regioncount_cli.main", "count", str(path), "--box", str(-r), str(r)]
    proc = _run([*cli, "--json", "--no-linear"], env, timeout)
    row["rc_regions"] = proc.get("regions")
    row["rc_process_wall"], row["rc_process_cpu"] = proc.get("process_wall"), proc.get("process_cpu")
    if "error" in proc:
        row["rc_error"] = proc["error"]
    lib = _run([sys.executable, "-c", _RC_LIBRARY, str(path), str(r)], env, timeout)
    row["rc_library_wall"], row["rc_library_cpu"] = lib.get("wall"), lib.get("cpu")
    if peer_python:
        peer_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        peer_env["OPENBLAS_NUM_THREADS"] = "1"
        peer = _run([peer_python, "-c", _PEER_LIBRARY, str(path), str(r)], peer_env, timeout)
        row["peer_regions"], row["peer_library_wall"], row["peer_library_cpu"] = (
            peer.get("regions"),
            peer.get("wall"),
            peer.get("cpu"),
        )
        # the whole peer process from outside (its imports, and any worker it waited for, included)
        row["peer_process_cpu"], row["peer_process_wall"] = peer.get("process_cpu"), peer.get("process_wall")
        if "error" in peer:
            row["peer_error"] = peer["error"]
        if row.get("peer_library_cpu") and row.get("rc_library_cpu"):
            row["cpu_ratio_library"] = row["peer_library_cpu"] / row["rc_library_cpu"]
        if row.get("peer_library_cpu") and row.get("rc_process_cpu"):
            row["cpu_ratio_process"] = row["peer_library_cpu"] / row["rc_process_cpu"]
        if row.get("peer_regions") is not None:
            row["counts_agree"] = row["peer_regions"] == row.get("rc_regions")
    row["load_after"] = load_average()
    return row


def _fmt(x, nd=3) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{nd}f}" if x < 100 else f"{x:,.0f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def table(rows: list[dict]) -> str:
    head = "| network | regions (rc) | regions (peer) | rc process CPU s / wall | rc library CPU s | peer library CPU s / wall | peer process CPU s | peer ÷ rc (library, process CPU) |"
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        agree = "" if r.get("counts_agree", True) else " **differs**"
        if r.get("peer_error"):
            agree += f" ({r['peer_error']})"
        ratio = f"{_fmt(r.get('cpu_ratio_library'), 1)}×, {_fmt(r.get('cpu_ratio_process'), 1)}×"
        lines.append(
            f"| {r['network']} | {_fmt(r.get('rc_regions'))} | {_fmt(r.get('peer_regions'))}{agree} | "
            f"{_fmt(r.get('rc_process_cpu'))} / {_fmt(r.get('rc_process_wall'))} | {_fmt(r.get('rc_library_cpu'))} | "
            f"{_fmt(r.get('peer_library_cpu'))} / {_fmt(r.get('peer_library_wall'))} | {_fmt(r.get('peer_process_cpu'))} | {ratio} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description="regioncount beside relucent on the same networks, in one run")
    ap.add_argument("--peer-python", help="a Python interpreter that can import relucent (omit: regioncount only)")
    ap.add_argument("--quick", action="store_true", help="only the small networks")
    ap.add_argument("--only", help="only networks whose name contains this")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per measurement")
    ap.add_argument("--json", help="also write the records and the machine to this file")
    args = ap.parse_args()
    nets = [n for n in NETS if (not args.quick or n[0] in QUICK) and (not args.only or args.only in n[0])]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, q, widths, seed, r in nets:
            row = measure(name, q, widths, seed, r, Path(tmp), args.peer_python, args.timeout)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    print(table(rows))
    if args.json:
        write_json(args.json, {"machine": machine(), "rows": rows}, newline=True)
    return 0 if all(r.get("counts_agree", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
