//! Recovery at start-up: the worlds, tokens and windows a previous run left in the store, each
//! window's public copies rebuilt byte-exact from every rank's latest snapshot plus the log
//! after it (with core's [`apply_record`], the code replay uses).
//!
//! Owns: reading the past. Must not: write anything (the registry takes it from here).

use std::collections::{BTreeMap, HashMap};

use anyhow::Context;

use onesided_core::audit::{apply_record, readable, Event};
use onesided_core::window::{Flavor, DYNAMIC_BASE};

use crate::audit::{AuditStore, StoredWorld};
use crate::registry::{desc_from_spec, RecoveredWindow};

/// What a restarted server starts from.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Worlds with their token hashes.
    pub worlds: Vec<StoredWorld>,
    /// Windows not freed, with their public copies.
    pub windows: Vec<RecoveredWindow>,
    /// The highest incarnation per `(world, rank)`.
    pub incarnations: Vec<(String, u32, u64)>,
}

/// Reads the directory and rebuilds every live window.
///
/// # Errors
/// Database failures, or a stored window this version cannot rebuild.
pub async fn recover(store: &AuditStore) -> anyhow::Result<Recovered> {
    recover_where(store, None).await
}

/// [`recover`] of one world only (a cluster node taking it up); an empty [`Recovered`] when
/// the world is not stored.
///
/// # Errors
/// As [`recover`].
pub async fn recover_world(store: &AuditStore, world: &str) -> anyhow::Result<Recovered> {
    recover_where(store, Some(world)).await
}

async fn recover_where(store: &AuditStore, only: Option<&str>) -> anyhow::Result<Recovered> {
    let (mut worlds, mut stored) = store.directory().await?;
    if let Some(only) = only {
        worlds.retain(|world| world.name == only);
        stored.retain(|window| window.world == only);
    }
    let mut windows = Vec::new();
    for window in stored {
        let desc = desc_from_spec(window.id, &window.world, &window.name, &window.spec)
            .with_context(|| format!("window {} ({})", window.name, window.id))?;
        let snapshots: HashMap<u32, (u64, Vec<u8>)> = store
            .snapshots(window.id)
            .await?
            .into_iter()
            .map(|snapshot| (snapshot.rank, (snapshot.seq, snapshot.data)))
            .collect();
        // every rank is snapshotted in each round (the actors' window log): the log after the
        // oldest of them is about one round's worth
        let dynamic = desc.flavor == Flavor::Dynamic;
        let from = (0..desc.nranks())
            .map(|rank| snapshots.get(&rank).map_or(0, |(seq, _)| *seq))
            .min()
            .unwrap_or(0)
            + 1;
        let mut rows = store.rows(window.id, from).await?;
        if rows
            .iter()
            .any(|row| row.record.event == Event::WindowFreed)
        {
            continue;
        }
        if dynamic && from > 1 {
            // a dynamic window's regions come from the whole log (a snapshot holds bytes
            // only): its attaches and detaches before the snapshots, found by their index
            let mut regions = store.region_rows(window.id, from).await?;
            regions.append(&mut rows);
            rows = regions;
        }
        // a row that cannot be read is refused, not skipped: the copy would silently lack it
        let rows = readable(rows)
            .map_err(|error| anyhow::anyhow!("window {} cannot be rebuilt: {error}", window.id))?;
        let mut copies = Vec::with_capacity(desc.sizes.len());
        let mut since = Vec::with_capacity(desc.sizes.len());
        for (rank, &size) in desc.sizes.iter().enumerate() {
            let (seq, copy) = match snapshots.get(&(rank as u32)) {
                Some((seq, data)) if dynamic || data.len() as u64 == size => (*seq, data.clone()),
                Some(_) => anyhow::bail!(
                    "the snapshot of rank {rank} of window {} does not match its size",
                    window.id
                ),
                None => (0, vec![0; size as usize]),
            };
            copies.push(copy);
            since.push(seq);
        }
        let mut regions = vec![BTreeMap::new(); if dynamic { copies.len() } else { 0 }];
        for record in &rows {
            let rank = record.rank as usize;
            match (&record.event, regions.get_mut(rank)) {
                // a region of no bytes never takes the place of one with bytes at its
                // address (the target keeps them apart; here one of them is known)
                (Event::RegionAttached { base, size: 0 }, Some(regions)) => {
                    regions
                        .entry(base.saturating_sub(DYNAMIC_BASE))
                        .or_insert(0);
                }
                (Event::RegionAttached { base, size }, Some(regions)) => {
                    regions.insert(base.saturating_sub(DYNAMIC_BASE), *size);
                }
                (Event::RegionDetached { base, size }, Some(regions)) => {
                    let offset = base.saturating_sub(DYNAMIC_BASE);
                    if regions.get(&offset) == Some(size) {
                        regions.remove(&offset);
                    }
                }
                _ => {}
            }
            if rank < copies.len() && record.seq > since[rank] {
                apply_record(&mut copies[rank], record).map_err(|error| {
                    anyhow::anyhow!("window {} cannot be rebuilt: {error}", window.id)
                })?;
            }
        }
        let logged = rows
            .iter()
            .filter(|record| record.seq >= from)
            .map(|record| crate::actor::logged_bytes(&record.event))
            .sum();
        tracing::info!(
            window = window.id,
            replayed = rows.len(),
            snapshots = snapshots.len(),
            "window rebuilt from snapshots and log"
        );
        windows.push(RecoveredWindow {
            desc,
            copies,
            regions,
            replayed: rows.len(),
            logged,
        });
    }
    let mut incarnations = store.incarnations().await?;
    if let Some(only) = only {
        incarnations.retain(|(world, ..)| world == only);
    }
    Ok(Recovered {
        worlds,
        windows,
        incarnations,
    })
}
