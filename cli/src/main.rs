//! `onesided`: the command-line client, on the onesided-client library and onesided-scenario only.
//!
//! `main` parses the command line, runs one subcommand, prints the error (one line, the MPI
//! class first) and maps it to an exit code scripts can rely on (see [`EXIT_CODES`]).
//!
//! Owns: the command tree and the global flags with their environment variables (`Global`:
//! address, CA, token, `--json`, the two timeouts, busy-polling; its Debug form never shows the
//! token), the `Endpoint` every command connects with, the text of `--help`'s end, shell
//! completions, and the runtime. Must not: speak gRPC or build wire messages (every connect
//! goes through the library's `Admin`, `Audit` or `Session`), decide an MPI rule, or print a
//! token; each subcommand's module does its own work and rendering.

#[macro_use]
mod out;

mod admin;
mod audit;
mod epoch;
mod exit;
mod explore;
mod json;
mod mpiexec;
mod progress;
mod run;
mod shell;
mod table;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use onesided_client::Endpoint;

use crate::exit::{exit_code, Usage};

/// The exit-code table, shown at the end of `--help`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  a scenario failed: an expectation did not hold, or a call failed unexpectedly;
     `audit verify` found the log broken
  2  usage error: bad arguments, a scenario or value that does not parse, an unreadable file
  3  the server refused: an MPI error class (printed first, as MPI_ERR_RMA_RANGE) or a gRPC
     refusal (unauthenticated, not found, already exists); `explore`: the scenario uses
     something the simulator does not run yet
  4  the server could not be reached (within --connect-timeout), did not answer (within
     --timeout), or the connection broke

Credentials: ONESIDED_TOKEN (or --token) is the admin token for `world`, `window`, `run` and
`audit`, and a rank's token (as printed by `world create`) for `get`, `put`, `acc`, `fop`, `cas`
and `shell`: the token decides the world and rank; --world and --rank are checked against it.

Client audit events: with ONESIDED_AUDIT_DATABASE_URL set (postgres://… or sqlite:…, the
database the server records into), every session a command attaches writes its own audit
events (loads, stores, returns of blocking calls) to that database itself and ships only a
marker naming them; without it they travel over the session.

TLS: an https:// address (--addr, ONESIDED_ADDR) is verified against the system's trusted roots,
or only against the CA certificate --ca (ONESIDED_CA) names.";

/// onesided: MPI one-sided communication (RMA) windows as a network service.
// no Debug: it holds the token
#[derive(Parser)]
#[command(name = "onesided", version, after_long_help = EXIT_CODES)]
struct Cli {
    /// Server address; a cluster's nodes as a comma list (http://a:1,http://b:2), tried in
    /// order, with sessions following a node's redirect to the node serving their world
    #[arg(
        long,
        global = true,
        env = "ONESIDED_ADDR",
        hide_env_values = true,
        default_value = "http://127.0.0.1:50051"
    )]
    addr: String,

    /// CA certificate (PEM) that signed the server's TLS certificate, for https:// addresses;
    /// without it the system's trusted roots are used
    #[arg(long, global = true, env = "ONESIDED_CA", value_name = "PATH")]
    ca: Option<PathBuf>,

    /// Token: the admin token (world, window, run, audit) or a rank's token (get, put, acc, fop,
    /// cas, shell)
    #[arg(long, global = true, env = "ONESIDED_TOKEN", hide_env_values = true)]
    token: Option<String>,

    /// Print machine-readable JSON on stdout
    #[arg(long, global = true)]
    json: bool,

    /// Seconds to wait for a connection to the server (TCP and TLS handshakes and its first answer)
    #[arg(
        long,
        global = true,
        env = "ONESIDED_CONNECT_TIMEOUT",
        value_name = "SECONDS",
        default_value = "10",
        value_parser = seconds
    )]
    connect_timeout: Duration,

    /// Seconds the server may take to answer a call that needs only the server (world,
    /// window, audit, attaching a session) or a keep-alive ping while a call waits for other
    /// ranks (a lock, a fence, a transfer, `audit log --follow`: those are not cut while the
    /// server answers); for `run`, the seconds every rank together may take in one run
    #[arg(
        long,
        global = true,
        env = "ONESIDED_TIMEOUT",
        value_name = "SECONDS",
        default_value = "30",
        value_parser = seconds
    )]
    timeout: Duration,

    /// Microseconds to keep polling for the server's answer after each message before the
    /// thread parks, as MPI libraries spin (lower latency, up to that much of a core's time
    /// per message; README, "Busy-polling"); 0, the default, never spins
    #[arg(
        long,
        global = true,
        env = "ONESIDED_BUSY_POLL",
        value_name = "MICROS",
        default_value = "0",
        value_parser = onesided_client::busy_poll::parse_micros
    )]
    busy_poll: Duration,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create, list and delete worlds (admin token)
    #[command(subcommand)]
    World(admin::WorldCommand),
    /// Create, list, describe and free windows (admin token)
    #[command(subcommand)]
    Window(admin::WindowCommand),
    /// A cluster's nodes and the worlds each serves (admin token)
    #[command(subcommand)]
    Cluster(admin::ClusterCommand),
    /// One-shot MPI_Get in its own lock epoch (rank token)
    Get(epoch::GetArgs),
    /// One-shot MPI_Put in its own lock epoch (rank token)
    Put(epoch::PutArgs),
    /// One-shot MPI_Accumulate in its own lock epoch (rank token)
    Acc(epoch::AccArgs),
    /// One-shot MPI_Fetch_and_op in its own lock epoch; prints the old value (rank token)
    Fop(epoch::FopArgs),
    /// One-shot MPI_Compare_and_swap in its own lock epoch; prints the old value (rank token)
    Cas(epoch::CasArgs),
    /// Read the audit log: recorded windows, events, replay, race check, verification, trace
    /// export (admin token)
    #[command(subcommand, after_long_help = audit::AFTER_HELP)]
    Audit(audit::AuditCommand),
    /// Run a scenario file (.rma, see docs/scenarios.md) in a fresh world (admin token)
    Run(run::RunArgs),
    /// Run a scenario file on the in-memory simulator under many seeded schedules and report
    /// every outcome they showed (no server)
    Explore(explore::ExploreArgs),
    /// An interactive session as one rank: each line a scenario call (rank token)
    Shell(shell::ShellArgs),
    /// Run an MPI program built by MPICH's mpicc on onesided, N processes (starts its own
    /// server unless --addr is given)
    Mpiexec(mpiexec::MpiexecArgs),
    /// Print a shell completion script
    Completions(CompletionArgs),
}

