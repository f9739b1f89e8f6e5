"""``regioncount``: the typer app and the console entry point ``main``.

One module per command: ``count``, ``bound``, ``build`` (its subcommands), ``scan``, ``track``, ``_plot`` (``plot``
and ``plot-line``), ``view`` (the atlas page) and ``relation`` (``relation fit`` and ``retrieval``). A command's
module is imported, and its
click command built, only when that command runs or a help lists it, so ``regioncount bound`` imports neither
NumPy nor JAX and ``count`` imports no other command's engines.
"""

# ruff: noqa: E402  (the start-up signal handlers come before the imports they guard)
from __future__ import annotations

import os
import signal
import sys


def _early_stop(signum, frame):
    """SIGINT or SIGTERM while the command starts (its imports, before :func:`main` holds the signals):
    nothing has been written yet; one line and the signal's status, never a traceback."""
    os.write(2, b"regioncount: error: interrupted while starting; nothing was written\n")
    os._exit(143 if signum == signal.SIGTERM else 130)


#: BLAS thread pools the command starts with one thread each, unless the environment says otherwise: the engines
#: run many small products, and their parallel work goes to worker processes (one per core), which a second
#: BLAS thread per process only slows (the 46,122-region count on 2 cores: 0.93-0.97 s wall with OpenBLAS's
#: default threads, 0.62-0.65 s with one, benchmarks/README.md). Read by the BLAS library when NumPy loads, so set
#: before any import.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")

if __name__ == "__main__" or os.path.basename(sys.argv[0]) == "regioncount":  # the command, not an import
    signal.signal(signal.SIGINT, _early_stop)
    signal.signal(signal.SIGTERM, _early_stop)
    for _name in BLAS_THREADS:
        os.environ.setdefault(_name, "1")

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Annotated, Any

import typer
import typer.core

from regioncount import RegionCountError

from . import (
    _coerce,
    _common,  # noqa: F401  (hides typer's <bool> beside flags, before any help is drawn)
    _validate as checks,
)

_coerce.install()  # plain option values converted without importing pydantic (start-up)

#: Every command: its module, the attribute there (a function, or a typer app for a group of subcommands)
#: and whether it is a group, in the order the help lists them.
COMMANDS: dict[str, tuple[str, str, bool]] = {
    "count": (".count", "count", False),
    "bound": (".bound", "bound", False),
    "scan": (".scan", "scan", False),
    "track": (".track", "track", False),
    "plot": ("._plot", "plot", False),
    "plot-line": ("._plot", "plot_line", False),
    "view": (".view", "view", False),
    "retrieval": (".relation", "retrieval", False),
    "build": (".build", "build_app", True),
    "relation": (".relation", "relation_app", True),
}


def _no_options() -> None:
    """The callback that makes a one-command typer app a group."""


def build_command(name: str) -> Any:
    """The click command of ``name``, built by typer as if it were registered on the app itself."""
    module, attr, group = COMMANDS[name]
    obj = getattr(importlib.import_module(module, __package__), attr)
    holder = typer.Typer()
    holder.callback()(_no_options)
    if group:
        holder.add_typer(obj, name=name)
    else:
        holder.command(name)(obj)
    command = typer.main.get_group(holder).commands[name]
    for cmd in [command, *getattr(command, "commands", {}).values()]:  # a group: each of its subcommands
        checks.guard_memory(cmd)
    return command


class _LazyCommands(MutableMapping[str, Any]):
    """A group's commands, each built on first use: running one command builds only that one, a help builds
    those it lists, and the names (for "did you mean") build none."""

    def __init__(self, built: dict[str, Any]):
        self._built = dict(built)

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in COMMANDS:
                raise KeyError(name)
            self._built[name] = build_command(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*COMMANDS, *self._built]))

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self._built))


class LazyGroup(typer.core.TyperGroup):
    """The root group: its commands come from :data:`COMMANDS`, built when first looked up."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.commands = _LazyCommands(dict(self.commands))


app = typer.Typer(
    name="regioncount",
    cls=LazyGroup,
    help="Count, certify and draw the regions of piecewise networks (ReLU MLPs, Maxout, hardmax/ReLU-attention "
    "Transformers) and set the counts beside the theory's bounds.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _show_version(value: bool):
    if value:
        print(f"regioncount {checks.tool_version()}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, metavar="", help="Print the version and exit."
        ),
    ] = False,
):
    """Count, certify and draw the regions of piecewise networks (ReLU MLPs, Maxout, hardmax/ReLU-attention
    Transformers) and set the counts beside the theory's bounds."""


