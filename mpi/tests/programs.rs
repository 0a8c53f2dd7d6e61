//! MPI programs of our own (`tests/programs/*.c`), built by the system's MPICH `mpicc` and run
//! under `onesided mpiexec` with this crate's libmpich.so.12 — the binaries and the library
//! `cargo test --workspace` builds into the target directory.

mod common;

use std::path::Path;

use common::{build, mpiexec, mpiexec_with, Run};

/// Builds `tests/programs/<name>.c` and runs it on each number of ranks in `ranks`: every run
/// succeeds and prints `<name>: ok`.
#[track_caller]
fn passes_on(name: &str, ranks: &[u32]) {
    let program = build(&format!("{name}.c"));
    let ok = format!("{name}: ok");
    for &n in ranks {
        let run = mpiexec(n, &program, &[]);
        assert!(run.status.success(), "-n {n}: {run:?}");
        assert!(run.stdout.contains(&ok), "-n {n}: {run:?}");
    }
}

/// Runs `program` with `args` on `n` ranks: the job ends with status `code`, its stderr saying
/// `says`.
#[track_caller]
fn ends_the_job(n: u32, program: &Path, args: &[&str], code: i32, says: &str) -> Run {
    let run = mpiexec(n, program, args);
    assert_eq!(run.status.code(), Some(code), "{run:?}");
    assert!(run.stderr.contains(says), "{run:?}");
    run
}

/// The programs that pass as they are: each test builds `tests/programs/<program>.c` and runs
/// it on each number of ranks listed ([`passes_on`]).
macro_rules! passing_programs {
    ($($test:ident: $program:literal on $ranks:expr;)*) => {$(
        #[test]
        fn $test() {
            passes_on($program, &$ranks);
        }
    )*};
}

passing_programs! {
    fence_put_and_get_see_each_others_values: "fence" on [2, 4];
    lock_accumulate_fetch_and_op_and_compare_and_swap: "lock_acc" on [4];
    post_start_complete_wait: "pscw" on [4];
    a_store_in_c_is_not_public_before_the_owner_synchronizes: "separate" on [2];
    split_dup_and_free_communicators_with_collectives_and_windows_over_them: "split" on [4];
    point_to_point_matches_orders_probes_and_reports_as_mpi_says: "p2p" on [3, 4];
    derived_datatypes_vector_indexed_and_subarray: "datatypes" on [3];
    scatter_gatherv_alltoall_and_reduce_scatter_on_the_world_and_a_subcommunicator: "collectives" on [1, 3, 4];
    maxloc_and_minloc_on_the_pair_types_with_the_c_structs_padding: "pairs" on [2, 4];
    group_algebra_and_a_shared_window_on_a_communicator_of_one: "groups_shared" on [4, 5];
    user_ops_reduce_in_rank_order_and_may_call_mpi: "user_ops" on [1, 3, 4];
    a_user_error_handler_on_a_communicator_hears_its_errors: "comm_errhandler" on [2];
    window_hints_are_set_and_read_after_creation: "win_info" on [3];
    dynamic_windows_at_the_programs_own_addresses_and_the_classes_of_bad_attaches: "dynamic" on [3];
    intercommunicators_are_made_and_merged_in_the_order_high_says: "intercomm" on [4];
}

#[test]
fn windows_are_unified_unless_asked_and_memory_sees_what_a_message_orders() {
    let program = build("unified.c");
    for args in [&[][..], &["bad-info"][..]] {
        let run = mpiexec(2, &program, args);
        assert!(run.status.success(), "{args:?}: {run:?}");
        assert!(run.stdout.contains("unified: ok"), "{args:?}: {run:?}");
    }
    let run = mpiexec_with(2, &program, &["separate"], &["--memory-model", "separate"]);
    assert!(run.status.success(), "{run:?}");
    assert!(run.stdout.contains("unified: ok"), "{run:?}");
}

#[test]
fn errors_return_mpich_classes_and_a_fatal_one_ends_the_job() {
    let program = build("errors.c");
    let run = mpiexec(3, &program, &[]);
    assert!(run.status.success(), "{run:?}");
    assert!(
        run.stdout.contains("errors: returned classes ok"),
        "{run:?}"
    );

    // MPI_ERR_RMA_SYNC's status
    ends_the_job(
        3,
        &program,
        &["fatal"],
        50,
        "rank 2: MPI_Win_unlock: MPI_ERR_RMA_SYNC",
    );
}

