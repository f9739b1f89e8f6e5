"""Shared CLI pieces: one-line errors, lazy progress bars, vectors from the command line, JSON output, the
options several commands share.

Start-up: this module (like every command module) imports neither NumPy nor rich; rich is imported the first
time a table or a progress bar is drawn (:func:`console`, :class:`LazyProgress`), NumPy by the library calls.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
import typer.core

from regioncount import RegionCountError, check_rss

from ._validate import box_callback

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID


def _flag_type_hidden(display_type_rich):
    """typer's help shows ``<bool>`` beside plain flags (--json, --help), which take no value: show nothing."""

    def display(self, ctx):
        if getattr(self, "is_flag", False) and self.metavar is None:
            return None
        return display_type_rich(self, ctx)

    return display


# a deliberate patch of typer's option class, for every command's help
typer.core.TyperOption.display_type_rich = _flag_type_hidden(typer.core.TyperOption.display_type_rich)  # type: ignore[method-assign]

# Options that several commands share, declared once so their help reads the same everywhere.
ModelArg = Annotated[
    Path,
    typer.Argument(
        metavar="MODEL",
        help="Model file: .npz (regioncount's layout, or a PyTorch Sequential state dict of Linear layers "
        "(0.weight, ... or fc1.weight, ...) with ReLU assumed between them: a state dict does not record it), "
        ".safetensors (a Sequential state dict of Linear layers, ReLU assumed) or .onnx (needs the onnx extra).",
    ),
]


def _box_option(help: str):
    return typer.Option(metavar="LO HI", callback=box_callback, help=help)


BoxOpt = Annotated[
    tuple[float, float], _box_option("LO HI: the box [LO, HI] in every input coordinate (or in u1, u2 for a slice).")
]
PlaneBoxOpt = Annotated[
    tuple[float, float],
    _box_option("LO HI: the box [LO, HI]^2 (a 2-input model), or [LO, HI]^2 in (u1, u2) for a slice."),
]
OriginOpt = Annotated[
    str | None,
    typer.Option(
        help="2D slice x = origin + u1 dir1 + u2 dir2: origin, comma-separated (or a .npy file of the input's shape)."
    ),
]
Dir1Opt = Annotated[str | None, typer.Option(help="Slice direction 1, comma-separated (or a .npy file).")]
Dir2Opt = Annotated[str | None, typer.Option(help="Slice direction 2, comma-separated (or a .npy file).")]
JsonOpt = Annotated[bool, typer.Option("--json", metavar="", help="Print one JSON object instead of a table.")]
NoLinearOpt = Annotated[
    bool,
    typer.Option("--no-linear", metavar="", help="Skip linear regions (merging neighbours with equal affine maps)."),
]
JsonFileOpt = Annotated[
    Path | None, typer.Option(help="Also write the JSON result to this file (whole or not at all).")
]


@functools.cache
def console() -> Console:
    """The rich console for tables on stdout: 120 columns when piped, so tables written to files or CI logs
    are not squeezed to 80."""
    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 120)


@functools.cache
def error_console() -> Console:
    """The rich console on stderr (progress bars)."""
    from rich.console import Console

    return Console(stderr=True)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print one clear line on stderr and exit non-zero."""
    print(f"regioncount: error: {' '.join(str(message).split())}", file=sys.stderr)
    raise typer.Exit(code)


def parse_vector(text: str | None, name: str):
    """``"1,2.5,-3"`` -> list of floats; None stays None."""
    if text is None:
        return None
    try:
        return [float(v) for v in text.replace(" ", "").split(",") if v != ""]
    except ValueError:
        fail(f"{name} must be comma-separated numbers, got {text!r}", 2)


def parse_ints(text: str, name: str) -> list[int]:
    try:
        vals = [int(v) for v in text.replace(" ", "").split(",") if v != ""]
    except ValueError:
        fail(f"{name} must be comma-separated integers, got {text!r}", 2)
    if not vals:
        fail(f"{name} is empty", 2)
    return vals


def _strict(obj):
    """``obj`` with every non-finite float (NaN, inf: not JSON) replaced by None."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strict(v) for v in obj]
    return obj


def dump_json(obj) -> str:
    """Strict JSON (``allow_nan=False``): a NaN or inf that reached a result is written as null, never as
    the NaN/Infinity tokens JSON readers reject."""
    if "numpy" in sys.modules:  # else nothing to convert (the bounds): leave NumPy unimported
        from regioncount import as_json_ready

        obj = as_json_ready(obj)
    return json.dumps(_strict(obj), indent=2, allow_nan=False)


def _stderr_may_be_a_terminal() -> bool:
    """False where rich would not draw a bar on stderr either (not a terminal, not forced by the environment),
    decided without importing rich (a tenth of a second of start-up for a piped or logged run)."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        tty = False
    return tty or any(os.environ.get(k) for k in ("FORCE_COLOR", "TTY_INTERACTIVE", "TTY_COMPATIBLE"))


class LazyProgress:
    """A ``progress(done, total)`` callback that shows a rich bar on stderr only once work has run ~1.5 s."""

    def __init__(self, description: str, delay: float = 1.5):
        self.description = description
        self.delay = delay
        self.t0 = time.perf_counter()
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, done: float, total: float) -> None:
        check_rss()  # the measured --memory-cap, in the main thread, as the work advances
        if self.bar is None:
            if (
                time.perf_counter() - self.t0 < self.delay
                or not _stderr_may_be_a_terminal()
                or not error_console().is_terminal
            ):
                return
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=error_console(),
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task(self.description, total=total)
        if self.task is not None:
            self.bar.update(self.task, completed=done, total=total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def guarded(fn):
    """Run ``fn``; library errors become one clear line with the exit status of their class."""
    from ._validate import LIMIT, exit_code_for, message_for

    try:
        return fn()
    except RegionCountError as e:
        fail(message_for(e), exit_code_for(e))
    except MemoryError:
        fail("out of memory: the run needed more memory than the machine could give; ask for less", LIMIT)
