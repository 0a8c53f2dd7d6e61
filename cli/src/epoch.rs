//! One-shot epochs: `get`, `put`, `acc`, `fop`, `cas`. Each attaches as the token's rank,
//! opens the window, locks the target, issues the operation, unlocks and prints the result.
//! Large `put --from-file` / `get --to-file` transfers go in chunks inside the one epoch, with
//! a progress bar advancing per completed chunk. Whatever the outcome, the command's session
//! ends cleanly before it exits ([`Session::close`]): its own audit rows (the unlock's return)
//! are committed, and the server sees the session leave rather than its stream break.
//!
//! Owns: these commands' arguments (target, index, values, lock type, an element type from
//! `--type` or the window's `onesided_element_type`), the one epoch each runs, chunking a
//! file transfer inside it, and printing its result. Must not: validate an operation or decide
//! an MPI rule (the library's `Window` runs core's checks, the server refuses the rest), or
//! leave its session open on any path.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use bytes::Bytes;
use clap::Args;
use indicatif::ProgressBar;
use onesided_client::LockType::{Exclusive, Shared};
use onesided_client::{Datatype, LockType, Op, OpKind, OpSpec, Session, Window};
use onesided_core::datatype::{decode, encode_all, parse_value, Value};
use serde_json::json;

use crate::admin::datatype;
use crate::exit::Usage;
use crate::{json, Global, LockArg};

/// Where the one-shot epoch goes.
#[derive(Debug, Args)]
pub struct EpochArgs {
    /// The world (checked against the token)
    #[arg(long)]
    world: Option<String>,
    /// The window
    #[arg(long)]
    window: String,
    /// This rank (checked against the token)
    #[arg(long)]
    rank: Option<u32>,
    /// The target rank
    #[arg(long)]
    target: u32,
    /// Displacement at the target, in the target's disp_units
    #[arg(long, default_value_t = 0)]
    disp: u64,
    /// Element type (i8 … u64, f32, f64, byte, bool, pairs as f64_i32 …); default: the
    /// window's own, when it was created with one (for files: byte)
    #[arg(long = "type", value_name = "TYPE")]
    dtype: Option<String>,
    /// The epoch's lock (default: shared for get, exclusive for the others)
    #[arg(long, value_enum)]
    lock: Option<LockArg>,
}

#[derive(Debug, Args)]
pub struct GetArgs {
    #[command(flatten)]
    epoch: EpochArgs,
    /// Number of elements
    #[arg(long, default_value_t = 1)]
    count: u64,
    /// Write the raw bytes to this file instead of printing values (type defaults to byte)
    #[arg(long, value_name = "FILE")]
    to_file: Option<PathBuf>,
    /// Bytes per operation for file transfers
    #[arg(long, default_value_t = 1 << 20, value_name = "BYTES")]
    chunk: u64,
}

#[derive(Debug, Args)]
pub struct PutArgs {
    #[command(flatten)]
    epoch: EpochArgs,
    /// Send this file's bytes instead of values (type defaults to byte)
    #[arg(long, value_name = "FILE", conflicts_with = "values")]
    from_file: Option<PathBuf>,
    /// Bytes per operation for file transfers
    #[arg(long, default_value_t = 1 << 20, value_name = "BYTES")]
    chunk: u64,
    /// The values, of --type
    #[arg(allow_negative_numbers = true, required_unless_present = "from_file")]
    values: Vec<String>,
}

#[derive(Debug, Args)]
pub struct AccArgs {
    #[command(flatten)]
    epoch: EpochArgs,
    /// The reduction (sum prod max min land band lor bor lxor bxor maxloc minloc replace)
    #[arg(long)]
    op: String,
    /// The values, of --type
    #[arg(allow_negative_numbers = true, required = true)]
    values: Vec<String>,
}

#[derive(Debug, Args)]
pub struct FopArgs {
    #[command(flatten)]
    epoch: EpochArgs,
    /// The reduction (as acc, plus no_op: an atomic read)
    #[arg(long)]
    op: String,
    /// The value (omitted for no_op)
    #[arg(allow_negative_numbers = true)]
    value: Option<String>,
}

#[derive(Debug, Args)]
pub struct CasArgs {
    #[command(flatten)]
    epoch: EpochArgs,
    /// The value the target must hold for the swap
    #[arg(long, allow_negative_numbers = true)]
    compare: String,
    /// The new value
    #[arg(allow_negative_numbers = true)]
    value: String,
}

