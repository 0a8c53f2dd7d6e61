//! Sessions of a world's ranks: beginning one (or succeeding a lost one), whether one is
//! still live, ending it, and its lease.
//!
//! Owns: each rank's incarnation count and its live session's place in the directory (the
//! token that supersedes it, the watch that tells when its departure is handled, its lease).
//! Must not: run a session (`crate::session` does) or keep a count past its world and its
//! last session.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{LiveSession, Registry};

/// A session's place in the directory: its incarnation, the token that ends it when a newer
/// incarnation of its rank attaches, and the session it replaces.
#[derive(Debug)]
pub struct SessionSlot {
    /// How many sessions of this rank came before, plus one.
    pub incarnation: u64,
    /// Cancelled when a newer incarnation of the rank attaches.
    pub superseded: CancellationToken,
    /// Cancelled when an operator ends the session ([`Registry::end_by_operator`]).
    pub ended_by_operator: CancellationToken,
    /// Set once this session's departure is handled everywhere.
    pub ended: watch::Sender<bool>,
    /// The previous live session of the rank: end it, then wait until its departure is handled.
    pub previous: Option<(CancellationToken, watch::Receiver<bool>)>,
    /// When the session's lease lapses unless it hears from the client (the session renews
    /// it; the web view reads it).
    pub lease: Arc<Lease>,
}

impl Registry {
    /// A new session of `rank` of `world`: its incarnation (1 for the rank's first session)
    /// becomes the rank's live one.
    pub fn begin_session(&self, world: &str, rank: u32) -> SessionSlot {
        self.succeed_session(world, rank, None)
            .expect("a session that succeeds no incarnation is always begun")
    }

    /// [`Registry::begin_session`] for a client re-attaching by itself after its session was
    /// lost, as the successor of incarnation `succeeds` when given: refused (with the rank's
    /// latest incarnation) when the rank attached again since — a newer incarnation than the
    /// one the client lost exists, and it must not be superseded by a client that only
    /// followed a failover. Accepted, the new incarnation is above `succeeds` even where the
    /// store's log (a node that took the world up rebuilds the counts from it) did not
    /// record the lost one.
    ///
    /// # Errors
    /// The rank's latest incarnation, when it is newer than `succeeds`.
    pub fn succeed_session(
        &self,
        world: &str,
        rank: u32,
        succeeds: Option<u64>,
    ) -> Result<SessionSlot, u64> {
        let mut inner = self.write();
        let key = (world.to_string(), rank);
        let count = inner.incarnations.entry(key.clone()).or_insert(0);
        if let Some(succeeds) = succeeds {
            if *count > succeeds {
                return Err(*count);
            }
            *count = succeeds;
        }
        *count += 1;
        let incarnation = *count;
        let superseded = CancellationToken::new();
        let ended_by_operator = CancellationToken::new();
        let (ended, watcher) = watch::channel(false);
        let lease = Arc::new(Lease::new(self.lease_ttl));
        let previous = inner.live.insert(
            key,
            LiveSession {
                incarnation,
                superseded: superseded.clone(),
                ended_by_operator: ended_by_operator.clone(),
                ended: watcher,
                lease: Arc::clone(&lease),
            },
        );
        Ok(SessionSlot {
            incarnation,
            superseded,
            ended_by_operator,
            ended,
            previous: previous.map(|live| (live.superseded, live.ended)),
            lease,
        })
    }

    /// Whether `incarnation` is still the live session of `rank` (no newer one attached).
    pub fn is_live(&self, world: &str, rank: u32, incarnation: u64) -> bool {
        self.read()
            .live
            .get(&(world.to_string(), rank))
            .is_some_and(|live| live.incarnation == incarnation)
    }

    /// The incarnation of `rank`'s live session, if it has one.
    pub fn live_incarnation(&self, world: &str, rank: u32) -> Option<u64> {
        self.read()
            .live
            .get(&(world.to_string(), rank))
            .map(|live| live.incarnation)
    }

    /// An operator ends the live session `incarnation` of `rank` (Admin `EndSession`): the
    /// session departs as when its lease lapses. The receiver is set once its departure is
    /// handled everywhere. `None` when that incarnation is no longer the rank's live session.
    pub fn end_by_operator(
        &self,
        world: &str,
        rank: u32,
        incarnation: u64,
    ) -> Option<watch::Receiver<bool>> {
        let inner = self.read();
        let live = inner.live.get(&(world.to_string(), rank))?;
        if live.incarnation != incarnation {
            return None;
        }
        live.ended_by_operator.cancel();
        Some(live.ended.clone())
    }

