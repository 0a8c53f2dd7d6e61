//! The numbering and hash chain of the audit log: each window's rows get the next gap-free
//! sequence numbers after its stored tail, and each row's hash chains it to the one before.
//!
//! Owns: the tails the writer knows (loaded from the store when first needed), the numbering
//! of a batch's events and the placing of its snapshots among them, the chain hashes, and the
//! undoing of a built batch to retry it. Must not: commit, retry or answer (the writer does),
//! or talk SQL (the store does).

use std::collections::HashMap;

use onesided_core::audit::{chain_hash, AuditRecord, Body, GENESIS};

use super::Writer;
use crate::audit::{NewRow, Pending, Snapshot};

impl Writer {
    /// Loads the stored tail of every window of `events` and `snapshots` not known yet.
    pub(super) async fn load_tails(
        &mut self,
        events: &[Pending],
        snapshots: &[Taken],
    ) -> anyhow::Result<()> {
        let windows = events
            .iter()
            .map(|pending| pending.window)
            .chain(snapshots.iter().map(|(_, window, ..)| *window));
        for window in windows {
            self.tail(window).await?;
        }
        Ok(())
    }

    /// Numbers and chains `events` after each window's tail (all loaded), and places each
    /// snapshot at the sequence number its window had reached when it was taken. (A commit
    /// does it in two steps, [`Writer::number_unchained`] and [`Writer::chain`], with the
    /// events file's write between them.)
    #[cfg(test)]
    pub(in crate::audit) fn number(
        &mut self,
        events: Vec<Pending>,
        snapshots: Vec<Taken>,
    ) -> Built {
        let mut built = self.number_unchained(events, snapshots);
        self.chain(&mut built);
        built
    }

    /// `number` without the hash chain: every row numbered and encoded, its
    /// `prev_hash` and `hash` zeros and `tails` empty until [`Writer::chain`]. Whatever needs
    /// only the rows' bodies (the events file's write) can start before the hashing.
    pub(super) fn number_unchained(
        &mut self,
        events: Vec<Pending>,
        snapshots: Vec<Taken>,
    ) -> Built {
        let mut rows = Vec::with_capacity(events.len());
        let mut seqs: HashMap<u64, u64> = HashMap::new();
        let mut placed = Vec::with_capacity(snapshots.len());
        let mut places = Vec::with_capacity(snapshots.len());
        let known = &self.tails;
        let seq_of = |seqs: &HashMap<u64, u64>, window: u64| {
            seqs.get(&window)
                .copied()
                .or_else(|| known.get(&window).map(|(seq, _)| *seq))
                .unwrap_or(0)
        };
        let mut snapshots = snapshots.into_iter().peekable();
        let mut events = events.into_iter().enumerate().peekable();
        loop {
            // a snapshot goes before the first event submitted after it
            let next = events.peek().map(|(index, _)| *index);
            if let Some((before, window, rank, data)) =
                snapshots.next_if(|(before, ..)| next.is_none_or(|index| *before <= index))
            {
                placed.push(Snapshot {
                    window,
                    rank,
                    seq: seq_of(&seqs, window),
                    data,
                });
                places.push(before);
                continue;
            }
            let Some((_, pending)) = events.next() else {
                break;
            };
            let seq = seq_of(&seqs, pending.window) + 1;
            let last_at = self.last_at.entry(pending.window).or_insert(0);
            *last_at = (*last_at).max(pending.at_ns);
            let record = AuditRecord {
                window: pending.window,
                seq,
                at_ns: *last_at,
                rank: pending.rank,
                incarnation: pending.incarnation,
                cseq: None,
                event: pending.event,
            };
            let body = Body::encode(&record.event);
            seqs.insert(record.window, seq);
            rows.push(NewRow {
                record,
                body,
                prev_hash: [0; 32],
                hash: [0; 32],
            });
        }
        Built {
            rows,
            tails: HashMap::new(),
            snapshots: placed,
            places,
        }
    }

    /// Chains the rows [`Writer::number_unchained`] built: each row's `prev_hash` and `hash`,
    /// and each window's tail after them.
    pub(super) fn chain(&self, built: &mut Built) {
        let mut tails: HashMap<u64, (u64, [u8; 32])> = HashMap::new();
        for row in &mut built.rows {
            let window = row.record.window;
            let previous = tails
                .get(&window)
                .or_else(|| self.tails.get(&window))
                .map_or(GENESIS, |(_, hash)| *hash);
            row.prev_hash = previous;
            row.hash = chain_hash(&previous, &row.record, &row.body);
            tails.insert(window, (row.record.seq, row.hash));
        }
        built.tails = tails;
    }
}

/// A snapshot as the writer receives it: the number of the batch's events submitted before it,
/// window, rank, the public copy.
pub(in crate::audit) type Taken = (usize, u64, u32, Vec<u8>);

/// A batch numbered and chained, ready to insert.
pub(in crate::audit) struct Built {
    pub(in crate::audit) rows: Vec<NewRow>,
    /// Each window's tail after these rows.
    pub(in crate::audit) tails: HashMap<u64, (u64, [u8; 32])>,
    pub(in crate::audit) snapshots: Vec<Snapshot>,
    /// Where each snapshot stood among the events.
    pub(in crate::audit) places: Vec<usize>,
}

impl Built {
    /// The events and snapshots again, to retry the batch.
    pub(super) fn undo(self) -> (Vec<Pending>, Vec<Taken>) {
        let events = self
            .rows
            .into_iter()
            .map(|row| Pending {
                window: row.record.window,
                rank: row.record.rank,
                incarnation: row.record.incarnation,
                at_ns: row.record.at_ns,
                event: row.record.event,
            })
            .collect();
        let snapshots = self
            .snapshots
            .into_iter()
            .zip(self.places)
            .map(|(snapshot, before)| (before, snapshot.window, snapshot.rank, snapshot.data))
            .collect();
        (events, snapshots)
    }
}