struct Epoch {
    session: Session,
    window: Window,
    target: u32,
    disp: u64,
    dtype: Datatype,
}

fn op_of(text: &str) -> Result<Op> {
    Op::parse(text).ok_or_else(|| Usage(format!("unknown op \"{text}\"")).into())
}

fn typed(dtype: Datatype, texts: &[String]) -> Result<Vec<Value>> {
    texts
        .iter()
        .map(|text| parse_value(dtype, text).map_err(|e| Usage(e.message).into()))
        .collect()
}

async fn open(global: &Global, args: &EpochArgs, default: LockType, file: bool) -> Result<Epoch> {
    let given = args.dtype.as_deref().map(datatype).transpose()?;
    let token = global.token("the token of the rank to act as")?;
    let session = Session::attach(global.endpoint()?, token).await?;
    let opened = async {
        check_membership(&session, args.world.as_deref(), args.rank)?;
        let window = session.window_zeroed(&args.window).await?;
        let dtype = element_type(given, window.desc().info.element_type, file, &args.window)?;
        let lock = match args.lock {
            Some(LockArg::Shared) => LockType::Shared,
            Some(LockArg::Exclusive) => LockType::Exclusive,
            None => default,
        };
        window.lock(lock, args.target, 0).await?;
        Ok::<_, anyhow::Error>((window, dtype))
    }
    .await;
    match opened {
        Ok((window, dtype)) => Ok(Epoch {
            session,
            window,
            target: args.target,
            disp: args.disp,
            dtype,
        }),
        Err(error) => ended(session, Err(error)).await,
    }
}

/// Opens the epoch `args` describes ([`open`]), runs `body` in it, and ends the session
/// ([`ended`]) whatever came of it.
async fn in_epoch(
    global: &Global,
    args: &EpochArgs,
    default: LockType,
    file: bool,
    body: impl AsyncFnOnce(Epoch) -> Result<ExitCode>,
) -> Result<ExitCode> {
    let epoch = open(global, args, default, file).await?;
    let session = epoch.session.clone();
    ended(session, body(epoch).await).await
}

/// Ends the command's session cleanly ([`Session::close`]) and returns `outcome`: its error
/// first, else the close's.
async fn ended<T>(session: Session, outcome: Result<T>) -> Result<T> {
    let closed = session.close().await;
    let value = outcome?;
    closed?;
    Ok(value)
}

/// The operation's type: --type, else the window's own (when its creator named one), else
/// bytes for a file transfer.
fn element_type(
    given: Option<Datatype>,
    window_type: Option<Datatype>,
    file: bool,
    window: &str,
) -> Result<Datatype, Usage> {
    match (given, window_type, file) {
        (Some(dtype), _, _) | (None, Some(dtype), false) => Ok(dtype),
        (None, _, true) => Ok(Datatype::Byte),
        (None, None, false) => Err(Usage(format!(
            "--type is required: window {window} was created without an element type"
        ))),
    }
}

impl Epoch {
    fn spec(&self, kind: OpKind, count: u64, data: Vec<u8>) -> OpSpec {
        OpSpec::contiguous(kind, self.dtype, self.disp, count, Bytes::from(data))
    }

    /// Issues one operation, closes the epoch, and returns the operation's bytes.
    async fn one(self, spec: OpSpec) -> Result<Vec<Value>> {
        let issued = self.window.issue(self.target, spec, false);
        let unlocked = self.window.unlock(self.target).await;
        let bytes = issued?.value().await?;
        unlocked?;
        Ok(decode(self.dtype, &bytes)?)
    }

    /// Checks `spec` against the target's window as [`Window::issue`] does, sending nothing.
    fn check(&self, spec: &OpSpec) -> Result<(), onesided_client::Error> {
        let size = self
            .window
            .desc()
            .sizes
            .get(self.target as usize)
            .copied()
            .unwrap_or(0);
        spec.validate(size, self.disp_unit())?;
        Ok(())
    }

    /// A chunk size in bytes that is a whole number of elements and of disp_units.
    fn chunk_bytes(&self, wanted: u64) -> u64 {
        let unit = self.dtype.size() as u64 * u64::from(self.disp_unit());
        (wanted / unit).max(1) * unit
    }

