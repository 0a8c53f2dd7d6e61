"""``Session`` and ``Window``: the Rust client's session and window, with numpy values.

Everything a call means is decided by the Rust client (``onesided-client``): which calls are
legal in which epoch, the private copy and when it is published (post, fence, unlock,
unlock_all, sync) and refreshed (wait, fence, lock, lock_all, sync), heartbeats and the audit
events of local loads and stores. This module only turns values into packed little-endian
bytes and back.
"""

from __future__ import annotations

from typing import (
    Any,
    Callable,
    Dict,
    Generator,
    Generic,
    Iterable,
    List,
    Mapping,
    Optional,
    Tuple,
    Type,
    TypeVar,
    Union,
    cast,
)

import numpy as np
import numpy.typing as npt

from . import _onesided
from ._errors import ErrorClass
from ._threads import off_loop
from ._types import DTYPES, DTypeLike, Layout, LockType, Op, datatype_name, plain, refusal

#: What the calls take as values: numpy arrays, lists, scalars, buffers (``memoryview``).
Values = npt.ArrayLike
#: What they return: numpy arrays.
Array = npt.NDArray[Any]
#: Info hints: a dict or (key, value) pairs.
Info = Union[Mapping[str, object], Iterable[Tuple[str, object]]]

T = TypeVar("T")


def _origin(values: Values, dtype: Optional[DTypeLike]) -> Array:
    """``values`` as a contiguous little-endian array of ``dtype``, one dimension."""
    array = np.ascontiguousarray(values, dtype=dtype)
    return array.reshape(-1)


def _no_op(op: Union[Op, str]) -> bool:
    """Whether ``op`` is ``Op.NO_OP`` (also spelled ``"noop"``): the op that sends no values."""
    return plain(op) in (Op.NO_OP.value, "noop")


def _info_pairs(info: Info) -> List[Tuple[str, str]]:
    """``info`` (a dict or (key, value) pairs) as the native calls take it."""
    pairs = info.items() if isinstance(info, Mapping) else info
    return [(str(key), str(value)) for key, value in pairs]


def pack(values: Values, layout: Layout, *, dtype: Optional[DTypeLike] = None) -> Array:
    """The elements of ``values`` that ``layout`` selects, in its type-map order, as a
    one-dimensional array: what an origin datatype sends (``onesided_client::pack``). A layout
    reaching past the values is ``ErrorClass.RMA_RANGE``."""
    array = np.ascontiguousarray(values, dtype=dtype)
    data = _onesided.pack(array.tobytes(), array.itemsize, **layout.native())
    return np.frombuffer(data, dtype=array.dtype).copy()


def unpack(packed: Values, buffer: Array, layout: Layout) -> None:
    """Writes ``packed`` values (as a get returns them) into the numpy array ``buffer`` where
    ``layout`` says, in its type-map order: a get's origin datatype (``onesided_client::unpack``).
    ``buffer`` is changed in place, and not at all on error (``ErrorClass.RMA_RANGE`` when the
    layout reaches past it, ``ErrorClass.COUNT`` when the number of values does not match)."""
    values = np.ascontiguousarray(packed, dtype=buffer.dtype)
    data = _onesided.unpack(
        values.tobytes(), buffer.tobytes(), buffer.itemsize, **layout.native()
    )
    np.copyto(buffer, np.frombuffer(data, dtype=buffer.dtype).reshape(buffer.shape))


class Pending(Generic[T]):
    """The answer of a get-like call, defined once the operation completed (after the flush,
    unlock, fence or complete that completes it). ``value()`` waits for it: an operation
    still waiting to travel with the epoch's closing call is sent then.

    ``Pending[Array]`` (get, get_accumulate, rget …): ``value()`` is a numpy array.
    ``Pending[Any]`` (fetch_and_op, compare_and_swap, one element by definition): ``value()``
    is that element, a numpy scalar (``int(old)``, ``old == expected`` work as for a number)."""

    def __init__(self, native: _onesided.NativePending, dtype: np.dtype[Any], single: bool) -> None:
        self._native = native
        self._dtype = dtype
        self._single = single

    def value(self) -> T:
        """The fetched elements as a numpy array (one element for fetch_and_op and
        compare_and_swap, as a numpy scalar); the operation's failure as an exception."""
        data = self._native.value()
        array = np.frombuffer(data, dtype=self._dtype).copy()
        return cast(T, array[0] if self._single else array)

    def __await__(self) -> Generator[Any, None, T]:
        """``await pending`` in a coroutine: ``value()`` without blocking the event loop
        (``onesided.aio``)."""
        return off_loop(self.value).__await__()

    def __repr__(self) -> str:
        return "Pending({})".format(self._dtype)


