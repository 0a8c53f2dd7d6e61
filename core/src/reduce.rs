//! The reduction operators of accumulate-style RMA calls and their type/op validity rules.
//!
//! Owns: the closed list of predefined operations with their names and stable wire codes,
//! which operation is defined for which datatype (MPI-3.1 §5.9.2), the element-wise
//! reduction `target = target op origin` over packed little-endian buffers, and the
//! one-element compare-and-swap. Must not: know about windows, layouts or epochs; callers
//! pass the already addressed byte slices.
//!
//! Semantics follow MPI's `f(a, b)` with `a` the target element and `b` the origin element:
//! `replace` yields `b`, `no_op` keeps `a`. Integer arithmetic wraps (two's complement).
//! Logical operations treat nonzero as true and store 1 or 0. Float `max` is
//! `if b > a { b } else { a }` and `min` is `if b < a { b } else { a }`, so a NaN already in
//! the target stays, a NaN arriving from the origin is ignored, and between `0.0` and `-0.0`
//! the target's is kept. `maxloc`/`minloc` keep the target pair when the values compare
//! unordered (NaN).

use std::fmt;
use std::ops::{BitAnd, BitOr, BitXor};
use std::str::FromStr;

use crate::datatype::Datatype;
use crate::error::{RmaError, RmaResult};
use crate::f80::F80;

/// A predefined reduction operation. The numeric values are stable: they travel on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Op {
    /// Sum (`MPI_SUM`).
    Sum = 1,
    /// Product (`MPI_PROD`).
    Prod = 2,
    /// Maximum (`MPI_MAX`).
    Max = 3,
    /// Minimum (`MPI_MIN`).
    Min = 4,
    /// Logical and (`MPI_LAND`).
    Land = 5,
    /// Bitwise and (`MPI_BAND`).
    Band = 6,
    /// Logical or (`MPI_LOR`).
    Lor = 7,
    /// Bitwise or (`MPI_BOR`).
    Bor = 8,
    /// Logical exclusive or (`MPI_LXOR`).
    Lxor = 9,
    /// Bitwise exclusive or (`MPI_BXOR`).
    Bxor = 10,
    /// Maximum value and its index (`MPI_MAXLOC`).
    MaxLoc = 11,
    /// Minimum value and its index (`MPI_MINLOC`).
    MinLoc = 12,
    /// Replace the target with the origin (`MPI_REPLACE`).
    Replace = 13,
    /// Leave the target unchanged (`MPI_NO_OP`).
    NoOp = 14,
}

impl Op {
    /// Every operation, in wire order.
    pub const ALL: [Op; 14] = [
        Op::Sum,
        Op::Prod,
        Op::Max,
        Op::Min,
        Op::Land,
        Op::Band,
        Op::Lor,
        Op::Bor,
        Op::Lxor,
        Op::Bxor,
        Op::MaxLoc,
        Op::MinLoc,
        Op::Replace,
        Op::NoOp,
    ];

