//! A linearizability checker for one `i64` register driven by `MPI_Fetch_and_op` (sum,
//! replace) and `MPI_Compare_and_swap`.
//!
//! A history is a set of completed [`Operation`]s, each with the instant it was invoked, the
//! instant its result arrived (any monotonic clock, in any unit) and the value it returned —
//! for all three kinds the register's value just before the operation took effect. [`check`]
//! searches for a linearization: one total order that respects real time (an operation that
//! returned before another was invoked comes first) and in which the sequential register,
//! started at the initial value, returns every observed value. This is Wing & Gong's search with
//! Lowe's memoization of visited configurations (the set of operations linearized so far and the
//! register's value), done with an explicit stack so that histories of tens of thousands of
//! operations do not recurse.
//!
//! Two facts keep it fast:
//! - the sequential register is deterministic and every operation returns the old value, so at
//!   each step only the pending operations whose observed value equals the current value can
//!   come next;
//! - a candidate that leaves the value unchanged (a failed CAS, a sum of 0, a replace by the same
//!   value) can always be taken at once: nothing still pending returned before it was invoked,
//!   so moving it to the front of any valid continuation keeps that continuation valid. Such
//!   moves are never revisited, which removes the 2^k orders of k concurrent failed CASes.
//!
//! Instants that tie (one operation returns at the instant another is invoked) count as
//! concurrent: the clock's resolution must not make a valid history fail.
//!
//! This module is pure: no I/O, no clock of its own. Callers record instants and results.

use std::collections::HashSet;

/// What one operation does to the register. Every kind returns the value it found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisterOp {
    /// `fetch_and_op(sum, d)`: the value becomes `old + d` (wrapping, as `MPI_SUM` on `i64`).
    Sum(i64),
    /// `fetch_and_op(replace, v)`: the value becomes `v`.
    Replace(i64),
    /// `compare_and_swap(compare, new)`: the value becomes `new` iff `old == compare`.
    CompareAndSwap {
        /// The value compared with.
        compare: i64,
        /// The value stored when the comparison holds.
        new: i64,
    },
}

impl RegisterOp {
    /// The register's value after this operation finds `old`.
    pub fn apply(self, old: i64) -> i64 {
        match self {
            RegisterOp::Sum(delta) => old.wrapping_add(delta),
            RegisterOp::Replace(value) => value,
            RegisterOp::CompareAndSwap { compare, new } => {
                if old == compare {
                    new
                } else {
                    old
                }
            }
        }
    }
}

/// One completed operation of a history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operation {
    /// What it did.
    pub op: RegisterOp,
    /// When it was invoked (before the call was made).
    pub invoked: u64,
    /// When its result was known (after the value arrived); not before `invoked`.
    pub returned: u64,
    /// The value it returned: the register's value just before it.
    pub observed: i64,
}

/// A valid order of a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Linearization {
    /// Indices into the checked history, in linearization order.
    pub order: Vec<usize>,
    /// The register's value after the last operation.
    pub final_value: i64,
}

/// Why a history was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// An operation whose result came before its invocation.
    #[error("operation {index} returned at {returned}, before it was invoked at {invoked}")]
    ReturnedBeforeInvoked {
        /// Its index in the history.
        index: usize,
        /// When it was invoked.
        invoked: u64,
        /// When it returned.
        returned: u64,
    },
    /// No order respects real time and the register's results.
    #[error(
        "not linearizable: at most {linearized} operations could be ordered; \
         operation {blocking} (returned at {blocking_returned}) could not be placed after them"
    )]
    NotLinearizable {
        /// The longest prefix of a linearization the search found.
        linearized: usize,
        /// At the end of that prefix: the pending operation that returned first — it must come
        /// next or earlier, and its observed value was not available.
        blocking: usize,
        /// When `blocking` returned.
        blocking_returned: u64,
    },
}

/// A set of operations as a bit per position in invocation order.
#[derive(Debug)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(len: usize) -> Self {
        Bits(vec![0; len.div_ceil(64)])
    }

    fn get(&self, at: usize) -> bool {
        self.0[at / 64] & (1 << (at % 64)) != 0
    }

    fn set(&mut self, at: usize, on: bool) {
        if on {
            self.0[at / 64] |= 1 << (at % 64);
        } else {
            self.0[at / 64] &= !(1 << (at % 64));
        }
    }
}

