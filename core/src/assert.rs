//! The `MPI_MODE_*` assertion bits, and which synchronization call accepts which.
//!
//! Owns: the bit values that travel on the wire and the per-call validity table
//! (SEMANTICS.md §4). Unknown bits, or a bit the call does not take, are `MPI_ERR_ASSERT`.
//! Must not: decide what an accepted bit does (skipping a push or pull is `epoch`'s, NOCHECK
//! is the lock table's), or know about epochs, windows or targets.

use crate::error::RmaResult;
use crate::rma_err;

/// A set of assertion bits, already checked against the call it was given to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Assert(u32);

impl Assert {
    /// `MPI_MODE_NOCHECK`.
    pub const NOCHECK: u32 = 1;
    /// `MPI_MODE_NOSTORE`.
    pub const NOSTORE: u32 = 2;
    /// `MPI_MODE_NOPUT`.
    pub const NOPUT: u32 = 4;
    /// `MPI_MODE_NOPRECEDE`.
    pub const NOPRECEDE: u32 = 8;
    /// `MPI_MODE_NOSUCCEED`.
    pub const NOSUCCEED: u32 = 16;

    const NAMES: [(u32, &'static str); 5] = [
        (Self::NOCHECK, "nocheck"),
        (Self::NOSTORE, "nostore"),
        (Self::NOPUT, "noput"),
        (Self::NOPRECEDE, "noprecede"),
        (Self::NOSUCCEED, "nosucceed"),
    ];

    /// No assertion (`assert = 0`, always valid).
    pub const fn none() -> Self {
        Assert(0)
    }

    /// Checks `bits` for `call`: unknown bits and bits the call does not accept are refused.
    ///
    /// # Errors
    /// `MPI_ERR_ASSERT`.
    pub fn for_call(call: SyncCall, bits: u32) -> RmaResult<Self> {
        let known = Self::NAMES.iter().fold(0, |acc, (bit, _)| acc | bit);
        if bits & !known != 0 {
            return Err(rma_err!(
                Assert,
                "unknown assertion bits {:#x}",
                bits & !known
            ));
        }
        let refused = bits & !call.accepted();
        if refused != 0 {
            return Err(rma_err!(
                Assert,
                "assertion {} is not valid for {}",
                Assert(refused).names().join(","),
                call.name()
            ));
        }
        Ok(Assert(bits))
    }

    /// Parses a comma-separated list of names (`nostore,noprecede`) into raw bits.
    ///
    /// # Errors
    /// `MPI_ERR_ASSERT` for an unknown name.
    pub fn parse_bits(text: &str) -> RmaResult<u32> {
        let mut bits = 0;
        for name in text.split(',').filter(|name| !name.is_empty()) {
            let bit = Self::NAMES
                .iter()
                .find(|(_, known)| known.eq_ignore_ascii_case(name))
                .map(|(bit, _)| *bit)
                .ok_or_else(|| rma_err!(Assert, "unknown assertion {name}"))?;
            bits |= bit;
        }
        Ok(bits)
    }

    /// The raw bits.
    pub fn bits(self) -> u32 {
        self.0
    }

    /// Whether every bit of `bit` is set.
    pub fn has(self, bit: u32) -> bool {
        self.0 & bit == bit
    }

    /// The names of the set bits.
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES
            .iter()
            .filter(|(bit, _)| self.0 & bit != 0)
            .map(|(_, name)| *name)
            .collect()
    }
}

/// The synchronization calls that take an assertion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncCall {
    /// `MPI_WIN_FENCE`: nostore, noput, noprecede, nosucceed.
    Fence,
    /// `MPI_WIN_POST`: nocheck, nostore, noput.
    Post,
    /// `MPI_WIN_START`: nocheck.
    Start,
    /// `MPI_WIN_LOCK`: nocheck.
    Lock,
    /// `MPI_WIN_LOCK_ALL`: nocheck.
    LockAll,
}

impl SyncCall {
    fn accepted(self) -> u32 {
        match self {
            SyncCall::Fence => {
                Assert::NOSTORE | Assert::NOPUT | Assert::NOPRECEDE | Assert::NOSUCCEED
            }
            SyncCall::Post => Assert::NOCHECK | Assert::NOSTORE | Assert::NOPUT,
            SyncCall::Start | SyncCall::Lock | SyncCall::LockAll => Assert::NOCHECK,
        }
    }

    fn name(self) -> &'static str {
        match self {
            SyncCall::Fence => "fence",
            SyncCall::Post => "post",
            SyncCall::Start => "start",
            SyncCall::Lock => "lock",
            SyncCall::LockAll => "lock_all",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorClass;

    #[test]
    fn fence_takes_its_four_assertions_and_nothing_else() {
        let bits = Assert::NOSTORE | Assert::NOPUT | Assert::NOPRECEDE | Assert::NOSUCCEED;
        assert_eq!(
            Assert::for_call(SyncCall::Fence, bits).unwrap().bits(),
            bits
        );
        let err = Assert::for_call(SyncCall::Fence, Assert::NOCHECK).unwrap_err();
        assert_eq!(err.class, ErrorClass::Assert);
    }

    #[test]
    fn unknown_bits_are_refused() {
        for call in [
            SyncCall::Fence,
            SyncCall::Post,
            SyncCall::Start,
            SyncCall::Lock,
        ] {
            let err = Assert::for_call(call, 1 << 9).unwrap_err();
            assert_eq!(err.class, ErrorClass::Assert);
        }
    }

    #[test]
    fn lock_refuses_noprecede() {
        let err = Assert::for_call(SyncCall::Lock, Assert::NOPRECEDE).unwrap_err();
        assert_eq!(err.class, ErrorClass::Assert);
        assert!(err.message.contains("noprecede"), "{}", err.message);
    }

    #[test]
    fn names_parse_back() {
        let bits = Assert::parse_bits("nostore,noprecede").unwrap();
        assert_eq!(bits, Assert::NOSTORE | Assert::NOPRECEDE);
        assert_eq!(Assert(bits).names(), vec!["nostore", "noprecede"]);
        assert_eq!(
            Assert::parse_bits("bogus").unwrap_err().class,
            ErrorClass::Assert
        );
    }
}
