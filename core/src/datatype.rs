//! The basic MPI datatypes and their byte encodings.
//!
//! Owns: the closed list of element datatypes, their names and stable wire codes, their
//! packed little-endian element encoding, and [`Value`], one decoded element as tests, CLIs
//! and scenarios write it. Must not: know about reductions ([`crate::reduce`]) or layouts
//! ([`crate::layout`]).
//!
//! Encoding: every element is stored little-endian with no padding. A pair type (MPI's
//! `MPI_FLOAT_INT` and friends) is the value's bytes immediately followed by a little-endian
//! `i32` index, so `f64_i32` is 12 bytes, not 16. `bool` is one byte holding 0 or 1 (any
//! nonzero byte decodes as `true`).

use std::fmt;
use std::str::FromStr;

use crate::error::{RmaError, RmaResult};

/// A basic element datatype. The numeric values are stable: they travel on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Datatype {
    /// Signed 8-bit integer (`MPI_INT8_T`).
    I8 = 1,
    /// Signed 16-bit integer (`MPI_INT16_T`).
    I16 = 2,
    /// Signed 32-bit integer (`MPI_INT32_T`).
    I32 = 3,
    /// Signed 64-bit integer (`MPI_INT64_T`).
    I64 = 4,
    /// Unsigned 8-bit integer (`MPI_UINT8_T`).
    U8 = 5,
    /// Unsigned 16-bit integer (`MPI_UINT16_T`).
    U16 = 6,
    /// Unsigned 32-bit integer (`MPI_UINT32_T`).
    U32 = 7,
    /// Unsigned 64-bit integer (`MPI_UINT64_T`).
    U64 = 8,
    /// IEEE 754 binary32 (`MPI_FLOAT`).
    F32 = 9,
    /// IEEE 754 binary64 (`MPI_DOUBLE`).
    F64 = 10,
    /// An uninterpreted byte (`MPI_BYTE`).
    Byte = 11,
    /// A boolean, one byte holding 0 or 1 (`MPI_C_BOOL`).
    Bool = 12,
    /// `f32` value and `i32` index (`MPI_FLOAT_INT`), 8 bytes.
    PairF32I32 = 13,
    /// `f64` value and `i32` index (`MPI_DOUBLE_INT`), 12 bytes.
    PairF64I32 = 14,
    /// `i64` value and `i32` index (`MPI_LONG_INT`), 12 bytes.
    PairI64I32 = 15,
    /// `i32` value and `i32` index (`MPI_2INT`), 8 bytes.
    PairI32I32 = 16,
    /// `i16` value and `i32` index (`MPI_SHORT_INT`), 6 bytes.
    PairI16I32 = 17,
    /// x87 80-bit extended float in 16 bytes (`MPI_LONG_DOUBLE` on x86-64):
    /// [`F80`](crate::f80::F80).
    F80 = 18,
}

impl Datatype {
    /// Every datatype, in wire order.
    pub const ALL: [Datatype; 18] = [
        Datatype::I8,
        Datatype::I16,
        Datatype::I32,
        Datatype::I64,
        Datatype::U8,
        Datatype::U16,
        Datatype::U32,
        Datatype::U64,
        Datatype::F32,
        Datatype::F64,
        Datatype::Byte,
        Datatype::Bool,
        Datatype::PairF32I32,
        Datatype::PairF64I32,
        Datatype::PairI64I32,
        Datatype::PairI32I32,
        Datatype::PairI16I32,
        Datatype::F80,
    ];

    /// The size in bytes of one element in the packed encoding.
    pub fn size(self) -> usize {
        match self {
            Datatype::I8 | Datatype::U8 | Datatype::Byte | Datatype::Bool => 1,
            Datatype::I16 | Datatype::U16 => 2,
            Datatype::I32 | Datatype::U32 | Datatype::F32 => 4,
            Datatype::I64 | Datatype::U64 | Datatype::F64 => 8,
            Datatype::PairF32I32 | Datatype::PairI32I32 => 8,
            Datatype::PairF64I32 | Datatype::PairI64I32 => 12,
            Datatype::PairI16I32 => 6,
            Datatype::F80 => 16,
        }
    }

