//! A world's collectives, sans I/O: the world barrier (`MPI_Barrier`), the barrier inside
//! `MPI_WIN_FREE`, `MPI_Win_set_info` (whose ranks must ask for the same info), and how a
//! departed rank fails them.
//!
//! Owns: arrival counts per collective, which barrier instance a rank's call is (counted
//! across its incarnations), and the failure rules — a departure fails every collective
//! pending, and while the rank is gone so do new ones that need every rank. Must not: do I/O
//! or know how answers travel (`R` is the caller's opaque reply address); freeing the window
//! is the caller's, told by [`Effects::freed`].

use std::collections::{BTreeMap, HashMap};

use crate::window::{Flavor, MemoryModel, WindowInfo};
use crate::{ErrorClass, RmaError};

/// Which collective an arrival belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    /// The world barrier.
    Barrier,
    /// `MPI_WIN_FREE` of a window; `barrier = false` for `no_locks` windows, whose ranks return
    /// at once.
    Free {
        /// The window id.
        window: u64,
        /// Whether ranks wait for each other.
        barrier: bool,
    },
}

/// What arrivals wait for: the `n`-th barrier call of every rank (counted across its
/// incarnations, so a restarted rank's next barrier meets the others' next one), or a window's
/// free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Instance {
    Barrier(u64),
    Free {
        window: u64,
        barrier: bool,
    },
    /// The `n`-th `MPI_Win_set_info` call of every member on a window (counted across their
    /// incarnations), as collectives match in call order in MPI.
    SetInfo(u64, u64),
}

/// What the caller must do after an input: send the answers, and free the window whose free
/// every rank reached.
#[derive(Debug)]
pub struct Effects<R> {
    /// Answers, in order.
    pub answers: Vec<(R, Result<(), RmaError>)>,
    /// Every rank arrived at this window's free: remove it.
    pub freed: Option<u64>,
    /// Every rank of this window called `MPI_Win_set_info` asking for this info: it is the
    /// window's from now on (the caller puts it in place before it sends the answers).
    pub info_set: Option<(u64, WindowInfo)>,
    /// Every rank called `MPI_Win_create`/`MPI_Win_allocate` for this window with matching
    /// arguments: the caller creates it and answers the replies with the outcome.
    pub create: Option<Creation<R>>,
}

/// One rank's call of `MPI_Win_create` or `MPI_Win_allocate` (the ranks create a window
/// together).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowPart {
    /// The bytes this rank exposes.
    pub size: u64,
    /// This rank's disp_unit.
    pub disp_unit: u32,
    /// What every rank must give alike.
    pub shared: SharedArgs,
}

/// The arguments of a window creation every rank must give alike.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedArgs {
    /// How its memory is made.
    pub flavor: Flavor,
    /// Its memory model.
    pub model: MemoryModel,
    /// Its info, as given (sorted by key).
    pub info: Vec<(String, String)>,
}

/// A window every rank asked for alike: the caller creates it, then answers every reply.
#[derive(Debug)]
pub struct Creation<R> {
    /// Its name.
    pub name: String,
    /// The world ranks it spans, its rank r being `group[r]`; empty for the whole world.
    pub group: Vec<u32>,
    /// Per-rank sizes, in rank order (of the window).
    pub sizes: Vec<u64>,
    /// Per-rank disp_units, in rank order.
    pub disp_units: Vec<u32>,
    /// What every rank gave alike.
    pub shared: SharedArgs,
    /// Whom to answer with the outcome.
    pub replies: Vec<R>,
}

impl<R> Effects<R> {
    fn none() -> Self {
        Effects {
            answers: Vec::new(),
            freed: None,
            info_set: None,
            create: None,
        }
    }

    fn answer(reply: R, answer: Result<(), RmaError>) -> Self {
        Effects {
            answers: vec![(reply, answer)],
            freed: None,
            info_set: None,
            create: None,
        }
    }
}

/// A creation collective: the group it is over (empty for the whole world) and which call of
/// its members on that group it is.
type CreateInstance = (Vec<u32>, u64);

