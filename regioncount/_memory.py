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
        now = rss_bytes() + (children_rss_bytes() if children else 0)
        if now > LIMIT:
            raise ResidentMemoryError(now, LIMIT)
