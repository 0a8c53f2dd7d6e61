//! The client chains: rows clients persist themselves, merged behind their markers, and the
//! verification of a window's whole history.
//!
//! Owns: `merge` (each `client_events` marker replaced by the client rows it names, in cseq
//! order, at the marker's seq and time; rows no marker names left out), `verify_history` and
//! its `Verdict` (the window chain, every client chain a marker names, which rows are still
//! pending for a live session, which are unmarked), the `ClientFault`s with their stable wire
//! names, and `RecordedWindow`, a window as the store lists it. Must not: read the store
//! (callers hand it the rows), tell a live session from a gone one other than by the log's own
//! `attach` and `detach` events, hash rows other than through `chain_hash`, or apply events to
//! bytes.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{chain_hash, verify, AuditRecord, Event, StoredRow, GENESIS};

/// The rows of the client chains of one window, by (rank, incarnation) and cseq.
type Chains<'a> = BTreeMap<(u32, u64), BTreeMap<u64, &'a StoredRow>>;

fn chains(client: &[StoredRow]) -> Chains<'_> {
    let mut chains: Chains<'_> = BTreeMap::new();
    for row in client {
        chains
            .entry((row.record.rank, row.record.incarnation))
            .or_default()
            .insert(row.record.seq, row);
    }
    chains
}

/// A window's history as readers see it: its records in order, each
/// [`Event::ClientEvents`] marker replaced by the client rows it names, in cseq order — the
/// order they would have had if the client had shipped them. A merged row keeps its rank,
/// incarnation and event; `seq` and `at_ns` are the marker's (one clock for the timeline) and
/// `cseq` its number in the client's chain. Rows that are missing, unreadable or of a kind a
/// client may not record are left out ([`verify_history`] names them).
///
/// `client` holds the stored rows of the window's client chains (`record.seq` = cseq).
pub fn merge(window: Vec<AuditRecord>, client: &[StoredRow]) -> Vec<AuditRecord> {
    let chains = chains(client);
    let mut merged = Vec::with_capacity(window.len() + client.len());
    for record in window {
        let Event::ClientEvents { from, to, .. } = &record.event else {
            merged.push(record);
            continue;
        };
        let Some(chain) = chains.get(&(record.rank, record.incarnation)) else {
            continue;
        };
        for row in chain.range(*from..=*to).map(|(_, row)| *row) {
            let Ok(event) = row.body.decode() else {
                continue;
            };
            if !event.is_client_side() {
                continue;
            }
            merged.push(AuditRecord {
                window: record.window,
                seq: record.seq,
                at_ns: record.at_ns,
                rank: record.rank,
                incarnation: record.incarnation,
                cseq: Some(row.record.seq),
                event,
            });
        }
    }
    merged
}

/// What is wrong with a client row a marker names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientFault {
    /// The marker does not continue its client's chain (its range skips or repeats cseqs).
    Range,
    /// The row is not stored (deleted, or not yet written by a client still running).
    Missing,
    /// The row does not hash to what is stored, or does not follow the row before it.
    Altered,
    /// The row is intact but holds an event a client may not record.
    NotClientSide,
    /// The rows chain correctly but end at another hash than the marker names.
    Unnamed,
}

impl ClientFault {
    /// Every fault.
    pub const ALL: [ClientFault; 5] = [
        ClientFault::Range,
        ClientFault::Missing,
        ClientFault::Altered,
        ClientFault::NotClientSide,
        ClientFault::Unnamed,
    ];

