//! MPICH's own RMA tests (`../shared/mpich-rma`, MPICH's test/mpi/rma with its harness,
//! unmodified), built with the system's `mpicc` as MPICH's build does and run under
//! `onesided mpiexec`: a run passes when it exits 0 and prints ` No Errors`.
//!
//! `PASSING` names the runs of `tests.txt` that pass now; each must keep passing. The others
//! need what this phase does not have yet (README, "Run MPI programs"): add a run here once it
//! passes, so the count only grows.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use common::{mpicc, mpiexec_with_env, mpiexec_within, scratch};

/// The runs of `tests.txt` (by name and process count) that pass on onesided now, within a
/// few seconds each (the fetch_and_op, get_flushlocal and linked_list_bench_lock_all runs
/// take 15 to 20 s here).
const PASSING: &[(&str, u32)] = &[
    ("allocmem", 2),
    ("lockcontention3", 8),
    ("acc_loc", 4),
    ("putfidx", 4),
    ("transpose3", 2),
    ("transpose3_shm", 2),
    ("test1", 2),
    ("test2", 2),
    ("test2_shm", 2),
    ("lockcontention", 3),
    ("lockopts", 2),
    ("transpose4", 2),
    ("fetchandadd_tree", 7),
    ("wintest", 2),
    ("wintest_shm", 2),
    ("test2_am", 2),
    ("test2_am_shm", 2),
    ("test4_am", 2),
    ("test5_am", 2),
    ("test1_dt", 2),
    ("attrorderwin", 1),
    ("wincall", 2),
    ("fkeyvalwin", 1),
    ("locknull", 2),
    ("strided_putget_indexed", 4),
    ("manyrma3", 2),
    ("fetch_and_op_char", 4),
    ("fetch_and_op_short", 4),
    ("fetch_and_op_int", 4),
    ("fetch_and_op_long", 4),
    ("fetch_and_op_double", 4),
    ("fetch_and_op_long_double", 4),
    ("fetch_and_op_char_hwacc", 4),
    ("fetch_and_op_short_hwacc", 4),
    ("fetch_and_op_int_hwacc", 4),
    ("fetch_and_op_long_hwacc", 4),
    ("fetch_and_op_double_hwacc", 4),
    ("fetch_and_op_long_double_hwacc", 4),
    ("fetch_and_op_char_accop_hwacc", 4),
    ("fetch_and_op_short_accop_hwacc", 4),
    ("fetch_and_op_int_accop_hwacc", 4),
    ("fetch_and_op_long_accop_hwacc", 4),
    ("fetch_and_op_double_accop_hwacc", 4),
    ("fetch_and_op_long_double_accop_hwacc", 4),
    ("req_example", 4),
    ("req_example_shm", 4),
    ("manyget", 2),
    ("rget_unlock", 2),
    ("lock_nested", 3),
    ("rget_testall", 2),
    ("get_flushlocal", 4),
    // point-to-point through the service
    ("test3", 2),
    ("test3_shm", 2),
    ("test3_am", 2),
    ("test3_am_shm", 2),
    ("flush", 4),
    // zero-size transfers between different basic types (an empty signature matches any)
    ("badrma", 2),
    // MPI_2INT
    ("acc_ordering", 2),
    // dynamic windows at the program's own addresses (module `dynamic`)
    ("win_flavors", 4),
    ("win_flavors", 3),
    ("win_dynamic_acc", 4),
    ("win_dynamic_acc_collattach", 4),
    ("linked_list", 4),
    ("linked_list_fop", 4),
    ("linked_list_lockall", 4),
    ("linked_list_bench_lock_all", 4),
    // a struct of several basic types, got from a dynamic window
    ("get_struct", 2),
    // 500 windows of MPI_Win_allocate, created and freed with no barrier of the library's
    ("window_allocation", 4),
    ("window_noncontig_allocation", 4),
    // MTest's communicators include a dup of the world made by MPI_Intercomm_merge
    ("accfence2", 4),
    ("accfence2_am", 4),
];

