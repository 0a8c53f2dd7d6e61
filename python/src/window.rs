//! `NativeWindow`: the Rust client's `Window` with every MPI call, on bytes and datatype names
//! (the `onesided` package turns numpy values into them). Operations go through
//! `Window::issue` with the same `OpSpec` the Rust client's typed methods build, so bounds,
//! types, epochs, splitting and coalescing are checked and done by that code. Layouts arrive
//! as the plain tuples of the package's layout classes (`LayoutArgs`); `pack` and `unpack`
//! apply one to an origin buffer with core's `gather` and `scatter`.

use std::sync::Mutex;

use bytes::Bytes;
use onesided_client::{
    Block, ByteBlock, Datatype, Error, ErrorClass, Layout, LockType, Op, OpKind, OpSpec, Order,
    Pending, StructBlock, Subarray, Window,
};
use onesided_core::layout::{gather, scatter};
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::admin::WindowDescription;
use crate::errors::{bad_argument, refused, to_py};
use crate::{block, now, str_pairs, wait, InRuntime};

/// Every datatype as `(name, size in bytes)`, in wire order.
pub(crate) fn datatypes() -> Vec<(&'static str, usize)> {
    Datatype::ALL
        .into_iter()
        .map(|dtype| (dtype.name(), dtype.size()))
        .collect()
}

/// The datatype named `name` (`"i64"`, …); an unknown name is class `TYPE`.
pub(crate) fn datatype_of(py: Python<'_>, name: &str) -> PyResult<Datatype> {
    Datatype::parse(name)
        .ok_or_else(|| bad_argument(py, ErrorClass::Type, format!("unknown datatype {name:?}")))
}

fn op_of(py: Python<'_>, name: Option<&str>) -> PyResult<Op> {
    let name = name.ok_or_else(|| bad_argument(py, ErrorClass::Op, "the call needs an op"))?;
    Op::parse(name).ok_or_else(|| bad_argument(py, ErrorClass::Op, format!("unknown op {name:?}")))
}

fn kind_of(py: Python<'_>, kind: &str, op: Option<&str>) -> PyResult<OpKind> {
    Ok(match kind {
        "put" => OpKind::Put,
        "get" => OpKind::Get,
        "accumulate" => OpKind::Accumulate(op_of(py, op)?),
        "get_accumulate" => OpKind::GetAccumulate(op_of(py, op)?),
        "fetch_and_op" => OpKind::FetchAndOp(op_of(py, op)?),
        "compare_and_swap" => OpKind::CompareAndSwap,
        other => {
            return Err(refused(
                py,
                ErrorClass::Arg,
                format!("{other:?} is not a communication call"),
            ))
        }
    })
}

fn lock_type_of(py: Python<'_>, name: &str) -> PyResult<LockType> {
    match name.to_ascii_lowercase().as_str() {
        "shared" => Ok(LockType::Shared),
        "exclusive" => Ok(LockType::Exclusive),
        _ => Err(bad_argument(
            py,
            ErrorClass::LockType,
            format!("lock type {name:?} is neither \"shared\" nor \"exclusive\""),
        )),
    }
}

/// A subarray as the package hands it over: sizes, subsizes, starts and the order's name.
type SubarrayArgs = (Vec<u64>, Vec<u64>, Vec<u64>, String);

/// A resized layout as the package hands it over: lb, extent, count and the inner layout's
/// `native()` dict.
type ResizedArgs<'py> = (i64, u64, u64, Bound<'py, PyDict>);

/// A struct's blocks as the package hands them over: (byte offset, datatype name, length).
type StructArgs = Vec<(u64, String, u64)>;