class Request:
    """A request-based operation (``MPI_Rput`` …); ``wait()`` is ``MPI_Wait`` on it: None for
    rput and raccumulate (locally complete at once: the values were copied), the fetched
    array for rget and rget_accumulate."""

    def __init__(self, pending: Optional[Pending[Array]] = None) -> None:
        self._pending = pending

    def wait(self) -> Optional[Array]:
        """``MPI_Wait``: None for rput and raccumulate, the fetched array for rget and
        rget_accumulate."""
        return None if self._pending is None else self._pending.value()

    def __await__(self) -> Generator[Any, None, Optional[Array]]:
        """``await request`` in a coroutine: ``wait()`` without blocking the event loop."""
        return off_loop(self.wait).__await__()


class _Calls:
    """The calls of a window that do not wait (local loads and stores, operations that are
    queued, post and start, what the handle knows): the same in ``Window`` and in
    ``onesided.aio.Window``, which differ only in the calls that wait."""

    def __init__(self, native: _onesided.NativeWindow) -> None:
        self._native = native
        self.desc = native.desc
        self.rank = native.rank

    # ---- datatypes ----

    def _datatype(self, dtype: Optional[DTypeLike], values: Optional[Values] = None) -> str:
        if dtype is not None:
            return datatype_name(dtype)
        if isinstance(values, (np.ndarray, np.generic)):
            return datatype_name(values.dtype)
        if self.desc.element_type is not None:
            return self.desc.element_type
        if values is None:
            raise refusal(
                ErrorClass.TYPE,
                "the window names no element type: give dtype=",
                True,
            )
        return datatype_name(np.asarray(values).dtype)

    def _values(self, values: Values, dtype: Optional[DTypeLike]) -> Tuple[str, Array]:
        name = self._datatype(dtype, values)
        return name, _origin(values, DTYPES[name])

    def _read(self, dtype: Optional[DTypeLike], read: Callable[[int], bytes]) -> Array:
        """The elements of a local read: ``read(size)`` returns their bytes, ``size`` being the
        size in bytes of the datatype (``dtype``, else the window's element type)."""
        element = DTYPES[self._datatype(dtype)]
        return np.frombuffer(read(element.itemsize), dtype=element).copy()

    @staticmethod
    def _shape(layout: Optional[Layout], count: int) -> Tuple[Dict[str, Any], int]:
        if layout is None:
            return {"count": count}, count
        return layout.native(), layout.elements()

    # ---- the private copy ----

    def store(self, index: int, values: Values, *, dtype: Optional[DTypeLike] = None) -> None:
        """A local store of ``values`` into the private copy at element ``index``. Nothing
        is published until the next post, fence, unlock, unlock_all or sync."""
        name, array = self._values(values, dtype)
        self._native.store_bytes(index * DTYPES[name].itemsize, array.tobytes())

    def load(self, index: int, count: int = 1, *, dtype: Optional[DTypeLike] = None) -> Array:
        """A local load of ``count`` elements of the private copy at element ``index``."""
        return self._read(dtype, lambda size: self._native.load_bytes(index * size, count * size))

    def store_bytes(self, offset: int, data: Union[bytes, bytearray, memoryview]) -> None:
        """A local store of raw bytes (any buffer) at byte ``offset``."""
        self._native.store_bytes(offset, bytes(memoryview(data)))

    def load_bytes(self, offset: int, length: int) -> bytes:
        """A local load of ``length`` raw bytes at byte ``offset``."""
        return self._native.load_bytes(offset, length)

    # ---- dynamic windows ----

    def regions(self) -> List[Tuple[int, int]]:
        """This rank's attached regions as ``(address, size)`` pairs, by address: those it
        attached in this session and, once the window is opened again in a new session, those
        it attached before and did not detach."""
        return list(self._native.regions())

    def store_at(
        self, address: int, values: Values, *, dtype: Optional[DTypeLike] = None
    ) -> None:
        """A local store of ``values`` at byte ``address`` of a region this rank attached
        (``ErrorClass.RMA_RANGE`` unless inside one); published like ``store``."""
        _, array = self._values(values, dtype)
        self._native.store_at_bytes(int(address), array.tobytes())

    def load_at(
        self, address: int, count: int = 1, *, dtype: Optional[DTypeLike] = None
    ) -> Array:
        """A local load of ``count`` elements at byte ``address`` of a region this rank
        attached (``ErrorClass.RMA_RANGE`` unless inside one)."""
        return self._read(
            dtype, lambda size: self._native.load_at_bytes(int(address), count * size)
        )

    def inspect(self, index: int, count: int = 1, *, dtype: Optional[DTypeLike] = None) -> Array:
        """Reads the private copy like ``load`` but records no load: for tools that observe
        a program rather than take part in it."""
        return self._read(
            dtype, lambda size: self._native.inspect_bytes(index * size, count * size)
        )

    # ---- communication ----

    def _issue(
        self,
        kind: str,
        target: int,
        disp: int,
        name: str,
        data: bytes,
        shape: Dict[str, Any],
        request_based: bool = False,
        **extra: Any,
    ) -> _onesided.NativePending:
        return self._native.issue(
            target,
            kind,
            name,
            disp,
            data,
            request_based=request_based,
            **shape,
            **extra,
        )

    @staticmethod
    def _sent(array: Array, origin_layout: Optional[Layout]) -> Tuple[bytes, int]:
        """The packed values a call sends, and how many: all of ``array``, or those
        ``origin_layout`` selects."""
        if origin_layout is None:
            return array.tobytes(), array.size
        data = _onesided.pack(array.tobytes(), array.itemsize, **origin_layout.native())
        return data, origin_layout.elements()

    def _put_like(
        self,
        kind: str,
        target: int,
        disp: int,
        values: Values,
        op: Union[Op, str, None],
        dtype: Optional[DTypeLike],
        layout: Optional[Layout],
        request_based: bool,
        origin_layout: Optional[Layout] = None,
    ) -> None:
        name, array = self._values(values, dtype)
        data, elements = self._sent(array, origin_layout)
        shape, _ = self._shape(layout, elements)
        extra = {} if op is None else {"op": plain(op)}
        self._issue(kind, target, disp, name, data, shape, request_based, **extra)

    def put(
        self,
        target: int,
        disp: int,
        values: Values,
        *,
        dtype: Optional[DTypeLike] = None,
        layout: Optional[Layout] = None,
        origin_layout: Optional[Layout] = None,
    ) -> None:
        """``MPI_Put`` of ``values`` to ``target`` at ``disp``. With a target ``layout``
        (``Vector``, ``Indexed``, ``Hvector``, ``Hindexed``, ``Subarray``) the values are in
        its type-map order; with an ``origin_layout`` only the values it selects are sent, in
        its type-map order (``put_from`` in Rust)."""
        self._put_like(
            "put", target, disp, values, None, dtype, layout, False, origin_layout
        )

    def _get(
        self,
        target: int,
        disp: int,
        count: int,
        dtype: Optional[DTypeLike],
        layout: Optional[Layout],
        request_based: bool,
    ) -> Pending[Array]:
        name = self._datatype(dtype)
        shape, _ = self._shape(layout, count)
        native = self._issue("get", target, disp, name, b"", shape, request_based)
        return Pending[Array](native, DTYPES[name], single=False)

    def get(
        self,
        target: int,
        disp: int,
        count: int = 1,
        *,
        dtype: Optional[DTypeLike] = None,
        layout: Optional[Layout] = None,
    ) -> Pending[Array]:
        """``MPI_Get`` of ``count`` elements (or of the elements ``layout`` selects, in
        layout order): a ``Pending`` whose ``value()`` is the array. A get's origin layout is
        ``unpack(pending.value(), buffer, origin_layout)``."""
        return self._get(target, disp, count, dtype, layout, False)

    def accumulate(
        self,
        target: int,
        disp: int,
        values: Values,
        op: Union[Op, str],
        *,
        dtype: Optional[DTypeLike] = None,
        layout: Optional[Layout] = None,
        origin_layout: Optional[Layout] = None,
    ) -> None:
        """``MPI_Accumulate`` of ``values`` with ``op`` (an ``Op`` or its name); ``layout``
        and ``origin_layout`` as for ``put`` (``accumulate_from`` in Rust)."""
        self._put_like(
            "accumulate", target, disp, values, op, dtype, layout, False, origin_layout
        )

    def _get_accumulate(
        self,
        target: int,
        disp: int,
        values: Optional[Values],
        op: Union[Op, str],
        dtype: Optional[DTypeLike],
        count: int,
        request_based: bool,
        layout: Optional[Layout] = None,
        origin_layout: Optional[Layout] = None,
    ) -> Pending[Array]:
        no_op = _no_op(op)
        if no_op and values is None:
            # an atomic read of `count` elements: no origin values
            name = self._datatype(dtype)
            data, elements = b"", count if layout is None else layout.elements()
        else:
            if values is None:
                raise refusal(
                    ErrorClass.ARG, "op {} needs values: only NO_OP reads without".format(op), True
                )
            name, array = self._values(values, dtype)
            data, elements = self._sent(array, None if no_op else origin_layout)
            # the Rust client's rule: NO_OP sends no values, whatever was given
            data = b"" if no_op else data
        shape, _ = self._shape(layout, elements)
        native = self._issue(
            "get_accumulate",
            target,
            disp,
            name,
            data,
            shape,
            request_based,
            op=plain(op),
        )
        return Pending[Array](native, DTYPES[name], single=False)

    def get_accumulate(
        self,
        target: int,
        disp: int,
        values: Optional[Values],
        op: Union[Op, str],
        *,
        dtype: Optional[DTypeLike] = None,
        count: int = 1,
        layout: Optional[Layout] = None,
        origin_layout: Optional[Layout] = None,
    ) -> Pending[Array]:
        """``MPI_Get_accumulate``: the old contents come back, then ``op`` is applied. With
        ``Op.NO_OP`` it is an atomic read (``values`` may be None, then ``count`` elements, or
        those of ``layout``). ``layout`` and ``origin_layout`` as for ``put``
        (``get_accumulate_from`` in Rust); the old contents come back packed, in ``layout``'s
        order."""
        return self._get_accumulate(
            target, disp, values, op, dtype, count, False, layout, origin_layout
        )

    def fetch_and_op(
        self,
        target: int,
        disp: int,
        value: Values,
        op: Union[Op, str],
        *,
        dtype: Optional[DTypeLike] = None,
    ) -> Pending[Any]:
        """``MPI_Fetch_and_op`` on one element: a ``Pending`` whose ``value()`` is the old
        element, a numpy scalar (MPI's result buffer of this call holds one element)."""
        name, array = self._values(value, dtype)
        if array.size != 1:
            raise refusal(ErrorClass.COUNT, "fetch_and_op takes one element", True)
        data = b"" if _no_op(op) else array.tobytes()
        native = self._issue(
            "fetch_and_op", target, disp, name, data, {"count": 1}, op=plain(op)
        )
        return Pending[Any](native, DTYPES[name], single=True)

    def compare_and_swap(
        self,
        target: int,
        disp: int,
        compare: Values,
        value: Values,
        *,
        dtype: Optional[DTypeLike] = None,
    ) -> Pending[Any]:
        """``MPI_Compare_and_swap``: if the target element equals ``compare`` (bitwise) it
        becomes ``value``; the old element comes back either way, as a numpy scalar."""
        name = self._datatype(dtype, value)
        origin = _origin(value, DTYPES[name])
        expected = _origin(compare, DTYPES[name])
        native = self._issue(
            "compare_and_swap",
            target,
            disp,
            name,
            origin.tobytes(),
            {"count": 1},
            compare=expected.tobytes(),
        )
        return Pending[Any](native, DTYPES[name], single=True)

    def rput(
        self,
        target: int,
        disp: int,
        values: Values,
        *,
        dtype: Optional[DTypeLike] = None,
        layout: Optional[Layout] = None,
        origin_layout: Optional[Layout] = None,
    ) -> Request:
        """``MPI_Rput``: only in a passive-target epoch; locally complete at once. ``layout``
        and ``origin_layout`` as for ``put``."""
        self._put_like(
            "put", target, disp, values, None, dtype, layout, True, origin_layout
        )
        return Request()

    def rget(
        self,
        target: int,
        disp: int,
        count: int = 1,
        *,
        dtype: Optional[DTypeLike] = None,
        layout: Optional[Layout] = None,
    ) -> Request:
        """``MPI_Rget``: its request completes when the data is here; ``layout`` as for
        ``get``."""
        return Request(self._get(target, disp, count, dtype, layout, True))

    def raccumulate(
        self,
        target: int,
        disp: int,
        values: Values,
        op: Union[Op, str],
        *,
        dtype: Optional[DTypeLike] = None,
        layout: Optional[Layout] = None,
        origin_layout: Optional[Layout] = None,
    ) -> Request:
        """``MPI_Raccumulate``; ``layout`` and ``origin_layout`` as for ``put``."""
        self._put_like(
            "accumulate", target, disp, values, op, dtype, layout, True, origin_layout
        )
        return Request()

    def rget_accumulate(
        self,
        target: int,
        disp: int,
        values: Optional[Values],
        op: Union[Op, str],
        *,
        dtype: Optional[DTypeLike] = None,
        count: int = 1,
        layout: Optional[Layout] = None,
        origin_layout: Optional[Layout] = None,
    ) -> Request:
        """``MPI_Rget_accumulate``; ``layout`` and ``origin_layout`` as for
        ``get_accumulate``."""
        return Request(
            self._get_accumulate(
                target, disp, values, op, dtype, count, True, layout, origin_layout
            )
        )

    # ---- synchronization ----

    def post(self, group: Iterable[int], assertion: int = 0) -> None:
        """``MPI_Win_post``: exposes this rank's window to ``group`` and publishes its stores.
        Does not block."""
        self._native.post(list(group), int(assertion))

    def start(self, group: Iterable[int], assertion: int = 0) -> None:
        """``MPI_Win_start``: an access epoch to ``group``. Does not block."""
        self._native.start(list(group), int(assertion))

    # ---- what the handle knows ----

    def fencing_token(self, target: int) -> Optional[int]:
        """The fencing token of the lock this rank holds on ``target``, once its grant has
        been seen; None otherwise."""
        return self._native.fencing_token(target)

    def get_info(self) -> Dict[str, str]:
        """``MPI_Win_get_info``: a dict of every hint in use with its value (defaults
        included) and the keys the server does not use, kept as given at creation."""
        return dict(self._native.get_info())

    def get_group(self) -> List[int]:
        """``MPI_Win_get_group``: the window's ranks, as ranks of the world (all of them)."""
        return list(self._native.get_group())