    /// The short name used in scenarios, CLIs and messages (`i32`, `f64_i32`, …).
    pub fn name(self) -> &'static str {
        match self {
            Datatype::I8 => "i8",
            Datatype::I16 => "i16",
            Datatype::I32 => "i32",
            Datatype::I64 => "i64",
            Datatype::U8 => "u8",
            Datatype::U16 => "u16",
            Datatype::U32 => "u32",
            Datatype::U64 => "u64",
            Datatype::F32 => "f32",
            Datatype::F64 => "f64",
            Datatype::Byte => "byte",
            Datatype::Bool => "bool",
            Datatype::PairF32I32 => "f32_i32",
            Datatype::PairF64I32 => "f64_i32",
            Datatype::PairI64I32 => "i64_i32",
            Datatype::PairI32I32 => "i32_i32",
            Datatype::PairI16I32 => "i16_i32",
            Datatype::F80 => "f80",
        }
    }

    /// Parses a short name as [`Datatype::name`] prints it, ignoring ASCII case.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|dtype| dtype.name().eq_ignore_ascii_case(text))
    }

    /// The wire value (1..=18, in declaration order).
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The datatype for a wire value.
    pub fn from_code(code: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|dtype| dtype.code() == code)
    }

    /// True for the signed and unsigned integer types (`i*`, `u*`); not `byte`, `bool` or pairs.
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            Datatype::I8
                | Datatype::I16
                | Datatype::I32
                | Datatype::I64
                | Datatype::U8
                | Datatype::U16
                | Datatype::U32
                | Datatype::U64
        )
    }

    /// True for the signed integer types (`i*`) only; floats and pairs are not counted.
    pub fn is_signed(self) -> bool {
        matches!(
            self,
            Datatype::I8 | Datatype::I16 | Datatype::I32 | Datatype::I64
        )
    }

    /// True for `f32`, `f64` and `f80`; not for the pair types holding a float.
    pub fn is_float(self) -> bool {
        matches!(self, Datatype::F32 | Datatype::F64 | Datatype::F80)
    }

    /// True for the value-and-index pair types used by `maxloc` and `minloc`.
    pub fn is_pair(self) -> bool {
        self.pair_value_type().is_some()
    }

    /// True for `bool`.
    pub fn is_bool(self) -> bool {
        self == Datatype::Bool
    }

    /// True for `byte`.
    pub fn is_byte(self) -> bool {
        self == Datatype::Byte
    }

    /// For a pair type, the datatype of its value part (`f32` for `f32_i32`); `None` otherwise.
    pub fn pair_value_type(self) -> Option<Datatype> {
        match self {
            Datatype::PairF32I32 => Some(Datatype::F32),
            Datatype::PairF64I32 => Some(Datatype::F64),
            Datatype::PairI64I32 => Some(Datatype::I64),
            Datatype::PairI32I32 => Some(Datatype::I32),
            Datatype::PairI16I32 => Some(Datatype::I16),
            _ => None,
        }
    }

    /// The inclusive range of an integer-like type (integers and `byte`); `None` otherwise.
    fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            Datatype::I8 => (i8::MIN.into(), i8::MAX.into()),
            Datatype::I16 => (i16::MIN.into(), i16::MAX.into()),
            Datatype::I32 => (i32::MIN.into(), i32::MAX.into()),
            Datatype::I64 => (i64::MIN.into(), i64::MAX.into()),
            Datatype::U8 | Datatype::Byte => (0, u8::MAX.into()),
            Datatype::U16 => (0, u16::MAX.into()),
            Datatype::U32 => (0, u32::MAX.into()),
            Datatype::U64 => (0, u64::MAX.into()),
            _ => return None,
        })
    }
}

impl fmt::Display for Datatype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Datatype {
    type Err = RmaError;

    /// Like [`Datatype::parse`], with a class `TYPE` error for an unknown name.
    fn from_str(text: &str) -> RmaResult<Self> {
        Datatype::parse(text).ok_or_else(|| crate::rma_err!(Type, "unknown datatype \"{text}\""))
    }
}