#[derive(Debug, Args)]
struct CompletionArgs {
    /// The shell
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// What every subcommand gets besides its own arguments.
#[derive(Clone)]
pub struct Global {
    /// Server address.
    pub addr: String,
    /// `--ca`.
    pub ca: Option<PathBuf>,
    /// The token, if given.
    pub token: Option<String>,
    /// `--json`.
    pub json: bool,
    /// `--connect-timeout`.
    pub connect_timeout: Duration,
    /// `--timeout`.
    pub timeout: Duration,
    /// `--busy-poll`.
    pub busy_poll: Duration,
}

impl std::fmt::Debug for Global {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // never the token
        f.debug_struct("Global")
            .field("addr", &self.addr)
            .field("ca", &self.ca)
            .field("json", &self.json)
            .field("connect_timeout", &self.connect_timeout)
            .field("timeout", &self.timeout)
            .field("busy_poll", &self.busy_poll)
            .finish_non_exhaustive()
    }
}

impl Global {
    /// The server: `--addr`, with `--ca` when given, and the timeouts.
    ///
    /// # Errors
    /// An unreadable CA file, one without a certificate, or a CA for a plain http:// address.
    pub fn endpoint(&self) -> anyhow::Result<Endpoint> {
        let endpoint = Endpoint::new(self.addr.as_str())
            .connect_timeout(self.connect_timeout)
            .timeout(self.timeout)
            .busy_poll(self.busy_poll);
        Ok(match &self.ca {
            Some(path) => endpoint.ca_file(path)?,
            None => endpoint,
        })
    }

    /// The token, or a usage error naming what it is for.
    ///
    /// # Errors
    /// No token was given.
    pub fn token(&self, what: &str) -> anyhow::Result<&str> {
        self.token.as_deref().ok_or_else(|| {
            Usage(format!(
                "no token: set ONESIDED_TOKEN or pass --token ({what})"
            ))
            .into()
        })
    }
}

/// A positive number of seconds, fractions allowed (`0.5`).
fn seconds(text: &str) -> Result<Duration, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("\"{text}\" is not a number of seconds"))?;
    if value.is_nan() || value <= 0.0 {
        return Err(format!("{text} is not a positive number of seconds"));
    }
    Duration::try_from_secs_f64(value).map_err(|_| format!("{text} seconds is too long"))
}

/// `shared` or `exclusive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LockArg {
    /// MPI_LOCK_SHARED
    Shared,
    /// MPI_LOCK_EXCLUSIVE
    Exclusive,
}

async fn dispatch(cli: Cli, given: mpiexec::Given) -> anyhow::Result<ExitCode> {
    let global = Global {
        addr: cli.addr,
        ca: cli.ca,
        token: cli.token,
        json: cli.json,
        connect_timeout: cli.connect_timeout,
        timeout: cli.timeout,
        busy_poll: cli.busy_poll,
    };
    match cli.command {
        Command::World(command) => admin::world(&global, command).await,
        Command::Window(command) => admin::window(&global, command).await,
        Command::Cluster(command) => admin::cluster(&global, command).await,
        Command::Get(args) => epoch::get(&global, args).await,
        Command::Put(args) => epoch::put(&global, args).await,
        Command::Acc(args) => epoch::acc(&global, args).await,
        Command::Fop(args) => epoch::fop(&global, args).await,
        Command::Cas(args) => epoch::cas(&global, args).await,
        Command::Audit(command) => audit::audit(&global, command).await,
        Command::Run(args) => run::run(&global, args).await,
        Command::Explore(args) => explore::explore(&global, args),
        Command::Shell(args) => shell::shell(&global, args).await,
        Command::Mpiexec(args) => mpiexec::mpiexec(&global, given, args).await,
        Command::Completions(args) => {
            // clap_complete panics when its writer fails: it writes into memory, we write out
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut Cli::command(), "onesided", &mut script);
            out::bytes(&script);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Whether a global flag was given (on the command line or in the environment), not defaulted.
fn given(matches: &clap::ArgMatches, id: &str) -> bool {
    matches
        .value_source(id)
        .is_some_and(|source| source != ValueSource::DefaultValue)
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let given = mpiexec::Given {
        addr: given(&matches, "addr"),
        timeout: given(&matches, "timeout"),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    let json = cli.json;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("onesided: cannot start the runtime: {error}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(dispatch(cli, given)) {
        Ok(code) => code,
        Err(error) => {
            let code = exit_code(&error);
            if json {
                eprintln!("{}", exit::error_json(&error, code));
            } else {
                eprintln!("onesided: {error:#}");
            }
            ExitCode::from(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
