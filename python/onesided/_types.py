"""Datatypes, ops, lock types, assertions and layouts: the vocabulary of the calls, and how
numpy values become the wire's packed little-endian elements."""

from __future__ import annotations

import enum
from typing import Any, ClassVar, Dict, Generic, Iterable, List, Sequence, Tuple, TypeVar, Union

import numpy as np

from . import _onesided
from ._errors import ErrorClass


# a datatype as the calls take it: a name ("i64") or anything numpy makes a dtype of
DTypeLike = Union[str, "np.dtype[Any]", type]

# a block of a listed layout: a tuple ending with its length in elements
B = TypeVar("B", bound=Tuple[Any, ...])


def _pair(value: str) -> "np.dtype[Any]":
    return np.dtype([("value", value), ("index", "<i4")])


# The numpy dtype of each datatype, by its name. Pairs (MAXLOC/MINLOC) are packed structs.
DTYPES: Dict[str, "np.dtype[Any]"] = {
    "i8": np.dtype("<i1"),
    "i16": np.dtype("<i2"),
    "i32": np.dtype("<i4"),
    "i64": np.dtype("<i8"),
    "u8": np.dtype("<u1"),
    "u16": np.dtype("<u2"),
    "u32": np.dtype("<u4"),
    "u64": np.dtype("<u8"),
    "f32": np.dtype("<f4"),
    "f64": np.dtype("<f8"),
    "byte": np.dtype("<u1"),
    "bool": np.dtype("?"),
    "f32_i32": _pair("<f4"),
    "f64_i32": _pair("<f8"),
    "i64_i32": _pair("<i8"),
    "i32_i32": _pair("<i4"),
    "i16_i32": _pair("<i2"),
    # x86-64's long double: numpy's longdouble there is the same 16 bytes
    "f80": np.dtype(np.longdouble),
}

# the native module's datatypes are exactly these, of these sizes
assert dict(_onesided.DATATYPES) == {name: dt.itemsize for name, dt in DTYPES.items()}

# `MPI_2INT` and friends, for building values of the pair types
INT_INT = DTYPES["i32_i32"]
FLOAT_INT = DTYPES["f32_i32"]
DOUBLE_INT = DTYPES["f64_i32"]
LONG_INT = DTYPES["i64_i32"]
SHORT_INT = DTYPES["i16_i32"]


class Op(str, enum.Enum):
    """A reduction of accumulate-like calls (a plain name such as ``"sum"`` does too)."""

    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    LAND = "land"
    BAND = "band"
    LOR = "lor"
    BOR = "bor"
    LXOR = "lxor"
    BXOR = "bxor"
    MAXLOC = "maxloc"
    MINLOC = "minloc"
    REPLACE = "replace"
    NO_OP = "no_op"


class LockType(str, enum.Enum):
    """``MPI_LOCK_SHARED`` or ``MPI_LOCK_EXCLUSIVE`` (``"shared"``, ``"exclusive"`` do too)."""

    SHARED = "shared"
    EXCLUSIVE = "exclusive"


class Assert(enum.IntFlag):
    """The ``MPI_MODE_*`` assertion bits of fence, post, start and lock."""

    NOCHECK = 1
    NOSTORE = 2
    NOPUT = 4
    NOPRECEDE = 8
    NOSUCCEED = 16


class _Strided:
    """What ``Vector`` and ``Hvector`` share: ``count`` blocks of ``blocklen`` elements, a stride
    apart; ``_key`` is the native keyword, ``_args`` its value."""

    _key: ClassVar[str]
    count: int
    blocklen: int

    def _args(self) -> Tuple[int, int, int]:
        raise NotImplementedError

    def elements(self) -> int:
        return self.count * self.blocklen

    def native(self) -> Dict[str, Any]:
        return {self._key: self._args()}

    def __repr__(self) -> str:
        return "{}({}, {}, {})".format(type(self).__name__, *self._args())


class _Listed(Generic[B]):
    """What ``Indexed``, ``Hindexed`` and ``Struct`` share: a list of blocks, each ending with
    its length in elements; ``_key`` is the native keyword."""

    _key: ClassVar[str]
    blocks: List[B]

    def elements(self) -> int:
        return sum(int(block[-1]) for block in self.blocks)

    def native(self) -> Dict[str, Any]:
        return {self._key: self.blocks}

    def __repr__(self) -> str:
        return "{}({!r})".format(type(self).__name__, self.blocks)


class Vector(_Strided):
    """A layout of ``count`` blocks of ``blocklen`` elements, block i starting at
    element ``i * stride`` (``MPI_Type_vector``)."""

    _key = "vector"

    def __init__(self, count: int, blocklen: int, stride: int) -> None:
        self.count, self.blocklen, self.stride = count, blocklen, stride

    def _args(self) -> Tuple[int, int, int]:
        return self.count, self.blocklen, self.stride


class Indexed(_Listed[Tuple[int, int]]):
    """A layout of blocks ``(disp, len)`` at element displacements, in type-map order
    (``MPI_Type_indexed``)."""

    _key = "blocks"

    def __init__(self, blocks: Iterable[Tuple[int, int]]) -> None:
        self.blocks = [(int(disp), int(length)) for disp, length in blocks]


