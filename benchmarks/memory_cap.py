"""Peak resident memory of `regioncount count --method exact` under `--memory-cap`, measured.

Builds the Thm 4.4 construction (m, T, q, D) = (4, 3, 2, 9) (8,254,129 regions, about 22 GB uncapped), counts
it exactly with `--memory-cap CAP` in a child process, and reads the child's peak RSS from ``os.wait4``.

    python benchmarks/memory_cap.py --cap 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _machine import child_env


def peak_rss_of(argv: list[str]) -> tuple[int, float, int, str]:
    """Run ``regioncount argv`` in a child; return (exit status, wall seconds, peak RSS bytes, stderr)."""
    env = child_env()
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(
            [sys.executable, "-m", "regioncount_cli.main", *argv], stdout=subprocess.DEVNULL, stderr=err, env=env
        )
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return p.returncode, time.perf_counter() - t0, usage.ru_maxrss * 1024, err.read().strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap", type=float, default=2.0, help="--memory-cap in GiB")
    ap.add_argument("--quick", action="store_true", help="--cap 0.5: stops sooner")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if args.quick:
        args.cap = 0.5
    with tempfile.TemporaryDirectory() as d:
        model = Path(d) / "c4329.npz"
        build = ["build", "bound-transformer", "--m", "4", "--tokens", "3", "--inputs", "2", "--depth", "9"]
        code, _, _, err = peak_rss_of([*build, "--out", str(model)])
        if code != 0:
            sys.exit(f"build failed: {err}")
        code, wall, peak, err = peak_rss_of(["count", str(model), "--box", "-1", "2", "--memory-cap", str(args.cap)])
    if args.json:
        import json

        print(json.dumps({"cap_gib": args.cap, "exit": code, "seconds": wall, "peak_rss_gib": peak / 2**30}))
        return
    print(f"count --memory-cap {args.cap:g}: exit {code}, {wall:.1f} s, peak RSS {peak / 2**30:.3f} GiB")
    print(f"  {err}")


if __name__ == "__main__":
    main()