/// A layout as the `onesided` package describes it (its layout classes' `native()`): at most
/// one of the shapes, else `count` contiguous elements.
#[derive(Debug, Default)]
struct LayoutArgs {
    count: u64,
    /// `Vector`: (count, blocklen, stride in elements).
    vector: Option<(u64, u64, u64)>,
    /// `Indexed`: (displacement, length) in elements.
    blocks: Option<Vec<(u64, u64)>>,
    /// `Hvector`: (count, blocklen, stride in bytes).
    hvector: Option<(u64, u64, u64)>,
    /// `Hindexed`: (byte offset, length in elements).
    hblocks: Option<Vec<(u64, u64)>>,
    /// `Subarray`.
    subarray: Option<SubarrayArgs>,
    /// `Resized`: (lb, extent, count, the inner layout).
    resized: Option<(i64, u64, u64, Layout)>,
    /// `Struct`: (byte offset, datatype name, length).
    struct_blocks: Option<StructArgs>,
}

/// The keywords of a layout: its class's `native()` dict, as `pack`, `unpack` and `issue` take
/// it (`**layout`) and a resized layout nests it.
const LAYOUT_KEYS: [&str; 8] = [
    "count",
    "vector",
    "blocks",
    "hvector",
    "hblocks",
    "subarray",
    "resized",
    "struct_blocks",
];

/// The layout a `native()` dict describes (a resized one's inner layout nested as deep as
/// given); no dict is no elements. A key that is no layout's is a `TypeError`, as an unknown
/// keyword of a call is.
fn layout_of(py: Python<'_>, args: Option<&Bound<'_, PyDict>>) -> PyResult<Layout> {
    fn item<'py, T: FromPyObjectOwned<'py>>(
        args: &Bound<'py, PyDict>,
        key: &str,
    ) -> PyResult<Option<T>> {
        match args.get_item(key)? {
            Some(value) if !value.is_none() => Ok(Some(value.extract().map_err(Into::into)?)),
            _ => Ok(None),
        }
    }
    let Some(args) = args else {
        return LayoutArgs::default().layout(py);
    };
    for key in args.keys() {
        let key: String = key.extract()?;
        if !LAYOUT_KEYS.contains(&key.as_str()) {
            return Err(PyTypeError::new_err(format!(
                "unexpected keyword argument {key:?} (a layout's are {LAYOUT_KEYS:?})"
            )));
        }
    }
    let resized = match item::<ResizedArgs<'_>>(args, "resized")? {
        Some((lb, extent, count, inner)) => Some((lb, extent, count, layout_of(py, Some(&inner))?)),
        None => None,
    };
    LayoutArgs {
        count: item(args, "count")?.unwrap_or(0),
        vector: item(args, "vector")?,
        blocks: item(args, "blocks")?,
        hvector: item(args, "hvector")?,
        hblocks: item(args, "hblocks")?,
        subarray: item(args, "subarray")?,
        resized,
        struct_blocks: item(args, "struct_blocks")?,
    }
    .layout(py)
}

impl LayoutArgs {
    /// The layout; class `ARG` when several shapes or an unknown order are given.
    fn layout(self, py: Python<'_>) -> PyResult<Layout> {
        let given = [
            self.vector.is_some(),
            self.blocks.is_some(),
            self.hvector.is_some(),
            self.hblocks.is_some(),
            self.subarray.is_some(),
            self.resized.is_some(),
            self.struct_blocks.is_some(),
        ];
        if given.iter().filter(|&&shape| shape).count() > 1 {
            return Err(refused(py, ErrorClass::Arg, "a layout has one shape"));
        }
        if let Some((count, blocklen, stride)) = self.vector {
            return Ok(Layout::Vector {
                count,
                blocklen,
                stride,
            });
        }
        if let Some(blocks) = self.blocks {
            return Ok(Layout::Indexed {
                blocks: blocks
                    .into_iter()
                    .map(|(disp, len)| Block { disp, len })
                    .collect(),
            });
        }
        if let Some((count, blocklen, stride_bytes)) = self.hvector {
            return Ok(Layout::Hvector {
                count,
                blocklen,
                stride_bytes,
            });
        }
        if let Some(blocks) = self.hblocks {
            return Ok(Layout::Hindexed {
                blocks: blocks
                    .into_iter()
                    .map(|(offset, len)| ByteBlock { offset, len })
                    .collect(),
            });
        }
        if let Some((sizes, subsizes, starts, order)) = self.subarray {
            let order = match order.to_ascii_lowercase().as_str() {
                "c" => Order::C,
                "fortran" => Order::Fortran,
                _ => {
                    return Err(bad_argument(
                        py,
                        ErrorClass::Arg,
                        format!("order {order:?} is neither \"c\" nor \"fortran\""),
                    ))
                }
            };
            return Ok(Layout::Subarray(Box::new(Subarray {
                sizes,
                subsizes,
                starts,
                order,
            })));
        }
        if let Some((lb, extent, count, inner)) = self.resized {
            return Ok(Layout::resized(inner, lb, extent, count));
        }
        if let Some(blocks) = self.struct_blocks {
            return Ok(Layout::Struct {
                blocks: blocks
                    .into_iter()
                    .map(|(offset, dtype, len)| {
                        Ok(StructBlock {
                            offset,
                            dtype: datatype_of(py, &dtype)?,
                            len,
                        })
                    })
                    .collect::<PyResult<_>>()?,
            });
        }
        Ok(Layout::Contiguous { count: self.count })
    }
}

