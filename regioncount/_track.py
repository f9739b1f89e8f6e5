"""Regions through training (DESIGN §12): :func:`track` counts every checkpoint of a run.

Each row is what :func:`count_regions` gives for that checkpoint alone on the domain (``regions``,
``linear_regions``, ``exact``, ``method``, ``kind``), plus, on a 2D domain with an exact count, the decision
regions and their Betti numbers (:func:`regioncount.results.topology`), and, given data points and a radius,
the local complexity around them (:func:`regioncount.local_complexity`). Rows carry the checkpoint's content
digest and a digest of the settings, so a run that was cut short resumes by skipping the rows it already has.
"""

from __future__ import annotations

import glob as _glob
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import _memory
from ._domain import AffineSlice, Box, Segment, Slice
from ._errors import RegionCountError

#: Columns of the CSV table, in order.
CSV_COLUMNS = (
    "step",
    "checkpoint",
    "regions",
    "linear_regions",
    "decision_regions",
    "decision_holes",
    "boundary_components",
    "boundary_cycles",
    "decision_cavities",
    "local_complexity",
    "local_median",
    "local_max",
    "exact",
    "seconds",
)

_STEP = re.compile(r"(\d+)(?!.*\d)")


def step_of(path) -> int | None:
    """The step a checkpoint's name states: the last run of digits in its stem (``ckpt-0040.npz`` -> 40)."""
    m = _STEP.search(Path(path).stem)
    return int(m.group(1)) if m else None


