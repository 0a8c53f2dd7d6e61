"""``Session`` and ``Window``: the Rust client's session and window, with numpy values.

Everything a call means is decided by the Rust client (``onesided-client``): which calls are
legal in which epoch, the private copy and when it is published (post, fence, unlock,
unlock_all, sync) and refreshed (wait, fence, lock, lock_all, sync), heartbeats and the audit
events of local loads and stores. This module only turns values into packed little-endian
bytes and back.
"""

import numpy as np

from . import _onesided
from ._errors import ErrorClass
from ._types import DTYPES, Op, datatype_name, plain, refusal


def _origin(values, dtype):
    """``values`` as a contiguous little-endian array of ``dtype``, one dimension."""
    array = np.ascontiguousarray(values, dtype=dtype)
    return array.reshape(-1)


def pack(values, layout, *, dtype=None):
    """The elements of ``values`` that ``layout`` selects, in its type-map order, as a
    one-dimensional array: what an origin datatype sends (``onesided_client::pack``). A layout
    reaching past the values is ``ErrorClass.RMA_RANGE``."""
    array = np.ascontiguousarray(values, dtype=dtype)
    data = _onesided.pack(array.tobytes(), array.itemsize, **layout.native())
    return np.frombuffer(data, dtype=array.dtype).copy()


def unpack(packed, buffer, layout):
    """Writes ``packed`` values (as a get returns them) into the numpy array ``buffer`` where
    ``layout`` says, in its type-map order: a get's origin datatype (``onesided_client::unpack``).
    ``buffer`` is changed in place, and not at all on error (``ErrorClass.RMA_RANGE`` when the
    layout reaches past it, ``ErrorClass.COUNT`` when the number of values does not match)."""
    values = np.ascontiguousarray(packed, dtype=buffer.dtype)
    data = _onesided.unpack(
        values.tobytes(), buffer.tobytes(), buffer.itemsize, **layout.native()
    )
    np.copyto(buffer, np.frombuffer(data, dtype=buffer.dtype).reshape(buffer.shape))


class Pending:
    """The answer of a get-like call, defined once the operation completed (after the flush,
    unlock, fence or complete that completes it). ``value()`` waits for it: an operation
    still waiting to travel with the epoch's closing call is sent then."""

    def __init__(self, native, dtype, single):
        self._native = native
        self._dtype = dtype
        self._single = single

    def value(self):
        """The fetched elements as a numpy array (one element for fetch_and_op and
        compare_and_swap, as a numpy scalar); the operation's failure as an exception."""
        data = self._native.value()
        array = np.frombuffer(data, dtype=self._dtype).copy()
        return array[0] if self._single else array

    def __repr__(self):
        return "Pending({})".format(self._dtype)


class Request:
    """A request-based operation (``MPI_Rput`` …); ``wait()`` is ``MPI_Wait`` on it: None for
    rput and raccumulate (locally complete at once: the values were copied), the fetched
    array for rget and rget_accumulate."""

    def __init__(self, pending=None):
        self._pending = pending

    def wait(self):
        return None if self._pending is None else self._pending.value()


