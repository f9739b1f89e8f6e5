"""How often the exact plane engine needs exact arithmetic (docs/design.md §3).

For each network: regions, vertex sign tests, how many of them the float64 error bound could not decide
(decided in exact rational arithmetic instead), the smallest region area, and CPU seconds of one run.

    OPENBLAS_NUM_THREADS=1 python benchmarks/exact_predicates.py [--json]
"""

from __future__ import annotations

import argparse
import json
import time

from regioncount import Box, bound_attaining_transformer, partition_plane, product_maxout, product_relu, random_mlp

CASES = {
    "torch-init 2->128x3 on [-2, 2]^2": lambda: (random_mlp(2, [128] * 3, seed=0, init="torch"), Box(-2.0, 2.0, 2)),
    "torch-init 2->100x5 on [-2, 2]^2": lambda: (random_mlp(2, [100] * 5, seed=0, init="torch"), Box(-2.0, 2.0, 2)),
    "ReLU product (6, 6, 3) on [0, 1]^2": lambda: (product_relu([6, 6, 3], 2), Box(0.0, 1.0, 2)),
    "Maxout product k=3 (4, 4, 2) on [0, 1]^2": lambda: (product_maxout([4, 4, 2], 2, 3), Box(0.0, 1.0, 2)),
    "Thm 4.4 Transformer (1,4,2,9), paper layout, [-1, 2]^2": lambda: (
        bound_attaining_transformer(1, 4, 2, 9)[0],
        Box(-1.0, 2.0, 2),
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for name, make in CASES.items():
        net, box = make()
        t0 = time.process_time()
        part = partition_plane(net, box)
        cpu = time.process_time() - t0
        st = part.stats
        row = {
            "network": name,
            "regions": part.n_regions,
            "predicates": st["predicates"],
            "exact_predicates": st["exact_predicates"],
            "exact_fraction": st["exact_predicates"] / max(1, st["predicates"]),
            "smallest_area": st["min_area"],
            "cpu_seconds": cpu,
        }
        if args.json:
            print(json.dumps(row))
        else:
            print(
                f"{name:58s} {row['regions']:>8,} regions  {row['exact_predicates']:>8,} / {row['predicates']:>9,} "
                f"exact ({100 * row['exact_fraction']:.3f}%)  min area {row['smallest_area']:.2g}  {cpu:.2f} s CPU",
                flush=True,
            )


if __name__ == "__main__":
    main()