/// One decoded element.
///
/// Integers, `byte` and the integer halves of pairs decode to [`Value::Int`]; floats to
/// [`Value::Float`]; `bool` to [`Value::Bool`]; pair types to [`Value::Pair`] holding the value
/// part (`Int` or `Float`) and the index.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// An integer, wide enough for every integer type.
    Int(i128),
    /// A floating-point number.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A value-and-index pair; the value is `Int` or `Float`.
    Pair(Box<Value>, i32),
}

impl Value {
    /// A pair of `value` and `index`.
    pub fn pair(value: Value, index: i32) -> Value {
        Value::Pair(Box::new(value), index)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Pair(v, i) => write!(f, "({v},{i})"),
        }
    }
}

fn does_not_fit(dtype: Datatype, value: &Value) -> RmaError {
    crate::rma_err!(Type, "value {value} does not fit datatype {dtype}")
}

/// The integer a value stands for in an integer-like type, range-checked.
fn int_of(dtype: Datatype, value: &Value) -> RmaResult<i128> {
    let (lo, hi) = dtype
        .int_range()
        .ok_or_else(|| does_not_fit(dtype, value))?;
    let v = match value {
        Value::Int(v) => *v,
        // An integral float inside the type's range is accepted; every such range fits
        // comfortably in the exactly representable span of the cast below.
        Value::Float(v) if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e38 => *v as i128,
        _ => return Err(does_not_fit(dtype, value)),
    };
    if v < lo || v > hi {
        return Err(does_not_fit(dtype, value));
    }
    Ok(v)
}

/// The float a value stands for in a float type; integers are accepted (rounded).
fn float_of(dtype: Datatype, value: &Value) -> RmaResult<f64> {
    match value {
        Value::Float(v) => Ok(*v),
        Value::Int(v) => Ok(*v as f64),
        _ => Err(does_not_fit(dtype, value)),
    }
}

/// Appends the encoding of one element `value` of `dtype` to `out`.
///
/// Class `TYPE` when the value does not fit: out of range (300 as `u8`, -1 as `u32`, a finite
/// float beyond `f32`'s range), a float with a fractional part for an integer type, a
/// non-pair value for a pair type, and so on. Integers are accepted for float types (rounded
/// to nearest), integral floats for integer types, and `Int(0)`/`Int(1)` for `bool`. Nothing
/// is appended on error.
pub fn encode(dtype: Datatype, value: &Value, out: &mut Vec<u8>) -> RmaResult<()> {
    match dtype {
        Datatype::I8 => out.extend_from_slice(&(int_of(dtype, value)? as i8).to_le_bytes()),
        Datatype::I16 => out.extend_from_slice(&(int_of(dtype, value)? as i16).to_le_bytes()),
        Datatype::I32 => out.extend_from_slice(&(int_of(dtype, value)? as i32).to_le_bytes()),
        Datatype::I64 => out.extend_from_slice(&(int_of(dtype, value)? as i64).to_le_bytes()),
        Datatype::U8 | Datatype::Byte => {
            out.extend_from_slice(&(int_of(dtype, value)? as u8).to_le_bytes())
        }
        Datatype::U16 => out.extend_from_slice(&(int_of(dtype, value)? as u16).to_le_bytes()),
        Datatype::U32 => out.extend_from_slice(&(int_of(dtype, value)? as u32).to_le_bytes()),
        Datatype::U64 => out.extend_from_slice(&(int_of(dtype, value)? as u64).to_le_bytes()),
        Datatype::F32 => {
            let v = float_of(dtype, value)?;
            let narrow = v as f32;
            if v.is_finite() && !narrow.is_finite() {
                return Err(does_not_fit(dtype, value));
            }
            out.extend_from_slice(&narrow.to_le_bytes());
        }
        Datatype::F64 => out.extend_from_slice(&float_of(dtype, value)?.to_le_bytes()),
        Datatype::F80 => {
            out.extend_from_slice(&crate::f80::F80::from_f64(float_of(dtype, value)?).0)
        }
        Datatype::Bool => {
            let b = match value {
                Value::Bool(b) => *b,
                Value::Int(0) => false,
                Value::Int(1) => true,
                _ => return Err(does_not_fit(dtype, value)),
            };
            out.push(u8::from(b));
        }
        Datatype::PairF32I32
        | Datatype::PairF64I32
        | Datatype::PairI64I32
        | Datatype::PairI32I32
        | Datatype::PairI16I32 => {
            let (Value::Pair(inner, index), Some(value_type)) = (value, dtype.pair_value_type())
            else {
                return Err(crate::rma_err!(
                    Type,
                    "value {value} is not a pair for datatype {dtype}"
                ));
            };
            if matches!(**inner, Value::Pair(..) | Value::Bool(_)) {
                return Err(does_not_fit(dtype, value));
            }
            encode(value_type, inner, out).map_err(|_| does_not_fit(dtype, value))?;
            out.extend_from_slice(&index.to_le_bytes());
        }
    }
    Ok(())
}