    /// The stable name (`missing`, `altered`, …).
    pub fn name(self) -> &'static str {
        match self {
            ClientFault::Range => "range",
            ClientFault::Missing => "missing",
            ClientFault::Altered => "altered",
            ClientFault::NotClientSide => "not_client_side",
            ClientFault::Unnamed => "unnamed",
        }
    }

    /// The fault of a name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|fault| fault.name() == name)
    }

    /// In words.
    pub fn describe(self) -> &'static str {
        match self {
            ClientFault::Range => "the marker does not continue the client's chain",
            ClientFault::Missing => "the row is missing",
            ClientFault::Altered => "the row was changed, or does not follow the row before it",
            ClientFault::NotClientSide => "the row holds an event a client may not record",
            ClientFault::Unnamed => "the rows end at another hash than the marker names",
        }
    }
}

/// A recorded window, as the store lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedWindow {
    /// Window id (unique over the store's life).
    pub id: u64,
    /// World name.
    pub world: String,
    /// Window name.
    pub name: String,
    /// Number of recorded events.
    pub events: u64,
}

/// Where a client's chain is broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientBreak {
    /// The window sequence number of the marker naming the bad row.
    pub marker: u64,
    /// The client's rank.
    pub rank: u32,
    /// Its session incarnation.
    pub incarnation: u64,
    /// The bad row's cseq.
    pub cseq: u64,
    /// What is wrong.
    pub fault: ClientFault,
}

/// A range of one client's chain (window, rank, incarnation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientSpan {
    /// The client's rank.
    pub rank: u32,
    /// Its session incarnation.
    pub incarnation: u64,
    /// The first cseq.
    pub from: u64,
    /// The last.
    pub to: u64,
}

/// The verdict on a window's history: its own chain, and the client chains its markers name.
/// The client library hands it to its callers as it came over the wire (`Verification`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Number of rows of the window's chain.
    pub events: u64,
    /// The first bad window sequence number: a bad row of the window's chain, or the marker
    /// whose client rows are bad, whichever comes first. `None` when everything is intact.
    pub first_bad: Option<u64>,
    /// When the first bad place is in a client's chain: where.
    pub client_break: Option<ClientBreak>,
    /// How many client rows the markers name and were checked (up to the first bad place).
    pub client_events: u64,
    /// Rows markers name that are not stored yet, at the end of the chain of a session that is
    /// still attached (its writer commits them while the server logs the marker): not a break
    /// while it lives, [`ClientFault::Missing`] once it detached.
    pub pending: Vec<ClientSpan>,
    /// Stored client rows no marker names (a client that stopped before shipping their marker,
    /// or one still running); not merged. Reported for an intact history only.
    pub unmarked: Vec<ClientSpan>,
}

/// How one marker's rows check out.
enum Named {
    /// Every row is there and right; the chain ends at this hash.
    Intact([u8; 32]),
    /// From this cseq on nothing is stored yet.
    Unstored(u64),
    Broken(u64, ClientFault),
}

/// Checks the rows `from..=to` of `chain` after the row whose hash is `previous`.
fn check_named(
    chain: Option<&BTreeMap<u64, &StoredRow>>,
    from: u64,
    to: u64,
    previous: [u8; 32],
    counted: &mut u64,
) -> Named {
    let mut previous = previous;
    for cseq in from..=to {
        let Some(stored) = chain.and_then(|chain| chain.get(&cseq)) else {
            let later = chain.is_some_and(|chain| chain.range(cseq..).next().is_some());
            return if later {
                Named::Broken(cseq, ClientFault::Missing)
            } else {
                Named::Unstored(cseq)
            };
        };
        let readable = stored.body.decode().ok();
        let recomputed = chain_hash(&previous, &stored.record, &stored.body);
        if stored.prev_hash.as_slice() != previous.as_slice()
            || stored.hash.as_slice() != recomputed.as_slice()
            || readable.as_ref() != Some(&stored.record.event)
        {
            return Named::Broken(cseq, ClientFault::Altered);
        }
        if !stored.record.event.is_client_side() {
            return Named::Broken(cseq, ClientFault::NotClientSide);
        }
        previous = recomputed;
        *counted += 1;
    }
    Named::Intact(previous)
}