    /// The short name used in scenarios, CLIs and messages (`sum`, `no_op`, …).
    pub fn name(self) -> &'static str {
        match self {
            Op::Sum => "sum",
            Op::Prod => "prod",
            Op::Max => "max",
            Op::Min => "min",
            Op::Land => "land",
            Op::Band => "band",
            Op::Lor => "lor",
            Op::Bor => "bor",
            Op::Lxor => "lxor",
            Op::Bxor => "bxor",
            Op::MaxLoc => "maxloc",
            Op::MinLoc => "minloc",
            Op::Replace => "replace",
            Op::NoOp => "no_op",
        }
    }

    /// The MPI constant's name (`MPI_SUM`, `MPI_NO_OP`, …).
    pub fn mpi_name(self) -> String {
        format!("MPI_{}", self.name().to_ascii_uppercase())
    }

    /// Parses a short name (`sum`) or an MPI constant name (`MPI_SUM`), ignoring ASCII case;
    /// `noop` is accepted for `no_op`.
    pub fn parse(text: &str) -> Option<Self> {
        let short = match text.get(..4) {
            Some(prefix) if prefix.eq_ignore_ascii_case("mpi_") => &text[4..],
            _ => text,
        };
        if short.eq_ignore_ascii_case("noop") {
            return Some(Op::NoOp);
        }
        Self::ALL
            .into_iter()
            .find(|op| op.name().eq_ignore_ascii_case(short))
    }

    /// The wire value (1..=14, in declaration order).
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The operation for a wire value.
    pub fn from_code(code: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.code() == code)
    }

    /// Whether MPI defines this operation for `dtype` (the rule [`check_op`] enforces).
    pub fn is_defined_for(self, dtype: Datatype) -> bool {
        match self {
            Op::Replace | Op::NoOp => true,
            Op::MaxLoc | Op::MinLoc => dtype.is_pair(),
            Op::Sum | Op::Prod | Op::Max | Op::Min => dtype.is_integer() || dtype.is_float(),
            Op::Land | Op::Lor | Op::Lxor => dtype.is_integer() || dtype.is_bool(),
            Op::Band | Op::Bor | Op::Bxor => dtype.is_integer() || dtype.is_byte(),
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Op {
    type Err = RmaError;

    /// Like [`Op::parse`], with a class `OP` error for an unknown name.
    fn from_str(text: &str) -> RmaResult<Self> {
        Op::parse(text).ok_or_else(|| crate::rma_err!(Op, "unknown op \"{text}\""))
    }
}

/// Whether two accumulates of `op` on the same elements of `dtype` may be applied as one,
/// `a ⊕ b`, with exactly the result of applying `a` and then `b`: the op is associative with no
/// rounding on that type. Integer `SUM`, `PROD`, `MAX`, `MIN` (wrapping arithmetic), the logical
/// and bitwise ops, and `REPLACE` (the later data wins). Never a float op: `(x + a) + b` need
/// not equal `x + (a + b)`.
pub fn folds_exactly(op: Op, dtype: Datatype) -> bool {
    dtype.is_integer()
        && matches!(
            op,
            Op::Sum
                | Op::Prod
                | Op::Max
                | Op::Min
                | Op::Land
                | Op::Band
                | Op::Lor
                | Op::Bor
                | Op::Lxor
                | Op::Bxor
                | Op::Replace
        )
}

/// Checks that `op` is defined for `dtype` (MPI-3.1 §5.9.2).
///
/// `sum`, `prod`, `max`, `min`: integers and floats. `land`, `lor`, `lxor`: integers and
/// `bool`. `band`, `bor`, `bxor`: integers and `byte`. `maxloc`, `minloc`: pair types only.
/// `replace`, `no_op`: every type. Class `OP` otherwise.
pub fn check_op(op: Op, dtype: Datatype) -> RmaResult<()> {
    if op.is_defined_for(dtype) {
        Ok(())
    } else {
        Err(crate::rma_err!(
            Op,
            "op {op} is not defined for datatype {dtype}"
        ))
    }
}

/// Checks that two buffers hold the same whole number of `dtype` elements.
fn check_lengths(dtype: Datatype, target: usize, origin: usize) -> RmaResult<()> {
    if target != origin {
        return Err(crate::rma_err!(
            Count,
            "target has {target} bytes but origin has {origin}"
        ));
    }
    let size = dtype.size();
    if !target.is_multiple_of(size) {
        return Err(crate::rma_err!(
            Count,
            "buffer of {target} bytes is not a whole number of {dtype} elements of {size} bytes"
        ));
    }
    Ok(())
}

/// Applies `op` element-wise: `target[i] = target[i] op origin[i]`.
///
/// Both buffers hold packed little-endian elements of `dtype` and need no alignment. Class
/// `OP` when the operation is not defined for the datatype (checked first), class `COUNT`
/// when the lengths differ or are not a multiple of `dtype.size()`. The target is left
/// unchanged on error. Never panics.
pub fn reduce(op: Op, dtype: Datatype, target: &mut [u8], origin: &[u8]) -> RmaResult<()> {
    check_op(op, dtype)?;
    check_lengths(dtype, target.len(), origin.len())?;
    match op {
        Op::NoOp => return Ok(()),
        Op::Replace => {
            target.copy_from_slice(origin);
            return Ok(());
        }
        _ => {}
    }
    match dtype {
        Datatype::I8 => int_kernel::<1, i8>(op, target, origin),
        Datatype::I16 => int_kernel::<2, i16>(op, target, origin),
        Datatype::I32 => int_kernel::<4, i32>(op, target, origin),
        Datatype::I64 => int_kernel::<8, i64>(op, target, origin),
        // `byte` only reaches here with a bitwise op and `bool` with a logical op, both of
        // which the u8 kernel computes as required (logical results are 0 or 1).
        Datatype::U8 | Datatype::Byte | Datatype::Bool => int_kernel::<1, u8>(op, target, origin),
        Datatype::U16 => int_kernel::<2, u16>(op, target, origin),
        Datatype::U32 => int_kernel::<4, u32>(op, target, origin),
        Datatype::U64 => int_kernel::<8, u64>(op, target, origin),
        Datatype::F32 => float_kernel::<4, f32>(op, target, origin),
        Datatype::F64 => float_kernel::<8, f64>(op, target, origin),
        Datatype::F80 => float_kernel::<16, F80>(op, target, origin),
        Datatype::PairF32I32 => loc_kernel::<8, f32>(op, target, origin),
        Datatype::PairF64I32 => loc_kernel::<12, f64>(op, target, origin),
        Datatype::PairI64I32 => loc_kernel::<12, i64>(op, target, origin),
        Datatype::PairI32I32 => loc_kernel::<8, i32>(op, target, origin),
        Datatype::PairI16I32 => loc_kernel::<6, i16>(op, target, origin),
    }
}

/// Compares one element of `dtype` in `target` bitwise with `compare` and, when equal,
/// replaces it with `origin` (`MPI_Compare_and_swap`). Returns the old target bytes either way.
///
/// Defined for integers, `byte` and `bool` only: floats and pair types are class `TYPE`
/// (checked first). Class `COUNT` unless all three slices are exactly `dtype.size()` bytes.
pub fn compare_and_swap(
    dtype: Datatype,
    target: &mut [u8],
    compare: &[u8],
    origin: &[u8],
) -> RmaResult<Vec<u8>> {
    if !(dtype.is_integer() || dtype.is_byte() || dtype.is_bool()) {
        return Err(crate::rma_err!(
            Type,
            "compare_and_swap is not defined for datatype {dtype}"
        ));
    }
    let size = dtype.size();
    if target.len() != size || compare.len() != size || origin.len() != size {
        return Err(crate::rma_err!(
            Count,
            "compare_and_swap takes one {dtype} element of {size} bytes, got target {}, compare {}, origin {}",
            target.len(),
            compare.len(),
            origin.len()
        ));
    }
    let old = target.to_vec();
    if target == compare {
        target.copy_from_slice(origin);
    }
    Ok(old)
}

/// An element type with an `N`-byte little-endian encoding.
trait Elem<const N: usize>: Copy {
    fn load(bytes: [u8; N]) -> Self;
    fn store(self) -> [u8; N];
}

/// The integer operations the kernels need.
trait Int<const N: usize>:
    Elem<N> + Ord + BitAnd<Output = Self> + BitOr<Output = Self> + BitXor<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    fn wrapping_add(self, other: Self) -> Self;
    fn wrapping_mul(self, other: Self) -> Self;
}

/// The float operations the kernels need.
trait Float<const N: usize>:
    Elem<N> + PartialOrd + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self>
{
}

macro_rules! elem {
    ($n:literal, $t:ty) => {
        impl Elem<$n> for $t {
            #[inline(always)]
            fn load(bytes: [u8; $n]) -> Self {
                <$t>::from_le_bytes(bytes)
            }
            #[inline(always)]
            fn store(self) -> [u8; $n] {
                self.to_le_bytes()
            }
        }
    };
}

macro_rules! int {
    ($n:literal, $t:ty) => {
        elem!($n, $t);
        impl Int<$n> for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)]
            fn wrapping_add(self, other: Self) -> Self {
                <$t>::wrapping_add(self, other)
            }
            #[inline(always)]
            fn wrapping_mul(self, other: Self) -> Self {
                <$t>::wrapping_mul(self, other)
            }
        }
    };
}