/// Encodes a sequence of elements of `dtype` into a fresh buffer, as [`encode`] does each.
pub fn encode_all(dtype: Datatype, values: &[Value]) -> RmaResult<Vec<u8>> {
    let mut out = Vec::with_capacity(values.len().saturating_mul(dtype.size()));
    for value in values {
        encode(dtype, value, &mut out)?;
    }
    Ok(out)
}

/// Copies up to `N` leading bytes into an array (zero-filled); never panics.
fn le<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut array = [0u8; N];
    for (dst, src) in array.iter_mut().zip(bytes) {
        *dst = *src;
    }
    array
}

/// Decodes one element from a slice of exactly `dtype.size()` bytes.
fn decode_one(dtype: Datatype, b: &[u8]) -> Value {
    match dtype {
        Datatype::I8 => Value::Int(i8::from_le_bytes(le(b)).into()),
        Datatype::I16 => Value::Int(i16::from_le_bytes(le(b)).into()),
        Datatype::I32 => Value::Int(i32::from_le_bytes(le(b)).into()),
        Datatype::I64 => Value::Int(i64::from_le_bytes(le(b)).into()),
        Datatype::U8 | Datatype::Byte => Value::Int(u8::from_le_bytes(le(b)).into()),
        Datatype::U16 => Value::Int(u16::from_le_bytes(le(b)).into()),
        Datatype::U32 => Value::Int(u32::from_le_bytes(le(b)).into()),
        Datatype::U64 => Value::Int(u64::from_le_bytes(le(b)).into()),
        Datatype::F32 => Value::Float(f32::from_le_bytes(le(b)).into()),
        Datatype::F64 => Value::Float(f64::from_le_bytes(le(b))),
        Datatype::F80 => Value::Float(crate::f80::F80(le(b)).to_f64()),
        Datatype::Bool => Value::Bool(b.first().is_some_and(|&byte| byte != 0)),
        Datatype::PairF32I32
        | Datatype::PairF64I32
        | Datatype::PairI64I32
        | Datatype::PairI32I32
        | Datatype::PairI16I32 => {
            let value_type = dtype.pair_value_type().unwrap_or(Datatype::I32);
            let split = value_type.size();
            let (head, tail) = b.split_at(split.min(b.len()));
            Value::pair(decode_one(value_type, head), i32::from_le_bytes(le(tail)))
        }
    }
}

/// Decodes a buffer of whole elements of `dtype`.
///
/// Class `COUNT` when the length is not a multiple of `dtype.size()`.
pub fn decode(dtype: Datatype, bytes: &[u8]) -> RmaResult<Vec<Value>> {
    let size = dtype.size();
    if !bytes.len().is_multiple_of(size) {
        return Err(crate::rma_err!(
            Count,
            "buffer of {} bytes is not a whole number of {dtype} elements of {size} bytes",
            bytes.len()
        ));
    }
    Ok(bytes
        .chunks_exact(size)
        .map(|chunk| decode_one(dtype, chunk))
        .collect())
}

