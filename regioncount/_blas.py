"""One BLAS thread for the engines' products, in this process and in its worker processes.

The engines use every core through processes (:mod:`regioncount.engines._fork`: the tiles of a tiled count, the
row batches of a large plane partition). OpenBLAS, which NumPy's wheels bundle, starts a thread per core in
each process and keeps it spinning between the small products the engines make, so two processes on two cores
run four busy threads: on the Thm 4.4 Transformer's sub-box one process spends 4.9 CPU s with OpenBLAS's default
threads against 3.4 s with one, for the same wall time (benchmarks/README.md). And a product split between
threads may round differently from the same product on one (the torch 2->100x5 net's partition differs in its
floats, not its counts). :func:`one_thread` holds this process's OpenBLAS to one thread for the time of a
partition or of a fork's workers (children forked then inherit the setting) and gives it back its thread count
afterwards: the floats of a partition are then the same wherever its batches run, and the same as the command
line's.

The library is found among the files this process has mapped (Linux's ``/proc/self/maps``) and called through
its exported setter; where there is none (another BLAS, another platform) nothing is changed. The command line
sets ``OPENBLAS_NUM_THREADS=1`` before NumPy loads; this covers the library used from Python.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator

#: (setter, getter) names OpenBLAS builds export: plain, 64-bit-integer, and SciPy's bundled (NumPy's wheels) builds.
_NAMES = (
    ("openblas_set_num_threads", "openblas_get_num_threads"),
    ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
)

_found: list | None = None


def _controls() -> list:
    """``(set, get)`` of every OpenBLAS this process has loaded (looked up once)."""
    global _found
    if _found is not None:
        return _found
    import numpy  # noqa: F401  (NumPy loads its BLAS: it is mapped from then on)

    _found = []
    try:
        with open("/proc/self/maps") as f:
            names = {ln.split()[-1] for ln in f if "/" in ln}
    except OSError:
        return _found
    # a shared object whose name says OpenBLAS (NumPy's own copy, or a system libopenblas.so.0)
    paths = sorted(p for p in names if "openblas" in os.path.basename(p).lower() and ".so" in os.path.basename(p))
    for path in paths:
        try:
            lib = ctypes.CDLL(path)  # already loaded: this only takes a handle
        except OSError:
            continue
        for set_name, get_name in _NAMES:
            setter, getter = getattr(lib, set_name, None), getattr(lib, get_name, None)
            if setter is not None and getter is not None:
                getter.restype = ctypes.c_int
                _found.append((setter, getter))
                break
    return _found


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Hold this process's OpenBLAS to one thread inside the block (module docstring). The setting is the
    process's: blocks that overlap in threads of one process leave it as the last one to end finds it."""
    held = []
    for setter, getter in _controls():
        n = int(getter())
        if n > 1:
            setter(1)
            held.append((setter, n))
    try:
        yield
    finally:
        for setter, n in held:
            setter(n)
