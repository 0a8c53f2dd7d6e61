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
mod pipelined;
mod promises;
mod protocol;
mod raw;
mod recovery;
mod requests;
mod secrets;
mod service;
mod store;
mod tls;
mod unified;
mod web;

pub use onesided_test_support::fixture::{
    ranks, spawn_server, spawn_server_with, start_fresh, start_on, world_with, Fixture,
    Restartable, TestServer, ADMIN_TOKEN,
};
pub use onesided_test_support::{server_binary, unique, Launched, TempDir};

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