/// The elements of `data` (elements of `itemsize` bytes) that the layout (its `native()`
/// keywords) selects, packed in its type-map order: an origin datatype
/// (`onesided_client::pack` on bytes).
#[pyfunction]
#[pyo3(signature = (data, itemsize, **layout))]
pub(crate) fn pack<'py>(
    py: Python<'py>,
    data: &[u8],
    itemsize: u64,
    layout: Option<&Bound<'_, PyDict>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let packed = layout_of(py, layout)?
        .flatten(itemsize)
        .and_then(|runs| gather(&runs, 0, data))
        .map_err(|error| to_py(py, error.into()))?;
    Ok(PyBytes::new(py, &packed))
}

/// `buffer` with `packed` values (as a get returns them) put where the layout (its `native()`
/// keywords) says: the origin datatype of a get (`onesided_client::unpack` on bytes). Nothing
/// is changed on error.
#[pyfunction]
#[pyo3(signature = (packed, buffer, itemsize, **layout))]
pub(crate) fn unpack<'py>(
    py: Python<'py>,
    packed: &[u8],
    buffer: &[u8],
    itemsize: u64,
    layout: Option<&Bound<'_, PyDict>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut unpacked = buffer.to_vec();
    layout_of(py, layout)?
        .flatten(itemsize)
        .and_then(|runs| scatter(&runs, 0, &mut unpacked, packed))
        .map_err(|error| to_py(py, error.into()))?;
    Ok(PyBytes::new(py, &unpacked))
}

/// One rank's window; `onesided.Window` wraps it.
#[pyclass(frozen, module = "onesided._onesided")]
#[derive(Debug)]
pub(crate) struct NativeWindow {
    window: InRuntime<Window>,
}

impl NativeWindow {
    pub(crate) fn new(window: Window) -> Self {
        NativeWindow {
            window: InRuntime::new(window),
        }
    }
}

#[pymethods]
impl NativeWindow {
    /// What every rank knows about the window, as it was when opened (`get_info` has the
    /// info in use after `set_info`).
    #[getter]
    fn desc(&self) -> WindowDescription {
        WindowDescription::from(self.window.desc())
    }

    /// This rank.
    #[getter]
    fn rank(&self) -> u32 {
        self.window.rank()
    }

    /// The fencing token of the lock this rank holds on `target`, once its grant was seen.
    fn fencing_token(&self, target: u32) -> Option<u64> {
        self.window.fencing_token(target)
    }

    /// `MPI_Win_get_info`: the hints in use and the keys kept as given.
    fn get_info(&self) -> Vec<(String, String)> {
        self.window.get_info()
    }

    /// `MPI_Win_get_group`: the window's ranks, as ranks of the world.
    fn get_group(&self) -> Vec<u32> {
        self.window.get_group()
    }

