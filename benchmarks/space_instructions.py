"""Instructions the exact space engine executes per region (issue 21), counted by valgrind's callgrind: a
measure that a shared machine's load does not move, where CPU seconds on two contended cores vary by 2x
from run to run.

For each net, two fresh processes under ``valgrind --tool=callgrind``: one imports, warms up on a small net
of the same input dimension and builds the net (``calls=0``), the other does the same and then one
``count_regions(net, box, method="exact")`` (``calls=1``, partition and linear regions). The difference of
their instruction counts is the count's. Slow (about 30x native; under five minutes for the four nets).
``--path`` puts another checkout's ``regioncount`` first (an export of an older commit, to compare).

    python benchmarks/space_instructions.py
    python benchmarks/space_instructions.py --path /tmp/old   # /tmp/old/regioncount from git archive
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (input dim, hidden widths, box half-side): issue 21's 3D/4D nets (torch-default init, seed 0)
CASES = [(3, (16, 16, 16), 2.0), (4, (10, 10), 2.0), (3, (8, 8, 8, 8), 2.0), (3, (32, 32, 32), 1.0)]

_CHILD = r"""
import sys
import regioncount as rc
d, w, L, n = int(sys.argv[1]), tuple(int(x) for x in sys.argv[2].split(",")), float(sys.argv[3]), int(sys.argv[4])
rc.partition_space(rc.random_mlp(d, (4, 4), seed=99, init="torch"), rc.Box([-1.0] * d, [1.0] * d))
net, box = rc.random_mlp(d, w, seed=0, init="torch"), rc.Box([-L] * d, [L] * d)
for _ in range(n):
    out = rc.count_regions(net, box, method="exact")
    print("regions", out["regions"])
"""


def instructions(path: str, d: int, widths, side: float, calls: int) -> tuple[int, int | None]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([path, str(ROOT / "cli")]))
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", _CHILD]
    cmd += [str(d), ",".join(map(str, widths)), str(side), str(calls)]
    # from a neutral folder: ``python -c`` puts the working directory first on sys.path, ahead of --path
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    ir = re.search(r"Collected : (\d+)", proc.stderr)
    if ir is None:
        raise SystemExit(f"error: no instruction count from valgrind:\n{proc.stderr[-2000:]}")
    reg = re.search(r"regions (\d+)", proc.stdout)
    return int(ir.group(1)), int(reg.group(1)) if reg else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=str(ROOT), help="the folder holding the regioncount package to measure")
    args = ap.parse_args(argv)
    base: dict[int, int] = {}
    print("| net | box | regions | instructions of one count | per region |")
    print("|---|---|---:|---:|---:|")
    for d, widths, side in CASES:
        if d not in base:
            base[d] = instructions(args.path, d, widths, side, 0)[0]
        total, regions = instructions(args.path, d, widths, side, 1)
        count = total - base[d]
        assert regions is not None
        net = f"{d}->{'x'.join(map(str, widths))}"
        print(
            f"| {net} | [-{side:g},{side:g}]^{d} | {regions:,} | {count / 1e6:,.0f} M | {count / regions / 1e3:,.1f} k |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
