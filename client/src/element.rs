//! Typed views: the Rust types whose values travel as an MPI basic datatype.
//!
//! Owns: `Element`, which Rust type travels as which core `Datatype` (the integers, the floats
//! and the MAXLOC/MINLOC pairs `IntIndex` and `FloatIndex`), and the little-endian casts
//! between values and wire bytes (`encode`, `decode`; a big-endian target does not build).
//! Must not: check counts or bounds (the window's validation does), or know any datatype's
//! arithmetic (core's `reduce` does).

use onesided_core::Datatype;

#[cfg(target_endian = "big")]
compile_error!("onesided's wire format and typed views are little-endian");

/// A plain value type with an MPI basic datatype. Encoded little-endian, like the wire.
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    /// The datatype its values travel as.
    const DATATYPE: Datatype;
}

macro_rules! element {
    ($($ty:ty => $dtype:ident),* $(,)?) => {
        $(impl Element for $ty {
            const DATATYPE: Datatype = Datatype::$dtype;
        })*
    };
}

element! {
    i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
    f32 => F32, f64 => F64,
}

/// A `MAXLOC`/`MINLOC` pair of an `i32` value and an `i32` index (`MPI_2INT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct IntIndex {
    /// The value.
    pub value: i32,
    /// Its index.
    pub index: i32,
}

impl Element for IntIndex {
    const DATATYPE: Datatype = Datatype::PairI32I32;
}

/// A `MAXLOC`/`MINLOC` pair of an `f32` value and an `i32` index (`MPI_FLOAT_INT`).
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct FloatIndex {
    /// The value.
    pub value: f32,
    /// Its index.
    pub index: i32,
}

impl Element for FloatIndex {
    const DATATYPE: Datatype = Datatype::PairF32I32;
}

/// Values as wire bytes.
pub fn encode<T: Element>(values: &[T]) -> bytes::Bytes {
    bytes::Bytes::copy_from_slice(bytemuck::cast_slice(values))
}

/// Wire bytes as values (the length was checked by the server's layout).
pub fn decode<T: Element>(bytes: &[u8]) -> Vec<T> {
    bytemuck::pod_collect_to_vec(bytes)
}