    /// `MPI_Win_set_info` (collective): `info` is a list of (key, value) pairs.
    fn set_info(&self, py: Python<'_>, info: Vec<(String, String)>) -> PyResult<()> {
        wait(py, self.window.set_info(&str_pairs(&info)))
    }

    /// Issues a communication call (`kind` is its MPI name) of `dtype` elements at `disp`, in
    /// the layout `shape` (a layout class's `native()` keywords: `count` contiguous elements,
    /// or the `vector` (count, blocklen, stride), indexed `blocks` ((disp, len), …), `hvector`
    /// (count, blocklen, stride in bytes), hindexed `hblocks` ((byte offset, len), …),
    /// `subarray` (sizes, subsizes, starts, order), `resized` (lb, extent, count, the inner
    /// layout's dict) or `struct_blocks` ((byte offset, datatype name, len), …)). `data` are
    /// the origin's values, packed little-endian.
    #[pyo3(signature = (
        target, kind, dtype, disp, data, *, op = None, compare = None, request_based = false,
        **shape
    ))]
    #[allow(clippy::too_many_arguments)]
    fn issue(
        &self,
        py: Python<'_>,
        target: u32,
        kind: &str,
        dtype: &str,
        disp: u64,
        data: &[u8],
        op: Option<&str>,
        compare: Option<&[u8]>,
        request_based: bool,
        shape: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<NativePending> {
        let layout = layout_of(py, shape)?;
        let spec = OpSpec {
            kind: kind_of(py, kind, op)?,
            dtype: datatype_of(py, dtype)?,
            disp,
            layout,
            data: Bytes::copy_from_slice(data),
            compare: compare.map(Bytes::copy_from_slice).unwrap_or_default(),
        };
        let pending = now(py, || self.window.issue(target, spec, request_based))?;
        Ok(NativePending {
            state: Mutex::new(Answer::Waiting(InRuntime::new(pending))),
        })
    }

    /// Stores `data` into the private copy at byte `offset` (a local store).
    fn store_bytes(&self, py: Python<'_>, offset: u64, data: &[u8]) -> PyResult<()> {
        now(py, || self.window.store_bytes(offset, data))
    }

    /// Loads `length` bytes of the private copy at byte `offset` (a local load).
    fn load_bytes<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        length: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let loaded = now(py, || self.window.load_bytes(offset, length))?;
        Ok(PyBytes::new(py, &loaded))
    }

    /// Reads the private copy without recording a load (for tools that observe a program).
    fn inspect_bytes<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        length: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let read = now(py, || self.window.inspect_bytes(offset, length))?;
        Ok(PyBytes::new(py, &read))
    }

    /// `MPI_Win_attach` on a dynamic window: a region of `size` bytes, at the address the
    /// server hands out (returned).
    fn attach(&self, py: Python<'_>, size: u64) -> PyResult<u64> {
        wait(py, self.window.attach(size))
    }

    /// `MPI_Win_attach` of a region of `size` bytes at `address`.
    fn attach_at(&self, py: Python<'_>, address: u64, size: u64) -> PyResult<u64> {
        wait(py, self.window.attach_at(address, size))
    }

    /// `MPI_Win_detach` of the region attached at `address`.
    fn detach(&self, py: Python<'_>, address: u64) -> PyResult<()> {
        wait(py, self.window.detach(address))
    }

    /// This rank's attached regions: (address, size in bytes), by address.
    fn regions(&self) -> Vec<(u64, u64)> {
        self.window.regions()
    }

    /// Stores `data` at `address` of a region this rank attached (a local store).
    fn store_at_bytes(&self, py: Python<'_>, address: u64, data: &[u8]) -> PyResult<()> {
        now(py, || self.window.store_at::<u8>(address, data))
    }

    /// Loads `length` bytes at `address` of a region this rank attached (a local load).
    fn load_at_bytes<'py>(
        &self,
        py: Python<'py>,
        address: u64,
        length: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let loaded = now(py, || self.window.load_at::<u8>(address, length))?;
        Ok(PyBytes::new(py, &loaded))
    }

    fn fence(&self, py: Python<'_>, assert: u32) -> PyResult<()> {
        wait(py, self.window.fence(assert))
    }

    fn post(&self, py: Python<'_>, group: Vec<u32>, assert: u32) -> PyResult<()> {
        now(py, || self.window.post(&group, assert))
    }

    fn start(&self, py: Python<'_>, group: Vec<u32>, assert: u32) -> PyResult<()> {
        now(py, || self.window.start(&group, assert))
    }

    fn complete(&self, py: Python<'_>) -> PyResult<()> {
        wait(py, self.window.complete())
    }

    fn wait(&self, py: Python<'_>) -> PyResult<()> {
        wait(py, self.window.wait())
    }

    fn test(&self, py: Python<'_>) -> PyResult<bool> {
        wait(py, self.window.test())
    }

    fn lock(&self, py: Python<'_>, lock_type: &str, target: u32, assert: u32) -> PyResult<()> {
        let lock_type = lock_type_of(py, lock_type)?;
        wait(py, self.window.lock(lock_type, target, assert))
    }

    fn unlock(&self, py: Python<'_>, target: u32) -> PyResult<()> {
        wait(py, self.window.unlock(target))
    }

    fn lock_all(&self, py: Python<'_>, assert: u32) -> PyResult<()> {
        wait(py, self.window.lock_all(assert))
    }

    fn unlock_all(&self, py: Python<'_>) -> PyResult<()> {
        wait(py, self.window.unlock_all())
    }

    fn flush(&self, py: Python<'_>, target: u32) -> PyResult<()> {
        wait(py, self.window.flush(target))
    }

    fn flush_all(&self, py: Python<'_>) -> PyResult<()> {
        wait(py, self.window.flush_all())
    }

    fn flush_local(&self, py: Python<'_>, target: u32) -> PyResult<()> {
        wait(py, self.window.flush_local(target))
    }

    fn flush_local_all(&self, py: Python<'_>) -> PyResult<()> {
        wait(py, self.window.flush_local_all())
    }

    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        wait(py, self.window.sync())
    }

    fn free(&self, py: Python<'_>) -> PyResult<()> {
        wait(py, self.window.free())
    }
}

