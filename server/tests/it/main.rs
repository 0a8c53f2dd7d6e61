//! Integration tests: the real server on 127.0.0.1:0, driven through the real client, from
//! the fixtures of the test-support crate (`fixture`: a server in process, a world attached).

/// `#[tokio::test]`s on two worker threads that each await one call, `name => call;`: the
/// cases of a body shared by several tests (a store, shipped or persisted). Defined before the
/// modules, which use it.
macro_rules! async_tests {
    ($($(#[$meta:meta])* $name:ident => $call:expr;)+) => {
        $(
            $(#[$meta])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $call.await;
            }
        )+
    };
}

/// For each `body: sqlite_name, postgres_name;`, the [`async_tests`] `sqlite_name`, running
/// `body(Store::Sqlite)`, and `postgres_name`, running `body` on a fresh PostgreSQL database.
macro_rules! store_tests {
    ($($body:ident: $sqlite:ident, $postgres:ident;)+) => {
        $(
            async_tests! {
                $sqlite => $body(crate::store::Store::Sqlite);
                $postgres => $body(crate::store::Store::postgres().await);
            }
        )+
    };
}

mod audit;
mod backpressure;
mod binary;
mod cluster;
mod concurrency;
mod dynamic;
mod errors;
mod failure;
mod fence;
mod forum;
mod groups;
mod hostile;
mod identity;
mod legacy;
mod limits;
mod linearizable;
mod messages;
mod metrics;
mod operator;
mod pipelined;
mod promises;
mod protocol;
mod raw;
mod recovery;
mod requests;
mod secrets;
mod service;
mod shapes;
mod store;
mod tls;
mod unified;
mod web;

pub use onesided_test_support::fixture::{
    attached_window, get_shared, poll_until, ranks, spawn_server, spawn_server_with, start_fresh,
    start_on, world_with, Fixture, Restartable, TestServer, ADMIN_TOKEN,
};
pub use onesided_test_support::{server_binary, unique, Launched, TempDir};

/// The windows of ranks 0 and 1: rank 0 locks its own rank exclusively, granted at once (an
/// eager lock waits for its grant); rank 1 asks for that lock too, its lazy request travelling
/// with a put of 7 at element 0, and a task of its own flushes (waiting for the grant) and
/// unlocks. Returns rank 0's window, and the task, which gives rank 1's window back.
pub async fn rank_1_waiting_for_rank_0(
    mut windows: Vec<onesided_client::Window>,
) -> (
    onesided_client::Window,
    tokio::task::JoinHandle<onesided_client::Window>,
) {
    use onesided_client::LockType::Exclusive;
    let waiter = windows.pop().unwrap();
    let holder = windows.pop().unwrap();
    holder.lock(Exclusive, 0, 0).await.unwrap();
    waiter.lock(Exclusive, 0, 0).await.unwrap();
    waiter.put(0, 0, &[7i64]).unwrap();
    let waited = tokio::spawn(async move {
        waiter.flush(0).await.unwrap();
        waiter.unlock(0).await.unwrap();
        waiter
    });
    (holder, waited)
}

/// Asserts that `error` (of the call `what` describes) has the gRPC `code` and MPI `class`.
pub fn assert_refused(
    what: &str,
    error: &onesided_client::Error,
    code: tonic::Code,
    class: onesided_client::ErrorClass,
) {
    assert_eq!(
        (error.code(), error.class()),
        (code, Some(class)),
        "{what}: {error}"
    );
}

/// The subarray layout of `subsizes` at `starts` of a two-dimensional array of `sizes`, in
/// `order`.
pub fn subarray(
    sizes: [u64; 2],
    subsizes: [u64; 2],
    starts: [u64; 2],
    order: onesided_client::Order,
) -> onesided_client::Layout {
    onesided_client::Layout::Subarray(Box::new(onesided_client::Subarray {
        sizes: sizes.to_vec(),
        subsizes: subsizes.to_vec(),
        starts: starts.to_vec(),
        order,
    }))
}

/// The `onesided-server` binary this suite runs.
pub const SERVER_BINARY: &str = env!("CARGO_BIN_EXE_onesided-server");

/// The `onesided-server` binary on 127.0.0.1:0 with `data` as its data directory and `extra`
/// flags, logging at `log` without colour: what every suite that runs the binary starts from.
pub fn server_command(data: &TempDir, extra: &[&str], log: &str) -> std::process::Command {
    server_binary::command(SERVER_BINARY, "127.0.0.1:0", &data.0, extra, log)
}

/// The binary started as [`server_command`] says, up to the line containing `until` (at most
/// 60 s).
pub fn launch_server(data: &TempDir, extra: &[&str], log: &str, until: &str) -> Launched {
    Launched::start(
        server_command(data, extra, log),
        until,
        std::time::Duration::from_secs(60),
    )
}

/// [`launch_server`] up to the line saying where it listens, and its `http://` URL.
pub fn launch_server_listening(data: &TempDir, extra: &[&str], log: &str) -> (Launched, String) {
    let launched = launch_server(data, extra, log, "address=");
    let url = format!("http://{}", launched.field("address="));
    (launched, url)
}