int!(1, i8);
int!(2, i16);
int!(4, i32);
int!(8, i64);
int!(1, u8);
int!(2, u16);
int!(4, u32);
int!(8, u64);
elem!(4, f32);
elem!(8, f64);
impl Float<4> for f32 {}
impl Float<8> for f64 {}
impl Elem<16> for F80 {
    #[inline(always)]
    fn load(bytes: [u8; 16]) -> Self {
        F80(bytes)
    }
    #[inline(always)]
    fn store(self) -> [u8; 16] {
        self.0
    }
}
impl Float<16> for F80 {}

/// A value-and-index pair element, `V`'s bytes followed by a little-endian `i32`.
#[derive(Clone, Copy)]
struct Loc<V> {
    value: V,
    index: i32,
}

macro_rules! loc {
    ($n:literal, $m:literal, $t:ty) => {
        impl Elem<$n> for Loc<$t> {
            #[inline(always)]
            fn load(bytes: [u8; $n]) -> Self {
                let (value, index) = bytes.split_at($m);
                let mut v = [0u8; $m];
                v.copy_from_slice(value);
                let mut i = [0u8; 4];
                i.copy_from_slice(index);
                Loc {
                    value: <$t>::from_le_bytes(v),
                    index: i32::from_le_bytes(i),
                }
            }
            #[inline(always)]
            fn store(self) -> [u8; $n] {
                let mut out = [0u8; $n];
                out[..$m].copy_from_slice(&self.value.to_le_bytes());
                out[$m..].copy_from_slice(&self.index.to_le_bytes());
                out
            }
        }
    };
}

loc!(8, 4, f32);
loc!(12, 8, f64);
loc!(12, 8, i64);
loc!(8, 4, i32);
loc!(6, 2, i16);

/// Runs `f(target, origin)` over every element pair, storing the result in the target.
#[inline(always)]
fn zip<const N: usize, T: Elem<N>>(target: &mut [u8], origin: &[u8], f: impl Fn(T, T) -> T) {
    let (target, _) = target.as_chunks_mut::<N>();
    let (origin, _) = origin.as_chunks::<N>();
    for (a, b) in target.iter_mut().zip(origin) {
        *a = f(T::load(*a), T::load(*b)).store();
    }
}

/// The error for an (op, kernel) pair that validation should have excluded.
fn unreachable_kernel(op: Op, kind: &str) -> RmaError {
    crate::rma_err!(Intern, "op {op} reached the {kind} kernel")
}

fn int_kernel<const N: usize, T: Int<N>>(
    op: Op,
    target: &mut [u8],
    origin: &[u8],
) -> RmaResult<()> {
    let truth = |x: T| x != T::ZERO;
    let of = |b: bool| if b { T::ONE } else { T::ZERO };
    match op {
        Op::Sum => zip(target, origin, |a: T, b| a.wrapping_add(b)),
        Op::Prod => zip(target, origin, |a: T, b| a.wrapping_mul(b)),
        Op::Max => zip(target, origin, |a: T, b| a.max(b)),
        Op::Min => zip(target, origin, |a: T, b| a.min(b)),
        Op::Land => zip(target, origin, |a: T, b| of(truth(a) && truth(b))),
        Op::Lor => zip(target, origin, |a: T, b| of(truth(a) || truth(b))),
        Op::Lxor => zip(target, origin, |a: T, b| of(truth(a) != truth(b))),
        Op::Band => zip(target, origin, |a: T, b| a & b),
        Op::Bor => zip(target, origin, |a: T, b| a | b),
        Op::Bxor => zip(target, origin, |a: T, b| a ^ b),
        Op::MaxLoc | Op::MinLoc | Op::Replace | Op::NoOp => {
            return Err(unreachable_kernel(op, "integer"))
        }
    }
    Ok(())
}

