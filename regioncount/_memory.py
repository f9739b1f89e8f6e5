"""The measured memory limit: the resident set size of the process, read from ``/proc/self/statm`` where the
engines grow their arrays, against a limit the caller sets (the CLI's ``--memory-cap``)."""

from __future__ import annotations

import os
import sys

from ._errors import ResidentMemoryError

#: Resident bytes past which :func:`check_rss` raises; None: no limit.
LIMIT: int | None = None
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """Resident set size of this process in bytes (0 where there is no ``/proc``)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _peak_bytes() -> int:
    """The largest resident set size this process has had, from one system call (the engines check the limit
    hundreds of times per count; reading ``/proc`` each time cost 9 us against 0.6); never below the size now
    (Linux reports the larger of the two). Past the limit, or without the call, the caller reads the size now."""
    try:
        import resource
    except ImportError:  # no getrusage (Windows): never below a limit's
        return 1 << 62
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere


#: What :func:`keep_heap` asks of glibc's allocator: blocks below this many bytes come from the heap (not a mapping
#: of their own), and the heap keeps this much free room at its top.
HEAP_KEEP = 1 << 26


def keep_heap() -> bool:
    """Ask glibc's allocator to keep freed memory for reuse: arrays below :data:`HEAP_KEEP` bytes come from the heap
    rather than a fresh mapping each, and the heap's top keeps that much free room. By default each large NumPy
    array is a mapping of its own, returned to the system when freed, so the engines' rounds, which make and free
    arrays of a few megabytes again and again, pay for fresh zeroed pages each time (a tenth of a tiled count's CPU
    went to the kernel). The resident size then stays up to :data:`HEAP_KEEP` higher. Returns whether it was set
    (False off glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    M_TOP_PAD, M_MMAP_THRESHOLD = -2, -3
    return bool(mallopt(M_MMAP_THRESHOLD, HEAP_KEEP)) and bool(mallopt(M_TOP_PAD, HEAP_KEEP))


def set_rss_limit(limit: int | None) -> None:
    """Set (``None``: clear) the resident bytes past which :func:`check_rss` raises in this process."""
    global LIMIT
    LIMIT = None if limit is None else int(limit)


def children_rss_bytes() -> int:
    """Resident bytes of every descendant of this process (worker processes and theirs), read from
    ``/proc`` in one pass: a limit on a whole run holds the workers too."""
    me = os.getpid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    kids: dict[int, list[int]] = {}
    for pid in entries:
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            # the parent pid is the second field after the parenthesised command name
            kids.setdefault(int(stat[stat.rindex(")") + 2 :].split()[1]), []).append(int(pid))
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0, list(kids.get(me, ()))
    while todo:
        child = todo.pop()
        todo.extend(kids.get(child, ()))
        try:
            with open(f"/proc/{child}/statm") as f:
                total += int(f.read().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            continue
    return total


def check_rss(children: bool = False) -> None:
    """Raise :class:`ResidentMemoryError` when a limit is set and the process holds more than it (with
    ``children``: the process and its worker processes together)."""
    if LIMIT is not None:
        if not children and _peak_bytes() <= LIMIT:  # the peak bounds the size now: no file to read
            return
        now = rss_bytes() + (children_rss_bytes() if children else 0)
        if now > LIMIT:
            raise ResidentMemoryError(now, LIMIT)