def main(argv: list[str] | None = None) -> int:
    """Console entry point. Every error is one line ``regioncount: error: ...`` on stderr with the exit status
    of its class (``_validate.EXIT_CODES``), never a traceback; SIGINT and SIGTERM stop the run cleanly."""
    from typer._click import exceptions as click_exc

    from . import _files

    args = checks.rewrite_aliases(list(sys.argv[1:] if argv is None else argv))
    code = 0
    guard = None
    late: list[int] = []

    def _late(signum, frame):
        late.append(signum)

    try:
        with _files.signals_as_exceptions():
            try:
                try:
                    rv = app(args=args, prog_name="regioncount", standalone_mode=False)
                    code = rv if isinstance(rv, int) else 0
                finally:
                    guard = checks.stop_guard()
                if guard is not None:
                    guard.raise_if_tripped()
                if _files.received is not None or code == checks.SIGINT_EXIT:
                    # typer turns an interrupt into exit status 130; say which signal it was
                    raise _files.Interrupted(_files.received or signal.SIGINT)
            except KeyboardInterrupt as e:
                code = _interrupted(e, guard)
            except typer.Exit as e:
                code = e.exit_code
            except click_exc.NoArgsIsHelpError as e:  # the help is printed; say in one line what was missing
                checks.print_error(f"no command given: run `{e.ctx.command_path if e.ctx else 'regioncount'} --help`")
                code = checks.USAGE
            except typer.Abort:
                checks.print_error("aborted")
                code = checks.SIGINT_EXIT
            except click_exc.ClickException as e:  # usage errors: unknown option, bad value, missing argument
                checks.print_error(e.format_message())
                code = e.exit_code if e.exit_code else checks.USAGE
            except (RegionCountError, MemoryError) as e:
                checks.print_error(checks.message_for(e) or "out of memory")
                code = checks.exit_code_for(e)
            except Exception as e:
                if _files.received is not None:
                    # the signal itself, turned into another error where it landed (a C extension's import
                    # fails with "ImportError: initialization failed" when interrupted): an interrupt
                    code = _interrupted(_files.Interrupted(_files.received), guard)
                else:  # a bug: still one line, with what to report
                    checks.print_error(f"internal error, please report it: {type(e).__name__}: {e}")
                    code = checks.INTERNAL
        if argv is None:
            for s in (signal.SIGINT, signal.SIGTERM):
                signal.signal(s, _late)
    except KeyboardInterrupt as e:  # a signal in the moment the handlers were put back
        code = _interrupted(e, guard)
        if argv is None:
            for s in (signal.SIGINT, signal.SIGTERM):
                signal.signal(s, _late)
    if argv is None:
        # The run is over: a signal from here on finds every file written whole (or removed), and still
        # ends the run with its status (it was once ignored here, and the run exited 0).
        if late and code == 0:
            sig = late[0]
            checks.print_error(
                "terminated (SIGTERM); its files were written whole"
                if sig == signal.SIGTERM
                else "interrupted; its files were written whole"
            )
            code = checks.SIGTERM_EXIT if sig == signal.SIGTERM else checks.SIGINT_EXIT
        # Leave without the interpreter's teardown: finalisers of compiled code and plotting threads (XLA,
        # matplotlib) have crashed there (SIGSEGV after Ctrl-C); every file was already written whole or removed.
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
        os._exit(code)
    return code


def _interrupted(e: KeyboardInterrupt, guard) -> int:
    """An interrupt is the memory guard's stop, SIGTERM or SIGINT; each gets its own line and status."""
    from ._files import Interrupted

    if guard is not None and guard.tripped_at:
        try:
            guard.raise_if_tripped()
        except RegionCountError as err:
            checks.print_error(str(err))
        return checks.LIMIT
    if isinstance(e, Interrupted) and e.signum == signal.SIGTERM:
        checks.print_error("terminated (SIGTERM); no file was half-written")
        return checks.SIGTERM_EXIT
    checks.print_error("interrupted; no file was half-written")
    return checks.SIGINT_EXIT


if __name__ == "__main__":
    main()