fn float_kernel<const N: usize, T: Float<N>>(
    op: Op,
    target: &mut [u8],
    origin: &[u8],
) -> RmaResult<()> {
    match op {
        Op::Sum => zip(target, origin, |a: T, b| a + b),
        Op::Prod => zip(target, origin, |a: T, b| a * b),
        Op::Max => zip(target, origin, |a: T, b| if b > a { b } else { a }),
        Op::Min => zip(target, origin, |a: T, b| if b < a { b } else { a }),
        _ => return Err(unreachable_kernel(op, "float")),
    }
    Ok(())
}

fn loc_kernel<const N: usize, V>(op: Op, target: &mut [u8], origin: &[u8]) -> RmaResult<()>
where
    V: Copy + PartialOrd,
    Loc<V>: Elem<N>,
{
    // Equal values keep the smaller index; unordered values (NaN) keep the target.
    let tie = |a: Loc<V>, b: Loc<V>| Loc {
        value: a.value,
        index: a.index.min(b.index),
    };
    match op {
        Op::MaxLoc => zip(target, origin, |a: Loc<V>, b| {
            if a.value > b.value {
                a
            } else if a.value < b.value {
                b
            } else if a.value == b.value {
                tie(a, b)
            } else {
                a
            }
        }),
        Op::MinLoc => zip(target, origin, |a: Loc<V>, b| {
            if a.value < b.value {
                a
            } else if a.value > b.value {
                b
            } else if a.value == b.value {
                tie(a, b)
            } else {
                a
            }
        }),
        _ => return Err(unreachable_kernel(op, "pair")),
    }
    Ok(())
}

#[cfg(test)]
mod folding {
    use super::*;
    use proptest::prelude::*;

    fn applied(op: Op, dtype: Datatype, target: &[u8], updates: &[&[u8]]) -> Vec<u8> {
        let mut target = target.to_vec();
        for update in updates {
            reduce(op, dtype, &mut target, update).unwrap();
        }
        target
    }

    proptest! {
        #[test]
        fn an_op_that_folds_exactly_gives_the_same_bytes_folded(
            target in any::<[u8; 8]>(),
            a in any::<[u8; 8]>(),
            b in any::<[u8; 8]>(),
            op_code in 1i32..=13,
        ) {
            let op = Op::from_code(op_code).unwrap();
            for dtype in [Datatype::I8, Datatype::U16, Datatype::I32, Datatype::U64, Datatype::I64] {
                if !folds_exactly(op, dtype) {
                    continue;
                }
                let mut folded = a.to_vec();
                reduce(op, dtype, &mut folded, &b).unwrap();
                prop_assert_eq!(
                    applied(op, dtype, &target, &[&folded]),
                    applied(op, dtype, &target, &[&a, &b]),
                    "{:?} on {:?}", op, dtype
                );
            }
        }
    }

