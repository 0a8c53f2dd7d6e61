//! Linearizability of fetch-and-op and compare-and-swap on one element: 64 sessions hammer
//! rank 0's element 0 concurrently, every call timed from before it is issued to after its
//! value arrives, and the history goes through `onesided_test_support::linearizable::check`.

use std::time::Instant;

use onesided_client::{LockType, Op, WindowSpec};
use onesided_test_support::linearizable::{check, Operation, RegisterOp};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use onesided_server::audit::Durability;

use crate::{ranks, spawn_server_with, unique, Fixture};

const CLIENTS: u32 = 64;
const OPS_PER_CLIENT: usize = 1000;

/// What one client did: its history and how many of its CASes swapped.
struct ClientRun {
    history: Vec<Operation>,
    swaps: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_clients_of_mixed_fetch_and_op_and_cas_are_linearizable() {
    // a new seed each run, printed; ONESIDED_TEST_SEED=N runs seed N again
    let seed: u64 = match std::env::var("ONESIDED_TEST_SEED") {
        Ok(text) => text.parse().expect("ONESIDED_TEST_SEED is a number"),
        Err(_) => rand::random(),
    };
    eprintln!("linearizable: seed {seed} (ONESIDED_TEST_SEED={seed} repeats it)");
    // the audit log is recorded in the background: with every answer waiting for its SQLite
    // commit the 128 000 calls take over a minute in a debug build on 2 cores
    let server = spawn_server_with(|config| config.durability = Durability::Async).await;
    let fixture = Fixture::on(server, CLIENTS).await;
    let windows = fixture
        .window(WindowSpec::of::<i64>(&unique("w"), CLIENTS, 1))
        .await;
    let origin = Instant::now();
    let runs = ranks(windows, move |rank, w| async move {
        let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(rank) << 32));
        let ticks = |at: Instant| at.duration_since(origin).as_nanos() as u64;
        // the value this client last left behind: a CAS comparing with it swaps when no other
        // client came in between
        let mut left = 0i64;
        let mut history = Vec::with_capacity(OPS_PER_CLIENT);
        let mut swaps = 0;
        w.lock_all(0).await.unwrap();
        for _ in 0..OPS_PER_CLIENT {
            let op = match rng.random_range(0..10) {
                0..4 => RegisterOp::Sum(rng.random_range(-1000..=1000)),
                4..6 => RegisterOp::Replace(rng.random_range(0..64)),
                _ => RegisterOp::CompareAndSwap {
                    compare: if rng.random_bool(0.8) {
                        left
                    } else {
                        rng.random_range(0..64)
                    },
                    new: rng.random_range(-5000..5000),
                },
            };
            let invoked = ticks(Instant::now());
            let pending = match op {
                RegisterOp::Sum(delta) => w.fetch_and_op(0, 0, delta, Op::Sum),
                RegisterOp::Replace(value) => w.fetch_and_op(0, 0, value, Op::Replace),
                RegisterOp::CompareAndSwap { compare, new } => {
                    w.compare_and_swap(0, 0, compare, new)
                }
            }
            .unwrap();
            w.flush(0).await.unwrap();
            let observed = pending.value().await.unwrap();
            let returned = ticks(Instant::now());
            if let RegisterOp::CompareAndSwap { compare, .. } = op {
                swaps += usize::from(observed == compare);
            }
            left = op.apply(observed);
            history.push(Operation {
                op,
                invoked,
                returned,
                observed,
            });
        }
        w.unlock_all().await.unwrap();
        w.session().barrier().await.unwrap();
        let last = if rank == 0 {
            w.lock(LockType::Shared, 0, 0).await.unwrap();
            let value = w.get::<i64>(0, 0, 1).unwrap();
            w.unlock(0).await.unwrap();
            Some(value.value().await.unwrap()[0])
        } else {
            None
        };
        (ClientRun { history, swaps }, last)
    })
    .await;
    let final_value = runs[0].1.expect("rank 0 read the element");
    let swaps: usize = runs.iter().map(|(run, _)| run.swaps).sum();
    let history: Vec<Operation> = runs.into_iter().flat_map(|(run, _)| run.history).collect();
    // successful swaps are part of what is checked: a run without any checks less
    assert!(swaps > 0, "seed {seed}: no compare-and-swap succeeded");
    let checked = Instant::now();
    let linearization = match check(0, &history) {
        Ok(found) => found,
        Err(why) => panic!("seed {seed}: {why}"),
    };
    eprintln!(
        "linearizable: {} operations, {swaps} CAS swaps, checked in {:?}",
        history.len(),
        checked.elapsed()
    );
    assert_eq!(
        linearization.final_value, final_value,
        "seed {seed}: the element does not hold what the linearization ends with"
    );
}