class Window:
    """One rank's handle on a window: its private copy and every MPI RMA call by its MPI name.

    Values are numpy arrays, lists, scalars or anything with the buffer protocol (a
    ``memoryview``); the datatype is ``dtype`` when given (a name such as ``"i64"``, or a numpy
    dtype), else a numpy array's own, else the window's element type (``WindowSpec.of``),
    else what numpy makes of the values. ``disp`` is in the target's disp_units; ``index``
    of local loads and stores counts elements of the datatype. On a dynamic window
    (``WindowSpec.dynamic``) ``disp`` is the address of a byte of a region the target attached
    (``attach``), and ``store_at``/``load_at`` take this rank's addresses.
    """

    def __init__(self, native, session):
        self._native = native
        self.session = session
        self.desc = native.desc
        self.rank = native.rank

    def __repr__(self):
        return "Window({!r}, rank={})".format(self.desc.name, self.rank)

    # ---- datatypes ----

    def _datatype(self, dtype, values=None):
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
            )
        return datatype_name(np.asarray(values).dtype)

    def _values(self, values, dtype):
        name = self._datatype(dtype, values)
        return name, _origin(values, DTYPES[name])

    @staticmethod
    def _shape(layout, count):
        if layout is None:
            return {"count": count}, count
        return layout.native(), layout.elements()

    # ---- the private copy ----

    def store(self, index, values, *, dtype=None):
        """A local store of ``values`` into the private copy at element ``index``. Nothing
        is published until the next post, fence, unlock, unlock_all or sync."""
        name, array = self._values(values, dtype)
        self._native.store_bytes(index * DTYPES[name].itemsize, array.tobytes())

    def load(self, index, count=1, *, dtype=None):
        """A local load of ``count`` elements of the private copy at element ``index``."""
        name = self._datatype(dtype)
        size = DTYPES[name].itemsize
        data = self._native.load_bytes(index * size, count * size)
        return np.frombuffer(data, dtype=DTYPES[name]).copy()

    def store_bytes(self, offset, data):
        """A local store of raw bytes (any buffer) at byte ``offset``."""
        self._native.store_bytes(offset, bytes(memoryview(data)))

    def load_bytes(self, offset, length):
        """A local load of ``length`` raw bytes at byte ``offset``."""
        return self._native.load_bytes(offset, length)

    # ---- dynamic windows ----

    def attach(self, size):
        """``MPI_Win_attach`` on a window of flavor ``"dynamic"``: a region of ``size`` bytes of
        this rank's memory; returns its address, which other ranks name as the ``disp`` of
        their operations (disp_unit 1). A local call: no epoch is needed; the other ranks learn
        the address from this rank. A region of 0 bytes is allowed, as in MPI: it has an
        address to detach, and no access reaches it. ``ErrorClass.RMA_FLAVOR`` on another
        flavor, ``ErrorClass.RMA_ATTACH`` past the server's bytes per rank."""
        return self._native.attach(int(size))

    def attach_at(self, address, size):
        """``MPI_Win_attach`` of a region of ``size`` bytes at ``address`` (returned);
        ``ErrorClass.RMA_ATTACH`` when it overlaps a region attached (or ``address`` is 0)."""
        return self._native.attach_at(int(address), int(size))

    def detach(self, address):
        """``MPI_Win_detach`` of the region attached at ``address``: operations on it fail
        with ``ErrorClass.RMA_RANGE`` from now on. ``ErrorClass.RMA_ATTACH`` when no region
        this rank attached starts there."""
        self._native.detach(int(address))

    def regions(self):
        """This rank's attached regions as ``(address, size)`` pairs, by address: those it
        attached in this session and, once the window is opened again in a new session, those
        it attached before and did not detach."""
        return list(self._native.regions())

    def store_at(self, address, values, *, dtype=None):
        """A local store of ``values`` at byte ``address`` of a region this rank attached
        (``ErrorClass.RMA_RANGE`` unless inside one); published like ``store``."""
        _, array = self._values(values, dtype)
        self._native.store_at_bytes(int(address), array.tobytes())

    def load_at(self, address, count=1, *, dtype=None):
        """A local load of ``count`` elements at byte ``address`` of a region this rank
        attached (``ErrorClass.RMA_RANGE`` unless inside one)."""
        name = self._datatype(dtype)
        size = DTYPES[name].itemsize
        data = self._native.load_at_bytes(int(address), count * size)
        return np.frombuffer(data, dtype=DTYPES[name]).copy()

    def inspect(self, index, count=1, *, dtype=None):
        """Reads the private copy like ``load`` but records no load: for tools that observe
        a program rather than take part in it."""
        name = self._datatype(dtype)
        size = DTYPES[name].itemsize
        data = self._native.inspect_bytes(index * size, count * size)
        return np.frombuffer(data, dtype=DTYPES[name]).copy()

    # ---- communication ----

    def _issue(self, kind, target, disp, name, data, shape, request_based=False, **extra):
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
    def _sent(array, origin_layout):
        """The packed values a call sends, and how many: all of ``array``, or those
        ``origin_layout`` selects."""
        if origin_layout is None:
            return array.tobytes(), array.size
        data = _onesided.pack(array.tobytes(), array.itemsize, **origin_layout.native())
        return data, origin_layout.elements()

    def _put_like(
        self, kind, target, disp, values, op, dtype, layout, request_based, origin_layout=None
    ):
        name, array = self._values(values, dtype)
        data, elements = self._sent(array, origin_layout)
        shape, _ = self._shape(layout, elements)
        extra = {} if op is None else {"op": plain(op)}
        return self._issue(kind, target, disp, name, data, shape, request_based, **extra)

    def put(self, target, disp, values, *, dtype=None, layout=None, origin_layout=None):
        """``MPI_Put`` of ``values`` to ``target`` at ``disp``. With a target ``layout``
        (``Vector``, ``Indexed``, ``Hvector``, ``Hindexed``, ``Subarray``) the values are in
        its type-map order; with an ``origin_layout`` only the values it selects are sent, in
        its type-map order (``put_from`` in Rust)."""
        self._put_like(
            "put", target, disp, values, None, dtype, layout, False, origin_layout
        )

    def get(self, target, disp, count=1, *, dtype=None, layout=None):
        """``MPI_Get`` of ``count`` elements (or of the elements ``layout`` selects, in
        layout order): a ``Pending`` whose ``value()`` is the array. A get's origin layout is
        ``unpack(pending.value(), buffer, origin_layout)``."""
        name = self._datatype(dtype)
        shape, _ = self._shape(layout, count)
        native = self._issue("get", target, disp, name, b"", shape)
        return Pending(native, DTYPES[name], single=False)

    def accumulate(
        self, target, disp, values, op, *, dtype=None, layout=None, origin_layout=None
    ):
        """``MPI_Accumulate`` of ``values`` with ``op`` (an ``Op`` or its name); ``layout``
        and ``origin_layout`` as for ``put`` (``accumulate_from`` in Rust)."""
        self._put_like(
            "accumulate", target, disp, values, op, dtype, layout, False, origin_layout
        )

    def _get_accumulate(
        self, target, disp, values, op, dtype, count, request_based, layout=None,
        origin_layout=None,
    ):
        no_op = plain(op) in (Op.NO_OP.value, "noop")
        if no_op and values is None:
            # an atomic read of `count` elements: no origin values
            name = self._datatype(dtype)
            data, elements = b"", count if layout is None else layout.elements()
        else:
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
        return Pending(native, DTYPES[name], single=False)

    def get_accumulate(
        self, target, disp, values, op, *, dtype=None, count=1, layout=None, origin_layout=None
    ):
        """``MPI_Get_accumulate``: the old contents come back, then ``op`` is applied. With
        ``Op.NO_OP`` it is an atomic read (``values`` may be None, then ``count`` elements, or
        those of ``layout``). ``layout`` and ``origin_layout`` as for ``put``
        (``get_accumulate_from`` in Rust); the old contents come back packed, in ``layout``'s
        order."""
        return self._get_accumulate(
            target, disp, values, op, dtype, count, False, layout, origin_layout
        )

    def fetch_and_op(self, target, disp, value, op, *, dtype=None):
        """``MPI_Fetch_and_op`` on one element: a ``Pending`` whose ``value()`` is the old
        element."""
        name, array = self._values(value, dtype)
        if array.size != 1:
            raise refusal(ErrorClass.COUNT, "fetch_and_op takes one element")
        data = b"" if plain(op) in (Op.NO_OP.value, "noop") else array.tobytes()
        native = self._issue(
            "fetch_and_op", target, disp, name, data, {"count": 1}, op=plain(op)
        )
        return Pending(native, DTYPES[name], single=True)

    def compare_and_swap(self, target, disp, compare, value, *, dtype=None):
        """``MPI_Compare_and_swap``: if the target element equals ``compare`` (bitwise) it
        becomes ``value``; the old element comes back either way."""
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
        return Pending(native, DTYPES[name], single=True)

    def rput(self, target, disp, values, *, dtype=None, layout=None, origin_layout=None):
        """``MPI_Rput``: only in a passive-target epoch; locally complete at once. ``layout``
        and ``origin_layout`` as for ``put``."""
        self._put_like(
            "put", target, disp, values, None, dtype, layout, True, origin_layout
        )
        return Request()

    def rget(self, target, disp, count=1, *, dtype=None, layout=None):
        """``MPI_Rget``: its request completes when the data is here; ``layout`` as for
        ``get``."""
        name = self._datatype(dtype)
        shape, _ = self._shape(layout, count)
        native = self._issue("get", target, disp, name, b"", shape, True)
        return Request(Pending(native, DTYPES[name], single=False))

    def raccumulate(
        self, target, disp, values, op, *, dtype=None, layout=None, origin_layout=None
    ):
        """``MPI_Raccumulate``; ``layout`` and ``origin_layout`` as for ``put``."""
        self._put_like(
            "accumulate", target, disp, values, op, dtype, layout, True, origin_layout
        )
        return Request()

    def rget_accumulate(
        self, target, disp, values, op, *, dtype=None, count=1, layout=None, origin_layout=None
    ):
        """``MPI_Rget_accumulate``; ``layout`` and ``origin_layout`` as for
        ``get_accumulate``."""
        return Request(
            self._get_accumulate(
                target, disp, values, op, dtype, count, True, layout, origin_layout
            )
        )

    # ---- synchronization ----

    def fence(self, assertion=0):
        """``MPI_Win_fence``: publishes this rank's stores (unless NOSTORE); one that ends an
        epoch returns when every operation of it is applied everywhere; then refreshes the
        private copy."""
        self._native.fence(int(assertion))

    def post(self, group, assertion=0):
        """``MPI_Win_post``: exposes this rank's window to ``group`` and publishes its stores.
        Does not block."""
        self._native.post(list(group), int(assertion))

    def start(self, group, assertion=0):
        """``MPI_Win_start``: an access epoch to ``group``. Does not block."""
        self._native.start(list(group), int(assertion))

    def complete(self):
        """``MPI_Win_complete``: ends the access epoch once its operations are done."""
        self._native.complete()

    def wait(self):
        """``MPI_Win_wait``: ends the exposure epoch, then refreshes the private copy."""
        self._native.wait()

    def test(self):
        """``MPI_Win_test``: ``wait`` if it would not block (True), else False."""
        return self._native.test()

    def lock(self, lock_type, target, assertion=0):
        """``MPI_Win_lock``: a lock of one's own rank refreshes the private copy."""
        self._native.lock(plain(lock_type), target, int(assertion))

    def unlock(self, target):
        """``MPI_Win_unlock``: publishes this rank's stores and returns when every operation
        to ``target`` is complete there."""
        self._native.unlock(target)

    def lock_all(self, assertion=0):
        """``MPI_Win_lock_all``: a shared lock of every rank."""
        self._native.lock_all(int(assertion))

    def unlock_all(self):
        """``MPI_Win_unlock_all``."""
        self._native.unlock_all()

    def flush(self, target):
        """``MPI_Win_flush``: completes the operations to ``target`` at origin and target."""
        self._native.flush(target)

    def flush_all(self):
        """``MPI_Win_flush_all``."""
        self._native.flush_all()

    def flush_local(self, target):
        """``MPI_Win_flush_local``: completes the operations to ``target`` at the origin."""
        self._native.flush_local(target)

    def flush_local_all(self):
        """``MPI_Win_flush_local_all``."""
        self._native.flush_local_all()

    def sync(self):
        """``MPI_Win_sync``: publishes this rank's stores, then refreshes the private copy."""
        self._native.sync()

    def free(self):
        """``MPI_Win_free``: collective; returns once every rank has freed the window."""
        self._native.free()

    def fencing_token(self, target):
        """The fencing token of the lock this rank holds on ``target``, once its grant has
        been seen; None otherwise."""
        return self._native.fencing_token(target)

    def get_info(self):
        """``MPI_Win_get_info``: a dict of every hint in use with its value (defaults
        included) and the keys the server does not use, kept as given at creation."""
        return dict(self._native.get_info())

    def set_info(self, info):
        """``MPI_Win_set_info``, collective: returns once every rank called it with the same
        info (a dict or (key, value) pairs). ``accumulate_ops``, ``accumulate_ordering``,
        ``mpi_accumulate_granularity`` and keys the server does not use take the values
        given; creation hints (``no_locks``, ``same_size``, ...) are checked and ignored."""
        pairs = info.items() if isinstance(info, dict) else info
        self._native.set_info([(str(key), str(value)) for key, value in pairs])

    def get_group(self):
        """``MPI_Win_get_group``: the window's ranks, as ranks of the world (all of them)."""
        return list(self._native.get_group())


