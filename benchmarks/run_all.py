"""Run every benchmark in benchmarks/ and the depth scan, collect their JSON into one file, print a summary.

Each ``benchmarks/*.py`` script (this one excepted) runs in its own process. Its flags are read from its
``--help``: ``--quick`` is passed when the script has it and ``--quick`` was given here (a script without it
gets the reduced arguments in :data:`QUICK_FALLBACK`, if any); ``--json FILE`` makes it write JSON to a file,
a bare ``--json`` flag makes it print JSON (one document, or one object per line) on stdout. The scan is the
CLI timed cold in a fresh process, JIT compilation included: ``regioncount scan --depth 9 --out TMPDIR``
(DESIGN §7 target: under 60 s), depth 6 with ``--quick`` unless ``--scan-depth`` says otherwise.

    python benchmarks/run_all.py                      # everything, results in benchmarks/results.json
    python benchmarks/run_all.py --quick              # the short versions
    python benchmarks/run_all.py --out somewhere.json --only bounds_table --only scan

Exit status 1 when a benchmark fails (its error is recorded in the results file too).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _machine import machine, run_timed, write_json

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: Arguments that shorten a script that has no ``--quick`` of its own.
QUICK_FALLBACK = {"exact2d_speed": ["--widths", "32,32,32", "--widths", "64,64,64", "--repeat", "1"]}
SCAN_TARGET_S = 60.0


def scripts() -> list[Path]:
    return sorted(p for p in HERE.glob("*.py") if p.name != Path(__file__).name and not p.name.startswith("_"))


def script_flags(path: Path) -> dict:
    """What a script accepts, read from its ``--help``: ``quick`` (bool) and ``json`` (None, "flag" or "file")."""
    res = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    text = res.stdout
    m = re.search(r"\[--json(?:\s+([A-Z_][A-Z0-9_]*))?\]", text)
    return {
        "quick": "--quick" in text,
        "json": None if m is None else ("file" if m.group(1) else "flag"),
    }


def parse_json_output(text: str):
    """A JSON document, or a list of the JSON objects printed one per line; None if there is none."""
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    docs = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(("{", "[")):
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return docs or None


def tail(text: str, n: int = 2000) -> str:
    return text[-n:] if text else ""


def run_script(path: Path, quick: bool, tmp: Path, timeout: float) -> dict:
    name = path.stem
    flags = script_flags(path)
    cmd = [sys.executable, str(path)]
    notes = []
    if quick:
        if flags["quick"]:
            cmd.append("--quick")
        elif name in QUICK_FALLBACK:
            cmd += QUICK_FALLBACK[name]
            notes.append(f"no --quick: ran with {' '.join(QUICK_FALLBACK[name])}")
        else:
            notes.append("no --quick: ran in full")
    json_file = None
    if flags["json"] == "file":
        json_file = tmp / f"{name}.json"
        cmd += ["--json", str(json_file)]
    elif flags["json"] == "flag":
        cmd.append("--json")
    else:
        notes.append("no --json: stdout kept as text")
    shown = [str(path.relative_to(ROOT)), *(a if a != str(json_file) else f"<tmp>/{name}.json" for a in cmd[2:])]
    print(f"--> {name}: python {' '.join(shown)}", flush=True)
    rc, out, err, seconds = run_timed(cmd, cwd=ROOT, timeout=timeout)
    if json_file is not None:
        results = parse_json_output(json_file.read_text()) if json_file.exists() else None
    elif flags["json"] == "flag":
        results = parse_json_output(out)
    else:
        results = None
    entry = {
        "command": ["python", *shown],
        "returncode": rc,
        "seconds": round(seconds, 2),
        "results": results,
        "notes": notes,
    }
    if results is None:
        entry["stdout"] = tail(out, 6000)
    if rc != 0:
        entry["stderr"] = tail(err)
    return entry


def regioncount_command() -> list[str]:
    """The ``regioncount`` console script of this interpreter's environment, else the one on PATH."""
    local = Path(sys.executable).parent / "regioncount"
    if local.exists():
        return [str(local)]
    found = shutil.which("regioncount")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from regioncount_cli.main import main; sys.exit(main())"]


def run_scan(depth: int, tmp: Path, timeout: float) -> dict:
    out_dir = tmp / "scan_out"
    cmd = [*regioncount_command(), "scan", "--depth", str(depth), "--out", str(out_dir)]
    print(f"--> scan: regioncount scan --depth {depth} --out <tmp> (cold, new process)", flush=True)
    rc, out, err, seconds = run_timed(cmd, cwd=tmp, timeout=timeout)
    if rc is None:
        out = ""  # a scan cut short: its partial output is not a result
    scan_json = out_dir / "scan.json"
    rows = json.loads(scan_json.read_text()) if scan_json.exists() else None
    entry = {
        "command": ["regioncount", "scan", "--depth", str(depth), "--out", "<tmp>"],
        "returncode": rc,
        "seconds": round(seconds, 2),
        "target_seconds": SCAN_TARGET_S if depth == 9 else None,
        "results": rows,
        "notes": [] if depth == 9 else [f"depth {depth}: the 60 s target is for depth 9"],
    }
    if rc != 0:
        entry["stderr"] = tail(err)
        entry["stdout"] = tail(out)
    return entry