/// A visited configuration: every position below `frontier` is linearized, `words` are the
/// bits from word `frontier / 64` up to the last linearized position, and `value` the register.
type Configuration = (usize, Box<[u64]>, i64);

/// One step of the current path.
#[derive(Debug)]
struct Step {
    /// The position (in invocation order) that was linearized.
    position: usize,
    /// The register's value before it.
    before: i64,
    /// Taken without alternatives (it left the value unchanged): backtracking skips past it.
    forced: bool,
}

/// The search's state: the operations linearized so far and the register's value.
#[derive(Debug)]
struct Search<'a> {
    history: &'a [Operation],
    /// History indices sorted by invocation.
    by_invocation: Vec<usize>,
    /// Positions (in `by_invocation`) sorted by return.
    by_return: Vec<usize>,
    /// For each position, its rank in `by_return`.
    return_rank: Vec<usize>,
    /// Linearized positions.
    done: Bits,
    done_count: usize,
    /// The first position not linearized.
    frontier: usize,
    /// The first rank in `by_return` whose position is not linearized.
    return_frontier: usize,
    value: i64,
}

impl Search<'_> {
    fn op(&self, position: usize) -> &Operation {
        &self.history[self.by_invocation[position]]
    }

    /// The earliest return among pending operations (`None` when all are linearized).
    fn earliest_pending_return(&self) -> Option<usize> {
        self.by_return.get(self.return_frontier).copied()
    }

    fn mark(&mut self, position: usize) {
        self.done.set(position, true);
        self.done_count += 1;
        while self.frontier < self.by_invocation.len() && self.done.get(self.frontier) {
            self.frontier += 1;
        }
        while self.return_frontier < self.by_return.len()
            && self.done.get(self.by_return[self.return_frontier])
        {
            self.return_frontier += 1;
        }
    }

    fn unmark(&mut self, position: usize) {
        self.done.set(position, false);
        self.done_count -= 1;
        self.frontier = self.frontier.min(position);
        self.return_frontier = self.return_frontier.min(self.return_rank[position]);
    }

    fn configuration(&self) -> Configuration {
        let first_word = self.frontier / 64;
        // every position below first_word * 64 is linearized; the others are in the words
        let mut remaining = self.done_count - first_word * 64;
        let mut words = Vec::new();
        for &word in &self.done.0[first_word..] {
            if remaining == 0 {
                break;
            }
            words.push(word);
            remaining -= word.count_ones() as usize;
        }
        (self.frontier, words.into_boxed_slice(), self.value)
    }

    /// The next position at or after `from` that may come next: invoked no later than the
    /// earliest pending return, pending, and having observed the current value. With
    /// `unchanging`, only those that leave the value as it is.
    fn candidate(&self, from: usize, unchanging: bool) -> Option<usize> {
        let deadline = self.op(self.earliest_pending_return()?).returned;
        let mut position = from.max(self.frontier);
        while position < self.by_invocation.len() {
            let op = self.op(position);
            if op.invoked > deadline {
                return None;
            }
            let fits = !self.done.get(position)
                && op.observed == self.value
                && (!unchanging || op.op.apply(self.value) == self.value);
            if fits {
                return Some(position);
            }
            position += 1;
        }
        None
    }
}

