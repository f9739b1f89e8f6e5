"""What every benchmark records about the machine it ran on, and how it times a call (imported by the scripts
beside it)."""

from __future__ import annotations

import os
import platform
import resource
import time


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


class Clock:
    """``with Clock() as c:`` times the block: ``c.wall`` and ``c.cpu`` seconds (``time.process_time``, which
    moves much less than wall time with the load of a shared machine), and this process's peak RSS in KiB
    before and after it (``c.rss0``, ``c.rss1``). Inside the block ``c.elapsed()`` is the wall time so far."""

    def __enter__(self) -> Clock:
        self.rss0 = peak_rss_kb()
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self.t0, time.process_time() - self.c0
        self.rss1 = peak_rss_kb()
