"""Checks every command runs before any work: option ranges, input and output files, memory.

Each error class has one exit status (:data:`EXIT_CODES`, documented in the README); a failed check prints
one line ``regioncount: error: ...`` on stderr that names the option and the range it accepts.

Option checks are typer callbacks (``typer.Option(callback=at_least(1))``), so they run while the command
line is parsed, before a command body starts. A command with ``--memory-cap`` (:data:`MemoryCapOpt`) runs its
body inside ``with MemoryGuard(cap):`` (``main.build_command`` wraps it), which reads the resident set size of
the process from ``/proc/self/statm`` while the body runs and stops it with
:class:`~regioncount.MemoryCapError` once the cap is passed.
"""

from __future__ import annotations

import _thread
import functools
import math
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from regioncount import (
    DomainError,
    MemoryCapError,
    ModelFileError,
    RegionCountError,
    ResidentMemoryError,
    WriteError,
    children_rss_bytes,
    rss_bytes,
    set_rss_limit,
)

# One exit status per error class.
OK = 0
CANNOT_ANSWER = 1  # a valid question this engine or network cannot answer (curved cells, smooth attention, ...)
USAGE = 2  # an unknown option, a value out of range, options that conflict or do not apply, LO >= HI
INPUT_FILE = 3  # a model file that is missing, a directory, unreadable, malformed or non-finite
OUTPUT_FILE = 4  # an output path that is a directory, unwritable, an input, or named twice
LIMIT = 5  # over --memory-cap (refused up front, or measured while running) or over a size limit
INTERNAL = 70  # a bug: an exception regioncount did not expect (still one line, never a traceback)
SIGINT_EXIT = 130
SIGTERM_EXIT = 143

EXIT_CODES = {
    OK: "success",
    CANNOT_ANSWER: "the engine cannot answer this question for this network exactly",
    USAGE: "bad command line: unknown option, value out of range, conflicting or inapplicable options",
    INPUT_FILE: "input model file missing, unreadable, malformed or non-finite",
    OUTPUT_FILE: "output path refused: a directory, not writable, an input, or named twice",
    LIMIT: "resource limit: over --memory-cap, or a result too large to compute",
    INTERNAL: "internal error (a bug; please report the line)",
    SIGINT_EXIT: "interrupted (SIGINT); no file was half-written",
    SIGTERM_EXIT: "terminated (SIGTERM); no file was half-written",
}


class UsageError(RegionCountError):
    """An option value out of range or options that conflict (exit status 2)."""


class OutputFileError(RegionCountError):
    """An output path that cannot or must not be written (exit status 4)."""


class LimitError(MemoryCapError):
    """A request too large to compute within the limits (exit status 5)."""


def exit_code_for(exc: BaseException) -> int:
    """The documented exit status for a library or CLI error."""
    if isinstance(exc, (UsageError, DomainError)):
        return USAGE
    if isinstance(exc, ModelFileError):
        return INPUT_FILE
    if isinstance(exc, (OutputFileError, WriteError)):
        return OUTPUT_FILE
    if isinstance(exc, (MemoryCapError, MemoryError)):
        return LIMIT
    if isinstance(exc, RegionCountError):
        return CANNOT_ANSWER
    return INTERNAL


def message_for(exc: BaseException) -> str:
    """The one line for an error: the engines' measured-memory stop is told against --memory-cap."""
    if isinstance(exc, ResidentMemoryError) and active_guard is not None:
        return (
            f"resident memory reached {exc.resident / 2**30:.2f} GiB, at the --memory-cap of "
            f"{active_guard.cap / 2**30:.3g} GiB: the run was stopped; raise --memory-cap or ask for less"
        )
    return str(exc)


# ---------------------------------------------------------------------------------------------------------
# option callbacks


def at_least(minimum: int, maximum: int | None = None):
    """A typer callback: an integer option in ``[minimum, maximum]`` (None passes through)."""

    def check(param: typer.CallbackParam, value):
        if value is None:
            return value
        if value < minimum or (maximum is not None and value > maximum):
            rng = f"at least {minimum:,}" if maximum is None else f"from {minimum:,} to {maximum:,}"
            raise typer.BadParameter(f"must be an integer {rng}, got {value}")
        return value

    return check