class Hvector(_Strided):
    """A layout of ``count`` blocks of ``blocklen`` elements, block i starting at byte
    ``i * stride_bytes`` (``MPI_Type_create_hvector``; the stride need not be a multiple of the
    element size)."""

    _key = "hvector"

    def __init__(self, count: int, blocklen: int, stride_bytes: int) -> None:
        self.count, self.blocklen, self.stride_bytes = count, blocklen, stride_bytes

    def _args(self) -> Tuple[int, int, int]:
        return self.count, self.blocklen, self.stride_bytes


class Hindexed(_Listed[Tuple[int, int]]):
    """A layout of blocks ``(offset, len)``: ``len`` elements starting at byte ``offset``, in
    type-map order (``MPI_Type_create_hindexed``)."""

    _key = "hblocks"

    def __init__(self, blocks: Iterable[Tuple[int, int]]) -> None:
        self.blocks = [(int(offset), int(length)) for offset, length in blocks]


class Subarray:
    """The block of ``subsizes`` elements starting at ``starts`` of an array of ``sizes``
    (one number per dimension), stored in ``order`` ``"c"`` (row-major, the default) or
    ``"fortran"`` (``MPI_Type_create_subarray``). A shape MPI refuses is ``ErrorClass.ARG``
    when used."""

    def __init__(
        self,
        sizes: Sequence[int],
        subsizes: Sequence[int],
        starts: Sequence[int],
        order: str = "c",
    ) -> None:
        self.sizes = [int(size) for size in sizes]
        self.subsizes = [int(size) for size in subsizes]
        self.starts = [int(start) for start in starts]
        self.order = str(plain(order))

    def elements(self) -> int:
        elements = 1
        for size in self.subsizes:
            elements *= size
        return elements

    def native(self) -> Dict[str, Any]:
        return {"subarray": (self.sizes, self.subsizes, self.starts, self.order)}

    def __repr__(self) -> str:
        return "Subarray({!r}, {!r}, {!r}, order={!r})".format(
            self.sizes, self.subsizes, self.starts, self.order
        )


class Resized:
    """``count`` copies of ``inner`` (a layout, or an int: that many contiguous elements),
    copy k moved ``k * extent`` bytes, in type-map order (``MPI_Type_create_resized`` used
    with a count): one column of a row-major matrix is ``Resized(1, row_bytes, rows)``. As in
    MPI, the lower bound ``lb`` (bytes, may be negative) moves nothing; ``lb + extent`` past
    int64 is ``ErrorClass.COUNT`` when used."""

    def __init__(self, inner: Union[Layout, int], extent: int, count: int, lb: int = 0) -> None:
        self.inner, self.extent, self.count, self.lb = inner, int(extent), int(count), int(lb)

    def _inner_native(self) -> Dict[str, Any]:
        if isinstance(self.inner, int):
            return {"count": self.inner}
        return self.inner.native()

    def elements(self) -> int:
        inner = self.inner if isinstance(self.inner, int) else self.inner.elements()
        return self.count * inner

    def native(self) -> Dict[str, Any]:
        return {"resized": (self.lb, self.extent, self.count, self._inner_native())}

    def __repr__(self) -> str:
        return "Resized({!r}, {}, {}, lb={})".format(self.inner, self.extent, self.count, self.lb)


class Struct(_Listed[Tuple[int, str, int]]):
    """Blocks ``(offset, dtype, len)``: ``len`` elements of their own basic ``dtype`` (a name
    such as ``"i32"`` or anything ``DTYPES`` knows) starting at byte ``offset``, in type-map
    order (``MPI_Type_create_struct``). A put or get through it moves its blocks' bytes: pass
    and get them as ``dtype="u8"``. An accumulate needs every block to be its datatype, else
    ``ErrorClass.TYPE``."""

    _key = "struct_blocks"

    def __init__(self, blocks: Iterable[Tuple[int, DTypeLike, int]]) -> None:
        self.blocks = [
            (int(offset), datatype_name(dtype), int(length)) for offset, dtype, length in blocks
        ]


def plain(value: Any) -> Any:
    """The plain value of an enum member (or the value itself)."""
    return value.value if isinstance(value, enum.Enum) else value


def refusal(error_class: ErrorClass, message: str, argument: bool = False) -> BaseException:
    """The MpiError the client library makes of a refusal of this class; an ``ArgumentError``
    (also a ``ValueError``) when ``argument``: a name or value given that cannot be used."""
    return _onesided.refusal(int(error_class), message, argument)


def datatype_name(dtype: DTypeLike) -> str:
    """The datatype name of ``dtype``: a name (``"i64"``, ``"byte"``, ``"f64_i32"``) or anything
    numpy makes a dtype of (``np.int64``, ``"<f8"``, ``FLOAT_INT``)."""
    if isinstance(dtype, str) and dtype.lower() in DTYPES:
        return dtype.lower()
    try:
        wanted = np.dtype(dtype)
    except TypeError:
        raise refusal(ErrorClass.TYPE, "{!r} is not a datatype".format(dtype), True) from None
    if wanted.fields is None:
        wanted = wanted.newbyteorder("<") if wanted.byteorder == ">" else wanted
    for name, known in DTYPES.items():
        if name != "byte" and known == wanted:
            return name
    raise refusal(
        ErrorClass.TYPE, "numpy dtype {} has no MPI datatype here".format(wanted), True
    )


# any of the layouts: the target ``layout=`` and ``origin_layout=`` of the calls
Layout = Union[Vector, Indexed, Hvector, Hindexed, Subarray, Resized, Struct]
