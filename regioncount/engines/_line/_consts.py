"""The line engine's named tolerances and block size (their values live in ``regioncount._tolerances``)."""

from ... import _tolerances as tol

_ZERO = tol.LINE_ZERO  # relative size below which a compared polynomial counts as identically zero
_NOISE = tol.LINE_NOISE  # relative margin below which a midpoint decision is not trusted
_S_EPS = tol.LINE_SUBINTERVAL  # smallest sub-interval, relative to its parent (local units)
_T_EPS = tol.LINE_T_RESOLUTION  # smallest sub-interval in t
_CHUNK = 1 << 22  # floats per temporary array: ops run on blocks of intervals of about this size
_IMAG = 1e-6  # companion eigenvalues with a smaller imaginary part are candidate (near-double) roots