def finite(minimum: float | None = None, maximum: float | None = None, *, open_min: bool = False):
    """A typer callback: a finite float option (each element of a tuple) within the given limits."""

    def one(param, v):
        ok = math.isfinite(v) and (minimum is None or (v > minimum if open_min else v >= minimum))
        ok = ok and (maximum is None or v <= maximum)
        if not ok:
            lo = "" if minimum is None else (f" above {minimum:g}" if open_min else f" at least {minimum:g}")
            hi = "" if maximum is None else f"{' and' if lo else ''} at most {maximum:g}"
            raise typer.BadParameter(f"must be a finite number{lo}{hi}, got {v}")

    def check(param: typer.CallbackParam, value):
        if value is None:
            return value
        for v in value if isinstance(value, tuple) else (value,):
            one(param, v)
        return value

    return check


def one_of(*choices: str):
    """A typer callback: a string option that must be one of ``choices``."""

    def check(param: typer.CallbackParam, value):
        if value is not None and value not in choices:
            raise typer.BadParameter(f"must be one of {', '.join(choices)}, got {value!r}")
        return value

    return check


def box_callback(param: typer.CallbackParam, value):
    """``--box LO HI``: two finite numbers with LO < HI."""
    finite()(param, value)
    if value is not None and not value[0] < value[1]:
        raise typer.BadParameter(f"LO must be below HI, got LO={value[0]:g}, HI={value[1]:g}")
    return value


def explicit(name: str) -> bool:
    """Whether the running command's parameter ``name`` (its Python name) was typed on the command line."""
    from typer._click.core import ParameterSource
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE


def usage(message: str):
    raise UsageError(message)


def not_applicable(option: str, why: str):
    """Refuse an option the run would otherwise ignore silently."""
    raise UsageError(f"{option} does not apply here: {why}")


# ---------------------------------------------------------------------------------------------------------
# memory


class MemoryGuard:
    """Stops the command once the process's resident memory passes the cap.

    A daemon thread reads ``/proc/self/statm`` every ``interval`` seconds; past ``trip = cap - margin`` it
    interrupts the main thread (``_thread.interrupt_main``), and :meth:`raise_if_tripped` turns that
    interrupt into :class:`MemoryCapError`; the engines also check against ``trip`` in the main thread
    (:func:`regioncount.check_rss`). The margin (40% of the cap, within 320 MiB and 2 GiB) absorbs
    what is allocated between a check and the stop: up to about 620 MB measured (one batch of attention
    temporaries of the exact plane engine on the (4,3,2,9) construction, on a loaded machine), so the peak stays
    under the cap.
    """

    def __init__(self, cap_bytes: int, interval: float = 0.005):
        self.cap = int(cap_bytes)
        self.trip = self.cap - min(max(self.cap * 2 // 5, 320 * 2**20), 2 * 2**30)
        self.interval = interval
        self.tripped_at = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous: Any = None  # the SIGINT handler :meth:`_listen` replaced, if it did

    def start(self) -> MemoryGuard:
        now = rss_bytes()
        if now > self.trip:
            raise MemoryCapError(
                f"--memory-cap {self.cap / 2**30:.3g} GiB is below what this process holds before any work "
                f"({now / 2**30:.2f} GiB resident): raise --memory-cap"
            )
        self._listen()
        self._thread = threading.Thread(target=self._watch, name="regioncount-memory-guard", daemon=True)
        self._thread.start()
        set_rss_limit(self.trip)  # the engines also check, in the main thread, wherever they grow
        return self

    def _listen(self) -> None:
        """Make sure the watcher's interrupt reaches the main thread. ``_thread.interrupt_main`` does nothing
        where SIGINT is ignored, as it is in a job a shell starts in the background (``regioncount count ... &``
        in a script), or left to the system: there a handler is installed while the guard runs that raises
        KeyboardInterrupt for the watcher alone and otherwise does what the signal did before."""
        if threading.current_thread() is not threading.main_thread():
            return
        before = signal.getsignal(signal.SIGINT)
        if before not in (signal.SIG_IGN, signal.SIG_DFL):
            return  # Python's own handler (or a caller's): the interrupt arrives as it is

        def on_interrupt(signum, frame):
            if self.tripped_at:
                raise KeyboardInterrupt
            if before == signal.SIG_DFL:  # a real SIGINT where the system's default was in place: end as it would
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGINT)

        signal.signal(signal.SIGINT, on_interrupt)
        self._previous = before

    def _watch(self) -> None:
        # this process every interval; its worker processes (Dask tiles, scan workers) every 0.1 s, since
        # reading them walks /proc: the cap holds for the whole process tree
        every = max(1, int(0.1 / self.interval))
        tick, workers = 0, 0
        while not self._stop.wait(self.interval):
            if tick % every == 0:
                workers = children_rss_bytes()
            tick += 1
            now = rss_bytes() + workers
            if now > self.trip:
                self.tripped_at = now
                _thread.interrupt_main()
                return

    def stop(self) -> None:
        set_rss_limit(None)
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None
        previous, self._previous = self._previous, None
        if previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, previous)

    def __enter__(self) -> MemoryGuard:
        global active_guard
        stop_guard()
        active_guard = self.start()
        return self

    def __exit__(self, typ, exc, tb) -> None:
        # the guard stays active_guard until main's stop_guard(): an interrupt it sent may land after this
        self.stop()
        if self.tripped_at and (typ is None or issubclass(typ, KeyboardInterrupt)):
            self.raise_if_tripped()

    def raise_if_tripped(self) -> None:
        """Raise :class:`MemoryCapError` if the watcher stopped the run."""
        if self.tripped_at:
            raise MemoryCapError(
                f"resident memory reached {self.tripped_at / 2**30:.2f} GiB, at the --memory-cap of "
                f"{self.cap / 2**30:.3g} GiB: the run was stopped; raise --memory-cap or ask for less"
            )