#[derive(Debug)]
enum Answer {
    Waiting(InRuntime<Pending<Bytes>>),
    /// A thread is waiting for it.
    Awaited,
    Done(Result<Bytes, Error>),
}

/// The answer of an operation: the bytes a get-like call fetched (empty for put-like ones),
/// once the operation completed. `value()` may be called again; it gives the same answer.
#[pyclass(frozen, module = "onesided._onesided")]
#[derive(Debug)]
pub(crate) struct NativePending {
    state: Mutex<Answer>,
}

impl NativePending {
    fn state(&self) -> std::sync::MutexGuard<'_, Answer> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

#[pymethods]
impl NativePending {
    /// The fetched bytes, waiting for them if they have not arrived (an operation still
    /// waiting to travel with the epoch's closing call is sent now).
    fn value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let taken = std::mem::replace(&mut *self.state(), Answer::Awaited);
        let answer = match taken {
            Answer::Waiting(mut pending) => match pending.0.take() {
                Some(pending) => match block(py, pending.value()) {
                    Ok(answer) => answer,
                    Err(signal) => {
                        let abandoned = Error::Disconnected("the wait was interrupted".into());
                        *self.state() = Answer::Done(Err(abandoned));
                        return Err(signal);
                    }
                },
                None => Err(Error::Protocol("the answer was dropped".into())),
            },
            Answer::Done(answer) => answer,
            Answer::Awaited => {
                return Err(PyRuntimeError::new_err(
                    "another thread is waiting for this answer",
                ))
            }
        };
        *self.state() = Answer::Done(answer.clone());
        match answer {
            Ok(bytes) => Ok(PyBytes::new(py, &bytes)),
            Err(error) => Err(to_py(py, error)),
        }
    }
}