/// The collectives of one world of `nranks` ranks.
#[derive(Debug)]
pub struct Collectives<R> {
    nranks: u32,
    waiting: HashMap<Instance, Vec<(u32, Option<R>)>>,
    /// The members of a window's collective waiting over part of the world (world ranks):
    /// only their departures fail it.
    groups: HashMap<Instance, Vec<u32>>,
    /// Ranks whose session ended and that have not attached again, and why.
    gone: BTreeMap<u32, String>,
    /// Barrier calls per rank.
    barriers: Vec<u64>,
    /// Barrier instances that failed: every rank's call of one fails, so that ranks stay in
    /// step.
    failed: HashMap<u64, RmaError>,
    /// Per instance of `MPI_Win_set_info` (window, call number): the info each rank that
    /// called it asked for.
    proposals: HashMap<(u64, u64), Vec<(u32, WindowInfo)>>,
    /// Per window: how many times each rank called `MPI_Win_set_info` on it.
    set_infos: HashMap<u64, Vec<u64>>,
    /// `MPI_Win_set_info` instances that failed (a member departed): every member's call of
    /// one fails, so that ranks stay in step.
    failed_infos: HashMap<(u64, u64), RmaError>,
    /// Per instance (the n-th creation call of every member of a group — the whole world
    /// when empty —, as collectives match per communicator in MPI): the ranks that called
    /// `MPI_Win_create`/`MPI_Win_allocate`, with the name they gave.
    creating: HashMap<CreateInstance, Vec<(u32, String, WindowPart, R)>>,
    /// Creation calls per group, per world rank.
    creates: HashMap<Vec<u32>, Vec<u64>>,
    /// Creation instances that failed: every member's call of one fails (ranks stay in step).
    failed_creates: HashMap<CreateInstance, RmaError>,
    /// Of two creation instances that failed because their members gave one window's group in
    /// different orders, each one's other: a member's call of one counts as its call of both.
    reordered_with: HashMap<CreateInstance, CreateInstance>,
}

/// Every member of a window's creation over `group` arrived (`arrivals`: rank, name, part,
/// reply): the window to create, or every call failing when they differ in name, info,
/// flavor or model.
fn matched<R>(group: &[u32], mut arrivals: Vec<(u32, String, WindowPart, R)>) -> Effects<R> {
    // in the window's rank order
    arrivals.sort_by_key(|(rank, _, _, _)| {
        group
            .iter()
            .position(|member| member == rank)
            .unwrap_or(*rank as usize)
    });
    let mut effects = Effects::none();
    let (leader, name) = (arrivals[0].0, arrivals[0].1.clone());
    let first = arrivals[0].2.shared.clone();
    if let Some((other, theirs, _, _)) = arrivals.iter().find(|(_, other, _, _)| *other != name) {
        let error = RmaError::new(
            ErrorClass::Arg,
            format!(
                "creating a window needs the same name on every rank: rank {leader} gives \
                 {name:?}, rank {other} {theirs:?}; nothing was created"
            ),
        );
        for (_, _, _, reply) in arrivals {
            effects.answers.push((reply, Err(error.clone())));
        }
        return effects;
    }
    if let Some((other, _, part, _)) = arrivals.iter().find(|(_, _, part, _)| part.shared != first)
    {
        let (class, what, mine, theirs) = if part.shared.info != first.info {
            (
                ErrorClass::Info,
                "info",
                format!("{:?}", first.info),
                format!("{:?}", part.shared.info),
            )
        } else if part.shared.flavor != first.flavor {
            (
                ErrorClass::Arg,
                "flavor",
                format!("{:?}", first.flavor),
                format!("{:?}", part.shared.flavor),
            )
        } else {
            (
                ErrorClass::Arg,
                "model",
                format!("{:?}", first.model),
                format!("{:?}", part.shared.model),
            )
        };
        let error = RmaError::new(
            class,
            format!(
                "creating window {name} needs the same {what} on every rank: rank {leader} \
                 gives {mine}, rank {other} {theirs}; nothing was created"
            ),
        );
        for (_, _, _, reply) in arrivals {
            effects.answers.push((reply, Err(error.clone())));
        }
        return effects;
    }
    let mut creation = Creation {
        name,
        group: group.to_vec(),
        sizes: Vec::with_capacity(arrivals.len()),
        disp_units: Vec::with_capacity(arrivals.len()),
        shared: first,
        replies: Vec::with_capacity(arrivals.len()),
    };
    for (_, _, part, reply) in arrivals {
        creation.sizes.push(part.size);
        creation.disp_units.push(part.disp_unit);
        creation.replies.push(reply);
    }
    effects.create = Some(creation);
    effects
}

fn proc_failed(rank: u32, reason: &str) -> RmaError {
    RmaError::new(
        ErrorClass::ProcFailed,
        format!("rank {rank} failed: its session ended ({reason})"),
    )
}

impl<R> Collectives<R> {
    /// A world of `nranks` ranks with nothing pending.
    pub fn new(nranks: u32) -> Self {
        Collectives {
            nranks,
            waiting: HashMap::new(),
            groups: HashMap::new(),
            gone: BTreeMap::new(),
            barriers: vec![0; nranks as usize],
            failed: HashMap::new(),
            proposals: HashMap::new(),
            set_infos: HashMap::new(),
            failed_infos: HashMap::new(),
            creating: HashMap::new(),
            creates: HashMap::new(),
            failed_creates: HashMap::new(),
            reordered_with: HashMap::new(),
        }
    }

    /// A session of `rank` started: collectives may wait for it again.
    pub fn joined(&mut self, rank: u32) {
        self.gone.remove(&rank);
    }

