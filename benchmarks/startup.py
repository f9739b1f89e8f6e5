"""Whole-process start-up: how long a fresh ``regioncount`` process takes before (and besides) its engine.

Each command runs in a new Python process, timed from outside (``perf_counter`` around ``subprocess.run``):
``--help``, ``bound`` (the list), one bound, and ``count`` of a torch-layout 2->32x3 MLP on [-2, 2]^2 (exact,
plane engine). For ``count`` the time before the engine is the wall time minus the ``seconds`` the JSON
reports for the count itself, so it also holds interpreter exit: an upper bound. Every command also runs
once under ``python -X importtime`` to record whether it imported JAX. Reference rows: ``python -c pass`` and
``python -c "import jax"``. Target (issue 15): ``count`` spends under 0.3 s before its engine starts;
``--help`` and ``bound`` never import JAX.

Each row also has the CPU seconds (user + system) of the process, which a loaded machine inflates far less
than wall time. ``--root DIR`` times another checkout of the repository (e.g. an older commit) with this
script, so before and after are measured alike.

Usage: python benchmarks/startup.py [--repeat N] [--json] [--quick] [--root DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _machine import ROOT, child_env, machine

CLI = [sys.executable, "-c", "import sys; from regioncount_cli.main import main; sys.exit(main())"]


def _torch_mlp(path: Path) -> None:
    """A PyTorch nn.Sequential state dict (Linear, ReLU, ...), default init, as np.savez writes it."""
    rng = np.random.default_rng(0)
    dims = [2, 32, 32, 32, 1]
    arrays = {}
    for i, (fan_in, fan_out) in enumerate(zip(dims[:-1], dims[1:])):
        s = 1 / np.sqrt(fan_in)
        arrays[f"{2 * i}.weight"] = rng.uniform(-s, s, (fan_out, fan_in))
        arrays[f"{2 * i}.bias"] = rng.uniform(-s, s, fan_out)
    np.savez(path, **arrays)


def _env() -> dict:
    return child_env(ROOT)  # ROOT: this checkout, or the one --root names


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(cmd: list[str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of one run of ``cmd``, and its stdout."""
    cpu, t = _cpu_children(), time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=300)
    wall, cpu = time.perf_counter() - t, _cpu_children() - cpu
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr.strip()[-500:]}")
    return wall, cpu, out.stdout


def _imports_jax(cmd: list[str]) -> bool:
    out = subprocess.run(
        [cmd[0], "-X", "importtime", *cmd[1:]], capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=300
    )
    # importtime lines read "import time: self | cumulative | <indent>module"
    return any(line.split("|")[-1].strip() == "jax" for line in out.stderr.splitlines() if "|" in line)


def measure(name: str, cmd: list[str], repeat: int, engine_seconds: bool = False) -> dict:
    _run(cmd)  # warm the file cache; not recorded
    walls, cpus, before = [], [], []
    for _ in range(repeat):
        wall, cpu, stdout = _run(cmd)
        walls.append(wall)
        cpus.append(cpu)
        if engine_seconds:
            before.append(wall - json.loads(stdout)["seconds"])
    row = {
        "command": name,
        "wall_s_median": statistics.median(walls),
        "wall_s_min": min(walls),
        "wall_s_max": max(walls),
        "cpu_s_median": statistics.median(cpus),
        "imports_jax": _imports_jax(cmd),
    }
    if before:
        row.update(
            before_engine_s_median=statistics.median(before),
            before_engine_s_min=min(before),
            before_engine_s_max=max(before),
        )
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per command (median, min, max reported)")
    ap.add_argument("--json", action="store_true", help="print one JSON object per command")
    ap.add_argument("--quick", action="store_true", help="3 runs per command")
    ap.add_argument("--root", type=Path, help="time this checkout of the repository instead of this one")
    args = ap.parse_args()
    if args.root is not None:
        global ROOT
        ROOT = args.root.resolve()
    repeat = 3 if args.quick else args.repeat
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "torch_mlp.npz"
        _torch_mlp(model)
        cases = [
            ("python -c pass", [sys.executable, "-c", "pass"], False),
            ('python -c "import jax"', [sys.executable, "-c", "import jax"], False),
            ("regioncount --help", [*CLI, "--help"], False),
            ("regioncount bound", [*CLI, "bound"], False),
            (
                "regioncount bound transformer_maxout_lower --m 4 --T 3 --q 2 --D 6",
                [*CLI, "bound", "transformer_maxout_lower", "--m", "4", "--T", "3", "--q", "2", "--D", "6"],
                False,
            ),
            (
                "regioncount count torch_mlp.npz --box -2 2 --json",
                [*CLI, "count", str(model), "--box", "-2", "2", "--json"],
                True,
            ),
        ]
        rows = [measure(name, cmd, repeat, engine) for name, cmd, engine in cases]
    info = machine()
    if args.json:
        for row in rows:
            print(json.dumps({**row, "machine": info}))
        return
    print(f"machine: {info}")
    print(f"{'command':66s} {'median s':>9s} {'min':>6s} {'max':>6s} {'CPU s':>6s} {'before engine':>14s} {'JAX':>4s}")
    for r in rows:
        before = f"{r['before_engine_s_median']:.2f}" if "before_engine_s_median" in r else ""
        print(
            f"{r['command']:66s} {r['wall_s_median']:9.2f} {r['wall_s_min']:6.2f} {r['wall_s_max']:6.2f} "
            f"{r['cpu_s_median']:6.2f} {before:>14s} {'yes' if r['imports_jax'] else 'no':>4s}"
        )


if __name__ == "__main__":
    main()