/// Runs that pass too, but slowly here: 8 to 75 s each with the audit off (loaded two-core
/// machine, debug builds), 20 to 160 s with it `sync`. A profile of get_accumulate_int (perf,
/// 2026-12-07) finds no hot spot of ours: the time is debug code everywhere (the audit's
/// SHA-256 and SQLite unoptimized, async state machines copied on every poll); the audit alone
/// is most of it (51 s `sync`, 30 s `async`, 10 s `off`). These runs judge MPI semantics, which
/// the audit's durability does not change (it decides when an answer goes, never what it says),
/// and the 71 of `PASSING` run with the audit `sync`: so these run with `off`, 7 minutes
/// together, each allowed 300 s.
const SLOW_PASSING: &[(&str, u32)] = &[
    ("manyrma2", 2),
    ("manyrma2_shm", 2),
    ("get_accumulate_double", 4),
    ("get_accumulate_int", 4),
    ("get_accumulate_int_derived", 4),
    ("get_accumulate_long", 4),
    ("get_accumulate_short_derived", 4),
    ("at_complete", 2),
    ("get_flushlocal_shm", 4),
    ("strided_acc_onelock", 2),
    ("strided_acc_subarray", 2),
    ("window_creation", 2),
    ("get_accumulate_double_derived", 4),
    ("get_accumulate_long_derived", 4),
    ("get_accumulate_short", 4),
    ("atomic_rmw_fop", 3),
    ("rma_contig -- -iter=10", 2),
    ("contention_put", 4),
];

/// Where the suite is: `ONESIDED_MPICH_RMA`, else `../shared/mpich-rma` beside the repository,
/// else the team's shared directory on these machines (`/work/shared/mpich-rma`: CI runs a
/// clone that may be anywhere).
fn suite() -> PathBuf {
    let candidates: Vec<PathBuf> = match std::env::var_os("ONESIDED_MPICH_RMA") {
        Some(dir) => vec![PathBuf::from(dir)],
        None => vec![
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/mpich-rma"),
            PathBuf::from("/work/shared/mpich-rma"),
        ],
    };
    let found = candidates.iter().find(|dir| dir.join("tests.txt").exists());
    assert!(
        found.is_some(),
        "MPICH's RMA tests are not at any of {candidates:?} (set ONESIDED_MPICH_RMA to their \
         directory)"
    );
    found.unwrap().clone()
}

/// One line of `tests.txt`: name, processes, source, preprocessor flags, arguments.
#[derive(Debug, Clone)]
struct Run {
    name: String,
    nprocs: u32,
    source: String,
    flags: Vec<String>,
    args: Vec<String>,
}

fn runs(suite: &Path) -> Vec<Run> {
    let text = std::fs::read_to_string(suite.join("tests.txt")).unwrap();
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (before, args) = line.split_once(" -- ").unwrap_or((line, ""));
            let mut words = before.split_whitespace();
            let name = words.next().unwrap().to_string();
            let nprocs = words.next().unwrap().parse().unwrap();
            let source = words.next().unwrap().to_string();
            Run {
                name,
                nprocs,
                source,
                flags: words.map(str::to_string).collect(),
                args: args.split_whitespace().map(str::to_string).collect(),
            }
        })
        .collect()
}

/// The harness objects every program links with, built once; `mpitestconf.h` and
/// `mtest_mpix.h` are written as MPICH's configure and autogen would (README of the suite).
fn harness(suite: &Path) -> Vec<PathBuf> {
    static BUILT: Mutex<Option<Vec<PathBuf>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(objects) = built.as_ref() {
        return objects.clone();
    }
    let dir = scratch().join("mpich-harness");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("mpitestconf.h"),
        "#define HAVE_MPI_WIN_CREATE 1\n#define HAVE_MPI_INIT_THREAD 1\n#define HAVE_STRING_H 1\n\
         #define HAVE_UNISTD_H 1\n#define HAVE_STDARG_H 1\n#define HAVE_STDLIB_H 1\n\
         #define THREAD_PACKAGE_NAME THREAD_PACKAGE_POSIX\n",
    )
    .unwrap();
    std::fs::write(dir.join("mtest_mpix.h"), "").unwrap();
    let mut objects = Vec::new();
    for unit in ["mtest", "mtest_common", "mtest_single"] {
        let object = dir.join(format!("{unit}.o"));
        let status = std::process::Command::new("mpicc")
            .arg("-c")
            .arg(format!("-I{}", dir.display()))
            .arg(format!("-I{}", suite.join("include").display()))
            .arg(suite.join("util").join(format!("{unit}.c")))
            .arg("-o")
            .arg(&object)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("mpicc (apt-get install mpich libmpich-dev)");
        assert!(status.success(), "mpicc failed on util/{unit}.c");
        objects.push(object);
    }
    *built = Some(objects.clone());
    objects
}