    /// A session of `rank` ended: every collective pending fails with `PROC_FAILED` naming it
    /// (one it took part in or still had to join cannot complete), and while it is `gone` (no
    /// newer session attached) so do new ones that need every rank.
    pub fn departed(&mut self, rank: u32, reason: &str, gone: bool) -> Effects<R> {
        let mut effects = Effects::none();
        let error = proc_failed(rank, reason);
        for (instance, arrivals) in std::mem::take(&mut self.waiting) {
            if self
                .groups
                .get(&instance)
                .is_some_and(|members| !members.contains(&rank))
            {
                // a window over part of the world that `rank` is not in
                self.waiting.insert(instance, arrivals);
                continue;
            }
            self.groups.remove(&instance);
            match instance {
                Instance::Barrier(n) => {
                    self.failed.insert(n, error.clone());
                }
                Instance::SetInfo(window, n) => {
                    self.proposals.remove(&(window, n));
                    self.failed_infos.insert((window, n), error.clone());
                }
                Instance::Free { .. } => {}
            }
            for reply in arrivals.into_iter().filter_map(|(_, reply)| reply) {
                effects.answers.push((reply, Err(error.clone())));
            }
        }
        for (instance, arrivals) in std::mem::take(&mut self.creating) {
            if !instance.0.is_empty() && !instance.0.contains(&rank) {
                // a creation over a group `rank` is not in
                self.creating.insert(instance, arrivals);
                continue;
            }
            self.failed_creates.insert(instance, error.clone());
            for (_, _, _, reply) in arrivals {
                effects.answers.push((reply, Err(error.clone())));
            }
        }
        if gone {
            self.gone.insert(rank, reason.to_string());
        }
        effects
    }

    /// Rank `rank` calls `MPI_Win_create` or `MPI_Win_allocate` for the window `name` with
    /// its `part`, over `group` (world ranks, the window's rank r being `group[r]`, as MPI
    /// numbers a subcommunicator; empty for the whole world); `reply` is answered once every
    /// member called. Calls match by their order at each member on that group (the n-th of
    /// every member), as MPI's collectives match per communicator, so every member must give
    /// the same name, flavor, model and info: when one differs, every call fails with
    /// `MPI_ERR_ARG` (or `MPI_ERR_INFO` for the info) naming the first rank that differs, and
    /// nothing is created; otherwise [`Effects::create`] says what to create. A bad group, or
    /// one without the caller, fails that call alone with `MPI_ERR_GROUP`; members that give
    /// different groups wait for the members of theirs (as MPI ranks calling a collective on
    /// different communicators do) until a member departs, except that the same ranks giving
    /// one window's group in different orders are told at once (`MPI_ERR_GROUP`, every call of
    /// both orders).
    pub fn propose_window(
        &mut self,
        name: &str,
        rank: u32,
        group: &[u32],
        part: WindowPart,
        reply: R,
    ) -> Effects<R> {
        if let Err(error) = self.creator(rank, group) {
            return Effects::answer(reply, Err(error));
        }
        let nranks = self.nranks as usize;
        let calls = &mut self
            .creates
            .entry(group.to_vec())
            .or_insert_with(|| vec![0; nranks])[rank as usize];
        *calls += 1;
        let instance = (group.to_vec(), *calls);
        if let Some(error) = self.failed_creates.get(&instance) {
            let error = error.clone();
            if let Some(sibling) = self.reordered_with.get(&instance).cloned() {
                self.step_past(&sibling, rank);
            }
            return Effects::answer(reply, Err(error));
        }
        let members = (!group.is_empty()).then_some(group);
        if let Some((gone, reason)) = self.gone_member(members) {
            let error = proc_failed(*gone, reason);
            self.failed_creates.insert(instance, error.clone());
            return Effects::answer(reply, Err(error));
        }
        if let Some((error, waiting)) = self.reordered(name, rank, group, &instance) {
            let mut effects = Effects::answer(reply, Err(error.clone()));
            for (_, _, _, reply) in waiting {
                effects.answers.push((reply, Err(error.clone())));
            }
            return effects;
        }
        let needed = if group.is_empty() {
            nranks
        } else {
            group.len()
        };
        let arrivals = self.creating.entry(instance.clone()).or_default();
        arrivals.push((rank, name.to_string(), part, reply));
        if arrivals.len() < needed {
            return Effects::none();
        }
        let arrivals = self.creating.remove(&instance).unwrap_or_default();
        matched(group, arrivals)
    }