    #[test]
    fn float_sums_never_fold() {
        for dtype in [Datatype::F32, Datatype::F64] {
            assert!(!folds_exactly(Op::Sum, dtype));
        }
        // why: applied one by one to 1.0, the 1 rounds away against 1e16; folded, it stays
        let (x, a, b) = (1.0f64, 1e16f64, -1e16f64);
        assert_eq!((x + a) + b, 0.0);
        assert_eq!(x + (a + b), 1.0);
        assert!(!folds_exactly(Op::MaxLoc, Datatype::PairF64I32));
        assert!(!folds_exactly(Op::NoOp, Datatype::I64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::{decode, encode_all, Value};
    use crate::error::ErrorClass;
    use proptest::prelude::*;

    #[test]
    fn names_codes_round_trip() {
        for (position, op) in Op::ALL.into_iter().enumerate() {
            assert_eq!(op.code(), position as i32 + 1);
            assert_eq!(Op::from_code(op.code()), Some(op));
            assert_eq!(Op::parse(op.name()), Some(op));
            assert_eq!(Op::parse(&op.name().to_ascii_uppercase()), Some(op));
            assert_eq!(Op::parse(&op.mpi_name()), Some(op));
            assert_eq!(op.mpi_name().parse::<Op>(), Ok(op));
            assert_eq!(op.to_string(), op.name());
        }
        assert_eq!(Op::parse("MPI_NO_OP"), Some(Op::NoOp));
        assert_eq!(Op::parse("mpi_maxloc"), Some(Op::MaxLoc));
        assert_eq!(Op::parse("noop"), Some(Op::NoOp));
        assert_eq!(Op::parse("MPI_"), None);
        assert_eq!(Op::parse("avg"), None);
        assert_eq!(Op::from_code(0), None);
        assert_eq!(Op::from_code(15), None);
        assert_eq!("x".parse::<Op>().unwrap_err().class, ErrorClass::Op);
    }

    /// The §5.9.2 table, written out by datatype name independently of the predicates.
    fn expected_valid(op: Op, dtype: Datatype) -> bool {
        let name = dtype.name();
        let integer = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"].contains(&name);
        let float = ["f32", "f64", "f80"].contains(&name);
        let pair = name.contains('_');
        match op.name() {
            "replace" | "no_op" => true,
            "sum" | "prod" | "max" | "min" => integer || float,
            "land" | "lor" | "lxor" => integer || name == "bool",
            "band" | "bor" | "bxor" => integer || name == "byte",
            "maxloc" | "minloc" => pair,
            other => panic!("unknown op {other}"),
        }
    }

    /// Reduces `v` modulo 2^bits into the range of the (un)signed type.
    fn wrap(v: i128, bits: u32, signed: bool) -> i128 {
        let modulus = 1i128 << bits;
        let mut r = v.rem_euclid(modulus);
        if signed && r >= modulus / 2 {
            r -= modulus;
        }
        r
    }

    fn bits_of(dtype: Datatype) -> u32 {
        (dtype.size() * 8) as u32
    }

    /// A straightforward reference for one element, on decoded values.
    fn reference(op: Op, dtype: Datatype, a: &Value, b: &Value) -> Value {
        match op {
            Op::Replace => return b.clone(),
            Op::NoOp => return a.clone(),
            _ => {}
        }
        match (a, b) {
            (Value::Int(x), Value::Int(y)) => {
                let (x, y) = (*x, *y);
                let bool_of = |t: bool| Value::Int(i128::from(t));
                match op {
                    Op::Sum => Value::Int(wrap(x + y, bits_of(dtype), dtype.is_signed())),
                    Op::Prod => {
                        Value::Int(wrap(x.wrapping_mul(y), bits_of(dtype), dtype.is_signed()))
                    }
                    Op::Max => Value::Int(if x >= y { x } else { y }),
                    Op::Min => Value::Int(if x <= y { x } else { y }),
                    Op::Land => bool_of(x != 0 && y != 0),
                    Op::Lor => bool_of(x != 0 || y != 0),
                    Op::Lxor => bool_of((x != 0) ^ (y != 0)),
                    Op::Band => Value::Int(wrap(x & y, bits_of(dtype), dtype.is_signed())),
                    Op::Bor => Value::Int(wrap(x | y, bits_of(dtype), dtype.is_signed())),
                    Op::Bxor => Value::Int(wrap(x ^ y, bits_of(dtype), dtype.is_signed())),
                    _ => panic!("no reference for {op} on {dtype}"),
                }
            }
            (Value::Float(x), Value::Float(y)) => {
                let (x, y) = (*x, *y);
                // Computing in f64 and rounding once to f32 is exact for + and *.
                let round = |v: f64| {
                    if dtype == Datatype::F32 {
                        Value::Float(f64::from(v as f32))
                    } else {
                        Value::Float(v)
                    }
                };
                match op {
                    Op::Sum => round(x + y),
                    Op::Prod => round(x * y),
                    Op::Max => Value::Float(if y > x { y } else { x }),
                    Op::Min => Value::Float(if y < x { y } else { x }),
                    _ => panic!("no reference for {op} on {dtype}"),
                }
            }
            (Value::Bool(x), Value::Bool(y)) => match op {
                Op::Land => Value::Bool(*x && *y),
                Op::Lor => Value::Bool(*x || *y),
                Op::Lxor => Value::Bool(x != y),
                _ => panic!("no reference for {op} on {dtype}"),
            },
            (Value::Pair(x, i), Value::Pair(y, j)) => {
                let order = match (&**x, &**y) {
                    (Value::Int(x), Value::Int(y)) => x.partial_cmp(y),
                    (Value::Float(x), Value::Float(y)) => x.partial_cmp(y),
                    _ => panic!("bad pair"),
                };
                let order = match op {
                    Op::MaxLoc => order,
                    Op::MinLoc => order.map(|o| o.reverse()),
                    _ => panic!("no reference for {op} on {dtype}"),
                };
                match order {
                    Some(std::cmp::Ordering::Greater) | None => a.clone(),
                    Some(std::cmp::Ordering::Less) => b.clone(),
                    Some(std::cmp::Ordering::Equal) => Value::Pair(x.clone(), (*i).min(*j)),
                }
            }
            _ => panic!("mismatched sample values"),
        }
    }

    /// Sample (target, origin) element vectors for a datatype, covering ties, zeros,
    /// negatives and overflow.
    fn samples(dtype: Datatype) -> (Vec<Value>, Vec<Value>) {
        let ints = |a: &[i128], b: &[i128]| {
            (
                a.iter().map(|&v| Value::Int(v)).collect(),
                b.iter().map(|&v| Value::Int(v)).collect(),
            )
        };
        let floats = |a: &[f64], b: &[f64]| {
            (
                a.iter().map(|&v| Value::Float(v)).collect(),
                b.iter().map(|&v| Value::Float(v)).collect(),
            )
        };
        let signed = |min: i128, max: i128| {
            ints(
                &[0, 1, -1, max, min, 5, -7, 12, 0, max],
                &[0, 0, 3, 1, -1, 5, 2, -12, 9, max],
            )
        };
        let unsigned = |max: i128| {
            ints(
                &[0, 1, 0, max, max, 5, 7, 12, 0xf0, max / 2 + 1],
                &[0, 0, 3, 1, max, 5, 2, 3, 0x3c, 2],
            )
        };
        let pairs = |values: (Vec<Value>, Vec<Value>)| {
            let ia = [0, 4, 9, 3, 2, 8, 1, 5, 6, 7];
            let ib = [1, 3, 9, 4, 2, 0, 8, 5, 7, 6];
            let make = |vs: Vec<Value>, is: &[i32]| {
                vs.into_iter()
                    .zip(is)
                    .map(|(v, &i)| Value::pair(v, i))
                    .collect::<Vec<_>>()
            };
            (make(values.0, &ia), make(values.1, &ib))
        };
        let float_sample = || {
            floats(
                &[0.0, 1.5, -2.0, 3.25, 1e10, -0.5, 7.0, 0.1, -0.0, 2.0],
                &[0.0, 1.5, 4.0, -3.25, 1e-3, -0.5, 6.0, 0.2, 0.0, f64::NAN],
            )
        };
        match dtype {
            Datatype::I8 => signed(i8::MIN.into(), i8::MAX.into()),
            Datatype::I16 => signed(i16::MIN.into(), i16::MAX.into()),
            Datatype::I32 => signed(i32::MIN.into(), i32::MAX.into()),
            Datatype::I64 => signed(i64::MIN.into(), i64::MAX.into()),
            Datatype::U8 | Datatype::Byte => unsigned(u8::MAX.into()),
            Datatype::U16 => unsigned(u16::MAX.into()),
            Datatype::U32 => unsigned(u32::MAX.into()),
            Datatype::U64 => unsigned(u64::MAX.into()),
            Datatype::F32 | Datatype::F64 | Datatype::F80 => float_sample(),
            Datatype::Bool => {
                let a = [true, true, false, false];
                let b = [true, false, true, false];
                (
                    a.iter().map(|&v| Value::Bool(v)).collect(),
                    b.iter().map(|&v| Value::Bool(v)).collect(),
                )
            }
            Datatype::PairF32I32 | Datatype::PairF64I32 => pairs(float_sample()),
            Datatype::PairI64I32 => pairs(signed(i64::MIN.into(), i64::MAX.into())),
            Datatype::PairI32I32 => pairs(signed(i32::MIN.into(), i32::MAX.into())),
            Datatype::PairI16I32 => pairs(signed(i16::MIN.into(), i16::MAX.into())),
        }
    }

    /// Value equality that treats two NaNs as equal and tells 0.0 from -0.0.
    fn same(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Float(x), Value::Float(y)) => {
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
            }
            (Value::Pair(x, i), Value::Pair(y, j)) => i == j && same(x, y),
            _ => a == b,
        }
    }

    #[test]
    fn every_op_on_every_datatype() {
        let mut checked = 0;
        for op in Op::ALL {
            for dtype in Datatype::ALL {
                let valid = expected_valid(op, dtype);
                assert_eq!(op.is_defined_for(dtype), valid, "{op} on {dtype}");
                let (a, b) = samples(dtype);
                let mut target = encode_all(dtype, &a).unwrap();
                let origin = encode_all(dtype, &b).unwrap();
                let before = target.clone();
                let result = reduce(op, dtype, &mut target, &origin);
                if !valid {
                    let err = result.unwrap_err();
                    assert_eq!(err.class, ErrorClass::Op, "{op} on {dtype}");
                    assert_eq!(
                        err.message,
                        format!("op {op} is not defined for datatype {dtype}")
                    );
                    assert_eq!(check_op(op, dtype), Err(err));
                    assert_eq!(target, before, "{op} on {dtype} changed the target");
                    continue;
                }
                result.unwrap();
                check_op(op, dtype).unwrap();
                let a = decode(dtype, &before).unwrap();
                let b = decode(dtype, &origin).unwrap();
                let got = decode(dtype, &target).unwrap();
                for ((x, y), z) in a.iter().zip(&b).zip(&got) {
                    let want = reference(op, dtype, x, y);
                    assert!(
                        same(z, &want),
                        "{op} on {dtype}: {x} op {y} = {z}, want {want}"
                    );
                }
                checked += 1;
            }
        }
        // 8 integer types take 10 ops + 2; floats 4 + 2; bool and byte 3 + 2; pairs 2 + 2.
        assert_eq!(checked, 8 * 12 + 3 * 6 + 2 * 5 + 5 * 4);
    }

    #[test]
    fn concrete_results() {
        let run = |op, dtype, a: &[Value], b: &[Value]| {
            let mut t = encode_all(dtype, a).unwrap();
            reduce(op, dtype, &mut t, &encode_all(dtype, b).unwrap()).unwrap();
            decode(dtype, &t).unwrap()
        };
        let i = Value::Int;
        assert_eq!(run(Op::Sum, Datatype::U8, &[i(250)], &[i(10)]), [i(4)]);
        assert_eq!(run(Op::Sum, Datatype::I8, &[i(127)], &[i(1)]), [i(-128)]);
        assert_eq!(
            run(Op::Prod, Datatype::I16, &[i(300)], &[i(300)]),
            [i(24464)]
        );
        assert_eq!(
            run(Op::Land, Datatype::I32, &[i(5), i(0)], &[i(-3), i(2)]),
            [i(1), i(0)]
        );
        assert_eq!(
            run(Op::Bxor, Datatype::Byte, &[i(0xf0)], &[i(0xff)]),
            [i(0x0f)]
        );
        assert_eq!(
            run(
                Op::MaxLoc,
                Datatype::PairF64I32,
                &[Value::pair(Value::Float(2.0), 5)],
                &[Value::pair(Value::Float(2.0), 3)]
            ),
            [Value::pair(Value::Float(2.0), 3)]
        );
        // NaN from the origin is ignored, NaN in the target stays.
        let nan = run(
            Op::Max,
            Datatype::F64,
            &[Value::Float(1.0), Value::Float(f64::NAN)],
            &[Value::Float(f64::NAN), Value::Float(1.0)],
        );
        assert_eq!(nan[0], Value::Float(1.0));
        assert!(matches!(nan[1], Value::Float(v) if v.is_nan()));
        // Bool logical ops store 0/1 even if the target held another nonzero byte.
        let mut t = [2u8, 0];
        reduce(Op::Land, Datatype::Bool, &mut t, &[1, 1]).unwrap();
        assert_eq!(t, [1, 0]);
    }

    #[test]
    fn length_errors() {
        let mut t = [0u8; 8];
        let err = reduce(Op::Sum, Datatype::I32, &mut t, &[0; 4]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Count);
        let mut t = [0u8; 6];
        let err = reduce(Op::Sum, Datatype::I32, &mut t, &[1; 6]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Count);
        assert_eq!(t, [0; 6]);
        let err = reduce(Op::Replace, Datatype::PairI16I32, &mut t[..5], &[1; 5]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Count);
        // The op check comes first.
        let err = reduce(Op::Band, Datatype::F64, &mut t, &[1; 5]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Op);
        assert_eq!(err.message, "op band is not defined for datatype f64");
        reduce(Op::Sum, Datatype::F64, &mut [], &[]).unwrap();
    }

    #[test]
    fn compare_and_swap_rules() {
        // (compare, swap in, old value returned, target after): equal swaps, unequal does not
        let mut t = 7i32.to_le_bytes();
        for (compare, swap, old, after) in [(7, 9, 7, 9), (7, 1, 9, 9)] {
            let bytes = |value: i32| value.to_le_bytes();
            let returned = compare_and_swap(Datatype::I32, &mut t, &bytes(compare), &bytes(swap));
            assert_eq!(returned.unwrap(), bytes(old));
            assert_eq!(t, bytes(after));
        }
        let mut b = [1u8];
        assert_eq!(
            compare_and_swap(Datatype::Bool, &mut b, &[1], &[0]).unwrap(),
            [1]
        );
        assert_eq!(b, [0]);
        assert_eq!(
            compare_and_swap(Datatype::Byte, &mut b, &[0], &[0xaa]).unwrap(),
            [0]
        );
        assert_eq!(b, [0xaa]);
        for dtype in Datatype::ALL {
            let size = dtype.size();
            let mut t = vec![0u8; size];
            let result = compare_and_swap(dtype, &mut t, &vec![0; size], &vec![1; size]);
            if dtype.is_float() || dtype.is_pair() {
                let err = result.unwrap_err();
                assert_eq!(err.class, ErrorClass::Type);
                assert_eq!(
                    err.message,
                    format!("compare_and_swap is not defined for datatype {dtype}")
                );
                assert_eq!(t, vec![0; size]);
            } else {
                assert_eq!(result.unwrap(), vec![0; size]);
                assert_eq!(t, vec![1; size]);
            }
        }
        let mut t = [0u8; 8];
        for (target, compare, origin) in [(8, 4, 4), (4, 8, 4), (4, 4, 8), (8, 8, 8)] {
            let err = compare_and_swap(
                Datatype::U32,
                &mut t[..target],
                &vec![0; compare],
                &vec![1; origin],
            )
            .unwrap_err();
            assert_eq!(err.class, ErrorClass::Count);
        }
        assert_eq!(t, [0; 8]);
        let err = compare_and_swap(Datatype::F32, &mut t[..4], &[0; 4], &[0; 4]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Type);
    }

    fn enc<T: Copy, const N: usize>(values: &[T], to: fn(T) -> [u8; N]) -> Vec<u8> {
        values.iter().flat_map(|&v| to(v)).collect()
    }

    fn dec_i32(bytes: &[u8]) -> Vec<i32> {
        bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    fn pairs_of(len: usize) -> impl Strategy<Value = (Vec<i32>, Vec<i32>)> {
        (
            proptest::collection::vec(any::<i32>(), len),
            proptest::collection::vec(any::<i32>(), len),
        )
    }

    fn two_vecs() -> impl Strategy<Value = (Vec<i32>, Vec<i32>)> {
        (0usize..40).prop_flat_map(pairs_of)
    }

    fn i32_result(op: Op, a: &[i32], b: &[i32]) -> Vec<i32> {
        let mut t = enc(a, i32::to_le_bytes);
        reduce(op, Datatype::I32, &mut t, &enc(b, i32::to_le_bytes)).unwrap();
        dec_i32(&t)
    }

    /// Bytes of `len` elements of a random integer-like datatype.
    fn int_buffers() -> impl Strategy<Value = (Datatype, Vec<u8>, Vec<u8>, Vec<u8>)> {
        let dtypes: Vec<Datatype> = Datatype::ALL
            .into_iter()
            .filter(|d| d.is_integer())
            .collect();
        (proptest::sample::select(dtypes), 0usize..16).prop_flat_map(|(dtype, len)| {
            let bytes = len * dtype.size();
            (
                Just(dtype),
                proptest::collection::vec(any::<u8>(), bytes),
                proptest::collection::vec(any::<u8>(), bytes),
                proptest::collection::vec(any::<u8>(), bytes),
            )
        })
    }

    proptest! {
        #[test]
        fn sum_i32_wraps((a, b) in two_vecs()) {
            let want: Vec<i32> = a.iter().zip(&b).map(|(x, y)| x.wrapping_add(*y)).collect();
            prop_assert_eq!(i32_result(Op::Sum, &a, &b), want);
        }

        #[test]
        fn replace_and_no_op((a, b) in two_vecs()) {
            prop_assert_eq!(i32_result(Op::Replace, &a, &b), b.clone());
            prop_assert_eq!(i32_result(Op::NoOp, &a, &b), a.clone());
        }

        #[test]
        fn max_min_bitwise_match_std((a, b) in two_vecs()) {
            let each = |f: fn(i32, i32) -> i32| -> Vec<i32> {
                a.iter().zip(&b).map(|(x, y)| f(*x, *y)).collect()
            };
            prop_assert_eq!(i32_result(Op::Max, &a, &b), each(std::cmp::max));
            prop_assert_eq!(i32_result(Op::Min, &a, &b), each(std::cmp::min));
            prop_assert_eq!(i32_result(Op::Band, &a, &b), each(|x, y| x & y));
            prop_assert_eq!(i32_result(Op::Bor, &a, &b), each(|x, y| x | y));
            prop_assert_eq!(i32_result(Op::Bxor, &a, &b), each(|x, y| x ^ y));
        }

        #[test]
        fn max_min_u64_match_std(
            a in proptest::collection::vec(any::<u64>(), 8),
            b in proptest::collection::vec(any::<u64>(), 8),
        ) {
            for (op, f) in [(Op::Max, u64::max as fn(u64, u64) -> u64), (Op::Min, u64::min)] {
                let mut t = enc(&a, u64::to_le_bytes);
                reduce(op, Datatype::U64, &mut t, &enc(&b, u64::to_le_bytes)).unwrap();
                let want: Vec<u64> = a.iter().zip(&b).map(|(x, y)| f(*x, *y)).collect();
                prop_assert_eq!(t, enc(&want, u64::to_le_bytes));
            }
        }

        #[test]
        fn maxloc_minloc_tie_rule(
            a in proptest::collection::vec((-3i32..3, any::<i32>()), 0..20),
            b in proptest::collection::vec((-3i32..3, any::<i32>()), 20),
        ) {
            let b = &b[..a.len()];
            let pack = |v: &[(i32, i32)]| -> Vec<u8> {
                v.iter().flat_map(|(x, i)| x.to_le_bytes().into_iter().chain(i.to_le_bytes())).collect()
            };
            for op in [Op::MaxLoc, Op::MinLoc] {
                let mut t = pack(&a);
                reduce(op, Datatype::PairI32I32, &mut t, &pack(b)).unwrap();
                let want: Vec<(i32, i32)> = a.iter().zip(b).map(|(&(x, i), &(y, j))| {
                    let a_wins = if op == Op::MaxLoc { x > y } else { x < y };
                    if x == y { (x, i.min(j)) } else if a_wins { (x, i) } else { (y, j) }
                }).collect();
                prop_assert_eq!(t, pack(&want));
            }
        }

        #[test]
        fn commutative_ops((dtype, a, b, _c) in int_buffers()) {
            for op in [Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Band, Op::Bor, Op::Bxor, Op::Land, Op::Lor, Op::Lxor] {
                let mut ab = a.clone();
                reduce(op, dtype, &mut ab, &b).unwrap();
                let mut ba = b.clone();
                reduce(op, dtype, &mut ba, &a).unwrap();
                prop_assert_eq!(ab, ba, "{} on {}", op, dtype);
            }
        }

        #[test]
        fn sum_is_associative((dtype, a, b, c) in int_buffers()) {
            // (a + b) + c
            let mut left = a.clone();
            reduce(Op::Sum, dtype, &mut left, &b).unwrap();
            reduce(Op::Sum, dtype, &mut left, &c).unwrap();
            // a + (b + c)
            let mut bc = b.clone();
            reduce(Op::Sum, dtype, &mut bc, &c).unwrap();
            let mut right = a.clone();
            reduce(Op::Sum, dtype, &mut right, &bc).unwrap();
            prop_assert_eq!(left, right);
        }

        #[test]
        fn never_panics(
            op in proptest::sample::select(Op::ALL.to_vec()),
            dtype in proptest::sample::select(Datatype::ALL.to_vec()),
            mut target in proptest::collection::vec(any::<u8>(), 0..40),
            origin in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let _ = reduce(op, dtype, &mut target, &origin);
            let _ = compare_and_swap(dtype, &mut target, &origin, &origin);
        }
    }
}