class Window(_Calls):
    """One rank's handle on a window: its private copy and every MPI RMA call by its MPI name.

    Values are numpy arrays, lists, scalars or anything with the buffer protocol (a
    ``memoryview``); the datatype is ``dtype`` when given (a name such as ``"i64"``, or a numpy
    dtype), else a numpy array's own, else the window's element type (``WindowSpec.of``),
    else what numpy makes of the values. ``disp`` is in the target's disp_units; ``index``
    of local loads and stores counts elements of the datatype. On a dynamic window
    (``WindowSpec.dynamic``) ``disp`` is the address of a byte of a region the target attached
    (``attach``), and ``store_at``/``load_at`` take this rank's addresses.
    """

    def __init__(self, native: _onesided.NativeWindow, session: Session) -> None:
        super().__init__(native)
        self.session = session

    def __repr__(self) -> str:
        return "Window({!r}, rank={})".format(self.desc.name, self.rank)

    # ---- the calls that wait: dynamic windows, then synchronization ----

    def attach(self, size: int) -> int:
        """``MPI_Win_attach`` on a window of flavor ``"dynamic"``: a region of ``size`` bytes of
        this rank's memory; returns its address, which other ranks name as the ``disp`` of
        their operations (disp_unit 1). A local call: no epoch is needed; the other ranks learn
        the address from this rank. A region of 0 bytes is allowed, as in MPI: it has an
        address to detach, and no access reaches it. ``ErrorClass.RMA_FLAVOR`` on another
        flavor, ``ErrorClass.RMA_ATTACH`` past the server's bytes per rank."""
        return self._native.attach(int(size))

    def attach_at(self, address: int, size: int) -> int:
        """``MPI_Win_attach`` of a region of ``size`` bytes at ``address`` (returned);
        ``ErrorClass.RMA_ATTACH`` when it overlaps a region attached (or ``address`` is 0)."""
        return self._native.attach_at(int(address), int(size))

    def detach(self, address: int) -> None:
        """``MPI_Win_detach`` of the region attached at ``address``: operations on it fail
        with ``ErrorClass.RMA_RANGE`` from now on. ``ErrorClass.RMA_ATTACH`` when no region
        this rank attached starts there."""
        self._native.detach(int(address))

    def fence(self, assertion: int = 0) -> None:
        """``MPI_Win_fence``: publishes this rank's stores (unless NOSTORE); one that ends an
        epoch returns when every operation of it is applied everywhere; then refreshes the
        private copy."""
        self._native.fence(int(assertion))

    def complete(self) -> None:
        """``MPI_Win_complete``: ends the access epoch once its operations are done."""
        self._native.complete()

    def wait(self) -> None:
        """``MPI_Win_wait``: ends the exposure epoch, then refreshes the private copy."""
        self._native.wait()

    def test(self) -> bool:
        """``MPI_Win_test``: ``wait`` if it would not block (True), else False."""
        return self._native.test()

    def lock(self, lock_type: Union[LockType, str], target: int, assertion: int = 0) -> None:
        """``MPI_Win_lock``: a lock of one's own rank refreshes the private copy."""
        self._native.lock(plain(lock_type), target, int(assertion))

    def unlock(self, target: int) -> None:
        """``MPI_Win_unlock``: publishes this rank's stores and returns when every operation
        to ``target`` is complete there."""
        self._native.unlock(target)

    def lock_all(self, assertion: int = 0) -> None:
        """``MPI_Win_lock_all``: a shared lock of every rank."""
        self._native.lock_all(int(assertion))

    def unlock_all(self) -> None:
        """``MPI_Win_unlock_all``."""
        self._native.unlock_all()

    def flush(self, target: int) -> None:
        """``MPI_Win_flush``: completes the operations to ``target`` at origin and target."""
        self._native.flush(target)

    def flush_all(self) -> None:
        """``MPI_Win_flush_all``."""
        self._native.flush_all()

    def flush_local(self, target: int) -> None:
        """``MPI_Win_flush_local``: completes the operations to ``target`` at the origin."""
        self._native.flush_local(target)

    def flush_local_all(self) -> None:
        """``MPI_Win_flush_local_all``."""
        self._native.flush_local_all()

    def sync(self) -> None:
        """``MPI_Win_sync``: publishes this rank's stores, then refreshes the private copy."""
        self._native.sync()

    def free(self) -> None:
        """``MPI_Win_free``: collective; returns once every rank has freed the window."""
        self._native.free()

    def set_info(self, info: Info) -> None:
        """``MPI_Win_set_info``, collective: returns once every rank called it with the same
        info (a dict or (key, value) pairs). ``accumulate_ops``, ``accumulate_ordering``,
        ``mpi_accumulate_granularity`` and keys the server does not use take the values
        given; creation hints (``no_locks``, ``same_size``, ...) are checked and ignored."""
        self._native.set_info(_info_pairs(info))