/// Checks a window's chain ([`verify`]) and, for every [`Event::ClientEvents`] marker before
/// its first bad row, that the client rows it names exist, chain correctly from
/// [`GENESIS`] (each chain is its window, rank and incarnation, `cseq` gap-free from 1, hashed
/// with [`chain_hash`] with `seq` = cseq), hold client-side events only, and end at the
/// marker's hash. Rows missing at the end of the chain of a session the log shows still
/// attached are [`Verdict::pending`], not a break.
pub fn verify_history(window: &[StoredRow], client: &[StoredRow]) -> Verdict {
    let window_bad = verify(window).err();
    let checked: Vec<&StoredRow> = window
        .iter()
        .take_while(|row| window_bad.is_none_or(|bad| row.record.seq < bad))
        .collect();
    let chains = chains(client);
    // the sessions still attached, and the last cseq each chain's markers name
    let mut attached = HashSet::new();
    let mut last_named: HashMap<(u32, u64), u64> = HashMap::new();
    for row in &checked {
        let key = (row.record.rank, row.record.incarnation);
        match &row.record.event {
            Event::Attach => {
                attached.insert(key);
            }
            Event::Detach => {
                attached.remove(&key);
            }
            Event::ClientEvents { to, .. } => {
                last_named.insert(key, *to);
            }
            _ => {}
        }
    }
    // per chain: the next cseq and the hash of the row before it
    let mut tails: HashMap<(u32, u64), (u64, [u8; 32])> = HashMap::new();
    let mut pending = Vec::new();
    let mut client_events = 0;
    let mut broken = None;
    for row in &checked {
        let Event::ClientEvents { from, to, hash } = &row.record.event else {
            continue;
        };
        let key = (row.record.rank, row.record.incarnation);
        if pending
            .iter()
            .any(|span: &ClientSpan| (span.rank, span.incarnation) == key)
        {
            continue;
        }
        let (next, previous) = tails.entry(key).or_insert((1, GENESIS));
        let at = |cseq: u64, fault: ClientFault| ClientBreak {
            marker: row.record.seq,
            rank: key.0,
            incarnation: key.1,
            cseq,
            fault,
        };
        if *from != *next || to < from {
            broken = Some(at(*next, ClientFault::Range));
            break;
        }
        match check_named(chains.get(&key), *from, *to, *previous, &mut client_events) {
            Named::Intact(last) if last.as_slice() == hash.as_slice() => {
                *next = to + 1;
                *previous = last;
            }
            Named::Intact(_) => {
                broken = Some(at(*to, ClientFault::Unnamed));
                break;
            }
            Named::Unstored(cseq) if attached.contains(&key) => pending.push(ClientSpan {
                rank: key.0,
                incarnation: key.1,
                from: cseq,
                to: last_named.get(&key).copied().unwrap_or(*to),
            }),
            Named::Unstored(cseq) => {
                broken = Some(at(cseq, ClientFault::Missing));
                break;
            }
            Named::Broken(cseq, fault) => {
                broken = Some(at(cseq, fault));
                break;
            }
        }
    }
    let first_bad = broken.map(|at| at.marker).or(window_bad);
    let unmarked = if first_bad.is_some() {
        Vec::new()
    } else {
        chains
            .iter()
            .filter_map(|(&(rank, incarnation), chain)| {
                let next = tails.get(&(rank, incarnation)).map_or(1, |tail| tail.0);
                let mut beyond = chain.range(next..).map(|(&cseq, _)| cseq);
                let from = beyond.next()?;
                let to = beyond.next_back().unwrap_or(from);
                Some(ClientSpan {
                    rank,
                    incarnation,
                    from,
                    to,
                })
            })
            .collect()
    };
    Verdict {
        events: window.len() as u64,
        first_bad,
        client_break: broken,
        client_events,
        pending: if first_bad.is_some() {
            Vec::new()
        } else {
            pending
        },
        unmarked,
    }
}
