"""What every benchmark records about the machine it ran on (imported by the scripts beside it)."""

from __future__ import annotations

import os
import platform


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
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        import jax
        import numpy

        info.update(numpy=numpy.__version__, jax=jax.__version__)
    except ImportError:
        pass
    return info