    /// The session `incarnation` of `rank` ended; it stays the rank's last one unless a newer
    /// one attached. Returns whether no newer one did.
    pub fn end_session(&self, world: &str, rank: u32, incarnation: u64) -> bool {
        let mut inner = self.write();
        let key = (world.to_string(), rank);
        let last = inner
            .live
            .get(&key)
            .is_some_and(|live| live.incarnation == incarnation);
        if last {
            inner.live.remove(&key);
            // the world was deleted while this session outlived it: nothing needs its count
            if !inner.worlds.contains_key(world) {
                inner.incarnations.remove(&key);
            }
        }
        last
    }
}

/// When a session's lease lapses: renewed by the session whenever it hears from its client,
/// read by the web view. An atomic, so neither side waits for the other.
#[derive(Debug)]
pub struct Lease {
    /// The clock reading the deadline counts from.
    base: tokio::time::Instant,
    /// The deadline, in milliseconds after `base`.
    deadline_ms: AtomicU64,
}

impl Lease {
    /// A lease that lapses `ttl` from now.
    fn new(ttl: Duration) -> Self {
        Lease {
            base: tokio::time::Instant::now(),
            deadline_ms: AtomicU64::new(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
        }
    }

    /// The lease now lapses at `deadline`.
    pub fn renew(&self, deadline: tokio::time::Instant) {
        let after = deadline.saturating_duration_since(self.base).as_millis();
        self.deadline_ms
            .store(u64::try_from(after).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// How long until the lease lapses (zero once it has).
    pub fn remaining(&self) -> Duration {
        let deadline = self.base + Duration::from_millis(self.deadline_ms.load(Ordering::Relaxed));
        deadline.saturating_duration_since(tokio::time::Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditHandle;
    use crate::limits::Limits;

    fn registry() -> Arc<Registry> {
        Registry::new(
            AuditHandle::off(),
            None,
            0,
            Duration::from_secs(60),
            Limits::default(),
        )
    }

    #[tokio::test]
    async fn a_deleted_world_leaves_no_session_counts_behind() {
        let registry = registry();
        for cycle in 0..3 {
            let name = format!("w{cycle}");
            registry.create_world(&name, 2).await.unwrap();
            for rank in 0..2 {
                let slot = registry.begin_session(&name, rank);
                assert_eq!(slot.incarnation, 1);
                assert!(registry.end_session(&name, rank, slot.incarnation));
            }
            registry.delete_world(&name).await.unwrap();
        }
        assert!(registry.read().incarnations.is_empty());
    }

    #[tokio::test]
    async fn a_session_outliving_its_world_drops_the_count_when_it_ends() {
        let registry = registry();
        registry.create_world("w", 1).await.unwrap();
        let first = registry.begin_session("w", 0);
        registry.delete_world("w").await.unwrap();
        // a world of the same name while the old session runs: counts on, no clash
        registry.create_world("w", 1).await.unwrap();
        let second = registry.begin_session("w", 0);
        assert_eq!(second.incarnation, 2);
        assert!(!registry.end_session("w", 0, first.incarnation));
        assert!(registry.is_live("w", 0, second.incarnation));
        assert!(registry.end_session("w", 0, second.incarnation));
        registry.delete_world("w").await.unwrap();
        assert!(registry.read().incarnations.is_empty());
        // and one that ends after its world went takes its count with it
        registry.create_world("v", 1).await.unwrap();
        let orphan = registry.begin_session("v", 0);
        registry.delete_world("v").await.unwrap();
        assert!(registry.end_session("v", 0, orphan.incarnation));
        assert!(registry.read().incarnations.is_empty());
    }

    #[tokio::test]
    async fn a_client_re_attaching_by_itself_never_supersedes_a_newer_incarnation() {
        let registry = registry();
        registry.create_world("w", 1).await.unwrap();
        let first = registry.begin_session("w", 0);
        assert_eq!(first.incarnation, 1);
        // the client that lost incarnation 1 comes back: it succeeds it
        let healed = registry.succeed_session("w", 0, Some(1)).unwrap();
        assert_eq!(healed.incarnation, 2);
        assert!(!registry.is_live("w", 0, 1));
        // a second client that also lost incarnation 1 is refused, naming the newer one, and
        // the live session stays
        assert_eq!(registry.succeed_session("w", 0, Some(1)).err(), Some(2));
        assert!(registry.is_live("w", 0, 2));
        // a node that rebuilt the counts from a log that missed incarnations still numbers
        // the successor above the one the client had
        registry.create_world("v", 1).await.unwrap();
        let healed = registry.succeed_session("v", 0, Some(7)).unwrap();
        assert_eq!(healed.incarnation, 8);
    }
}
