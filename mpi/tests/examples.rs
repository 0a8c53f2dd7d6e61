//! The seed documents' examples as C programs (`examples/mpi/`), built by the system's MPICH
//! `mpicc` and run under `onesided mpiexec`: each checks what MPI guarantees and that the value
//! MPI leaves obsolete is the one onesided gives; the racy one is caught by `--check`.

mod common;

use std::path::{Path, PathBuf};

use common::{mpicc, mpiexec, mpiexec_with};

fn example(file: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/mpi");
    let name = format!("example-{}", file.trim_end_matches(".c"));
    mpicc(&name, &[dir.join(file)], &["-Wall"])
}

#[test]
fn the_five_forum_examples_give_the_outcomes_semantics_works_out() {
    for (file, says) in [
        (
            "forum1_unlock_publishes.c",
            "forum1: X = 42 (guaranteed), Y = 0 (the obsolete value)",
        ),
        (
            "forum2_lock_pulls.c",
            "forum2: without lock 0 (the obsolete value), after lock 42 (guaranteed)",
        ),
        (
            "forum3_store_before_shared_lock.c",
            "forum3: store before shared lock 0 (the obsolete value), with win_sync 8",
        ),
        (
            "forum4_store_in_pscw.c",
            "forum4: Y = 11 (guaranteed), X = 0 (the obsolete value), Z = 33",
        ),
        (
            "forum5_load_in_pscw.c",
            "forum5: load in the epoch 0 (the obsolete value), get from itself 42 and load \
             after wait 42",
        ),
    ] {
        let run = mpiexec(2, &example(file), &[]);
        assert!(run.status.success(), "{file}: {run:?}");
        assert!(run.stdout.contains(says), "{file}: {run:?}");
    }
}

#[test]
fn fences_follow_the_rules_of_the_mpiwg_rma_thread() {
    let run = mpiexec(2, &example("fence_semantics.c"), &[]);
    assert!(run.status.success(), "{run:?}");
    assert!(
        run.stdout
            .contains("fence: 5, 9 and 3 as the rules guarantee"),
        "{run:?}"
    );
}

#[test]
fn check_names_the_ranks_and_calls_of_the_race_and_nothing_once_a_message_orders_them() {
    let program = example("race_broken.c");
    let run = mpiexec_with(3, &program, &[], &["--check"]);
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    assert!(run.stdout.contains("put_put"), "{run:?}");
    assert!(
        run.stdout.contains("rank 1 put") && run.stdout.contains("rank 2 put"),
        "{run:?}"
    );
    let run = mpiexec_with(3, &program, &["ordered"], &["--check"]);
    assert!(run.status.success(), "{run:?}");
    assert!(run.stdout.contains("no findings"), "{run:?}");
}