class Session:
    """This process attached as one rank of a world, over one stream. ``Session.attach``
    makes one; it is a context manager that closes it. Its lease is kept alive with
    heartbeats by the library."""

    def __init__(self, native):
        self._native = native

    @classmethod
    def attach(cls, url, token, **options):
        """Attaches to the server at ``url`` as the rank whose token this is. Options:
        ``audit_database_url`` (write this session's audit events to the store itself),
        ``ship_audit_events``, ``world`` and ``rank`` (a claim the server checks),
        ``ca_file``, ``connect_timeout`` and ``timeout`` (seconds), ``reattach_within``
        (seconds; 0 = never: how long the session keeps trying to attach again by itself, as
        a new incarnation, when its server or node goes away — 30 by default)."""
        return cls(_onesided.NativeSession.attach(url, token, **options))

    world = property(lambda self: self._native.world, doc="The world's name.")
    rank = property(lambda self: self._native.rank, doc="This session's rank.")
    nranks = property(lambda self: self._native.nranks, doc="The number of ranks.")
    incarnation = property(
        lambda self: self._native.incarnation,
        doc="This session's incarnation of its rank (1 for the first; it grows when the "
        "session attaches again by itself).",
    )
    audited = property(
        lambda self: self._native.audited, doc="Whether the server keeps an audit log."
    )

    def window(self, name):
        """Opens the window ``name`` of this world. On a dynamic window the handle knows the
        regions this rank attached in an earlier session and did not detach (``regions()``),
        their bytes as the public copy has them."""
        return Window(self._native.window(name), self)

    def create_window(
        self,
        name,
        size,
        disp_unit=1,
        flavor="allocate",
        info=None,
        model="separate",
        group=None,
    ):
        """``MPI_Win_allocate`` (or ``MPI_Win_create`` or ``MPI_Win_create_dynamic``, by
        ``flavor``: ``"allocate"``, ``"create"`` or ``"dynamic"``) by this rank, collective
        over the world's ranks, or over the members of ``group`` (world ranks, window rank r
        being ``group[r]``, as MPI numbers a subcommunicator; the other ranks take no part):
        every member calls it with the same ``name``, ``flavor``, ``model`` (``"separate"`` or
        ``"unified"``), ``info`` (a dict or pairs) and ``group`` and its own ``size`` in bytes
        (0 for a dynamic window: its memory is the regions it attaches, ``Window.attach``) and
        ``disp_unit``; returns the window, open, once every member has."""
        pairs = info.items() if isinstance(info, dict) else (info or [])
        native = self._native.create_window(
            name,
            size,
            disp_unit,
            flavor,
            [(str(k), str(v)) for k, v in pairs],
            model,
            list(group or []),
        )
        return Window(native, self)

    def barrier(self):
        """``MPI_Barrier`` over the world."""
        self._native.barrier()

    def close(self):
        """Ships what is still pending (loads and stores since the last call) and waits until
        the server has it, then ends the session (the server sees it leave, not break); calls
        on its windows fail afterwards."""
        self._native.close()

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        self.close()
        return False

    def __repr__(self):
        return "Session(world={!r}, rank={})".format(self.world, self.rank)
