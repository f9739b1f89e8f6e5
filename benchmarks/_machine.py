"""What every benchmark records about the machine it ran on, and how it times a call (imported by the scripts
beside it)."""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import tempfile
import time
from pathlib import Path

#: The repository root: children run the library and the CLI from this checkout.
ROOT = Path(__file__).resolve().parent.parent


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo, else what the platform module says."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict:
    """CPUs, CPU model, Python, NumPy and JAX versions, and the load average now."""
    info = {
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "loadavg": load_average(),
    }
    try:
        import jax
        import numpy

        info.update(numpy=numpy.__version__, jax=jax.__version__)
    except ImportError:
        pass
    return info


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages now, to two decimals."""
    return [round(x, 2) for x in os.getloadavg()]


def peak_rss_kb() -> int:
    """This process's peak resident memory so far, in KiB (``ru_maxrss`` on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of the children it has reaped so far: the engines fork
    workers for large counts, and ``time.process_time`` alone leaves their CPU out."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


class Clock:
    """``with Clock() as c:`` times the block: ``c.wall`` and ``c.cpu`` seconds (:func:`cpu_seconds`: this
    process's and its reaped workers', which moves much less than wall time with the load of a shared machine),
    and this process's peak RSS in KiB before and after it (``c.rss0``, ``c.rss1``). Inside the block
    ``c.elapsed()`` is the wall time so far."""

    def __enter__(self) -> Clock:
        self.rss0 = peak_rss_kb()
        self.t0, self.c0 = time.perf_counter(), cpu_seconds()
        return self

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self.t0, cpu_seconds() - self.c0
        self.rss1 = peak_rss_kb()


def child_env(root: Path | None = None) -> dict:
    """The environment of a child process that runs this checkout (or ``root``): its library and CLI first on
    PYTHONPATH (then any PYTHONPATH already set) and one BLAS thread."""
    root = ROOT if root is None else root
    paths = [str(root), str(root / "cli"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), "OPENBLAS_NUM_THREADS": "1"}


def run_timed(cmd: list[str], *, cwd, timeout: float, env: dict | None = None) -> tuple[int | None, str, str, float]:
    """Run ``cmd`` and time it from outside: ``(exit status, stdout, stderr, wall seconds)``; past ``timeout``
    the status is None, stdout what was printed by then and stderr says so."""
    t0 = time.perf_counter()
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env)
        rc, out, err = res.returncode, res.stdout, res.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = None, e.stdout or "", f"timed out after {timeout} s"
        out = out.decode() if isinstance(out, bytes) else out
    return rc, out, err, time.perf_counter() - t0


def write_json(path, doc, *, newline: bool = False) -> None:
    """Write ``doc`` as indented JSON to ``path`` whole or not at all (a temporary file beside it, then
    renamed); ``newline``: end the file with one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=2)
            if newline:
                f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
