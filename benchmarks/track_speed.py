"""Seconds per checkpoint of ``regioncount.track`` on the network of ``notebooks/08_training.ipynb``.

The notebook's 2-16-16-2 ReLU MLP is trained on two noisy circles (optax Adam, learning rate 0.02, 200 points)
for 300 steps; a checkpoint is saved every 6 steps from step 0, so 51 files (50 after the initial one). Then
``track`` counts them on [-1.5, 1.5]^2: exact activation and linear regions, decision regions with their Betti
numbers, and local complexity in the L∞ ball of radius 0.1 around 25 training points, first in this process
(``--processes 1``), then in worker processes (one per core). Reports wall and CPU seconds per checkpoint.

Usage: OPENBLAS_NUM_THREADS=1 python benchmarks/track_speed.py [--json] [--every N] [--steps N]
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
import optax
from _machine import machine

import regioncount as rc


def circles(n: int, noise: float, seed: int, factor: float = 0.5):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * np.pi, n)
    inner = rng.random(n) < 0.5
    r = np.where(inner, factor, 1.0)
    X = np.stack([r * np.cos(t), r * np.sin(t)], 1) + rng.normal(scale=noise, size=(n, 2))
    return X, inner.astype(np.int64)


def train(folder: Path, steps: int, every: int):
    """The notebook's training run, a checkpoint every ``every`` steps; returns the training points."""
    X, y = circles(200, 0.06, seed=0)
    widths = (2, 16, 16, 2)
    key = jax.random.PRNGKey(0)
    params = []
    for a, b in zip(widths[:-1], widths[1:], strict=True):
        key, k1, k2 = jax.random.split(key, 3)
        s = 1 / np.sqrt(a)
        params.append(
            (jax.random.uniform(k1, (b, a), minval=-s, maxval=s), jax.random.uniform(k2, (b,), minval=-s, maxval=s))
        )

    def logits(params, X):
        h = X
        for W, b in params[:-1]:
            h = jax.nn.relu(h @ W.T + b)
        W, b = params[-1]
        return h @ W.T + b

    def loss(params):
        return optax.softmax_cross_entropy_with_integer_labels(logits(params, X), y).mean()

    opt = optax.adam(0.02)
    state = opt.init(params)

    @jax.jit
    def step(params, state):
        grads = jax.grad(loss)(params)
        updates, state = opt.update(grads, state)
        return optax.apply_updates(params, updates), state

    def save(params, i):
        net = rc.MLP(tuple(np.asarray(W) for W, _ in params), tuple(np.asarray(b) for _, b in params))
        rc.save_model(net, folder / f"step-{i:04d}.npz")

    save(params, 0)
    for i in range(1, steps + 1):
        params, state = step(params, state)
        if i % every == 0:
            save(params, i)
    return X


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime + ch.ru_utime + ch.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--every", type=int, default=6)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = {"machine": machine(), "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        X = train(folder, args.steps, args.every)
        n = len(list(folder.iterdir()))
        box = rc.Box(-1.5, 1.5, 2)
        ref = None
        for workers in (1, rc.default_workers()):
            t0, c0 = time.perf_counter(), cpu_seconds()
            rows = rc.track(folder, box, points=X[::8], radius=0.1, workers=workers)
            wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
            key = [(r["regions"], r["linear_regions"], r["decision_regions"], r["local_complexity"]) for r in rows]
            assert ref is None or key == ref, "rows differ between worker counts"
            ref = key
            out["runs"].append(
                {
                    "checkpoints": n,
                    "processes": workers,
                    "wall_s": wall,
                    "cpu_s": cpu,
                    "wall_s_per_checkpoint": wall / n,
                    "cpu_s_per_checkpoint": cpu / n,
                    "regions_min_max": [min(r["regions"] for r in rows), max(r["regions"] for r in rows)],
                    "all_exact": all(r["exact"] for r in rows),
                }
            )
        out["machine"]["loadavg_end"] = machine()["loadavg"]
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"load average at start {out['machine']['loadavg']}, at end {out['machine']['loadavg_end']}")
    print("checkpoints  processes  wall s  CPU s  wall s/ckpt  CPU s/ckpt  regions")
    for r in out["runs"]:
        print(
            f"{r['checkpoints']:11d} {r['processes']:10d} {r['wall_s']:7.1f} {r['cpu_s']:6.1f} "
            f"{r['wall_s_per_checkpoint']:12.3f} {r['cpu_s_per_checkpoint']:11.3f}  {r['regions_min_max']}"
        )


if __name__ == "__main__":
    main()
