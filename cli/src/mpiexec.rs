//! `onesided mpiexec -n N PROGRAM [ARGS…]`: runs an MPI program built by MPICH's `mpicc` on
//! onesided, one process per rank, with the workspace's `libmpich.so.12` (the `mpi/` crate)
//! first on their loader path.
//!
//! Without `--addr` it starts a server of its own for the job (`onesided-server`, embedded
//! defaults, audit on, a temporary data directory unless `--data-dir`) and stops it after.
//! It creates a world of N ranks and hands each process its rank's token in the environment
//! (`ONESIDED_MPI_ADDR`, `ONESIDED_MPI_TOKEN`), forwards their output (they share ours), gives
//! standard input to rank 0 only, and exits with the first non-zero status: a process that
//! exits non-zero or dies by a signal (a crash, `MPI_Abort`, a fatal MPI error) ends the job,
//! the other processes killed.
//!
//! Owns: the job's processes (started, their environment and loader path, killed when one
//! fails), the server started for a job (its binary, port, admin token, data directory and log,
//! stopped after), the job's world, and the job's exit status. Must not: implement any MPI call
//! (the `mpi/` crate's library does, inside each process), or share a data directory it did not
//! create or was not given.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use onesided_client::{Admin, Audit, Endpoint};

use crate::exit::Usage;
use crate::Global;

#[derive(Debug, Args)]
#[command(after_long_help = "\
Build the program with MPICH's own compiler wrapper (`mpicc`, Debian's mpich/libmpich-dev): \
it links against libmpich.so.12, and the processes this starts load onesided's library of that \
name instead (README, \"Run MPI programs\", says which MPI calls work yet).

With no --addr (and no ONESIDED_ADDR) it starts `onesided-server` for the job on a free port of \
127.0.0.1 and stops it afterwards; with --addr it uses that server, and --token (ONESIDED_TOKEN) \
must be its admin token. --timeout, when given, limits the whole job. Exit status: the first \
non-zero exit status of a rank (128+N for a rank killed by signal N), 1 when --check found a \
race, else 0.")]
pub struct MpiexecArgs {
    /// Number of processes (ranks)
    #[arg(short = 'n', long = "np", value_parser = clap::value_parser!(u32).range(1..))]
    n: u32,
    /// Data directory of the server started for the job (default: a temporary one, removed
    /// afterwards); ignored with --addr
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Print the ids of the windows the job created (read them with `onesided audit`)
    #[arg(long)]
    audit: bool,
    /// Run the race checker over the job's windows afterwards; exit 1 on a finding
    #[arg(long)]
    check: bool,
    /// Memory model of the job's windows whose info does not choose one (info key
    /// onesided_memory_model): unified, as MPICH's windows are, or separate (dynamic windows
    /// are separate always)
    #[arg(long, value_enum, default_value = "unified")]
    memory_model: crate::admin::ModelArg,
    /// The onesided libmpich (default: libmpich.so beside this binary)
    #[arg(long, env = "ONESIDED_MPI_LIB", value_name = "PATH")]
    lib: Option<PathBuf>,
    /// The server binary started without --addr (default: onesided-server beside this
    /// binary, else on PATH)
    #[arg(long, env = "ONESIDED_SERVER_BIN", value_name = "PATH")]
    server_bin: Option<PathBuf>,
    /// The program and its arguments
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    program: Vec<OsString>,
}

/// What `main` knows about how the global flags were given.
#[derive(Debug, Clone, Copy)]
pub struct Given {
    /// `--addr` or `ONESIDED_ADDR` was given (else the default address).
    pub addr: bool,
    /// `--timeout` or `ONESIDED_TIMEOUT` was given.
    pub timeout: bool,
}

/// A server this job started: killed and its temporary directory removed on drop.
struct OwnServer {
    child: Child,
    temporary: Option<PathBuf>,
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.temporary {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The directory this binary is in (where cargo puts the workspace's other artifacts).
fn own_dir() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
}

fn random_hex(bytes: usize) -> Result<String> {
    use std::io::Read;
    let mut buffer = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buffer))
        .context("cannot read /dev/urandom")?;
    Ok(hex::encode(buffer))
}

fn unique_name(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{prefix}-{}-{nanos}", std::process::id())
}