def checkpoint_files(spec: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    """Checkpoint files from ``spec``: a directory (its ``.npz``, ``.safetensors`` and ``.onnx`` files, sorted
    by the step in their names, else by name), a glob pattern (sorted the same way), one file, or a sequence of
    these (kept in the order given). A pattern or directory that names no file is a :class:`RegionCountError`."""
    if isinstance(spec, (str, os.PathLike)):
        spec = [spec]
    out: list[Path] = []
    for item in spec:
        p = Path(item)
        if p.is_dir():
            found = [f for f in p.iterdir() if f.is_file() and f.suffix.lower() in (".npz", ".safetensors", ".onnx")]
            if not found:
                raise RegionCountError(f"the directory {p} holds no checkpoint (.npz, .safetensors or .onnx)")
            out.extend(_by_step(found))
        elif p.exists():
            out.append(p)
        elif any(ch in str(item) for ch in "*?["):
            found = [Path(f) for f in _glob.glob(str(item)) if Path(f).is_file()]
            if not found:
                raise RegionCountError(f"the pattern {item} matches no file")
            out.extend(_by_step(found))
        else:
            raise RegionCountError(f"no checkpoint at {p}")
    return out


def _by_step(files: Iterable[Path]) -> list[Path]:
    files = list(files)
    if all(step_of(f) is not None for f in files):
        return sorted(files, key=lambda f: (step_of(f), f.name))
    return sorted(files, key=lambda f: f.name)


def file_digest(path) -> str:
    """SHA-256 of a file's bytes (rows are reused only for the same content)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _domain_record(dom) -> dict:
    if isinstance(dom, Segment):
        return {"segment": [dom.a.tolist(), dom.b.tolist()]}
    if isinstance(dom, Slice):
        return {"slice": [dom.x0.tolist(), dom.v1.tolist(), dom.v2.tolist(), dom.lo.tolist(), dom.hi.tolist()]}
    if isinstance(dom, AffineSlice):
        return {"affine_slice": [dom.x0.tolist(), dom.U.tolist(), dom.lo.tolist(), dom.hi.tolist()]}
    return {"box": [dom.lo.tolist(), dom.hi.tolist()]}


def settings_digest(domain, options: dict, points=None) -> str:
    """A digest of everything a row depends on besides the checkpoint: the domain, the count options, the
    points (their bytes) and the local-complexity options."""
    rec: dict[str, Any] = {"domain": _domain_record(domain), "options": options}
    if points is not None:
        rec["points"] = hashlib.sha256(np.ascontiguousarray(points, dtype=np.float64).tobytes()).hexdigest()
    return hashlib.sha256(json.dumps(rec, sort_keys=True, default=str).encode()).hexdigest()[:16]


def count_checkpoint(path, domain, options: dict, points=None, local: dict | None = None) -> dict:
    """One row of :func:`track` for the checkpoint at ``path`` (runs in a worker process or a Dask task)."""
    from ._count import count_regions
    from ._loaders import load_network

    t0 = time.perf_counter()
    net = load_network(path)
    res = count_regions(net, domain, **options)
    row: dict[str, Any] = {
        "regions": res["regions"],
        "linear_regions": res["linear_regions"],
        "exact": bool(res["exact"]),
        "method": str(res["method"]),
        "kind": str(res["kind"]),
        "count": res,
    }
    exact_domain = isinstance(domain, Slice) or (isinstance(domain, Box) and domain.dim in (2, 3))
    if options.get("method", "exact") == "exact" and exact_domain and local is not None and local.get("decision", True):
        row.update(decision_row(net, domain, options.get("memory_cap")))
    if points is not None:
        from ._local import local_complexity

        lc = local_complexity(net, points, **{k: v for k, v in (local or {}).items() if k != "decision"})
        row["local"] = lc
        row["local_complexity"] = lc["mean"]
        row["local_median"] = lc["median"]
        row["local_max"] = lc["max"]
        row["exact"] = row["exact"] and lc["exact"]
    row["seconds"] = time.perf_counter() - t0
    return row


def decision_row(net, domain, memory_cap: int | None = None) -> dict:
    """Decision regions of ``net`` on a 2D domain or a 3D box and their Betti numbers (the exact partition of
    its decision network, :func:`regioncount.decision_topology`)."""
    from ._config import DEFAULT_MEMORY_CAP
    from ._count import PLANE_BYTES_PER_REGION, SPACE_BYTES_PER_REGION
    from ._decide import decision_topology

    cap = memory_cap or DEFAULT_MEMORY_CAP
    per = SPACE_BYTES_PER_REGION if domain.dim == 3 else PLANE_BYTES_PER_REGION
    topo = decision_topology(net, domain, max_regions=max(1, cap // per))
    d = topo.as_dict()
    row = {
        "decision_regions": d["decision_regions"],
        "decision_cells": int(topo.labels.size),
        "decision_holes": d["holes"],
        "boundary_components": d["boundary"]["b0"],
        "boundary_cycles": d["boundary"]["b1"],
        "topology": {k: d[k] for k in ("per_class", "boundary", "holes", "decision_regions", "cavities") if k in d},
    }
    if "cavities" in d:
        row["decision_cavities"] = d["cavities"]
    return row


def _job(args):
    path, domain, options, points, local = args
    return count_checkpoint(path, domain, options, points, local)


def _worker_init(limit: int | None) -> None:
    _memory.set_rss_limit(limit)


def track(
    checkpoints,
    domain,
    *,
    method: str = "exact",
    points=None,
    radius: float | None = None,
    local: dict | None = None,
    decision: bool = True,
    linear: bool = True,
    grid: int | None = None,
    samples: int | None = None,
    seed: int = 0,
    memory_cap: int | None = None,
    max_regions: int | None = None,
    workers: int = 1,
    client=None,
    previous: Sequence[dict] = (),
    out=None,
    resume: bool = True,
    on_row: Callable[[list[dict]], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict]:
    """Count every checkpoint in ``checkpoints`` (see :func:`checkpoint_files`) on ``domain``; rows in
    checkpoint order.

    Each row: ``step`` (from the file name, else the position), ``checkpoint``, ``regions``,
    ``linear_regions``, ``exact``, ``method``, ``kind`` and ``count`` (the full :func:`count_regions` result),
    ``seconds``. On an exact count of a 2D domain or a 3D box also ``decision_regions``, ``decision_holes``
    (holes of all decision regions), ``boundary_components`` and ``boundary_cycles`` (the decision boundary's
    b0 and b1; None in 3D), ``decision_cavities`` (3D) and ``topology``. With ``points (N, q)`` and ``radius``
    also ``local`` (see :func:`local_complexity`; its options in ``local``: ``directions``, ``slice_2d``,
    ``seed``, ``method``, ``samples``) and its ``local_complexity`` (the mean), ``local_median``, ``local_max``.

    ``previous``: rows of an earlier run; a row whose checkpoint digest and settings digest both match is
    reused, not recounted (marked ``"reused": True``). ``out``: a folder that keeps the run's progress: the rows
    so far are rewritten whole to ``out/.track-partial.json`` after each new row, and with ``resume`` the rows
    of ``out/track.json`` and of that file are reused as ``previous`` (write the final table with
    :func:`track_tables` and remove the partial file with :func:`finish_track`). ``on_row(rows_so_far)`` runs
    after each new row, in the calling process. ``workers > 1`` counts checkpoints in that many worker
    processes (spawn; at most one per core and per checkpoint); ``client``: a ``dask.distributed.Client``
    that counts them as tasks instead. The rows are the same either way.
    """
    files = checkpoint_files(checkpoints)
    if (points is None) != (radius is None):
        raise RegionCountError("local complexity needs both data points and a radius")
    if workers < 1:
        raise RegionCountError(f"workers must be at least 1, got {workers}")
    options: dict[str, Any] = dict(
        method=method,
        linear=linear,
        grid=grid,
        samples=samples,
        seed=seed,
        memory_cap=memory_cap,
        max_regions=max_regions,
    )
    loc: dict[str, Any] | None = None
    P = None
    if points is not None:
        P = np.asarray(points, dtype=np.float64)
        assert radius is not None  # checked above
        loc = {"radius": float(radius), "max_regions": max_regions, "memory_cap": memory_cap, **(local or {})}
    lopts = {**(loc or {}), "decision": bool(decision)}
    # the memory cap and region cap decide whether a row can be counted, not what it holds, so they are left
    # out of the digest, except where they choose between exact and sampled local counts (method "auto")
    from ._config import DEFAULT_MEMORY_CAP

    rec = {k: (np.asarray(v).tolist() if k == "directions" and v is not None else v) for k, v in lopts.items()}
    if rec.get("method", "auto") == "auto" and "radius" in rec:
        rec["memory_cap"] = rec.get("memory_cap") or DEFAULT_MEMORY_CAP
    else:
        rec.pop("memory_cap", None)
        rec.pop("max_regions", None)
    counted = {k: v for k, v in options.items() if k not in ("memory_cap", "max_regions")}
    digest = settings_digest(domain, {**counted, "local": rec}, P)
    digests = [file_digest(f) for f in files]
    if out is not None and resume:
        previous = [*previous, *previous_rows(out)]
    old = {(r.get("digest"), r.get("settings")): r for r in previous}
    rows: list[dict | None] = [None] * len(files)
    todo = []
    for i, (f, dg) in enumerate(zip(files, digests, strict=True)):
        prev = old.get((dg, digest))
        if prev is not None:
            rows[i] = {**prev, "reused": True, "checkpoint": str(f)}
        else:
            todo.append(i)
    total = len(files)
    done = total - len(todo)
    if progress is not None:
        progress(done, total)

    def finish(i: int, row: dict) -> None:
        nonlocal done
        step = step_of(files[i])
        row = {"step": i if step is None else step, "checkpoint": str(files[i]), **row}
        row.update(digest=digests[i], settings=digest, reused=False)
        rows[i] = row
        done += 1
        if out is not None:
            from ._count import as_json_ready
            from ._io import write_atomic

            so_far = [r for r in rows if r is not None]
            write_atomic(Path(out) / PARTIAL, json.dumps(as_json_ready(so_far), indent=1) + "\n")
        if on_row is not None:
            on_row([r for r in rows if r is not None])
        if progress is not None:
            progress(done, total)

    jobs = [(str(files[i]), domain, options, P, lopts) for i in todo]
    if client is not None:
        from distributed import as_completed

        futures = {client.submit(_job, job, pure=False): i for i, job in zip(todo, jobs, strict=True)}
        for fut in as_completed(list(futures)):
            finish(futures[fut], fut.result())
    elif workers == 1 or len(todo) <= 1:
        for i, job in zip(todo, jobs, strict=True):
            finish(i, _job(job))
    else:
        import multiprocessing

        from ._scan import default_workers

        n = max(1, min(workers, default_workers(), len(todo)))
        ctx = multiprocessing.get_context("spawn")
        pool = ctx.Pool(n, _worker_init, (_memory.LIMIT,))
        try:
            pending = {pool.apply_async(_job, (job,)): i for i, job in zip(todo, jobs, strict=True)}
            pool.close()
            while pending:
                ready = [a for a in pending if a.ready()]
                if not ready:
                    _memory.check_rss(children=True)
                    next(iter(pending)).wait(0.05)
                    continue
                for a in ready:
                    i = pending.pop(a)
                    finish(i, a.get())
            pool.join()
        except BaseException:
            pool.terminate()
            pool.join()
            raise
    return [r for r in rows if r is not None]


#: The file in a track folder that holds the rows of a run in progress.
PARTIAL = ".track-partial.json"


def previous_rows(out) -> list[dict]:
    """Rows kept in a track folder: those of ``track.json`` and of a run cut short (``.track-partial.json``).
    A file that does not parse as a list of rows is ignored (it is recounted, never trusted)."""
    rows: list[dict] = []
    for name in ("track.json", PARTIAL):
        p = Path(out) / name
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, list):
            rows.extend(r for r in data if isinstance(r, dict) and "digest" in r and "settings" in r)
    return rows


def track_tables(rows: list[dict]) -> dict[str, str]:
    """The table files of a track folder: ``{"track.json": ..., "track.csv": ...}`` (write them whole)."""
    from ._count import as_json_ready

    return {"track.json": json.dumps(as_json_ready(rows), indent=2) + "\n", "track.csv": rows_to_csv(rows)}


def finish_track(out) -> None:
    """Remove a track folder's partial rows once the final table is written."""
    (Path(out) / PARTIAL).unlink(missing_ok=True)


def rows_to_csv(rows: list[dict]) -> str:
    """The table as CSV: one line per row, :data:`CSV_COLUMNS` (empty where a row has no value)."""
    lines = [",".join(CSV_COLUMNS)]
    for r in rows:
        cells = []
        for c in CSV_COLUMNS:
            v = r.get(c)
            if v is None:
                cells.append("")
            elif isinstance(v, bool):
                cells.append("true" if v else "false")
            elif isinstance(v, float):
                cells.append(f"{v:.6g}")
            else:
                s = str(v)
                cells.append('"' + s.replace('"', '""') + '"' if ("," in s or '"' in s) else s)
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"
