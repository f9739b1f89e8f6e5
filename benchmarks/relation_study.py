"""Relation fitting and retrieval against the width of phi (Altabaa and Lafferty 2024, arXiv 2402.08856).

For one fixed target relation and key set, fit a relation model <phi(x), psi(y)> with one hidden layer of
width N (seed fixed), then report for each N: the sup and mean |r_model - r_target| over a 21 x 21 grid of
queries times a 21 x 21 grid of keys on [-1, 1]^2, the exact retrieval partition of the fitted model for
the keys on [-1, 1]^2 (activation regions, connected retrieval cells, keys retrieved) and the exact area
where it retrieves a key the target does not rank first.

Beside the errors: the rate N^(-1/2) anchored at the smallest width. The paper's neuron bounds rest on
Barron-type approximation of each feature (the eigenfunctions of the kernel, for a fixed number of them),
which needs O(1/eps^2) neurons for accuracy eps; with the feature dimension held fixed, that is error
~ N^(-1/2) in the width. Its constant (the Barron norms) is not computed here, so only the slope compares.
The measured slope is the least-squares slope of log(mean error) against log(N).

    python benchmarks/relation_study.py                 # the table (about a minute)
    python benchmarks/relation_study.py --quick         # three widths
    python benchmarks/relation_study.py --json out.json # also write the rows as JSON
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _machine import machine, write_json

from regioncount import Box
from regioncount.relations import fit_relation, retrieval_error, retrieval_partition

WIDTHS = (2, 4, 8, 16, 32, 64)
QUICK_WIDTHS = (2, 8, 32)


def study(target: str, widths, *, keys: int, features: int, steps: int, seed: int) -> dict:
    K = np.random.default_rng(seed).uniform(-0.9, 0.9, (keys, 2))
    box = Box(-1.0, 1.0, 2)
    rows = []
    for n in widths:
        t0 = time.perf_counter()
        fit = fit_relation(target, widths=(n,), features=features, steps=steps, seed=seed)
        t1 = time.perf_counter()
        ret = retrieval_partition(fit.model, K, box)
        err = retrieval_error(ret, target)
        t2 = time.perf_counter()
        rows.append(
            {
                "width": n,
                "sup_error": fit.sup_error,
                "mean_error": fit.mean_error,
                "activation_regions": ret.partition.n_regions,
                "retrieval_cells": ret.n_cells,
                "keys_retrieved": int(ret.retrieved.size),
                "mistake_area": err.area,
                "mistake_fraction": err.fraction,
                "mistake_exact": err.exact,
                "fit_s": t1 - t0,
                "retrieval_s": t2 - t1,
            }
        )
    w = np.log([r["width"] for r in rows])
    for key in ("mean_error", "sup_error"):
        e = np.array([r[key] for r in rows])
        for r, ref in zip(rows, e[0] * np.sqrt(widths[0] / np.array(widths, float))):
            r[f"{key}_rate"] = float(ref)
    slope = float(np.polyfit(w, np.log([r["mean_error"] for r in rows]), 1)[0]) if len(rows) > 1 else None
    sup_slope = float(np.polyfit(w, np.log([r["sup_error"] for r in rows]), 1)[0]) if len(rows) > 1 else None
    return {
        "target": target,
        "keys": keys,
        "features": features,
        "steps": steps,
        "seed": seed,
        "rows": rows,
        "mean_error_slope": slope,
        "sup_error_slope": sup_slope,
        "rate_slope": -0.5,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="three widths instead of six")
    ap.add_argument("--target", default="gaussian", help="gaussian, prefers or bilinear")
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="FILE", help="also write the result as JSON to FILE")
    args = ap.parse_args()
    t0 = time.perf_counter()
    res = study(
        args.target,
        QUICK_WIDTHS if args.quick else WIDTHS,
        keys=args.keys,
        features=args.features,
        steps=args.steps,
        seed=args.seed,
    )
    res["seconds"] = time.perf_counter() - t0
    res["machine"] = machine()
    print(
        f"target {res['target']}, {res['keys']} keys, {res['features']} features, {res['steps']} Adam steps, seed {res['seed']}"
    )
    print(
        f"{'width':>5} {'sup err':>8} {'N^-1/2':>8} {'mean err':>9} {'N^-1/2':>8} {'regions':>8} {'cells':>6} "
        f"{'keys':>5} {'mistake %':>10} {'fit s':>6} {'cells s':>7}"
    )
    for r in res["rows"]:
        print(
            f"{r['width']:>5} {r['sup_error']:>8.4f} {r['sup_error_rate']:>8.4f} {r['mean_error']:>9.5f} "
            f"{r['mean_error_rate']:>8.5f} {r['activation_regions']:>8} {r['retrieval_cells']:>6} "
            f"{r['keys_retrieved']:>5} {100 * r['mistake_fraction']:>10.3f} {r['fit_s']:>6.2f} {r['retrieval_s']:>7.2f}"
        )
    print(
        f"slope of log mean error vs log width: {res['mean_error_slope']:.2f} (sup: {res['sup_error_slope']:.2f}; "
        f"rate: -0.5); mistake areas exact; total {res['seconds']:.1f} s"
    )
    if args.json:
        write_json(args.json, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
