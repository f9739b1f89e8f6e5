"""Results files written as a set, whole or not at all, and SIGINT/SIGTERM turned into a clean stop.

:func:`write_files` stages every file of a run in a hidden temporary folder beside its target, then renames
them all into place with SIGINT and SIGTERM held back, so an interrupted run leaves the old set or the new
set, never a mix, and no temporary files. :func:`signals_as_exceptions` makes SIGTERM (like SIGINT) unwind
the stack as :class:`Interrupted`, so every ``finally`` that removes a temporary file runs.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

_HELD = {signal.SIGINT, signal.SIGTERM}
STAGE_PREFIX = ".regioncount-"


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; ``signum`` says which."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: The last SIGINT or SIGTERM received while :func:`signals_as_exceptions` was active (None: none).
received: int | None = None


#: Depth of :func:`signals_held` sections, and a signal that arrived inside one (raised when the last ends).
_held_depth = 0
_held_signal: int | None = None


def _raise_interrupted(signum, frame):
    global received, _held_signal
    received = signum
    if _held_depth:  # a signal that bypassed the mask (one delivered again, or the memory guard's): defer it
        _held_signal = signum
        return
    raise Interrupted(signum)


def _unraisable(default):
    """An :class:`Interrupted` raised inside a finaliser is swallowed by Python (printed as "Exception ignored"):
    deliver the signal again instead, so it lands outside the finaliser and stops the run, silently."""

    def hook(unraisable):
        if isinstance(unraisable.exc_value, Interrupted):
            # from another thread a moment later, so it lands once the finaliser (and this hook) are done
            signum = unraisable.exc_value.signum
            threading.Timer(0.002, _thread.interrupt_main, args=(signum,)).start()
            return
        default(unraisable)

    return hook


@contextlib.contextmanager
def signals_as_exceptions():
    """While active, SIGINT and SIGTERM raise :class:`Interrupted` in the main thread (no-op elsewhere)."""
    global received
    received = None
    try:
        old = {s: signal.signal(s, _raise_interrupted) for s in _HELD}
    except ValueError:  # not the main thread
        yield
        return
    old_hook = sys.unraisablehook
    sys.unraisablehook = _unraisable(old_hook)
    try:
        yield
    finally:
        sys.unraisablehook = old_hook
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def signals_held():
    """Hold SIGINT and SIGTERM back (they are delivered when the block ends): masked at the OS level, and
    deferred by the handler for those that reach Python another way (``_thread.interrupt_main``)."""
    global _held_depth, _held_signal
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    _held_depth += 1
    try:
        yield
    finally:
        global received
        _held_depth -= 1
        if not _held_depth and _held_signal is None:
            # a signal held back by the mask is taken here, while still masked, and raised from this line: left
            # to the handler it would fire at some later bytecode, perhaps inside the caller's cleanup
            pending = signal.sigpending() & set(_HELD)
            if pending and signal.getsignal(next(iter(pending))) is _raise_interrupted:
                info = signal.sigtimedwait(_HELD, 0)
                while signal.sigtimedwait(_HELD, 0) is not None:  # and any other of them, at most once each
                    pass
                if info is not None:
                    _held_signal = received = info.si_signo
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        if not _held_depth and _held_signal is not None:
            signum, _held_signal = _held_signal, None
            raise Interrupted(signum)


def _nearest_existing_dir(path: Path) -> Path:
    p = path.absolute()
    while not p.is_dir():
        p = p.parent
    return p


def write_files(files: dict[Path, bytes | str]) -> None:
    """Write every file in ``files`` (path -> content) or none of them.

    Each file is written into a hidden staging folder (``.regioncount-*``) in the nearest existing folder
    above its target, on the same file system; once all are written they are renamed into place (missing
    folders made) with SIGINT and SIGTERM held, and the staging folders removed. On any error or signal
    before that point the staging folders are removed and no target is touched.
    """
    stages: dict[Path, Path] = {}
    staged: list[tuple[Path, Path]] = []
    try:
        for target, data in files.items():
            target = Path(target).absolute()
            base = _nearest_existing_dir(target.parent)
            with signals_held():
                if base not in stages:
                    stages[base] = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=base))
            tmp = stages[base] / f"{len(staged)}-{target.name}"
            raw = data.encode() if isinstance(data, str) else data
            with open(tmp, "wb") as f:
                f.write(raw)
                f.flush()
                os.fsync(f.fileno())
            staged.append((tmp, target))
        # the renames and the removal of the staging folders in one held section: a signal that reaches the
        # process through another thread (not masked there) is deferred to its end, so it cannot land
        # between the renames and the clean-up and leave a staging folder behind
        with signals_held():
            try:
                for tmp, target in staged:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(tmp, target)
            finally:
                _remove(stages)
    except OSError as e:
        from ._validate import OutputFileError

        raise OutputFileError(f"cannot write {e.filename or 'the results'}: {e.strerror or e}") from None
    finally:
        if stages:  # left by an error or a signal before the renames
            with signals_held():
                _remove(stages)


def _remove(stages: dict[Path, Path]) -> None:
    """Remove the staging folders and forget them."""
    for stage in stages.values():
        shutil.rmtree(stage, ignore_errors=True)
    stages.clear()