    /// Whether `rank` may create a window over `group` (empty: the whole world): a rank of
    /// the world, in a valid group.
    fn creator(&self, rank: u32, group: &[u32]) -> Result<(), RmaError> {
        if rank >= self.nranks {
            return Err(RmaError::new(
                ErrorClass::Rank,
                format!("rank {rank} is outside the world"),
            ));
        }
        if !group.is_empty() {
            crate::window::WindowDesc::validate_group(self.nranks, Some(group))?;
            if !group.contains(&rank) {
                return Err(RmaError::new(
                    ErrorClass::Group,
                    format!(
                        "rank {rank} creates a window over the group {group:?}, which it is \
                         not in"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Rank `rank` calls the creation of window `name` over `group` (its `instance`) while
    /// members of the same ranks gave that window their group in another order: no call of
    /// either order can ever be matched, so both fail now with `MPI_ERR_GROUP` (instead of
    /// waiting until a deadline), the order's waiting calls with it, and so do the members'
    /// calls of either instance still to come. The error and the calls that waited.
    #[allow(clippy::type_complexity)]
    fn reordered(
        &mut self,
        name: &str,
        rank: u32,
        group: &[u32],
        instance: &CreateInstance,
    ) -> Option<(RmaError, Vec<(u32, String, WindowPart, R)>)> {
        let nranks = self.nranks;
        let ordered = |group: &[u32]| -> Vec<u32> {
            if group.is_empty() {
                (0..nranks).collect()
            } else {
                group.to_vec()
            }
        };
        let mine = ordered(group);
        let mut members = mine.clone();
        members.sort_unstable();
        let (theirs, other) = self.creating.iter().find_map(|(theirs, arrivals)| {
            let order = ordered(&theirs.0);
            if order == mine || order.len() != mine.len() {
                return None;
            }
            let mut same = order.clone();
            same.sort_unstable();
            let (other, _, _, _) = arrivals.iter().find(|(_, given, _, _)| given == name)?;
            (same == members).then(|| (theirs.clone(), *other))
        })?;
        let at = ordered(&theirs.0)
            .iter()
            .zip(&mine)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        let error = RmaError::new(
            ErrorClass::Group,
            format!(
                "creating window {}: rank {other} gives its group in another order than rank \
                 {rank} (window rank {at} is world rank {} for one, {} for the other); every \
                 member must give the same order, nothing was created",
                crate::error::quoted(name),
                ordered(&theirs.0)[at],
                mine[at],
            ),
        );
        self.failed_creates.insert(theirs.clone(), error.clone());
        self.failed_creates.insert(instance.clone(), error.clone());
        self.reordered_with.insert(theirs.clone(), instance.clone());
        self.reordered_with.insert(instance.clone(), theirs.clone());
        let waiting = self.creating.remove(&theirs).unwrap_or_default();
        // each call made is its member's call of both orders: none of them meets the other
        // order's failure later, when it calls again
        self.step_past(&theirs, rank);
        for (member, _, _, _) in &waiting {
            self.step_past(instance, *member);
        }
        Some((error, waiting))
    }

    /// `rank` has made its call of creation `instance` (its sibling's): if that is its next
    /// call of the instance's group, it is counted as made.
    fn step_past(&mut self, instance: &CreateInstance, rank: u32) {
        let nranks = self.nranks as usize;
        let calls = &mut self
            .creates
            .entry(instance.0.clone())
            .or_insert_with(|| vec![0; nranks])[rank as usize];
        if *calls + 1 == instance.1 {
            *calls = instance.1;
        }
    }

    /// Rank `rank` calls `MPI_Win_set_info` on `window`, asking for `info` (the window's info
    /// updated with its keys: [`WindowInfo::updated`]); `reply` is answered once every rank
    /// called. Every rank must ask for the same info: when one differs, every call fails
    /// with `MPI_ERR_INFO` naming the first key that differs, and nothing changes.
    ///
    /// `group`: the window's group (world ranks), whose members take part; empty for the
    /// whole world.
    pub fn propose_info(
        &mut self,
        window: u64,
        rank: u32,
        info: WindowInfo,
        group: &[u32],
        reply: R,
    ) -> Effects<R> {
        let nranks = self.nranks as usize;
        let calls = self
            .set_infos
            .entry(window)
            .or_insert_with(|| vec![0; nranks]);
        let n = calls.get_mut(rank as usize).map_or(0, |calls| {
            *calls += 1;
            *calls
        });
        if let Some(error) = self.failed_infos.get(&(window, n)) {
            return Effects::answer(reply, Err(error.clone()));
        }
        let instance = Instance::SetInfo(window, n);
        let members = (!group.is_empty()).then_some(group);
        // what `arrive_at` accepts: a member, arriving once, no member gone
        let accepted = self.member(rank, members)
            && self.gone_member(members).is_none()
            && !self
                .waiting
                .get(&instance)
                .is_some_and(|arrivals| arrivals.iter().any(|(arrived, _)| *arrived == rank));
        if accepted {
            self.proposals
                .entry((window, n))
                .or_default()
                .push((rank, info));
        }
        let mut effects = self.arrive_at(instance, rank, reply, members);
        if !accepted || self.waiting.contains_key(&instance) {
            return effects;
        }
        let mut proposals = self.proposals.remove(&(window, n)).unwrap_or_default();
        proposals.sort_by_key(|(rank, _)| *rank);
        let Some((_, first)) = proposals.first().cloned() else {
            return effects;
        };
        match proposals.iter().find(|(_, info)| *info != first) {
            None => effects.info_set = Some((window, first)),
            Some((other, info)) => {
                let mine: BTreeMap<_, _> = first.to_pairs().into_iter().collect();
                let theirs: BTreeMap<_, _> = info.to_pairs().into_iter().collect();
                let key = mine
                    .keys()
                    .chain(theirs.keys())
                    .find(|key| mine.get(*key) != theirs.get(*key))
                    .cloned()
                    .unwrap_or_default();
                let error = RmaError::new(
                    ErrorClass::Info,
                    format!(
                        "MPI_Win_set_info needs the same info on every rank: rank {} asks for \
                         {key}={}, rank {other} for {key}={}; nothing changed",
                        proposals[0].0,
                        mine.get(&key).map_or("(unset)", String::as_str),
                        theirs.get(&key).map_or("(unset)", String::as_str),
                    ),
                );
                for answer in &mut effects.answers {
                    answer.1 = Err(error.clone());
                }
            }
        }
        effects
    }

    /// Rank `rank` arrives at `collective`; `reply` is answered when it may leave.
    pub fn arrive(&mut self, collective: Collective, rank: u32, reply: R) -> Effects<R> {
        self.arrive_group(collective, rank, &[], reply)
    }

    /// As [`Collectives::arrive`], for a collective of a window over `group` (world ranks;
    /// empty: the whole world): only its members take part, and only their departures fail it.
    pub fn arrive_group(
        &mut self,
        collective: Collective,
        rank: u32,
        group: &[u32],
        reply: R,
    ) -> Effects<R> {
        let members = (!group.is_empty()).then_some(group);
        let instance = match collective {
            Collective::Barrier => {
                let Some(calls) = self.barriers.get_mut(rank as usize) else {
                    return self.arrive_at(Instance::Barrier(0), rank, reply, None);
                };
                *calls += 1;
                Instance::Barrier(*calls)
            }
            Collective::Free { window, barrier } => Instance::Free { window, barrier },
        };
        let members = match instance {
            Instance::Barrier(_) => None,
            _ => members,
        };
        self.arrive_at(instance, rank, reply, members)
    }

    /// Whether `rank` takes part: a rank of the world, and of `members` when given.
    fn member(&self, rank: u32, members: Option<&[u32]>) -> bool {
        rank < self.nranks && members.is_none_or(|members| members.contains(&rank))
    }

    /// A rank of `members` (the world when `None`) that is gone, and why.
    fn gone_member(&self, members: Option<&[u32]>) -> Option<(&u32, &String)> {
        self.gone
            .iter()
            .find(|(rank, _)| members.is_none_or(|members| members.contains(rank)))
    }

    fn arrive_at(
        &mut self,
        instance: Instance,
        rank: u32,
        reply: R,
        members: Option<&[u32]>,
    ) -> Effects<R> {
        if !self.member(rank, members) {
            let error = RmaError::new(
                ErrorClass::Rank,
                format!("rank {rank} is outside the world or the window's group"),
            );
            return Effects::answer(reply, Err(error));
        }
        if let Instance::Barrier(n) = instance {
            if let Some(error) = self.failed.get(&n) {
                return Effects::answer(reply, Err(error.clone()));
            }
        }
        let needs_all = !matches!(instance, Instance::Free { barrier: false, .. });
        if let Some((gone, reason)) = self.gone_member(members).filter(|_| needs_all) {
            let error = proc_failed(*gone, reason);
            match instance {
                Instance::Barrier(n) => {
                    self.failed.insert(n, error.clone());
                }
                Instance::SetInfo(window, n) => {
                    self.failed_infos.insert((window, n), error.clone());
                }
                Instance::Free { .. } => {}
            }
            return Effects::answer(reply, Err(error));
        }
        let arrivals = self.waiting.entry(instance).or_default();
        if arrivals.iter().any(|(arrived, _)| *arrived == rank) {
            let error = RmaError::new(
                ErrorClass::Other,
                format!("rank {rank} arrived twice at the same collective"),
            );
            return Effects::answer(reply, Err(error));
        }
        let mut effects = Effects::none();
        if needs_all {
            arrivals.push((rank, Some(reply)));
        } else {
            // a no_locks window's free returns at once
            effects.answers.push((reply, Ok(())));
            arrivals.push((rank, None));
        }
        if arrivals.len() < members.map_or(self.nranks as usize, <[u32]>::len) {
            if let Some(members) = members {
                self.groups.insert(instance, members.to_vec());
            }
            return effects;
        }
        self.groups.remove(&instance);
        let Some(arrivals) = self.waiting.remove(&instance) else {
            return effects;
        };
        if let Instance::Free { window, .. } = instance {
            effects.freed = Some(window);
        }
        for reply in arrivals.into_iter().filter_map(|(_, reply)| reply) {
            effects.answers.push((reply, Ok(())));
        }
        effects
    }
}

#[cfg(test)]
mod tests {
    use super::{Collective, Collectives, Effects};
    use crate::ErrorClass;

    fn classes(effects: &Effects<u32>) -> Vec<(u32, Option<ErrorClass>)> {
        effects
            .answers
            .iter()
            .map(|(reply, answer)| (*reply, answer.as_ref().err().map(|error| error.class)))
            .collect()
    }

    /// `MPI_Win_free` of `window` (`barrier`: whether it waits for every rank).
    fn win_free(window: u64, barrier: bool) -> Collective {
        Collective::Free { window, barrier }
    }

    /// The last of three ranks' window creations: no window, and each rank's call (answered
    /// to its rank) fails with `class`.
    #[track_caller]
    fn every_call_fails_and_nothing_is_created(last: &Effects<u32>, class: ErrorClass) {
        assert!(last.create.is_none());
        assert_eq!(
            classes(last),
            [(0, Some(class)), (1, Some(class)), (2, Some(class))]
        );
    }

    #[test]
    fn a_barrier_answers_every_rank_when_the_last_arrives() {
        let mut world = Collectives::new(3);
        assert!(classes(&world.arrive(Collective::Barrier, 0, 0)).is_empty());
        assert!(classes(&world.arrive(Collective::Barrier, 2, 2)).is_empty());
        let last = world.arrive(Collective::Barrier, 1, 1);
        assert_eq!(classes(&last), [(0, None), (2, None), (1, None)]);
        assert_eq!(last.freed, None);
    }

    #[test]
    fn a_departure_fails_the_pending_barrier_and_every_later_call_of_it() {
        let mut world = Collectives::new(3);
        world.arrive(Collective::Barrier, 0, 0);
        let failed = world.departed(2, "stream broke", true);
        assert_eq!(classes(&failed), [(0, Some(ErrorClass::ProcFailed))]);
        // rank 1's call of the same barrier fails too, naming rank 2
        let late = world.arrive(Collective::Barrier, 1, 1);
        assert_eq!(classes(&late), [(1, Some(ErrorClass::ProcFailed))]);
        assert!(late.answers[0]
            .1
            .as_ref()
            .unwrap_err()
            .message
            .contains("rank 2"));
        // while rank 2 is gone, new barriers fail; once it joined again, they complete
        assert_eq!(
            classes(&world.arrive(Collective::Barrier, 0, 0)),
            [(0, Some(ErrorClass::ProcFailed))]
        );
        world.joined(2);
        // ranks stay in step: the others' calls of the failed instances fail as well
        for rank in [1, 2, 2] {
            assert_eq!(
                classes(&world.arrive(Collective::Barrier, rank, rank)),
                [(rank, Some(ErrorClass::ProcFailed))]
            );
        }
        world.arrive(Collective::Barrier, 0, 0);
        world.arrive(Collective::Barrier, 1, 1);
        let done = world.arrive(Collective::Barrier, 2, 2);
        assert_eq!(classes(&done), [(0, None), (1, None), (2, None)]);
    }

    #[test]
    fn a_free_is_freed_by_the_last_arrival_and_a_no_locks_free_returns_at_once() {
        let mut world = Collectives::new(2);
        let free = win_free(7, true);
        assert!(world.arrive(free, 1, 1).answers.is_empty());
        let last = world.arrive(free, 0, 0);
        assert_eq!(classes(&last), [(1, None), (0, None)]);
        assert_eq!(last.freed, Some(7));

        let at_once = win_free(8, false);
        let first = world.arrive(at_once, 0, 0);
        assert_eq!((classes(&first), first.freed), (vec![(0, None)], None));
        let last = world.arrive(at_once, 1, 1);
        assert_eq!((classes(&last), last.freed), (vec![(1, None)], Some(8)));
    }

    #[test]
    fn twice_or_outside_the_world_is_refused() {
        let mut world = Collectives::new(2);
        let free = win_free(1, true);
        world.arrive(free, 0, 0);
        assert_eq!(
            classes(&world.arrive(free, 0, 9)),
            [(9, Some(ErrorClass::Other))]
        );
        assert_eq!(
            classes(&world.arrive(Collective::Barrier, 2, 2)),
            [(2, Some(ErrorClass::Rank))]
        );
    }

    #[test]
    fn a_windows_collective_waits_for_its_group_and_fails_only_by_its_members() {
        use crate::window::WindowInfo;
        let mut world = Collectives::new(4);
        // rank 3 is gone, but it is not in the window's group {2, 0}
        world.departed(3, "stream broke", true);
        let free = win_free(9, true);
        let group = [2, 0];
        assert!(classes(&world.arrive_group(free, 2, &group, 2)).is_empty());
        // a rank outside the group cannot take part
        assert_eq!(
            classes(&world.arrive_group(free, 1, &group, 1)),
            [(1, Some(ErrorClass::Rank))]
        );
        let last = world.arrive_group(free, 0, &group, 0);
        assert_eq!(classes(&last), [(2, None), (0, None)]);
        assert_eq!(last.freed, Some(9));
        // set_info over the group completes with two calls
        world.propose_info(8, 0, WindowInfo::default(), &group, 0);
        let done = world.propose_info(8, 2, WindowInfo::default(), &group, 2);
        assert_eq!(done.info_set, Some((8, WindowInfo::default())));
        // a member's departure fails it; another rank's does not
        world.arrive_group(free, 2, &group, 2);
        world.joined(3);
        assert!(classes(&world.departed(1, "stream broke", false)).is_empty());
        let failed = world.departed(0, "stream broke", true);
        assert_eq!(classes(&failed), [(2, Some(ErrorClass::ProcFailed))]);
    }

    #[test]
    fn set_info_completes_when_every_rank_asked_for_the_same_info() {
        use crate::window::WindowInfo;
        let mut world = Collectives::new(2);
        let same_op = WindowInfo::parse([("accumulate_ops", "same_op")]).unwrap();
        let first = world.propose_info(5, 1, same_op.clone(), &[], 1);
        assert!(first.answers.is_empty());
        let last = world.propose_info(5, 0, same_op.clone(), &[], 0);
        assert_eq!(classes(&last), [(1, None), (0, None)]);
        assert_eq!(last.info_set, Some((5, same_op.clone())));

        // different info: every rank's call fails, naming the key; nothing is set
        world.propose_info(5, 0, same_op, &[], 0);
        let other = WindowInfo::parse([("accumulate_ops", "same_op_no_op")]).unwrap();
        let last = world.propose_info(5, 1, other, &[], 1);
        assert_eq!(
            classes(&last),
            [(0, Some(ErrorClass::Info)), (1, Some(ErrorClass::Info))]
        );
        assert_eq!(last.info_set, None);
        assert!(last.answers[0]
            .1
            .as_ref()
            .unwrap_err()
            .message
            .contains("accumulate_ops"));

        // a departure fails a pending set_info, and what was asked is forgotten; the departed
        // rank's call of that instance fails too, so the ranks stay in step
        world.propose_info(5, 0, WindowInfo::default(), &[], 0);
        let failed = world.departed(1, "stream broke", false);
        assert_eq!(classes(&failed), [(0, Some(ErrorClass::ProcFailed))]);
        let late = world.propose_info(5, 1, WindowInfo::default(), &[], 1);
        assert_eq!(classes(&late), [(1, Some(ErrorClass::ProcFailed))]);
        world.propose_info(5, 1, WindowInfo::default(), &[], 1);
        let done = world.propose_info(5, 0, WindowInfo::default(), &[], 0);
        assert_eq!(done.info_set, Some((5, WindowInfo::default())));
    }

    /// A rank that calls set_info twice before the others call it once meets their first call
    /// with its first and their second with its second, as MPI matches collectives in order.
    #[test]
    fn pipelined_set_infos_are_matched_in_call_order() {
        use crate::window::WindowInfo;
        let mut world = Collectives::new(2);
        let same_op = WindowInfo::parse([("accumulate_ops", "same_op")]).unwrap();
        let no_op = WindowInfo::parse([("accumulate_ops", "same_op_no_op")]).unwrap();
        assert!(classes(&world.propose_info(5, 0, same_op.clone(), &[], 10)).is_empty());
        assert!(classes(&world.propose_info(5, 0, no_op.clone(), &[], 11)).is_empty());
        let first = world.propose_info(5, 1, same_op.clone(), &[], 20);
        assert_eq!(classes(&first), [(10, None), (20, None)]);
        assert_eq!(first.info_set, Some((5, same_op)));
        let second = world.propose_info(5, 1, no_op.clone(), &[], 21);
        assert_eq!(classes(&second), [(11, None), (21, None)]);
        assert_eq!(second.info_set, Some((5, no_op)));
        // another window counts its own calls
        world.propose_info(6, 1, WindowInfo::default(), &[], 30);
        let other = world.propose_info(6, 0, WindowInfo::default(), &[], 31);
        assert_eq!(other.info_set, Some((6, WindowInfo::default())));
    }

    #[test]
    fn ranks_create_a_window_together_each_with_its_own_size() {
        use super::{SharedArgs, WindowPart};
        use crate::window::{Flavor, MemoryModel};
        let shared = SharedArgs {
            flavor: Flavor::Allocate,
            model: MemoryModel::Separate,
            info: vec![("no_locks".into(), "true".into())],
        };
        let part = |size, disp_unit| WindowPart {
            size,
            disp_unit,
            shared: shared.clone(),
        };
        let mut world = Collectives::new(3);
        assert!(world
            .propose_window("w", 2, &[], part(0, 8), 2)
            .create
            .is_none());
        assert!(world
            .propose_window("w", 0, &[], part(16, 8), 0)
            .create
            .is_none());
        let last = world.propose_window("w", 1, &[], part(8, 4), 1);
        let creation = last.create.expect("every rank called");
        assert_eq!(creation.sizes, vec![16, 8, 0]);
        assert_eq!(creation.disp_units, vec![8, 4, 8]);
        assert_eq!(creation.replies, vec![0, 1, 2]);
        assert!(last.answers.is_empty(), "answered once created");

        // another info on one rank: every call fails with MPI_ERR_INFO, nothing to create
        world.propose_window("v", 0, &[], part(8, 1), 0);
        world.propose_window("v", 1, &[], part(8, 1), 1);
        let mut other = part(8, 1);
        other.shared.info.clear();
        let last = world.propose_window("v", 2, &[], other, 2);
        every_call_fails_and_nothing_is_created(&last, ErrorClass::Info);

        // calls match by order: another name on one rank fails every rank's call
        world.propose_window("t", 0, &[], part(8, 1), 0);
        world.propose_window("t", 1, &[], part(8, 1), 1);
        let last = world.propose_window("s", 2, &[], part(8, 1), 2);
        every_call_fails_and_nothing_is_created(&last, ErrorClass::Arg);

        // a departure fails the ranks waiting to create, and the others' calls of that
        // instance too, so that the ranks stay in step
        world.propose_window("u", 0, &[], part(8, 1), 0);
        let failed = world.departed(1, "stream broke", false);
        assert_eq!(classes(&failed), [(0, Some(ErrorClass::ProcFailed))]);
        assert_eq!(
            classes(&world.propose_window("u", 2, &[], part(8, 1), 2)),
            [(2, Some(ErrorClass::ProcFailed))]
        );
        world.propose_window("u", 1, &[], part(8, 1), 1);
        world.propose_window("u", 0, &[], part(8, 1), 0);
        world.propose_window("u", 1, &[], part(8, 1), 1);
        let done = world.propose_window("u", 2, &[], part(8, 1), 2);
        assert_eq!(
            done.create.map(|creation| creation.name),
            Some("u".to_string())
        );
    }

    #[test]
    fn members_of_a_group_create_its_window_without_the_other_ranks() {
        use super::{SharedArgs, WindowPart};
        use crate::window::{Flavor, MemoryModel};
        let part = |size| WindowPart {
            size,
            disp_unit: 1,
            shared: SharedArgs {
                flavor: Flavor::Allocate,
                model: MemoryModel::Separate,
                info: Vec::new(),
            },
        };
        let mut world = Collectives::new(4);
        // rank 0 waits for a window over the whole world meanwhile: a separate instance
        assert!(world
            .propose_window("all", 0, &[], part(1), 0)
            .create
            .is_none());
        // the group's members, in window-rank order 3, 1
        assert!(world
            .propose_window("g", 1, &[3, 1], part(8), 1)
            .create
            .is_none());
        let done = world.propose_window("g", 3, &[3, 1], part(16), 3);
        let creation = done.create.expect("both members called");
        assert_eq!(creation.group, vec![3, 1]);
        assert_eq!(creation.sizes, vec![16, 8], "window rank 0 is world rank 3");
        assert_eq!(creation.replies, vec![3, 1]);

        // a caller outside its group, or a bad group: that call alone fails with GROUP
        assert_eq!(
            classes(&world.propose_window("h", 2, &[3, 1], part(1), 2)),
            [(2, Some(ErrorClass::Group))]
        );
        assert_eq!(
            classes(&world.propose_window("h", 2, &[2, 2], part(1), 2)),
            [(2, Some(ErrorClass::Group))]
        );
        assert_eq!(
            classes(&world.propose_window("h", 2, &[2, 9], part(1), 2)),
            [(2, Some(ErrorClass::Group))]
        );

        // a departure outside the group leaves its creation waiting; a member's fails it
        world.propose_window("k", 1, &[1, 3], part(1), 1);
        let failed = world.departed(2, "stream broke", false);
        assert_eq!(
            classes(&failed),
            [(0, Some(ErrorClass::ProcFailed))],
            "only the whole world's creation needed rank 2"
        );
        let failed = world.departed(3, "stream broke", false);
        assert_eq!(classes(&failed), [(1, Some(ErrorClass::ProcFailed))]);
    }
}