    /// The target's disp_unit.
    fn disp_unit(&self) -> u32 {
        self.window
            .desc()
            .disp_units
            .get(self.target as usize)
            .copied()
            .unwrap_or(1)
    }
}

fn progress(global: &Global, total: u64) -> ProgressBar {
    crate::progress::bytes(global, total)
}

fn print_values(global: &Global, epoch_target: u32, values: &[Value], key: &str) {
    if global.json {
        let body = if key == "old" {
            json!({ "target": epoch_target, "old": values.first().map(json::value) })
        } else {
            json!({ "target": epoch_target, "values": json::values(values) })
        };
        json::print(&body);
    } else {
        let texts: Vec<String> = values.iter().map(Value::to_string).collect();
        outln!("{}", texts.join(" "));
    }
}

pub async fn get(global: &Global, args: GetArgs) -> Result<ExitCode> {
    let file = args.to_file.is_some();
    in_epoch(global, &args.epoch, Shared, file, async |epoch| {
        let Some(path) = &args.to_file else {
            let target = epoch.target;
            let spec = epoch.spec(OpKind::Get, args.count, Vec::new());
            let values = epoch.one(spec).await?;
            print_values(global, target, &values, "values");
            return Ok(ExitCode::SUCCESS);
        };
        let elem = epoch.dtype.size() as u64;
        let total = args.count * elem;
        let chunk = epoch.chunk_bytes(args.chunk);
        let bar = progress(global, total);
        let mut pending = Vec::new();
        let mut offset = 0;
        while offset < total {
            let len = chunk.min(total - offset);
            let mut spec = epoch.spec(OpKind::Get, len / elem, Vec::new());
            spec.disp = epoch.disp + offset / u64::from(epoch.disp_unit());
            pending.push(epoch.window.issue(epoch.target, spec, false));
            offset += len;
        }
        let mut data = Vec::with_capacity(total as usize);
        let mut first_error = None;
        for issued in pending {
            match issued {
                Ok(reply) => match reply.value().await {
                    Ok(bytes) => {
                        bar.inc(bytes.len() as u64);
                        data.extend_from_slice(&bytes);
                    }
                    Err(error) => {
                        first_error.get_or_insert(error);
                    }
                },
                Err(error) => {
                    first_error.get_or_insert(error);
                    break;
                }
            }
        }
        let unlocked = epoch.window.unlock(epoch.target).await;
        bar.finish_and_clear();
        if let Some(error) = first_error {
            return Err(error.into());
        }
        unlocked?;
        std::fs::write(path, &data)
            .map_err(|e| Usage(format!("cannot write {}: {e}", path.display())))?;
        if global.json {
            json::print(&json!({"target": epoch.target, "bytes": data.len(), "file": path}));
        }
        Ok(ExitCode::SUCCESS)
    })
    .await
}