#[test]
fn mpi_abort_ends_the_job_with_its_code() {
    ends_the_job(
        2,
        &build("abort.c"),
        &[],
        7,
        "rank 1: MPI_Abort with error code 7",
    );
}

#[test]
fn a_crashing_rank_ends_the_job_naming_it() {
    ends_the_job(
        2,
        &build("crash.c"),
        &[],
        128 + 11,
        "rank 1 was killed by signal 11",
    );
}

#[test]
fn check_finds_the_race_of_two_unordered_puts_naming_ranks_and_calls() {
    let program = build("race.c");
    let run = mpiexec_with(3, &program, &[], &["--audit", "--check"]);
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    assert!(run.stdout.contains("race: done"), "{run:?}");
    assert!(run.stdout.contains("put_put"), "{run:?}");
    assert!(
        run.stdout.contains("rank 1 put") && run.stdout.contains("rank 2 put"),
        "{run:?}"
    );

    let run = mpiexec_with(2, &build("fence.c"), &[], &["--check"]);
    assert!(run.status.success(), "{run:?}");
    assert!(run.stdout.contains("no findings"), "{run:?}");
}

/// The same two puts, ordered by a message from rank 1 to rank 2: the service recorded the
/// send and the receive, and the race checker sees the order.
#[test]
fn a_message_or_a_collective_between_the_epochs_orders_the_puts_for_the_check() {
    let program = build("race.c");
    // a message, and a collective (a broadcast over a communicator of ranks 1 and 2): both
    // travel as the service's messages, which the audit records on the program's window
    for order in ["ordered", "collective"] {
        let run = mpiexec_with(3, &program, &[order], &["--audit", "--check"]);
        assert!(run.status.success(), "{order}: {run:?}");
        assert!(run.stdout.contains("race: done"), "{order}: {run:?}");
        assert!(run.stdout.contains("no findings"), "{order}: {run:?}");
    }
}

#[test]
fn a_call_of_a_later_phase_fails_with_unsupported_operation_not_a_loader_error() {
    let says = "rank 1: MPI_Type_get_envelope: MPI_ERR_UNSUPPORTED_OPERATION";
    let run = ends_the_job(2, &build("unsupported.c"), &[], 44, says);
    assert!(run.stdout.contains("unsupported: returned"), "{run:?}");
}

/// Every function `mpi.h` declares is in the library under its `MPI_` and `PMPI_` names
/// (implemented, or a stub failing with `MPI_ERR_UNSUPPORTED_OPERATION`), but MPI-4's
/// large-count `_c` bindings, and so are `mpi.h`'s data symbols: a program built against it
/// loads whatever it calls.
#[test]
fn every_function_and_object_of_mpi_h_is_in_the_library() {
    let listed = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("abi/functions.txt"),
    )
    .unwrap();
    let nm = std::process::Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(common::library())
        .output()
        .expect("nm (binutils)");
    assert!(nm.status.success());
    let defined: std::collections::HashSet<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2).map(str::to_string))
        .collect();
    let mut missing = Vec::new();
    for name in listed.lines().filter(|name| !name.ends_with("_c")) {
        for symbol in [name.to_string(), format!("P{name}")] {
            if !defined.contains(&symbol) {
                missing.push(symbol);
            }
        }
    }
    for object in [
        "MPI_UNWEIGHTED",
        "MPI_WEIGHTS_EMPTY",
        "MPI_F_STATUS_IGNORE",
        "MPI_F_STATUSES_IGNORE",
        "MPI_F08_STATUS_IGNORE",
        "MPI_F08_STATUSES_IGNORE",
        "MPIR_F08_MPI_STATUS_IGNORE_OBJ",
        "MPIR_F08_MPI_STATUSES_IGNORE_OBJ",
        "MPIR_F08_MPI_IN_PLACE",
        "MPIR_F08_MPI_BOTTOM",
        "MPI_T_PVAR_ALL_HANDLES",
    ] {
        if !defined.contains(object) {
            missing.push(object.to_string());
        }
    }
    assert!(missing.is_empty(), "not in libmpich.so: {missing:?}");
    assert!(listed.lines().count() > 600, "mpi.h's functions were read");
}
