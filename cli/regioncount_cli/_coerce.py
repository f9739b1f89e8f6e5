"""Plain command-line values converted without pydantic.

typer (0.29 and later) converts every parameter value through a pydantic ``TypeAdapter``; importing pydantic
for that costs more start-up than the rest of a ``regioncount count`` before its engine. Parameters of the
plain kinds this CLI declares (``str``, ``int``, ``float``, ``bool``, ``Path``, and tuples or lists of them,
with no parser, choices, range or file mode) get a converter that handles the unambiguous spellings itself (digits,
decimal numbers, paths) and hands every other value to typer's own conversion, built the first time one is
needed: results and error messages stay typer's (``tests/test_cli_errors.py`` checks them against typer).

It replaces ``typer.core.build_runtime_param``, the hook typer's parameters call on first use, and does so
only when typer's private modules look as expected; otherwise typer's conversion is left as it is.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args, get_origin

import typer.core

if TYPE_CHECKING:
    from typer._click import Context
    from typer._coercion import RuntimeParam, TypeDescriptor

#: Spellings whose value every converter agrees on: optional minus, no leading zeros, no spaces or
#: underscores, a bounded number of digits (ints) or exponent digits (floats).
_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,17})?(?:[eE][-+]?[0-9]{1,3})?")
_LEAVES = (str, int, float, bool, Path)


class NotPlain(Exception):
    """A value the fast path leaves to typer."""


def _leaf(annotation: Any, value: Any, descriptor: TypeDescriptor, param: Any, ctx: Context) -> Any:
    from typer._param_types import coerce_cli_path

    if type(value) is annotation and annotation is not Path:  # a default of the declared type
        return value
    if annotation is Path and (isinstance(value, Path) or (isinstance(value, str) and value)):
        # typer's own path checks (file or folder, readable, ...), given the Path pydantic would make
        path = value if isinstance(value, Path) else Path(value)
        return coerce_cli_path(path, descriptor.parameter_info, path_type=Path, param=param, ctx=ctx)
    if isinstance(value, str):
        if annotation is int and _INT.fullmatch(value):
            return int(value)
        if annotation is float and _FLOAT.fullmatch(value):
            return float(value)
    raise NotPlain


def plain_value(descriptor: TypeDescriptor, value: Any, param: Any, ctx: Context) -> Any:
    """``value`` converted for ``descriptor``'s annotation; :class:`NotPlain` where typer must decide."""
    annotation = descriptor.annotation
    origin = get_origin(annotation)
    if origin is tuple:
        kinds = get_args(annotation)
        if not isinstance(value, (list, tuple)) or len(value) != len(kinds):
            raise NotPlain
        return tuple(_leaf(k, v, descriptor, param, ctx) for k, v in zip(kinds, value))
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise NotPlain
        (kind,) = get_args(annotation)
        return [_leaf(kind, v, descriptor, param, ctx) for v in value]
    return _leaf(annotation, value, descriptor, param, ctx)


def is_plain(descriptor: TypeDescriptor) -> bool:
    """Whether ``descriptor`` is a parameter of the plain kinds (see the module docstring)."""
    from typer._param_types import routes_to_path

    info = descriptor.parameter_info
    if descriptor.file_annotation is not None or info.parser is not None or info.path_type is not None:
        return False
    if descriptor.is_choice or descriptor.is_ranged:
        return False
    annotation = descriptor.annotation
    origin = get_origin(annotation)
    kinds = get_args(annotation) if origin in (tuple, list) else (annotation,)
    if origin is list and len(kinds) != 1:
        return False
    if str in kinds and routes_to_path(str, info):  # a str with path checks: typer's conversion
        return False
    return bool(kinds) and all(k in _LEAVES for k in kinds)


#: typer's own ``build_runtime_param``, once :func:`install` has put the plain converter in front of it.
typer_build: Callable[[TypeDescriptor], RuntimeParam] | None = None


def install() -> bool:
    """Route typer's parameters of the plain kinds through :func:`plain_value`; False (and nothing changed)
    where typer's private hook is not the one this module knows."""
    global typer_build
    if typer_build is not None:
        return True
    try:
        from typer import _coercion
        from typer._coercion import build_runtime_param as own
        from typer._param_types import coerce_cli_path, routes_to_path  # noqa: F401  (used on first values)
    except ImportError:
        return False
    if getattr(typer.core, "build_runtime_param", None) is not own or not hasattr(_coercion, "RuntimeParam"):
        return False

    @dataclass(frozen=True)
    class PlainParam(_coercion.RuntimeParam):
        descriptor: Any

        @functools.cached_property
        def typer_param(self) -> RuntimeParam:
            return own(self.descriptor)

        def _coerce_value(self, value: Any, param: Any, ctx: Context) -> Any:
            try:
                return plain_value(self.descriptor, value, param, ctx)
            except NotPlain:
                return self.typer_param._coerce_value(value, param=param, ctx=ctx)

    def build_runtime_param(descriptor: TypeDescriptor) -> RuntimeParam:
        if is_plain(descriptor):
            return PlainParam(
                parameter_info=descriptor.parameter_info, annotation=descriptor.annotation, descriptor=descriptor
            )
        return own(descriptor)

    typer_build = own
    typer.core.build_runtime_param = build_runtime_param
    return True
