//! The x87 80-bit extended float: C's `long double` on x86-64 (`MPI_LONG_DOUBLE`), held as its
//! ABI holds it, in 16 bytes (the 64-bit significand with its explicit integer bit, then sign
//! and 15-bit exponent, then 6 bytes of padding, which results leave zero).
//!
//! Owns: the arithmetic accumulate needs on it and its conversions to and from `f64`, computed
//! in software (`rustc_apfloat`, LLVM's APFloat in Rust: the same format and roundings as the
//! x87 unit, to nearest-even, on any machine). Must not: round anything `f80` holds.

use std::cmp::Ordering;

use rustc_apfloat::ieee::{Double, X87DoubleExtended};
use rustc_apfloat::{Float, FloatConvert, Round};

/// One `long double`: its 16 bytes as memory holds them. `==` compares the bytes; the order
/// (`<`, `>`) is the values' (−0 and +0 are neither less than the other, a NaN is unordered).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct F80(pub [u8; 16]);

impl F80 {
    fn value(self) -> X87DoubleExtended {
        let mut bits = [0u8; 16];
        bits[..10].copy_from_slice(&self.0[..10]);
        X87DoubleExtended::from_bits(u128::from_le_bytes(bits))
    }

    fn of(value: X87DoubleExtended) -> F80 {
        let mut bytes = value.to_bits().to_le_bytes();
        bytes[10..].fill(0);
        F80(bytes)
    }

    /// Not a number.
    pub fn is_nan(self) -> bool {
        self.value().is_nan()
    }

    /// `value`, exactly (every `f64` is an `f80`).
    pub fn from_f64(value: f64) -> F80 {
        let mut inexact = false;
        let wide: X87DoubleExtended = Double::from_bits(u128::from(value.to_bits()))
            .convert_r(Round::NearestTiesToEven, &mut inexact)
            .value;
        F80::of(wide)
    }

    /// The nearest `f64` (ties to even; overflow to infinity, underflow to subnormals or
    /// zero), as the x87 unit's `fstp qword` stores it.
    pub fn to_f64(self) -> f64 {
        let mut inexact = false;
        let narrow: Double = self
            .value()
            .convert_r(Round::NearestTiesToEven, &mut inexact)
            .value;
        f64::from_bits(narrow.to_bits() as u64)
    }
}

impl PartialOrd for F80 {
    fn partial_cmp(&self, other: &F80) -> Option<Ordering> {
        self.value().partial_cmp(&other.value())
    }
}

impl std::ops::Add for F80 {
    type Output = F80;
    /// The sum, rounded once to nearest-even (as C's `a + b` on `long double`).
    fn add(self, other: F80) -> F80 {
        F80::of((self.value() + other.value()).value)
    }
}

impl std::ops::Mul for F80 {
    type Output = F80;
    /// The product, rounded once to nearest-even.
    fn mul(self, other: F80) -> F80 {
        F80::of((self.value() * other.value()).value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<f64> {
        let mut values = vec![
            0.0,
            -0.0,
            1.0,
            -1.5,
            0.1,
            1e300,
            -1e-300,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            -4.9e-320,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        // a spread of bit patterns
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            values.push(f64::from_bits(state));
        }
        values
    }

    #[test]
    fn every_f64_goes_there_and_back_unchanged() {
        for value in samples() {
            let back = F80::from_f64(value).to_f64();
            if value.is_nan() {
                assert!(back.is_nan(), "{value:e}");
            } else {
                assert_eq!(back.to_bits(), value.to_bits(), "{value:e}");
            }
        }
    }

    #[test]
    fn the_order_is_the_order_of_the_values() {
        let values = samples();
        for pair in values.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            assert_eq!(
                F80::from_f64(a).partial_cmp(&F80::from_f64(b)),
                a.partial_cmp(&b),
                "{a:e} vs {b:e}"
            );
        }
    }

    #[test]
    fn sums_and_products_carry_the_bits_f64_drops() {
        // 1 + 2^-60 needs 61 bits of significand: f64 loses it, long double keeps it
        let one = F80::from_f64(1.0);
        let tiny = F80::from_f64(2f64.powi(-60));
        let sum = one + tiny;
        assert_ne!(sum, one);
        assert_eq!(sum.to_f64(), 1.0, "rounds back to 1 in f64");
        assert_eq!((sum + F80::from_f64(-1.0)).to_f64(), 2f64.powi(-60));
        assert_eq!((F80::from_f64(3.0) * F80::from_f64(-0.5)).to_f64(), -1.5);
        // a product f64 would overflow stays finite in the wider exponent
        let big = F80::from_f64(1e300) * F80::from_f64(1e300);
        assert!(big > F80::from_f64(f64::MAX));
        assert_eq!(big.to_f64(), f64::INFINITY);
    }
}