#: The guard of the command now running or just run (entered around its body, cleared by ``main``).
active_guard: MemoryGuard | None = None


def stop_guard() -> MemoryGuard | None:
    """Stop the running guard and return it (None if none ran)."""
    global active_guard
    guard, active_guard = active_guard, None
    if guard is not None:
        guard.stop()
    return guard


def memory_cap_callback(value: float):
    """``--memory-cap GIB``: a finite number of GiB above 0 (the guard itself runs around the command body)."""
    if value is not None and not (math.isfinite(value) and 0 < value <= 65536):
        raise typer.BadParameter(f"must be a number of GiB above 0 and at most 65536, got {value}")
    return value


def guard_memory(command) -> None:
    """Run the click ``command``'s body inside ``with MemoryGuard(--memory-cap):`` if it has that option."""
    fn = command.callback
    if fn is None or not any(p.name == "memory_cap" for p in command.params):
        return

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with MemoryGuard(int(kwargs["memory_cap"] * 2**30)):
            return fn(*args, **kwargs)

    command.callback = run


MemoryCapOpt = Annotated[
    float,
    typer.Option(
        "--memory-cap",
        callback=memory_cap_callback,
        help="Memory cap in GiB: runs known to need more are refused before they start, and a run whose "
        "measured resident memory reaches the cap is stopped (exit status 5).",
    ),
]


def refuse_over_cap(need_bytes: float, cap_gib: float, what: str) -> None:
    """Refuse up front a run whose known size is over the memory cap."""
    if need_bytes > cap_gib * 2**30:
        raise LimitError(
            f"{what} needs about {need_bytes / 2**30:,.1f} GiB, over the --memory-cap of {cap_gib:g} GiB: "
            "ask for less or raise --memory-cap"
        )


# ---------------------------------------------------------------------------------------------------------
# files


def check_model_file(path: Path, option: str = "MODEL") -> None:
    """An input model path must be an existing regular file that can be read."""
    if path.is_dir():
        raise ModelFileError(f"{option} {path} is a directory, not a model file")
    if not path.exists():
        raise ModelFileError(f"{option} {path}: no such model file")
    if not os.access(path, os.R_OK):
        raise ModelFileError(f"{option} {path}: cannot be read (permission denied)")