pub async fn put(global: &Global, args: PutArgs) -> Result<ExitCode> {
    let file = args.from_file.is_some();
    in_epoch(global, &args.epoch, Exclusive, file, async |epoch| {
        let Some(path) = &args.from_file else {
            let values = typed(epoch.dtype, &args.values)?;
            let data = encode_all(epoch.dtype, &values)?;
            let spec = epoch.spec(OpKind::Put, values.len() as u64, data);
            let target = epoch.target;
            epoch.one(spec).await?;
            if global.json {
                json::print(&json!({"target": target, "elements": values.len()}));
            }
            return Ok(ExitCode::SUCCESS);
        };
        let data = std::fs::read(path)
            .with_context(|| format!("cannot read {}", path.display()))
            .map_err(|e| Usage(format!("{e:#}")))?;
        let elem = epoch.dtype.size() as u64;
        if !(data.len() as u64).is_multiple_of(elem) {
            return Err(Usage(format!(
                "{} has {} bytes, not a whole number of {} elements",
                path.display(),
                data.len(),
                epoch.dtype
            ))
            .into());
        }
        // the whole transfer is checked before any chunk is sent: a file that does not fit
        // leaves the target as it was, rather than with its first chunks written
        let whole = epoch.spec(OpKind::Put, data.len() as u64 / elem, data);
        if let Err(error) = epoch.check(&whole) {
            let _ = epoch.window.unlock(epoch.target).await;
            return Err(error.into());
        }
        let data = whole.data;
        let chunk = epoch.chunk_bytes(args.chunk);
        let bar = progress(global, data.len() as u64);
        let mut pending = Vec::new();
        let mut first_error = None;
        // each chunk is a slice of the file's one buffer, not a copy of it: the client holds the
        // file's bytes once, however many chunks are in flight
        for (index, start) in (0..data.len()).step_by(chunk as usize).enumerate() {
            let part = data.slice(start..data.len().min(start + chunk as usize));
            let len = part.len() as u64;
            let mut spec =
                OpSpec::contiguous(OpKind::Put, epoch.dtype, epoch.disp, len / elem, part);
            spec.disp = epoch.disp + index as u64 * chunk / u64::from(epoch.disp_unit());
            match epoch.window.issue(epoch.target, spec, false) {
                Ok(reply) => pending.push((len, reply)),
                Err(error) => {
                    first_error = Some(error);
                    break;
                }
            }
        }
        for (len, reply) in pending {
            match reply.value().await {
                Ok(_) => bar.inc(len),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        let unlocked = epoch.window.unlock(epoch.target).await;
        bar.finish_and_clear();
        if let Some(error) = first_error {
            return Err(error.into());
        }
        unlocked?;
        if global.json {
            json::print(&json!({"target": epoch.target, "bytes": data.len(), "file": path}));
        }
        Ok(ExitCode::SUCCESS)
    })
    .await
}

pub async fn acc(global: &Global, args: AccArgs) -> Result<ExitCode> {
    // a usage error before attaching
    let op = op_of(&args.op)?;
    in_epoch(global, &args.epoch, Exclusive, false, async |epoch| {
        let values = typed(epoch.dtype, &args.values)?;
        let data = encode_all(epoch.dtype, &values)?;
        let spec = epoch.spec(OpKind::Accumulate(op), values.len() as u64, data);
        let target = epoch.target;
        epoch.one(spec).await?;
        if global.json {
            json::print(&json!({"target": target, "elements": values.len(), "op": op.name()}));
        }
        Ok(ExitCode::SUCCESS)
    })
    .await
}

pub async fn fop(global: &Global, args: FopArgs) -> Result<ExitCode> {
    // a usage error before attaching
    let op = op_of(&args.op)?;
    in_epoch(global, &args.epoch, Exclusive, false, async |epoch| {
        let data = match (&args.value, op) {
            (_, Op::NoOp) => Vec::new(),
            (Some(value), _) => encode_all(
                epoch.dtype,
                &typed(epoch.dtype, std::slice::from_ref(value))?,
            )?,
            (None, _) => {
                return Err(Usage(format!("fop with op {} needs a value", op.name())).into())
            }
        };
        let spec = epoch.spec(OpKind::FetchAndOp(op), 1, data);
        let target = epoch.target;
        let old = epoch.one(spec).await?;
        print_values(global, target, &old, "old");
        Ok(ExitCode::SUCCESS)
    })
    .await
}

pub async fn cas(global: &Global, args: CasArgs) -> Result<ExitCode> {
    in_epoch(global, &args.epoch, Exclusive, false, async |epoch| {
        let value = typed(epoch.dtype, std::slice::from_ref(&args.value))?;
        let compare = typed(epoch.dtype, std::slice::from_ref(&args.compare))?;
        let mut spec = epoch.spec(OpKind::CompareAndSwap, 1, encode_all(epoch.dtype, &value)?);
        spec.compare = Bytes::from(encode_all(epoch.dtype, &compare)?);
        let target = epoch.target;
        let old = epoch.one(spec).await?;
        print_values(global, target, &old, "old");
        Ok(ExitCode::SUCCESS)
    })
    .await
}

/// Refuses a `--world`/`--rank` that the token does not belong to.
///
/// # Errors
/// A usage error naming what the token does belong to.
pub(crate) fn check_membership(
    session: &Session,
    world: Option<&str>,
    rank: Option<u32>,
) -> Result<(), Usage> {
    if let Some(world) = world {
        if world != session.world() {
            return Err(Usage(format!(
                "the token belongs to world {}, not {world}",
                session.world()
            )));
        }
    }
    if let Some(rank) = rank {
        if rank != session.rank() {
            return Err(Usage(format!(
                "the token belongs to rank {}, not {rank}",
                session.rank()
            )));
        }
    }
    Ok(())
}