/// Parses an integer: optional sign, then decimal digits or `0x`/`0X` and hex digits.
fn parse_int(text: &str) -> Option<i128> {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = match rest.get(..2) {
        Some("0x" | "0X") => (16, &rest[2..]),
        _ => (10, rest),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(digits, radix).ok()?;
    if negative {
        0i128.checked_sub_unsigned(magnitude)
    } else {
        i128::try_from(magnitude).ok()
    }
}

/// Parses the text of a non-pair element; the result is range-checked by the caller.
fn parse_scalar(dtype: Datatype, text: &str) -> Option<Value> {
    if dtype.is_bool() {
        return match text.to_ascii_lowercase().as_str() {
            "true" | "1" => Some(Value::Bool(true)),
            "false" | "0" => Some(Value::Bool(false)),
            _ => None,
        };
    }
    if dtype.is_float() {
        // `f64` parsing keeps "-0" negative; hex integers are tried after it.
        return match text.parse::<f64>() {
            Ok(v) => Some(Value::Float(v)),
            Err(_) => parse_int(text).map(|v| Value::Float(v as f64)),
        };
    }
    if let Some(v) = parse_int(text) {
        return Some(Value::Int(v));
    }
    // An integral float ("3.0", "1e3") is accepted for integer types.
    let v = text.parse::<f64>().ok()?;
    (v.is_finite() && v.fract() == 0.0 && v.abs() < 1e38).then_some(Value::Int(v as i128))
}

/// Parses one element of `dtype` from text.
///
/// Accepts integers (decimal with optional sign, or `0x` hex), floats (anything `f64` parses,
/// including `inf` and `nan`), `true`/`false` (or `1`/`0`) for `bool`, and `value:index` for
/// pair types (`3.5:2`). Integer types yield [`Value::Int`], float types [`Value::Float`]
/// (integers converted). Surrounding whitespace is ignored. Class `TYPE`, naming the text and
/// the datatype, when the text does not parse or the value does not fit.
pub fn parse_value(dtype: Datatype, text: &str) -> RmaResult<Value> {
    let invalid = || crate::rma_err!(Type, "invalid value \"{text}\" for datatype {dtype}");
    let trimmed = text.trim();
    let value = match dtype.pair_value_type() {
        Some(value_type) => {
            let (value, index) = trimmed.rsplit_once(':').ok_or_else(invalid)?;
            let value = parse_scalar(value_type, value.trim()).ok_or_else(invalid)?;
            let index = parse_int(index.trim())
                .and_then(|i| i32::try_from(i).ok())
                .ok_or_else(invalid)?;
            Value::pair(value, index)
        }
        None => parse_scalar(dtype, trimmed).ok_or_else(invalid)?,
    };
    encode(dtype, &value, &mut Vec::new()).map_err(|_| invalid())?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    #[test]
    fn names_codes_and_sizes() {
        for (position, dtype) in Datatype::ALL.into_iter().enumerate() {
            assert_eq!(Datatype::parse(dtype.name()), Some(dtype));
            assert_eq!(
                Datatype::parse(&dtype.name().to_ascii_uppercase()),
                Some(dtype)
            );
            assert_eq!(dtype.name().parse::<Datatype>(), Ok(dtype));
            assert_eq!(dtype.to_string(), dtype.name());
            assert_eq!(dtype.code(), position as i32 + 1);
            assert_eq!(Datatype::from_code(dtype.code()), Some(dtype));
        }
        assert_eq!(Datatype::parse("int"), None);
        assert_eq!(Datatype::from_code(0), None);
        assert_eq!(Datatype::from_code(19), None);
        assert_eq!(
            "nope".parse::<Datatype>().unwrap_err().class,
            ErrorClass::Type
        );
        let sizes: Vec<usize> = Datatype::ALL.iter().map(|d| d.size()).collect();
        assert_eq!(
            sizes,
            [1, 2, 4, 8, 1, 2, 4, 8, 4, 8, 1, 1, 8, 12, 12, 8, 6, 16]
        );
    }

    #[test]
    fn predicates() {
        for dtype in Datatype::ALL {
            let kinds = [
                dtype.is_integer(),
                dtype.is_float(),
                dtype.is_pair(),
                dtype.is_bool(),
                dtype.is_byte(),
            ];
            assert_eq!(kinds.iter().filter(|&&k| k).count(), 1, "{dtype}");
            assert_eq!(
                dtype.is_signed(),
                dtype.name().starts_with('i') && !dtype.is_pair()
            );
            if let Some(inner) = dtype.pair_value_type() {
                assert_eq!(dtype.size(), inner.size() + 4);
                assert!(dtype.name().starts_with(inner.name()));
            }
        }
    }

    fn samples(dtype: Datatype) -> Vec<Value> {
        let ints = |lo: i128, hi: i128| {
            vec![
                Value::Int(lo),
                Value::Int(hi),
                Value::Int(0),
                Value::Int(1),
                Value::Int(hi / 3),
                Value::Int(lo / 7),
            ]
        };
        match dtype {
            Datatype::I8 => ints(i8::MIN.into(), i8::MAX.into()),
            Datatype::I16 => ints(i16::MIN.into(), i16::MAX.into()),
            Datatype::I32 => ints(i32::MIN.into(), i32::MAX.into()),
            Datatype::I64 => ints(i64::MIN.into(), i64::MAX.into()),
            Datatype::U8 | Datatype::Byte => ints(0, u8::MAX.into()),
            Datatype::U16 => ints(0, u16::MAX.into()),
            Datatype::U32 => ints(0, u32::MAX.into()),
            Datatype::U64 => ints(0, u64::MAX.into()),
            Datatype::F32 => [
                0.0,
                -0.0,
                1.5,
                -2.25,
                f32::MAX,
                f32::MIN_POSITIVE,
                f32::INFINITY,
            ]
            .into_iter()
            .map(|v| Value::Float(v.into()))
            .collect(),
            Datatype::F64 | Datatype::F80 => {
                [0.0, 1.0 / 3.0, -1e300, f64::MIN_POSITIVE, f64::NEG_INFINITY]
                    .into_iter()
                    .map(Value::Float)
                    .collect()
            }
            Datatype::Bool => vec![Value::Bool(true), Value::Bool(false)],
            _ => {
                let inner = dtype.pair_value_type().unwrap();
                samples(inner)
                    .into_iter()
                    .zip([0, -1, i32::MAX, i32::MIN, 7, 42, 3])
                    .map(|(v, i)| Value::pair(v, i))
                    .collect()
            }
        }
    }

    #[test]
    fn encode_decode_round_trip() {
        for dtype in Datatype::ALL {
            let values = samples(dtype);
            let bytes = encode_all(dtype, &values).unwrap();
            assert_eq!(bytes.len(), values.len() * dtype.size(), "{dtype}");
            assert_eq!(decode(dtype, &bytes).unwrap(), values, "{dtype}");
            for value in &values {
                let text = match value {
                    Value::Pair(v, i) => format!("{v}:{i}"),
                    other => other.to_string(),
                };
                assert_eq!(&parse_value(dtype, &text).unwrap(), value, "{dtype} {text}");
            }
        }
    }

    #[test]
    fn known_encodings() {
        let mut out = Vec::new();
        encode(Datatype::I16, &Value::Int(-2), &mut out).unwrap();
        encode(Datatype::U32, &Value::Int(0x0102_0304), &mut out).unwrap();
        encode(Datatype::Bool, &Value::Bool(true), &mut out).unwrap();
        encode(
            Datatype::PairI16I32,
            &Value::pair(Value::Int(1), 2),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [0xfe, 0xff, 4, 3, 2, 1, 1, 1, 0, 2, 0, 0, 0]);
        assert_eq!(
            decode(Datatype::Bool, &[0, 1, 2]).unwrap()[2],
            Value::Bool(true)
        );
        assert_eq!(
            encode_all(Datatype::F32, &[Value::Int(3)]).unwrap(),
            3.0f32.to_le_bytes()
        );
        assert_eq!(
            encode_all(Datatype::I32, &[Value::Float(-4.0)]).unwrap(),
            (-4i32).to_le_bytes()
        );
    }

    #[test]
    fn out_of_range_values_are_type_errors() {
        let cases = [
            (Datatype::U8, Value::Int(300)),
            (Datatype::U8, Value::Int(-1)),
            (Datatype::Byte, Value::Int(256)),
            (Datatype::I8, Value::Int(128)),
            (Datatype::I8, Value::Int(-129)),
            (Datatype::U64, Value::Int(-1)),
            (Datatype::U64, Value::Int(i128::from(u64::MAX) + 1)),
            (Datatype::I64, Value::Int(i128::from(i64::MAX) + 1)),
            (Datatype::I32, Value::Float(1.5)),
            (Datatype::I32, Value::Float(f64::NAN)),
            (Datatype::I32, Value::Float(1e10)),
            (Datatype::I32, Value::Bool(true)),
            (Datatype::F32, Value::Float(1e300)),
            (Datatype::F32, Value::Bool(false)),
            (Datatype::Bool, Value::Int(2)),
            (Datatype::Bool, Value::Float(1.0)),
            (Datatype::PairF32I32, Value::Float(1.0)),
            (Datatype::PairI16I32, Value::pair(Value::Int(40_000), 1)),
            (Datatype::PairI32I32, Value::pair(Value::Float(0.5), 1)),
            (Datatype::PairF64I32, Value::pair(Value::Bool(true), 1)),
            (
                Datatype::PairF64I32,
                Value::pair(Value::pair(Value::Int(1), 1), 1),
            ),
            (Datatype::I8, Value::pair(Value::Int(1), 1)),
        ];
        for (dtype, value) in cases {
            let mut out = vec![9];
            let err = encode(dtype, &value, &mut out).unwrap_err();
            assert_eq!(err.class, ErrorClass::Type, "{dtype} {value}");
            assert_eq!(out, [9], "nothing appended for {dtype} {value}");
        }
    }

    #[test]
    fn decode_needs_whole_elements() {
        let err = decode(Datatype::PairF64I32, &[0; 13]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Count);
        assert_eq!(decode(Datatype::PairF64I32, &[]).unwrap(), vec![]);
    }

    #[test]
    fn display() {
        assert_eq!(Value::Int(-3).to_string(), "-3");
        assert_eq!(Value::Float(2.5).to_string(), "2.5");
        assert_eq!(Value::Bool(false).to_string(), "false");
        assert_eq!(Value::pair(Value::Float(3.5), 2).to_string(), "(3.5,2)");
    }

    #[test]
    fn parse_value_forms() {
        use Datatype as D;
        let forms = [
            (D::I32, "-17", Value::Int(-17)),
            (D::I32, "+17", Value::Int(17)),
            (D::U16, "0xFFff", Value::Int(65535)),
            (D::I8, "-0x80", Value::Int(-128)),
            (D::I64, " 3.0 ", Value::Int(3)),
            (D::F64, "1e3", Value::Float(1000.0)),
            (D::F32, "0x10", Value::Float(16.0)),
            (D::F32, "-7", Value::Float(-7.0)),
            (D::Bool, "TRUE", Value::Bool(true)),
            (D::Bool, "0", Value::Bool(false)),
            (D::PairF32I32, "3.5:2", Value::pair(Value::Float(3.5), 2)),
            (D::PairI64I32, "-5:-1", Value::pair(Value::Int(-5), -1)),
        ];
        for (dtype, text, value) in forms {
            assert_eq!(parse_value(dtype, text).unwrap(), value, "{dtype} {text:?}");
        }
        assert!(
            matches!(parse_value(Datatype::F64, "nan").unwrap(), Value::Float(v) if v.is_nan())
        );
        for (dtype, text) in [
            (Datatype::U8, "300"),
            (Datatype::U8, "-1"),
            (Datatype::I32, "1.5"),
            (Datatype::I32, "abc"),
            (Datatype::I32, ""),
            (Datatype::I32, "0x"),
            (Datatype::I32, "--1"),
            (Datatype::I32, "0x-1"),
            (Datatype::I32, "true"),
            (Datatype::Bool, "yes"),
            (Datatype::Bool, "2"),
            (Datatype::F32, "1e300"),
            (Datatype::F64, "x1"),
            (Datatype::PairF32I32, "3.5"),
            (Datatype::PairI32I32, "1.5:2"),
            (Datatype::PairI32I32, "1:2.5"),
            (Datatype::PairI32I32, "1:4294967296"),
            (Datatype::PairI16I32, "1:2:3"),
        ] {
            let err = parse_value(dtype, text).unwrap_err();
            assert_eq!(err.class, ErrorClass::Type, "{dtype} {text:?}");
            assert!(err.message.contains(text), "{}", err.message);
            assert!(err.message.contains(dtype.name()), "{}", err.message);
        }
    }
}