def _nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists():
        p = p.parent
    return p


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def check_outputs(outputs: dict[str, Path | None], inputs: dict[str, Path | None] | None = None) -> None:
    """Refuse, before any work, output files that could not be written whole or must not be written:
    an existing directory, a folder that does not exist and cannot be made, one without write permission,
    an input of the same run, or a path named twice. ``outputs``/``inputs`` map an option name to a path."""
    named = {k: Path(v) for k, v in outputs.items() if v is not None}
    ins = {k: Path(v) for k, v in (inputs or {}).items() if v is not None}
    for opt, path in named.items():
        if path.is_dir():
            raise OutputFileError(f"{opt} {path} is a directory; give a file name")
        if path.exists() and not path.is_file():
            raise OutputFileError(f"{opt} {path} exists and is not a regular file")
        base = _nearest_existing(path.parent)
        if not base.is_dir():
            raise OutputFileError(f"{opt} {path}: {base} is a file, not a folder")
        if not os.access(base, os.W_OK | os.X_OK):
            raise OutputFileError(f"{opt} {path}: cannot write in {base} (permission denied)")
        for iopt, ipath in ins.items():
            if _same(path, ipath):
                raise OutputFileError(f"{opt} {path} is the input {iopt}; it is never overwritten: choose another path")
    items = list(named.items())
    for i, (a, pa) in enumerate(items):
        for b, pb in items[i + 1 :]:
            if _same(pa, pb):
                raise OutputFileError(f"{a} and {b} name the same file {pa}; each output needs its own path")


def check_output_dir(opt: str, path: Path, inputs: dict[str, Path | None] | None = None) -> None:
    """An output folder must be a folder (or not exist yet) inside a writable folder."""
    if path.exists() and not path.is_dir():
        raise OutputFileError(f"{opt} {path} is a file; give a folder")
    base = _nearest_existing(path)
    if not base.is_dir():
        raise OutputFileError(f"{opt} {path}: {base} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise OutputFileError(f"{opt} {path}: cannot write in {base} (permission denied)")


# ---------------------------------------------------------------------------------------------------------
# one name per quantity; old spellings stay as hidden aliases

#: Per command (as typed: "scan", "bound", "build bound-transformer", ...), old spelling -> current name.
ALIASES: dict[str, dict[str, str]] = {
    "scan": {"-T": "--tokens", "--T": "--tokens", "--q": "--inputs", "--D": "--depth"},
    "bound": {"--T": "--tokens", "-T": "--tokens", "--q": "--inputs", "--n0": "--inputs", "--D": "--depth"},
    "build bound-transformer": {"--T": "--tokens", "-T": "--tokens", "--q": "--inputs", "--D": "--depth"},
    "build product-relu": {"--n0": "--inputs"},
    "build product-maxout": {"--n0": "--inputs"},
    "build random-transformer": {"-T": "--tokens", "--T": "--tokens"},
    "plot": {"--max-regions": "--region-cap"},
}


def command_of(argv: list[str]) -> str:
    """The command path named by ``argv`` (``"count"``, ``"build compile"``), or ``""``."""
    words = [a for a in argv if not a.startswith("-")][:2]
    if not words:
        return ""
    return " ".join(words) if words[0] == "build" and len(words) > 1 else words[0]


def rewrite_aliases(argv: list[str]) -> list[str]:
    """Replace old option spellings by the current ones (``--T 3`` and ``--T=3`` alike)."""
    table = ALIASES.get(command_of(argv), {})
    if not table:
        return argv
    out = []
    for a in argv:
        head, eq, tail = a.partition("=")
        out.append(table[head] + eq + tail if head in table else a)
    return out


def tool_version() -> str:
    """The package's version (the wheel's metadata is built from the same ``__version__``)."""
    import regioncount

    return regioncount.__version__


def print_error(message: str) -> None:
    line = " ".join(str(message).split())
    print(f"regioncount: error: {line}", file=sys.stderr)
