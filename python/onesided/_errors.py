"""The package's exceptions: every failure is an ``OnesidedError``; a call refused with an MPI
error class is an ``MpiError`` whose ``error_class`` says which (``ErrorClass.RMA_SYNC`` …).
"""

import enum
from typing import Dict, Optional, Type


class ErrorClass(enum.IntEnum):
    """An MPI error class, with its stable wire value (``onesided.v1``'s ``MpiError.class``)."""

    WIN = 1
    BASE = 2
    SIZE = 3
    DISP = 4
    LOCKTYPE = 5
    ASSERT = 6
    RMA_CONFLICT = 7
    RMA_SYNC = 8
    RMA_RANGE = 9
    RMA_ATTACH = 10
    RMA_SHARED = 11
    RMA_FLAVOR = 12
    RANK = 13
    TYPE = 14
    OP = 15
    COUNT = 16
    ARG = 17
    GROUP = 18
    INFO = 19
    PROC_FAILED = 20
    NO_MEM = 21
    INTERN = 22
    OTHER = 23
    IO = 24
    REQUEST = 25

    @property
    def mpi_name(self) -> str:
        """The MPI constant's name, ``MPI_ERR_RMA_SYNC``."""
        return "MPI_ERR_" + self.name

    def __str__(self) -> str:
        return self.mpi_name


class StatusCode(enum.IntEnum):
    """A gRPC status code, named as gRPC names them."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16

    def __str__(self) -> str:
        return self.name


class OnesidedError(Exception):
    """A call failed. ``code`` is the gRPC status code it maps to; ``error_class`` is the MPI
    error class, or None when the failure has none (authentication, transport)."""

    error_class: Optional[ErrorClass] = None

    def __init__(self, message: str, code: StatusCode) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class MpiError(OnesidedError):
    """The call was refused with an MPI error class, by the library at the call (a bounds
    check at the origin) or by the server, or a call reports the refusal of one it completed.
    ``unchanged`` is True when the server refused the call itself before it changed anything
    (its audit store away): the window's state here is as before the call, and the same call
    may simply be made again."""

    error_class: ErrorClass

    def __init__(
        self, message: str, code: StatusCode, error_class: ErrorClass, unchanged: bool = False
    ) -> None:
        super().__init__(message, code)
        self.error_class = error_class
        self.unchanged = unchanged


class ArgumentError(MpiError, ValueError):
    """A name or value given to a call that the library cannot use, refused before anything
    is sent: an unknown datatype, op, lock type, flavor, memory model or subarray order. An
    ``MpiError`` of its class (``ErrorClass.TYPE``, ``OP``, ``LOCKTYPE``, ``ARG``) and a
    ``ValueError``."""


class StatusError(OnesidedError):
    """A gRPC failure that carries no MPI class (UNAUTHENTICATED, NOT_FOUND, ALREADY_EXISTS …)."""


class ConnectError(OnesidedError):
    """The server could not be reached."""


class DisconnectedError(OnesidedError):
    """The session's stream ended; the calls in flight failed."""


class ConfigError(OnesidedError, ValueError):
    """A client-side setting cannot be used: an address without ``http://`` or ``https://``, a
    CA file that holds no certificate, a token file that is missing, unreadable or empty
    (``read_token``), a token that is not printable ASCII, a timeout that is not a number of
    seconds > 0. Also a ``ValueError``; the message says which setting and what is wrong."""


class ProtocolError(OnesidedError):
    """The server answered something this library did not expect."""


class AuditStoreError(OnesidedError):
    """The audit store this session writes its own events to cannot be used."""


_KINDS: Dict[str, Type[OnesidedError]] = {
    "status": StatusError,
    "connect": ConnectError,
    "disconnected": DisconnectedError,
    "config": ConfigError,
    "protocol": ProtocolError,
    "audit_store": AuditStoreError,
}


def _status_code(code: int) -> StatusCode:
    try:
        return StatusCode(code)
    except ValueError:
        return StatusCode.UNKNOWN


def _from_native(
    kind: str, error_class: Optional[int], code: int, message: str, unchanged: bool = False
) -> OnesidedError:
    """The exception for a failure of the native module (called by it)."""
    if kind == "mpi" and error_class is not None:
        return MpiError(message, _status_code(code), ErrorClass(error_class), unchanged)
    if kind == "argument" and error_class is not None:
        return ArgumentError(message, _status_code(code), ErrorClass(error_class))
    return _KINDS.get(kind, OnesidedError)(message, _status_code(code))