/// Searches for a linearization of `history` from a register holding `initial`.
///
/// # Errors
/// [`Rejection::ReturnedBeforeInvoked`] for a malformed operation;
/// [`Rejection::NotLinearizable`] when no valid order exists.
pub fn check(initial: i64, history: &[Operation]) -> Result<Linearization, Rejection> {
    for (index, op) in history.iter().enumerate() {
        if op.returned < op.invoked {
            return Err(Rejection::ReturnedBeforeInvoked {
                index,
                invoked: op.invoked,
                returned: op.returned,
            });
        }
    }
    let mut by_invocation: Vec<usize> = (0..history.len()).collect();
    by_invocation.sort_by_key(|&index| (history[index].invoked, index));
    let mut by_return: Vec<usize> = (0..history.len()).collect();
    by_return.sort_by_key(|&position| (history[by_invocation[position]].returned, position));
    let mut return_rank = vec![0; history.len()];
    for (rank, &position) in by_return.iter().enumerate() {
        return_rank[position] = rank;
    }
    let mut search = Search {
        history,
        by_invocation,
        by_return,
        return_rank,
        done: Bits::new(history.len()),
        done_count: 0,
        frontier: 0,
        return_frontier: 0,
        value: initial,
    };
    let mut visited: HashSet<Configuration> = HashSet::new();
    let mut path: Vec<Step> = Vec::with_capacity(history.len());
    // the deepest dead end, for the rejection: (linearized, blocking position)
    let mut deepest: Option<(usize, usize)> = None;
    // where the scan for the next alternative resumes at the current configuration
    let mut resume = 0;

    loop {
        if search.done_count == history.len() {
            let order = path
                .iter()
                .map(|step| search.by_invocation[step.position])
                .collect();
            return Ok(Linearization {
                order,
                final_value: search.value,
            });
        }
        let forced = search.candidate(0, true);
        let next = match forced {
            Some(position) => Some(position),
            None => search.candidate(resume, false),
        };
        let mut advanced = false;
        let mut scan = next;
        while let Some(position) = scan {
            let before = search.value;
            search.value = search.op(position).op.apply(before);
            search.mark(position);
            if visited.insert(search.configuration()) {
                path.push(Step {
                    position,
                    before,
                    forced: forced.is_some(),
                });
                advanced = true;
                break;
            }
            search.unmark(position);
            search.value = before;
            // a forced move into a visited configuration leaves nothing else to try here
            scan = match forced {
                Some(_) => None,
                None => search.candidate(position + 1, false),
            };
        }
        if advanced {
            resume = 0;
            continue;
        }
        // a dead end: note it, then undo steps until one has an alternative left
        let blocking = search
            .earliest_pending_return()
            .expect("a dead end has a pending operation");
        if deepest.is_none_or(|(linearized, _)| search.done_count > linearized) {
            deepest = Some((search.done_count, blocking));
        }
        loop {
            let Some(step) = path.pop() else {
                let (linearized, blocking) = deepest.expect("a dead end was noted");
                return Err(Rejection::NotLinearizable {
                    linearized,
                    blocking: search.by_invocation[blocking],
                    blocking_returned: search.op(blocking).returned,
                });
            };
            search.unmark(step.position);
            search.value = step.before;
            if !step.forced {
                resume = step.position + 1;
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn op(op: RegisterOp, invoked: u64, returned: u64, observed: i64) -> Operation {
        Operation {
            op,
            invoked,
            returned,
            observed,
        }
    }

    fn cas(compare: i64, new: i64) -> RegisterOp {
        RegisterOp::CompareAndSwap { compare, new }
    }

    fn refused(initial: i64, history: &[Operation]) -> bool {
        matches!(
            check(initial, history),
            Err(Rejection::NotLinearizable { .. })
        )
    }

    #[test]
    fn the_empty_history_ends_where_it_starts() {
        let found = check(7, &[]).unwrap();
        assert_eq!(found.order, Vec::<usize>::new());
        assert_eq!(found.final_value, 7);
    }

    #[test]
    fn a_sequential_history_is_accepted_in_its_order() {
        let history = [
            op(RegisterOp::Sum(5), 0, 1, 0),
            op(RegisterOp::Replace(9), 2, 3, 5),
            op(cas(9, 4), 4, 5, 9),
            op(cas(9, 1), 6, 7, 4),
            op(RegisterOp::Sum(-2), 8, 9, 4),
        ];
        let found = check(0, &history).unwrap();
        assert_eq!(found.order, vec![0, 1, 2, 3, 4]);
        assert_eq!(found.final_value, 2);
    }

    #[test]
    fn overlapping_operations_may_take_effect_in_either_order() {
        // the later-invoked sum took effect first; the CAS overlaps both and saw the first sum
        let history = [
            op(RegisterOp::Sum(1), 0, 10, 2),
            op(RegisterOp::Sum(2), 1, 5, 0),
            op(cas(3, 8), 2, 12, 3),
        ];
        let found = check(0, &history).unwrap();
        assert_eq!(found.order, vec![1, 0, 2]);
        assert_eq!(found.final_value, 8);
    }

    #[test]
    fn an_operation_invoked_as_another_returns_counts_as_concurrent() {
        let history = [
            op(RegisterOp::Sum(1), 0, 5, 1),
            op(RegisterOp::Replace(1), 5, 9, 0),
        ];
        assert_eq!(check(0, &history).unwrap().order, vec![1, 0]);
    }

    #[test]
    fn a_stale_read_after_a_completed_write_is_refused() {
        // the replace finished before the sum began, yet the sum saw the old value
        let history = [
            op(RegisterOp::Replace(5), 0, 1, 0),
            op(RegisterOp::Sum(0), 2, 3, 0),
        ];
        assert!(refused(0, &history));
        // the same two overlapping are fine
        let overlapping = [
            op(RegisterOp::Replace(5), 0, 3, 0),
            op(RegisterOp::Sum(0), 2, 4, 0),
        ];
        assert_eq!(check(0, &overlapping).unwrap().order, vec![1, 0]);
    }

    #[test]
    fn two_fetch_and_ops_returning_the_same_old_value_are_refused() {
        let history = [
            op(RegisterOp::Sum(1), 0, 10, 0),
            op(RegisterOp::Sum(1), 1, 11, 0),
        ];
        let rejection = check(0, &history).unwrap_err();
        assert_eq!(
            rejection,
            Rejection::NotLinearizable {
                linearized: 1,
                blocking: 1,
                blocking_returned: 11
            }
        );
    }

    #[test]
    fn a_cas_success_that_no_order_allows_is_refused() {
        // both CASes claim to have found 0 and swapped; only one of them can have
        let both_won = [op(cas(0, 1), 0, 10, 0), op(cas(0, 2), 0, 10, 0)];
        assert!(refused(0, &both_won));
        // a CAS that found 0 after a sum of 3 had completed: no order gives it 0
        let after_sum = [
            op(RegisterOp::Sum(3), 0, 1, 0),
            op(cas(0, 5), 2, 6, 0),
            op(RegisterOp::Sum(1), 3, 7, 5),
        ];
        assert!(refused(0, &after_sum));
    }

    #[test]
    fn a_value_written_back_allows_a_repeated_observation() {
        // 0 -> 1 (sum), 1 -> 0 (replace), then a second sum sees 0 again
        let history = [
            op(RegisterOp::Sum(1), 0, 10, 0),
            op(RegisterOp::Sum(1), 0, 10, 0),
            op(RegisterOp::Replace(0), 0, 10, 1),
        ];
        let found = check(0, &history).unwrap();
        assert_eq!(found.final_value, 1);
        assert_eq!(found.order.len(), 3);
        assert_eq!(found.order[1], 2);
    }

    #[test]
    fn a_wrong_guess_is_undone() {
        // both sums saw 0; the search tries the sum of 7 first (invoked first), runs into a
        // dead end after the sum of 1 and has to back out to the sum of 4 / replace order
        let history = [
            op(RegisterOp::Sum(7), 0, 20, 0),
            op(RegisterOp::Sum(4), 1, 20, 0),
            op(RegisterOp::Replace(0), 2, 20, 4),
            op(RegisterOp::Sum(1), 3, 4, 7),
        ];
        let found = check(0, &history).unwrap();
        assert_eq!(found.order, vec![1, 2, 0, 3]);
        assert_eq!(found.final_value, 8);
        // with the replace invoked after the sum of 1 returned, nothing works
        let impossible = [
            op(RegisterOp::Sum(7), 0, 20, 0),
            op(RegisterOp::Sum(4), 1, 20, 0),
            op(RegisterOp::Replace(0), 5, 20, 4),
            op(RegisterOp::Sum(1), 3, 4, 7),
        ];
        assert!(refused(0, &impossible));
    }

    #[test]
    fn a_result_before_its_invocation_is_malformed() {
        let history = [op(RegisterOp::Sum(1), 5, 4, 0)];
        assert_eq!(
            check(0, &history),
            Err(Rejection::ReturnedBeforeInvoked {
                index: 0,
                invoked: 5,
                returned: 4
            })
        );
    }

    #[test]
    fn many_concurrent_failed_cases_do_not_explode() {
        // 60 failed CASes all concurrent with the rest: 2^60 subsets of them if each were a
        // choice; taken as forced moves they cost one step each
        let mut history: Vec<Operation> = (0..60).map(|i| op(cas(-1, i), 0, 100, 0)).collect();
        history.push(op(RegisterOp::Sum(1), 0, 100, 0));
        history.push(op(cas(-1, 0), 0, 100, 1));
        assert_eq!(check(0, &history).unwrap().final_value, 1);
        // and refusing means exhausting the search: two sums that both saw 0
        history.pop();
        history.push(op(RegisterOp::Sum(1), 0, 100, 0));
        assert!(refused(0, &history));
    }

    /// 64 clients, 1000 operations each, one pending per client, linearization points at
    /// random inside their intervals: the shape of the server test, without a server.
    #[test]
    fn sixty_four_thousand_concurrent_operations_are_checked_quickly() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let clients = 64;
        let per_client = 1000;
        // each client's ops occupy consecutive slots of its own timeline; the point where an
        // op takes effect is drawn inside its interval
        let mut points = Vec::new();
        let mut clocks = vec![0u64; clients];
        for _ in 0..per_client {
            for clock in clocks.iter_mut() {
                let invoked = *clock + next() % 50;
                let returned = invoked + 1 + next() % 400;
                let point = invoked + next() % (returned - invoked + 1);
                let kind = match next() % 3 {
                    0 => RegisterOp::Sum((next() % 100) as i64 - 50),
                    1 => RegisterOp::Replace((next() % 100) as i64),
                    _ => cas((next() % 4) as i64, (next() % 100) as i64),
                };
                points.push((point, invoked, returned, kind));
                *clock = returned;
            }
        }
        points.sort_by_key(|&(point, ..)| point);
        let mut value = 0;
        let mut history = Vec::new();
        for (_, invoked, returned, kind) in points {
            history.push(op(kind, invoked, returned, value));
            value = kind.apply(value);
        }
        let found = check(0, &history).unwrap();
        assert_eq!(found.final_value, value);
        assert_eq!(found.order.len(), clients * per_client);
        // one result that no register could give, half-way through: refused, in reasonable time
        let middle = history.len() / 2;
        history[middle].observed = i64::MIN;
        let Err(Rejection::NotLinearizable { linearized, .. }) = check(0, &history) else {
            panic!("a history with an impossible result was accepted");
        };
        assert!(linearized < history.len());
    }

    fn register_op() -> impl Strategy<Value = RegisterOp> {
        prop_oneof![
            (-3i64..4).prop_map(RegisterOp::Sum),
            (0i64..4).prop_map(RegisterOp::Replace),
            (0i64..4, 0i64..4).prop_map(|(compare, new)| cas(compare, new)),
        ]
    }

    /// Operations taking effect in a sequence, each interval stretched around its point.
    fn concurrent_history() -> impl Strategy<Value = (Vec<Operation>, i64)> {
        proptest::collection::vec((register_op(), 0u64..20, 0u64..20), 0..40).prop_map(|ops| {
            let mut value = 0;
            let mut history = Vec::new();
            for (point, (kind, before, after)) in ops.into_iter().enumerate() {
                let point = 100 + 10 * point as u64;
                history.push(op(kind, point - before * 5, point + after * 5, value));
                value = kind.apply(value);
            }
            (history, value)
        })
    }

    proptest! {
        #[test]
        fn a_history_with_linearization_points_is_accepted((history, value) in concurrent_history()) {
            let found = check(0, &history).unwrap();
            prop_assert_eq!(found.final_value, value);
            // the order found is itself a valid sequential run
            let mut replayed = 0;
            for &index in &found.order {
                prop_assert_eq!(history[index].observed, replayed);
                replayed = history[index].op.apply(replayed);
            }
        }

        #[test]
        fn a_wrong_result_in_a_sequential_history_is_refused(
            ops in proptest::collection::vec(register_op(), 1..30),
            wrong in any::<prop::sample::Index>(),
            offset in 1i64..5,
        ) {
            // one after the other: the order is forced, so any other result is impossible
            let mut value = 0;
            let mut history = Vec::new();
            for (at, kind) in ops.into_iter().enumerate() {
                let at = 2 * at as u64;
                history.push(op(kind, at, at + 1, value));
                value = kind.apply(value);
            }
            let wrong = wrong.index(history.len());
            history[wrong].observed += offset;
            prop_assert!(refused(0, &history));
        }
    }
}
