"""Lazy re-exports for package ``__init__`` modules (PEP 562 module ``__getattr__``).

A package lists its public names with the private module each lives in; a name is imported the first time it
is used and then cached in the package's namespace. This keeps ``import regioncount`` (and the bounds path)
free of JAX, matplotlib and the engines until something needs them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_exports(
    namespace: dict[str, object], table: Mapping[str, str], subpackages: tuple[str, ...] = ()
) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for the package whose ``globals()`` is ``namespace``; ``table`` maps each
    public name to the module (relative, e.g. ``"._domain"``) that defines it; ``subpackages`` are public
    subpackages reachable as attributes (``regioncount.theory``) without an explicit import."""
    package = str(namespace["__name__"])

    def __getattr__(name: str):
        if name in subpackages:
            value = importlib.import_module(f".{name}", package)
        elif name in table:
            value = getattr(importlib.import_module(table[name], package), name)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table) | set(subpackages))

    return __getattr__, __dir__