def _rows(results) -> list[dict]:
    if isinstance(results, dict):
        return results.get("rows") or []
    return [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []


def _num(v) -> str:
    return "-" if v is None else (f"{v:,.1f}" if isinstance(v, float) else f"{v:,}")


def summarise(name: str, entry: dict) -> list[str]:
    head = f"{name}: {entry['seconds']:.1f} s" + (
        "" if entry["returncode"] == 0 else f", FAILED (exit {entry['returncode']})"
    )
    lines = [head] + [f"    note: {n}" for n in entry.get("notes", [])]
    res = entry.get("results")
    if name == "sample_throughput":
        for r in _rows(res):
            lines.append(
                f"    {r['network']}: forward {r['forward_pts_per_s']:,.0f} pts/s, whole count {r['count_pts_per_s']:,.0f} "
                f"pts/s, ratio {r['ratio']:.2f} ({r['regions_seen']:,} codes in {r['points']:,} points, a lower bound)"
            )
    elif name == "exact2d_speed":
        for r in _rows(res):
            lines.append(
                f"    widths {r['widths']}: {r['regions']:,} regions in {r['seconds']} s = {r['regions_per_s']:,} regions/s, "
                f"peak traced {r.get('peak_traced_mb')} MB"
            )
    elif name == "bounds_table":
        rows = _rows(res)
        eq = sum(1 for r in rows if r.get("equals_bound"))
        bad = [r for r in rows if r.get("matches_formula") is False]
        lines.append(f"    {len(rows)} rows, {eq} exact counts equal their bound, {len(bad)} differ from their formula")
        for r in rows:
            cnt = f"{r['count']:,}" if r.get("exact") else f">= {r['count']:,} (sampled)"
            lines.append(f"    {r['name']} {r['params']}: bound {r['bound']:,}, count {cnt}, {r['seconds']:.2f} s")
    elif name == "scan":
        rows = res or []
        target = entry.get("target_seconds")
        if target:
            verdict = "within" if entry["seconds"] < target else "OVER"
            lines.append(f"    cold wall time {entry['seconds']:.1f} s, {verdict} the {target:.0f} s target")
        hit = [r["depth"] for r in rows if r.get("bound") is not None and r.get("constructed") == r.get("bound")]
        lines.append(f"    constructed count equals Thm 4.4 at depths {hit}")
        for r in rows:
            lines.append(
                f"    D={r['depth']}: bound {_num(r.get('bound'))}, constructed {_num(r.get('constructed'))}, "
                f"compact {_num(r.get('compact'))}, "
                f"random line {_num(r.get('random_line_mean'))}, random sampled >= {_num(r.get('random_sample_mean'))}"
            )
    elif res is None and entry.get("stdout"):
        lines += ["    " + ln for ln in entry["stdout"].strip().splitlines()[-5:]]
    if entry["returncode"] != 0 and entry.get("stderr"):
        lines += ["    " + ln for ln in entry["stderr"].strip().splitlines()[-5:]]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="pass --quick to every script; scan at depth 6")
    ap.add_argument("--out", type=Path, default=HERE / "results.json", help="results file (default: %(default)s)")
    ap.add_argument("--scan-depth", type=int, default=None, help="depth of the timed scan (default 9, 6 with --quick)")
    ap.add_argument("--only", action="append", default=None, help="run only these (script stem or 'scan'; repeatable)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds each benchmark may run")
    args = ap.parse_args(argv)
    depth = args.scan_depth or (6 if args.quick else 9)
    names = [p.stem for p in scripts()] + ["scan"]
    if args.only:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            ap.error(f"unknown benchmark(s) {unknown}; choose from {names}")
    started = datetime.datetime.now(datetime.UTC)
    doc = {
        "started": started.isoformat(timespec="seconds"),
        "quick": args.quick,
        "machine": machine(),
        "benchmarks": {},
    }
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="regioncount-bench-") as tmpdir:
        tmp = Path(tmpdir)
        for path in scripts():
            if args.only and path.stem not in args.only:
                continue
            doc["benchmarks"][path.stem] = run_script(path, args.quick, tmp, args.timeout)
        if not args.only or "scan" in args.only:
            doc["benchmarks"]["scan"] = run_scan(depth, tmp, args.timeout)
    doc["seconds"] = round(time.perf_counter() - t0, 1)
    write_json(args.out, doc, newline=True)
    print()
    print(f"summary ({'quick' if args.quick else 'full'} run, {doc['seconds']:.0f} s, {doc['machine']['nproc']} CPUs):")
    for name, entry in doc["benchmarks"].items():
        print("\n".join(summarise(name, entry)))
    print(f"\nwrote {args.out}")
    failed = [n for n, e in doc["benchmarks"].items() if e["returncode"] != 0]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