fn build(suite: &Path, run: &Run) -> PathBuf {
    let objects = harness(suite);
    let include = scratch().join("mpich-harness");
    let mut flags = vec![
        format!("-I{}", include.display()),
        format!("-I{}", suite.join("include").display()),
        "-w".to_string(),
    ];
    flags.extend(run.flags.iter().cloned());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut sources = vec![suite.join("rma").join(&run.source)];
    sources.extend(objects);
    mpicc(&format!("mpich-{}", run.name), &sources, &flags)
}

/// Whether `entry` of a list names `run`: by its name, or — for a name several runs share
/// with the same process count (rma_contig) — `NAME -- ARGS`.
fn names(entry: &str, run: &Run) -> bool {
    match entry.split_once(" -- ") {
        Some((name, args)) => run.name == name && run.args.join(" ") == args,
        None => run.name == entry,
    }
}

/// Runs each of `list`, each ended after `seconds`, with `env` for the job's server.
fn run_all(list: &[(&str, u32)], env: &[(&str, &str)], seconds: u32) {
    let suite = suite();
    let all = runs(&suite);
    assert_eq!(all.len(), 90, "tests.txt has MPICH's 90 runs");
    let mut failed = Vec::new();
    for &(name, nprocs) in list {
        let run = all
            .iter()
            .find(|run| names(name, run) && run.nprocs == nprocs)
            .unwrap_or_else(|| panic!("{name} with {nprocs} processes is not a run of tests.txt"));
        let program = build(&suite, run);
        let args: Vec<&str> = run.args.iter().map(String::as_str).collect();
        let started = std::time::Instant::now();
        let result = mpiexec_with_env(run.nprocs, &program, &args, &[], env, seconds);
        let passed =
            result.status.success() && result.stdout.lines().any(|line| line == " No Errors");
        println!(
            "{name} -n {nprocs}: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        if !passed {
            failed.push(format!("{name} -n {nprocs}: {result:?}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} failed:\n{}",
        failed.len(),
        list.len(),
        failed.join("\n")
    );
}

#[test]
fn the_mpich_rma_tests_that_pass_keep_passing() {
    run_all(PASSING, &[], 120);
}

#[test]
fn the_slow_mpich_rma_tests_that_pass_keep_passing() {
    run_all(SLOW_PASSING, &[("ONESIDED_AUDIT_DURABILITY", "off")], 300);
}

/// Not a check: runs every run of `tests.txt` that is in neither list, each within 90 s, and
/// prints which pass now and how the others end (the first lines of their error output), to
/// find what to add to `PASSING` and what to work on next.
#[test]
#[ignore = "a survey of the runs not passing yet (up to 90 s each)"]
fn survey_the_runs_not_passing_yet() {
    let suite = suite();
    for run in runs(&suite) {
        let known = PASSING
            .iter()
            .chain(SLOW_PASSING)
            .any(|&(name, nprocs)| names(name, &run) && run.nprocs == nprocs);
        if known {
            continue;
        }
        let program = build(&suite, &run);
        let args: Vec<&str> = run.args.iter().map(String::as_str).collect();
        let started = std::time::Instant::now();
        let result = mpiexec_within(run.nprocs, &program, &args, &[], 90);
        let passed =
            result.status.success() && result.stdout.lines().any(|line| line == " No Errors");
        let why: Vec<&str> = result.stderr.lines().take(2).collect();
        println!(
            "survey: {} -n {}: {} in {:.1} s {}",
            run.name,
            run.nprocs,
            if passed { "PASSES" } else { "fails" },
            started.elapsed().as_secs_f64(),
            if passed {
                String::new()
            } else {
                format!("{why:?}")
            }
        );
    }
}
