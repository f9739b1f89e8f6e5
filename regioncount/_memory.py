"""The measured memory limit: the resident set size of the process, read from ``/proc/self/statm`` where the
engines grow their arrays, against a limit the caller sets (the CLI's ``--memory-cap``)."""

from __future__ import annotations

import os

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


def set_rss_limit(limit: int | None) -> None:
    """Set (``None``: clear) the resident bytes past which :func:`check_rss` raises in this process."""
    global LIMIT
    LIMIT = None if limit is None else int(limit)


def check_rss() -> None:
    """Raise :class:`ResidentMemoryError` when a limit is set and the process holds more than it."""
    if LIMIT is not None:
        now = rss_bytes()
        if now > LIMIT:
            raise ResidentMemoryError(now, LIMIT)
