"""onesided: MPI one-sided communication (RMA) as a network service, from Python.

The calls are the Rust client library's (``onesided-client``), built into this package with
PyO3: the same epoch rules, private copy, heartbeats and audit events as a Rust program.

- ``Admin``: worlds (one token per rank) and windows (``WindowSpec``); ``Audit``: the audit
  log (events, check, replay, verify).
- ``Session``: attach as one rank; ``barrier``; ``window(name)``.
- ``Window``: every MPI RMA call by its MPI name, with numpy values; ``Pending`` and
  ``Request`` answers. Dynamic windows (``WindowSpec.dynamic``): ``attach``, ``attach_at``,
  ``detach``, ``regions``, ``store_at`` and ``load_at`` by address. Layouts (MPI's derived datatypes over one basic type): ``Vector``,
  ``Indexed``, ``Hvector``, ``Hindexed``, ``Subarray``; ``pack`` and ``unpack`` apply one to
  an origin buffer.
- ``OnesidedError``; ``MpiError`` carries the MPI error class (``ErrorClass``). Mistakes in
  what is given are ``ValueError``s too: ``ConfigError`` (an address, a token or token file,
  a timeout), ``ArgumentError`` (an unknown datatype, op, lock type, flavor or model name).
- ``read_token(path)``: the token in a token file.
- ``explore(text)``: every schedule MPI allows of a ``.rma`` scenario on the in-memory
  simulator (no server), as ``onesided explore --json`` reports it.
- ``onesided.aio``: the same API for asyncio (``await``-able waiting calls).

Blocking calls release the GIL, so the ranks of a world can run in threads of one process.
The package is typed (``py.typed``; the native module's types are ``_onesided.pyi``).
"""

from ._onesided import (
    Admin,
    Audit,
    AuditEntry,
    Finding,
    RecordedWindow,
    WindowDescription,
    WindowSpec,
    WorldSummary,
    WorldTokens,
)
from ._errors import (
    ArgumentError,
    AuditStoreError,
    ConfigError,
    ConnectError,
    DisconnectedError,
    ErrorClass,
    MpiError,
    OnesidedError,
    ProtocolError,
    StatusCode,
    StatusError,
)
from ._types import (
    DOUBLE_INT,
    DTYPES,
    FLOAT_INT,
    DTypeLike,
    Layout,
    INT_INT,
    LONG_INT,
    SHORT_INT,
    Assert,
    Hindexed,
    Hvector,
    Indexed,
    LockType,
    Op,
    Resized,
    Struct,
    Subarray,
    Vector,
)
from ._explore import explore
from ._token import read_token
from ._window import Array, Info, Pending, Request, Session, Values, Window, pack, unpack

__all__ = [
    "Admin",
    "ArgumentError",
    "Array",
    "Assert",
    "Audit",
    "AuditEntry",
    "AuditStoreError",
    "ConfigError",
    "ConnectError",
    "DisconnectedError",
    "DOUBLE_INT",
    "DTYPES",
    "DTypeLike",
    "ErrorClass",
    "FLOAT_INT",
    "Finding",
    "Hindexed",
    "Hvector",
    "INT_INT",
    "Indexed",
    "Info",
    "Layout",
    "LONG_INT",
    "LockType",
    "MpiError",
    "OnesidedError",
    "Op",
    "Pending",
    "ProtocolError",
    "RecordedWindow",
    "Request",
    "Resized",
    "SHORT_INT",
    "Session",
    "StatusCode",
    "StatusError",
    "Struct",
    "Subarray",
    "Vector",
    "Window",
    "WindowDescription",
    "WindowSpec",
    "WorldSummary",
    "WorldTokens",
    "explore",
    "pack",
    "Values",
    "read_token",
    "unpack",
]
