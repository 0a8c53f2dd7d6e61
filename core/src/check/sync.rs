//! How the race checker's pass advances its vector clocks at each synchronization event:
//! fences, PSCW, the world barrier, an operation issued, a lock released.
//!
//! Owns: the clock steps of those events. Must not: report findings (`check.rs` compares
//! accesses).

use super::*;

impl Pass {
    /// `rank` posts an exposure epoch to `group`: its stores so far are visible to them.
    pub(super) fn post(&mut self, rank: u32, group: &[u32]) {
        let clock = self.tick(rank);
        self.publish(rank, &clock);
        for &origin in group {
            let generation = self.post_gen.entry((rank, origin)).or_insert(0);
            *generation += 1;
            self.post_token
                .insert((rank, origin, *generation), clock.clone());
        }
        self.post_group[rank as usize] = group.to_vec();
    }

    /// `rank` completes its access epoch: its operations are complete at each target.
    pub(super) fn complete(&mut self, rank: u32) {
        let clock = self.tick(rank);
        self.complete_ops(rank, None, &clock);
        if let Some(group) = self.access_group[rank as usize].take() {
            for target in group {
                let generation = self.start_gen.get(&(rank, target)).copied().unwrap_or(0);
                self.complete_clock
                    .insert((target, rank, generation), clock.clone());
            }
        }
    }

    /// `rank`'s wait returns: after every origin of its exposure epoch completed.
    pub(super) fn wait_exit(&mut self, rank: u32) {
        self.tick(rank);
        let mut joined = self.zero();
        for &origin in &self.post_group[rank as usize] {
            let generation = self.post_gen.get(&(rank, origin)).copied().unwrap_or(0);
            if let Some(complete) = self.complete_clock.get(&(rank, origin, generation)) {
                join(&mut joined, complete);
            }
        }
        let clock = self.absorb(rank, &joined);
        self.refresh[rank as usize] = Some(clock);
    }

    /// `rank` enters its next world barrier.
    pub(super) fn barrier_enter(&mut self, rank: u32) {
        let clock = self.tick(rank);
        let round = self.barrier_enters[rank as usize];
        self.barrier_enters[rank as usize] += 1;
        if self.barrier_join.len() <= round {
            self.barrier_join.resize(round + 1, self.zero());
        }
        join(&mut self.barrier_join[round], &clock);
    }

    /// `rank` leaves its next world barrier: after every rank entered it.
    pub(super) fn barrier_exit(&mut self, rank: u32) {
        self.tick(rank);
        let round = self.barrier_exits[rank as usize];
        self.barrier_exits[rank as usize] += 1;
        if let Some(all) = self.barrier_join.get(round).cloned() {
            self.absorb(rank, &all);
        }
    }

    /// `rank` enters fence `fence`: its operations and stores so far are complete there.
    pub(super) fn fence_enter(&mut self, rank: u32, fence: u64, assert: u32) {
        let clock = self.tick(rank);
        self.complete_ops(rank, None, &clock);
        self.publish(rank, &clock);
        if assert & Assert::NOPRECEDE == 0 {
            self.fence_closing.insert(fence);
        }
        join(
            self.fence_join
                .entry(fence)
                .or_insert_with(|| vec![0; self.n]),
            &clock,
        );
        self.fence_enter.insert((fence, rank), clock);
        self.last_fence[rank as usize] = Some(fence);
    }

    /// `rank` leaves fence `fence`: after every rank's entry when the fence closes an epoch.
    pub(super) fn fence_exit(&mut self, rank: u32, fence: u64) {
        self.tick(rank);
        let mut clock = self.clock[rank as usize].clone();
        if self.fence_closing.contains(&fence) {
            if let Some(all) = self.fence_join.get(&fence) {
                clock = self.absorb(rank, &all.clone());
            }
        }
        self.refresh[rank as usize] = Some(clock);
    }

    /// `rank`'s lock of `origin`, held under `token`, was released (`released`: unlocked by
    /// the origin; else revoked): the target's later grants come after what the holder did.
    pub(super) fn lock_released(&mut self, rank: u32, origin: u32, token: u64, released: bool) {
        let unlocked = released
            .then(|| self.unlock_clock.get(&(origin, rank)).cloned())
            .flatten();
        let Some(clock) = unlocked.or_else(|| self.clock.get(origin as usize).cloned()) else {
            return;
        };
        join(&mut self.released_all[rank as usize], &clock);
        if self
            .holder_exclusive
            .get(&(rank, token))
            .copied()
            .unwrap_or(true)
        {
            join(&mut self.released_exclusive[rank as usize], &clock);
        }
    }

    /// `record`, rank's operation on `target`, was issued: an access, pending until the
    /// epoch's end or a flush completes it.
    pub(super) fn op_issued(
        &mut self,
        record: &AuditRecord,
        target: u32,
        op: &RecordedOp,
        datatype: &str,
        runs: &[(u64, u64)],
    ) {
        let rank = record.rank;
        let clock = self.tick(rank);
        let epoch = if self.lock_active.contains(&(rank, target)) {
            Epoch::Passive(self.lock_epoch[&(rank, target)])
        } else if let (true, Some(epoch)) = (
            self.lock_all_active[rank as usize],
            self.lock_all_epoch[rank as usize],
        ) {
            Epoch::Passive(epoch)
        } else if self.access_group[rank as usize]
            .as_ref()
            .is_some_and(|group| group.contains(&target))
        {
            Epoch::Pscw(self.start_gen.get(&(rank, target)).copied().unwrap_or(0))
        } else {
            Epoch::Fence(self.last_fence[rank as usize])
        };
        let (kind, call) = classify(op, datatype);
        let index = self.accesses.len();
        self.accesses.push(Access {
            seq: record.seq,
            cseq: record.cseq,
            rank,
            target,
            call,
            kind,
            ranges: runs.iter().copied().filter(|(s, e)| s < e).collect(),
            start: clock,
            end: None,
            flush_local: None,
            refresh: None,
            epoch,
            op: match &record.event {
                Event::OpIssued { op_id, .. } => Some((rank, record.incarnation, *op_id)),
                _ => None,
            },
        });
        self.pending_ops[rank as usize].push(index);
    }
}