async fn start_server(args: &MpiexecArgs, global: &Global) -> Result<(OwnServer, String, String)> {
    let binary = match &args.server_bin {
        Some(path) => path.clone(),
        None => own_dir()
            .map(|dir| dir.join("onesided-server"))
            .filter(|path| path.exists())
            .unwrap_or_else(|| PathBuf::from("onesided-server")),
    };
    let (data_dir, temporary) = match &args.data_dir {
        Some(dir) => (dir.clone(), None),
        None => {
            let dir = std::env::temp_dir().join(unique_name("onesided-mpiexec"));
            (dir.clone(), Some(dir))
        }
    };
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .context("no free port on 127.0.0.1")?
        .port();
    let token = random_hex(24)?;
    let log = std::fs::File::create(data_dir.join("server.log"))
        .with_context(|| format!("cannot write in {}", data_dir.display()))?;
    let child = Command::new(&binary)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(&data_dir)
        .env("ONESIDED_ADMIN_TOKEN", &token)
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start {}", binary.display()))?;
    let mut server = OwnServer { child, temporary };
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let endpoint = Endpoint::new(url.as_str()).connect_timeout(global.connect_timeout);
        if let Ok(admin) = Admin::connect(endpoint, &token).await {
            if admin.list_worlds().await.is_ok() {
                break;
            }
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            bail!(
                "the server started for the job exited ({status}); its log: {}",
                data_dir.join("server.log").display()
            );
        }
        if Instant::now() > deadline {
            bail!("the server started for the job did not answer within 20 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((server, url, token))
}

/// A directory holding `libmpich.so.12` and `libmpi.so.12` (mpi4py's name), both the
/// workspace's library.
fn library_dir(args: &MpiexecArgs, under: &Path) -> Result<PathBuf> {
    let lib = match &args.lib {
        Some(path) => path.clone(),
        None => own_dir()
            .map(|dir| dir.join("libmpich.so"))
            .filter(|path| path.exists())
            .ok_or_else(|| {
                Usage(
                    "onesided's libmpich.so is not beside this binary: build it (cargo build -p \
                     onesided-mpi) or name it with --lib / ONESIDED_MPI_LIB"
                        .into(),
                )
            })?,
    };
    let lib = std::fs::canonicalize(&lib).with_context(|| format!("no {}", lib.display()))?;
    std::fs::create_dir_all(under)?;
    for name in ["libmpich.so.12", "libmpi.so.12"] {
        let link = under.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&lib, &link)
            .with_context(|| format!("cannot link {}", link.display()))?;
    }
    Ok(under.to_path_buf())
}

/// How a rank ended, as an exit status and a sentence (`None`: it exited 0).
fn failure(rank: u32, status: std::process::ExitStatus) -> Option<(u8, String)> {
    use std::os::unix::process::ExitStatusExt;
    if let Some(signal) = status.signal() {
        return Some((
            128u8.saturating_add(signal as u8),
            format!("rank {rank} was killed by signal {signal}"),
        ));
    }
    match status.code() {
        Some(0) | None => None,
        Some(code) => Some((
            u8::try_from(code & 0xff).unwrap_or(1).max(1),
            format!("rank {rank} exited with status {code}"),
        )),
    }
}

pub async fn mpiexec(global: &Global, given: Given, args: MpiexecArgs) -> Result<ExitCode> {
    let (server, url, admin_token) = if given.addr {
        let token = global.token("mpiexec with --addr needs the server's admin token")?;
        (None, global.addr.clone(), token.to_string())
    } else {
        let (server, url, token) = start_server(&args, global).await?;
        (Some(server), url, token)
    };
    let endpoint = if given.addr {
        global.endpoint()?
    } else {
        Endpoint::new(url.as_str()).connect_timeout(global.connect_timeout)
    };
    let admin = Admin::connect(endpoint.clone(), &admin_token).await?;
    let world = unique_name("mpiexec");
    let tokens = admin.create_world(&world, args.n).await?;
    let scratch = std::env::temp_dir().join(unique_name("onesided-mpiexec-lib"));
    let outcome = run_ranks(global, given, &args, &url, &tokens.tokens, &scratch).await;
    let _ = std::fs::remove_dir_all(&scratch);
    let mut code = outcome?;
    if args.audit || args.check {
        let audit = Audit::connect(endpoint, &admin_token).await?;
        let windows: Vec<_> = audit
            .windows()
            .await?
            .into_iter()
            .filter(|window| window.world == world)
            .collect();
        for window in &windows {
            if args.audit {
                outln!(
                    "window {} {} ({} events)",
                    window.id,
                    window.name,
                    window.events
                );
            }
            if args.check {
                let findings = audit.check(window.id).await?;
                for finding in &findings {
                    outln!(
                        "window {} ({}): {}",
                        window.id,
                        window.name,
                        crate::audit::finding_text(finding)
                    );
                }
                if !findings.is_empty() && code == 0 {
                    code = 1;
                }
            }
        }
        if args.check {
            outln!(
                "checked {} window(s): {}",
                windows.len(),
                if code == 1 {
                    "races found"
                } else {
                    "no findings"
                }
            );
        }
    }
    if server.is_none() {
        let _ = admin.delete_world(&world).await;
    }
    drop(server);
    Ok(ExitCode::from(code))
}

async fn run_ranks(
    global: &Global,
    given: Given,
    args: &MpiexecArgs,
    url: &str,
    tokens: &[String],
    scratch: &Path,
) -> Result<u8> {
    let libs = library_dir(args, scratch)?;
    let mut path = OsString::from(libs.as_os_str());
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|old| !old.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let (program, program_args) = args
        .program
        .split_first()
        .ok_or_else(|| Usage("no program to run".into()))?;
    // each rank's process is waited for by a thread of its own, which reports its end at
    // once: the job ends with the status of the rank that failed first, not of one that failed
    // because of it a few milliseconds later (MPI_ERR_PROC_FAILED)
    let (ended, endings) = std::sync::mpsc::channel();
    let mut pids: Vec<Option<u32>> = Vec::new();
    for (rank, token) in tokens.iter().enumerate() {
        let mut command = Command::new(program);
        command
            .args(program_args)
            .env("LD_LIBRARY_PATH", &path)
            .env("ONESIDED_MPI_ADDR", url)
            .env("ONESIDED_MPI_TOKEN", token)
            .env("PMI_RANK", rank.to_string())
            .env("PMI_SIZE", tokens.len().to_string())
            .env(
                "ONESIDED_MPI_MEMORY_MODEL",
                onesided_client::MemoryModel::from(args.memory_model).name(),
            )
            .env_remove("ONESIDED_TOKEN");
        if rank != 0 {
            command.stdin(Stdio::null());
        }
        match command.spawn() {
            Ok(mut child) => {
                pids.push(Some(child.id()));
                let ended = ended.clone();
                std::thread::spawn(move || {
                    let _ = ended.send((rank, child.wait()));
                });
            }
            Err(error) => {
                kill_all(&pids);
                return Err(Usage(format!(
                    "cannot start {}: {error}",
                    program.to_string_lossy()
                ))
                .into());
            }
        }
    }
    drop(ended);
    let deadline = given.timeout.then(|| Instant::now() + global.timeout);
    let mut running = pids.len();
    let mut first: Option<u8> = None;
    while running > 0 {
        let wait = deadline.map_or(Duration::from_secs(3600), |deadline| {
            deadline.saturating_duration_since(Instant::now())
        });
        let (rank, status) = match tokio::task::block_in_place(|| endings.recv_timeout(wait)) {
            Ok(ending) => ending,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if deadline.is_some() => {
                eprintln!(
                    "onesided mpiexec: the job ran past --timeout ({} s): ending it",
                    global.timeout.as_secs_f64()
                );
                kill_all(&pids);
                return Ok(124);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        };
        running -= 1;
        pids[rank] = None;
        let status = status.context("waiting for a rank")?;
        if let Some((code, why)) = failure(rank as u32, status) {
            if first.is_none() {
                eprintln!("onesided mpiexec: {why}: ending the job");
                first = Some(code);
                kill_all(&pids);
            }
        }
    }
    Ok(first.unwrap_or(0))
}

/// Kills the processes still running (their waiting threads reap them).
fn kill_all(pids: &[Option<u32>]) {
    let pids: Vec<String> = pids.iter().flatten().map(u32::to_string).collect();
    if !pids.is_empty() {
        let _ = Command::new("kill")
            .arg("-KILL")
            .args(&pids)
            .stderr(Stdio::null())
            .status();
    }
}
