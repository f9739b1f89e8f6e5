"""JAX settings, applied without importing JAX.

x64 policy: regioncount computes in float64, and only where it computes. Its JAX entry points (the forward
passes of ``engines/_forward.py``, ``fit_relation``) run inside :func:`x64`, JAX's ``enable_x64`` context, and
are traced there; the caller's ``jax_enable_x64`` is left as it was, in every thread. ``import regioncount``
itself never imports JAX, so the bounds, the NumPy engines and ``--help`` start without it.

An import hook (:func:`when_jax_imported`) registers regioncount's network classes as JAX pytrees when JAX is
first imported (at once if it already is): a network built before JAX is imported still passes through
``jax.jit`` afterwards. It touches only regioncount's own classes.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

_F = TypeVar("_F", bound=Callable)

#: Memory cap (bytes) of a run when none is given: the sample engine's distinct-code table, the plane engine's
#: regions. Here, not in an engine, so that the NumPy path reads it without importing JAX.
DEFAULT_MEMORY_CAP = 4 * 2**30

_pending: list[Callable[[ModuleType], None]] = []


def when_jax_imported(callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(jax)`` now if JAX is imported, else right after the first ``import jax``."""
    jax = sys.modules.get("jax")
    if jax is not None and hasattr(jax, "tree_util"):
        callback(jax)
        return
    _pending.append(callback)
    if not any(isinstance(f, _JaxImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _JaxImportHook())


def _run_pending(jax: ModuleType) -> None:
    while _pending:
        _pending.pop(0)(jax)


class _LoaderThenCallbacks:
    """Wraps JAX's own loader (importlib's loader protocol): executes the module, then runs the callbacks."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        _run_pending(module)


class _JaxImportHook:
    """A one-shot ``sys.meta_path`` finder for the top-level ``jax`` package; it removes itself when asked."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "jax":
            return None
        sys.meta_path.remove(self)
        spec = None
        for finder in sys.meta_path:  # ask the other finders, in order, as the import system would
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _LoaderThenCallbacks(spec.loader)
        return spec


def x64():
    """A context in which JAX computes in 64 bits; on exit the caller's ``jax_enable_x64`` is back."""
    import jax

    enable = getattr(jax, "enable_x64", None)
    if enable is None:  # JAX before 0.5 kept the context in jax.experimental
        import jax.experimental as jex

        enable = jex.enable_x64  # type: ignore[attr-defined]  # absent from newer JAX's stubs
    return enable(True)


def in_x64(fn: _F) -> _F:
    """``fn`` run inside :func:`x64` (a jitted ``fn`` is then traced and compiled in 64 bits)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with x64():
            return fn(*args, **kwargs)

    return run  # type: ignore[return-value]
