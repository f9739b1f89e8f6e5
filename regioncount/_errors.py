"""Errors the library raises for input it cannot honestly answer. The CLI prints their message as one line."""


class RegionCountError(ValueError):
    """Base class: bad input or a question this engine cannot answer exactly."""


class ModelFileError(RegionCountError):
    """A model file is missing, malformed, inconsistent or holds non-finite numbers."""


class DomainError(RegionCountError):
    """A domain of zero area/length, or LO >= HI."""


class MemoryCapError(RegionCountError):
    """The run would exceed the memory cap."""


class CurvedBoundaryError(RegionCountError):
    """The plane engine met a curved (quadric) boundary it cannot split exactly."""


class NotPiecewiseError(RegionCountError):
    """The network is smooth (softmax attention): it has no pieces to count."""


class DegreeTooHighError(RegionCountError):
    """The line engine's polynomials would exceed the supported degree."""


class InexactError(RegionCountError):
    """An exact engine could not decide a predicate exactly (float bounds too wide, no exact fallback), or
    float64 overflowed: it stops rather than give a number it cannot stand behind."""


class CertificateError(RegionCountError):
    """An independent check of an exact result failed (``--certify``)."""


class KeySetError(RegionCountError):
    """A retrieval key set that does not fit its model: empty, of the wrong dimension, or not finite."""


class ResidentMemoryError(MemoryCapError):
    """The process's measured resident memory passed the limit set in :mod:`regioncount._memory`."""

    def __init__(self, resident: int, limit: int):
        super().__init__(
            f"resident memory reached {resident / 2**30:.2f} GiB, past the limit of {limit / 2**30:.2f} GiB"
        )
        self.resident, self.limit = resident, limit

    def __reduce__(self):  # rebuilt from its numbers when a worker process raises it
        return type(self), (self.resident, self.limit)


class WriteError(RegionCountError):
    """A file or folder the library was asked to write cannot be written (a path that is a file, a folder
    without write permission, a full disk)."""