class _SessionFacts:
    """What a session knows of itself: the same in ``Session`` and ``onesided.aio.Session``."""

    _native: _onesided.NativeSession

    @property
    def world(self) -> str:
        """The world's name."""
        return self._native.world

    @property
    def rank(self) -> int:
        """This session's rank."""
        return self._native.rank

    @property
    def nranks(self) -> int:
        """The number of ranks."""
        return self._native.nranks

    @property
    def incarnation(self) -> int:
        """This session's incarnation of its rank (1 for the first; it grows when the session
        attaches again by itself)."""
        return self._native.incarnation

    @property
    def audited(self) -> bool:
        """Whether the server keeps an audit log."""
        return self._native.audited


class Session(_SessionFacts):
    """This process attached as one rank of a world, over one stream. ``Session.attach``
    makes one; it is a context manager that closes it. Its lease is kept alive with
    heartbeats by the library."""

    def __init__(self, native: _onesided.NativeSession) -> None:
        self._native = native

    @classmethod
    def attach(
        cls,
        url: str,
        token: str,
        *,
        audit_database_url: Optional[str] = None,
        ship_audit_events: bool = False,
        world: Optional[str] = None,
        rank: Optional[int] = None,
        ca_file: Optional[str] = None,
        connect_timeout: Optional[float] = None,
        timeout: Optional[float] = None,
        reattach_within: Optional[float] = None,
    ) -> Session:
        """Attaches to the server at ``url`` as the rank whose token this is. Options:
        ``audit_database_url`` (write this session's audit events to the store itself),
        ``ship_audit_events``, ``world`` and ``rank`` (a claim the server checks),
        ``ca_file``, ``connect_timeout`` and ``timeout`` (seconds), ``reattach_within``
        (seconds; 0 = never: how long the session keeps trying to attach again by itself, as
        a new incarnation, when its server or node goes away — 30 by default)."""
        native = _onesided.NativeSession.attach(
            url,
            token,
            audit_database_url=audit_database_url,
            ship_audit_events=ship_audit_events,
            world=world,
            rank=rank,
            ca_file=ca_file,
            connect_timeout=connect_timeout,
            timeout=timeout,
            reattach_within=reattach_within,
        )
        return cls(native)

    def window(self, name: str) -> Window:
        """Opens the window ``name`` of this world. On a dynamic window the handle knows the
        regions this rank attached in an earlier session and did not detach (``regions()``),
        their bytes as the public copy has them."""
        return Window(self._native.window(name), self)

    def create_window(
        self,
        name: str,
        size: int,
        disp_unit: int = 1,
        flavor: str = "allocate",
        info: Optional[Info] = None,
        model: str = "separate",
        group: Optional[Iterable[int]] = None,
    ) -> Window:
        """``MPI_Win_allocate`` (or ``MPI_Win_create`` or ``MPI_Win_create_dynamic``, by
        ``flavor``: ``"allocate"``, ``"create"`` or ``"dynamic"``) by this rank, collective
        over the world's ranks, or over the members of ``group`` (world ranks, window rank r
        being ``group[r]``, as MPI numbers a subcommunicator; the other ranks take no part):
        every member calls it with the same ``name``, ``flavor``, ``model`` (``"separate"`` or
        ``"unified"``), ``info`` (a dict or pairs) and ``group`` and its own ``size`` in bytes
        (0 for a dynamic window: its memory is the regions it attaches, ``Window.attach``) and
        ``disp_unit``; returns the window, open, once every member has."""
        native = self._native.create_window(
            name, size, disp_unit, flavor, _info_pairs(info or []), model, list(group or [])
        )
        return Window(native, self)

    def barrier(self) -> None:
        """``MPI_Barrier`` over the world."""
        self._native.barrier()

    def close(self) -> None:
        """Ships what is still pending (loads and stores since the last call) and waits until
        the server has it, then ends the session (the server sees it leave, not break); calls
        on its windows fail afterwards."""
        self._native.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self, kind: Optional[Type[BaseException]], value: object, traceback: object
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Session(world={!r}, rank={})".format(self.world, self.rank)
