//! The hash chain that makes a window's log tamper-evident, and its verification.
//!
//! Owns: `GENESIS`, what `chain_hash` covers (the previous hash, the row's window, seq, time,
//! rank and incarnation, and its stored body bytes, a binary body behind a zero byte),
//! `StoredRow` (a row as readers get it, unreadable or not), the rule that a row whose event
//! cannot be read stops every reader that acts on events (`readable`, `all_readable`), and
//! `verify` of one window's chain: gap-free seqs from 1, linked and recomputed hashes, a body
//! that decodes to the stored event. Must not: read or write the store, know about client
//! chains or markers (`history` does), or apply events to bytes.

use sha2::{Digest, Sha256};

use super::{AuditRecord, Body};
use crate::error::RmaResult;
use crate::rma_err;

/// The hash before the first row of a window.
pub const GENESIS: [u8; 32] = [0; 32];

/// The hash a row commits to: SHA-256 over the previous hash, the row's fields and its stored
/// body. A binary body is preceded by a zero byte, which no JSON body starts with: the same
/// bytes cannot hash alike as both encodings.
pub fn chain_hash(previous: &[u8; 32], record: &AuditRecord, body: &Body) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(previous);
    hasher.update(record.window.to_le_bytes());
    hasher.update(record.seq.to_le_bytes());
    hasher.update(record.at_ns.to_le_bytes());
    hasher.update(record.rank.to_le_bytes());
    hasher.update(record.incarnation.to_le_bytes());
    match body {
        Body::Json(text) => hasher.update(text.as_bytes()),
        Body::Binary(bytes) => {
            hasher.update([0u8]);
            hasher.update(bytes);
        }
    }
    hasher.finalize().into()
}

/// A stored row as verification reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRow {
    /// The record (its event parsed from `body`; see `unreadable`).
    pub record: AuditRecord,
    /// Why `body` could not be read, if it could not: then `record.event` is a placeholder,
    /// which [`readable`] refuses to hand on (verification names the row).
    pub unreadable: Option<String>,
    /// The stored body.
    pub body: Body,
    /// The stored previous hash.
    pub prev_hash: Vec<u8>,
    /// The stored hash.
    pub hash: Vec<u8>,
}

/// Whether every row's stored event could be read.
///
/// # Errors
/// `MPI_ERR_OTHER` naming the first row whose stored event cannot be read: acting on the rest
/// would silently leave out what it did.
pub fn all_readable(rows: &[StoredRow]) -> RmaResult<()> {
    match rows.iter().find(|row| row.unreadable.is_some()) {
        None => Ok(()),
        Some(row) => Err(rma_err!(
            Other,
            "event {} of window {} cannot be read ({}); `onesided audit verify` names the \
             first bad row",
            row.record.seq,
            row.record.window,
            row.unreadable.as_deref().unwrap_or_default()
        )),
    }
}

/// The records of `rows`, for readers that act on events (replay, recovery, check, export).
///
/// # Errors
/// As [`all_readable`].
pub fn readable(rows: Vec<StoredRow>) -> RmaResult<Vec<AuditRecord>> {
    all_readable(&rows)?;
    Ok(rows.into_iter().map(|row| row.record).collect())
}

/// Checks a window's rows in stored order: sequence numbers 1, 2, … without gaps, each row's
/// previous hash equal to the hash of the row before, and each hash recomputed from the row.
/// Returns the first bad sequence number (or the position where one is missing).
pub fn verify(rows: &[StoredRow]) -> Result<(), u64> {
    let mut previous = GENESIS;
    for (index, row) in rows.iter().enumerate() {
        let expected_seq = index as u64 + 1;
        if row.record.seq != expected_seq {
            return Err(expected_seq.min(row.record.seq));
        }
        if row.prev_hash.as_slice() != previous.as_slice() {
            return Err(row.record.seq);
        }
        let hash = chain_hash(&previous, &row.record, &row.body);
        if row.hash.as_slice() != hash.as_slice() {
            return Err(row.record.seq);
        }
        // the body must say what the parsed event says (a rewritten body changes the hash
        // anyway; this catches a body the parser reads differently)
        if row.body.decode().ok().as_ref() != Some(&row.record.event) {
            return Err(row.record.seq);
        }
        previous = hash;
    }
    Ok(())
}
