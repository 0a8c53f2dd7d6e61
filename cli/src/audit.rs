//! `onesided audit …`: the recorded history of windows, as an admin reads it.
//!
//! `ls` lists the recorded windows, `log` prints a window's events (and follows live ones),
//! `replay` rebuilds every rank's public copy at a sequence number, `check` reports the pairs of
//! conflicting accesses no synchronization orders, `verify` checks the hash chain, `export`
//! writes the timeline as a Perfetto trace.
//!
//! Owns: these commands' arguments (a window by id or `WORLD/NAME`), a one-line summary of
//! every event kind, typed rendering of bytes (with the window's element type when known), and
//! how verdicts and findings read, in text and JSON, with their exit status. Must not: replay,
//! verify, check or export anything itself (the server runs core's code; the library's `Audit`
//! brings the answers), or read the store directly.

use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use futures::StreamExt;
use onesided_client::{
    Admin, Assert, Audit, AuditEntry, AuditEvent, ClientSpan, Datatype, Finding, FindingSide,
};
use onesided_core::datatype;
use serde_json::{json, Value as Json};

use crate::exit::Usage;
use crate::table::{self, Align, Align::Left, Align::Right};
use crate::{json, Global};

/// The end of `audit --help`.
pub const AFTER_HELP: &str = "\
WINDOW is a window id (as `audit ls` and `run --audit` print them) or WORLD/NAME, the newest \
recorded window of that name. Every subcommand but `export` takes --json: `ls` one document, \
`log` one object per line (the event's body as an object), `replay`, `check` and `verify` one \
document. `export --format perfetto` writes Chrome trace-event JSON (one track per rank, epochs \
as slices, operations as flow arrows) to stdout or --output; open it in https://ui.perfetto.dev.

Rows a client persisted itself (a session with ONESIDED_AUDIT_DATABASE_URL) follow the \
`client_events` marker that names them: `log` shows them as SEQ:CSEQ (the marker's seq, the \
row's number in its client's chain; JSON: `cseq`), `check` names them the same way, and \
`verify` also checks each client's chain against its markers.

Exit status: 0 success; 1 when `check` reports findings or `verify` finds the log broken (it \
prints the first bad sequence number); 2 usage errors (a WINDOW that is neither, an unknown \
--type or --format, a --type that does not divide a rank's copy, an unwritable --output); 3 the \
server refused (no such window, a wrong token, an audit that is off on the server); 4 it cannot \
be reached.";

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// List the recorded windows: id, world, name, number of events
    Ls,
    /// Print a window's events in sequence order, one per line
    Log(LogArgs),
    /// Rebuild every rank's public copy from the log, at the end or after event --at
    Replay(ReplayArgs),
    /// Report the conflicting accesses no synchronization orders: exit 0 none, 1 findings
    Check(CheckArgs),
    /// Check a window's hash chain and its client chains: exit 0 intact, 1 broken (naming where)
    Verify(VerifyArgs),
    /// Write a window's timeline as a trace (Perfetto: one track per rank)
    Export(ExportArgs),
}

/// A recorded window: its numeric id, or `WORLD/NAME` (the newest window of that name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowRef {
    /// A window id.
    Id(u64),
    /// World and window name.
    Named(String, String),
}

impl FromStr for WindowRef {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if let Ok(id) = text.parse() {
            return Ok(WindowRef::Id(id));
        }
        match text.split_once('/') {
            Some((world, name)) if !world.is_empty() && !name.is_empty() => {
                Ok(WindowRef::Named(world.to_string(), name.to_string()))
            }
            _ => Err(format!("\"{text}\" is neither a window id nor WORLD/NAME")),
        }
    }
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// The window: its id (as `audit ls` or `run --audit` print it) or WORLD/NAME
    window: WindowRef,
    /// Start at this sequence number
    #[arg(long, default_value_t = 1, value_name = "SEQ")]
    from: u64,
    /// Keep printing events as they are recorded, until interrupted
    #[arg(long)]
    follow: bool,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The window: its id or WORLD/NAME
    window: WindowRef,
    /// Replay the events up to and including this sequence number (default: all of them)
    #[arg(long, value_name = "SEQ", value_parser = clap::value_parser!(u64).range(1..))]
    at: Option<u64>,
    /// Decode each copy as elements of this type. Default: the window's element type while the
    /// window still exists (the log does not record one), else hex bytes grouped by disp_unit
    #[arg(long = "type", value_name = "TYPE")]
    dtype: Option<String>,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The window: its id or WORLD/NAME
    window: WindowRef,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The window: its id or WORLD/NAME
    window: WindowRef,
}

/// What `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Chrome trace-event JSON, as the Perfetto UI opens it
    Perfetto,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The window: its id or WORLD/NAME
    window: WindowRef,
    /// The trace format
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: ExportFormat,
    /// Write the trace to this file instead of stdout
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
}

async fn connect(global: &Global) -> Result<Audit> {
    let token = global.token("the admin token")?;
    Ok(Audit::connect(global.endpoint()?, token).await?)
}

/// The window id `window` names: itself, or the newest recorded window of that world and name.
async fn resolve(audit: &Audit, window: &WindowRef) -> Result<u64> {
    match window {
        WindowRef::Id(id) => Ok(*id),
        WindowRef::Named(world, name) => audit
            .windows()
            .await?
            .iter()
            .filter(|w| &w.world == world && &w.name == name)
            .map(|w| w.id)
            .max()
            .ok_or_else(|| {
                onesided_client::Error::Status {
                    code: tonic::Code::NotFound,
                    message: format!("no recorded window {world}/{name}"),
                }
                .into()
            }),
    }
}

pub async fn audit(global: &Global, command: AuditCommand) -> Result<ExitCode> {
    let audit = connect(global).await?;
    match command {
        AuditCommand::Ls => ls(global, &audit).await,
        AuditCommand::Log(args) => log(global, &audit, args).await,
        AuditCommand::Replay(args) => replay(global, &audit, args).await,
        AuditCommand::Check(args) => check(global, &audit, args).await,
        AuditCommand::Verify(args) => verify(global, &audit, args).await,
        AuditCommand::Export(args) => export(global, &audit, args).await,
    }
}

/// The columns of `audit ls`: the numbers right-aligned.
const LS_COLUMNS: &[(&str, Align)] = &[
    ("ID", Right),
    ("WORLD", Left),
    ("NAME", Left),
    ("EVENTS", Right),
];

async fn ls(global: &Global, audit: &Audit) -> Result<ExitCode> {
    let windows = audit.windows().await?;
    if global.json {
        let list: Vec<Json> = windows
            .iter()
            .map(|w| json!({"id": w.id, "world": w.world, "name": w.name, "events": w.events}))
            .collect();
        json::print(&json!({ "windows": list }));
    } else {
        table::print(
            LS_COLUMNS,
            windows
                .iter()
                .map(|w| table::row(&[&w.id, &w.world, &w.name, &w.events])),
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

/// Hex, cut after 32 bytes.
fn short_hex(bytes: &[u8]) -> String {
    const MAX: usize = 32;
    if bytes.len() <= MAX {
        hex(bytes)
    } else {
        format!("{}…({} bytes)", hex(&bytes[..MAX]), bytes.len())
    }
}

fn joined<T: ToString>(values: &[T]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn ranges(runs: &[(u64, u64)]) -> String {
    runs.iter()
        .map(|(offset, len)| format!("{offset}+{len}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn assert_names(bits: u32) -> String {
    let names: Vec<&str> = [
        (Assert::NOCHECK, "nocheck"),
        (Assert::NOSTORE, "nostore"),
        (Assert::NOPUT, "noput"),
        (Assert::NOPRECEDE, "noprecede"),
        (Assert::NOSUCCEED, "nosucceed"),
    ]
    .iter()
    .filter(|(bit, _)| bits & bit != 0)
    .map(|(_, name)| *name)
    .collect();
    let unknown = bits
        & !(Assert::NOCHECK
            | Assert::NOSTORE
            | Assert::NOPUT
            | Assert::NOPRECEDE
            | Assert::NOSUCCEED);
    let mut text = if names.is_empty() {
        "0".to_string()
    } else {
        names.join(",")
    };
    if unknown != 0 {
        text.push_str(&format!("+{unknown:#x}"));
    }
    text
}

/// Bytes of `datatype` as values (`[1 2 3]`), or hex when they are not whole elements.
fn typed(datatype: &str, bytes: &[u8]) -> String {
    Datatype::parse(datatype)
        .and_then(|dtype| datatype::decode(dtype, bytes).ok())
        .map(|values| {
            let shown: Vec<String> = values.iter().take(16).map(ToString::to_string).collect();
            let more = if values.len() > 16 {
                format!(" …({} elements)", values.len())
            } else {
                String::new()
            };
            format!("[{}{more}]", shown.join(" "))
        })
        .unwrap_or_else(|| short_hex(bytes))
}

/// A JSON field's value: strings bare, `null` as `-`, lists comma-separated, pairs as `a..b`
/// (the byte ranges of loads, stores, pulls and issued operations are `[start, end)`).
fn field_text(value: &Json) -> String {
    match value {
        Json::String(text) => text.clone(),
        Json::Null => "-".into(),
        Json::Array(items) => items
            .iter()
            .map(|item| match item.as_array().map(Vec::as_slice) {
                Some([a, b]) => format!("{a}..{b}"),
                _ => field_text(item),
            })
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

/// Every field of a stored body but its name, as `key=value` in key order: for events this
/// version has no special text for (and for bodies it cannot read).
fn generic_summary(body: &str) -> String {
    let Ok(Json::Object(fields)) = serde_json::from_str::<Json>(body) else {
        return body.to_string();
    };
    fields
        .iter()
        .filter(|(key, _)| key.as_str() != "event")
        .map(|(key, value)| format!("{key}={}", field_text(value)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A readable summary of an event's fields.
pub fn summary(event: &AuditEvent, body: &str) -> String {
    match event {
        AuditEvent::WindowCreated {
            world,
            name,
            sizes,
            disp_units,
            ..
        } => format!(
            "world={world} name={name} sizes={} disp_units={}",
            joined(sizes),
            joined(disp_units)
        ),
        AuditEvent::RegionAttached { base, size } | AuditEvent::RegionDetached { base, size } => {
            format!("base={base:#x} size={size}")
        }
        AuditEvent::Published { offset, data, .. } => {
            format!(
                "offset={offset} len={} data={}",
                data.len(),
                short_hex(data)
            )
        }
        AuditEvent::FenceEnter { fence, assert, .. } => {
            format!("fence={fence} assert={}", assert_names(*assert))
        }
        AuditEvent::Post { group, assert, .. } | AuditEvent::Start { group, assert, .. } => {
            format!("group={} assert={}", joined(group), assert_names(*assert))
        }
        AuditEvent::LockRequest {
            origin,
            lock_type,
            nocheck,
            ..
        } => format!(
            "origin={origin} {lock_type}{}",
            if *nocheck { " nocheck" } else { "" }
        ),
        AuditEvent::LockGrant {
            origin,
            lock_type,
            token,
            ..
        } => format!("origin={origin} {lock_type} token={token}"),
        AuditEvent::Op {
            origin,
            op,
            datatype,
            disp,
            runs,
            data,
            compare,
            result,
            ..
        } => {
            let mut text = format!(
                "{} origin={origin} {datatype} disp={disp} bytes={}",
                op,
                ranges(runs)
            );
            if !data.is_empty() {
                text.push_str(&format!(" data={}", typed(datatype, data)));
            }
            if !compare.is_empty() {
                text.push_str(&format!(" compare={}", typed(datatype, compare)));
            }
            if !result.is_empty() {
                text.push_str(&format!(" result={}", typed(datatype, result)));
            }
            text
        }
        _ => generic_summary(body),
    }
}

fn kind(entry: &AuditEntry) -> String {
    match &entry.event {
        Some(event) => event.kind().to_string(),
        None => serde_json::from_str::<Json>(&entry.body)
            .ok()
            .and_then(|body| body["event"].as_str().map(str::to_string))
            .unwrap_or_else(|| "unreadable".into()),
    }
}

fn entry_json(entry: &AuditEntry) -> Json {
    let body = serde_json::from_str::<Json>(&entry.body).unwrap_or_else(|_| json!(entry.body));
    json!({
        "window": entry.window,
        "seq": entry.seq,
        "cseq": entry.cseq,
        "at_ns": entry.at_ns,
        "rank": entry.rank,
        "incarnation": entry.incarnation,
        "kind": kind(entry),
        "event": body,
        "hash": hex(&entry.hash),
    })
}

const LOG_HEADER: &str = "      SEQ         T_MS  RANK   INC KIND            EVENT";

fn entry_text(entry: &AuditEntry) -> String {
    let summary = match &entry.event {
        Some(event) => summary(event, &entry.body),
        None => generic_summary(&entry.body),
    };
    let line = format!(
        "{:>9} {:>12.3} {:>5} {:>5} {:<15} {summary}",
        entry.place(),
        entry.at_ns as f64 / 1e6,
        entry.rank,
        entry.incarnation,
        kind(entry),
    );
    line.trim_end().to_string()
}

fn print_entry(global: &Global, entry: &AuditEntry) {
    if global.json {
        json::print(&entry_json(entry));
    } else {
        outln!("{}", entry_text(entry));
    }
}

async fn log(global: &Global, audit: &Audit, args: LogArgs) -> Result<ExitCode> {
    let window = resolve(audit, &args.window).await?;
    if !global.json {
        outln!("{LOG_HEADER}");
    }
    if args.follow {
        let mut stream = Box::pin(audit.follow(window, args.from).await?);
        while let Some(entry) = stream.next().await {
            print_entry(global, &entry?);
        }
    } else {
        for entry in audit.events(window, args.from).await? {
            print_entry(global, &entry);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Sizes and disp_units from the window's first event, when it is the creation.
/// What the log's first event says of window `window`.
struct Created {
    world: String,
    name: String,
    disp_units: Vec<u32>,
}

async fn shape(audit: &Audit, window: u64) -> Option<Created> {
    // the first event of the non-following stream; the rest is not read
    let mut stream = Box::pin(audit.follow(window, 1).await.ok()?);
    let first = stream.next().await?.ok()?;
    match first.event? {
        AuditEvent::WindowCreated {
            world,
            name,
            disp_units,
            ..
        } => Some(Created {
            world,
            name,
            disp_units,
        }),
        _ => None,
    }
}

/// The element type window `window` was created with, if it still exists (a window of the
/// same name created since is another window, with its own id).
async fn live_element_type(global: &Global, window: u64, created: &Created) -> Option<Datatype> {
    let token = global.token("the admin token").ok()?;
    let admin = Admin::connect(global.endpoint().ok()?, token).await.ok()?;
    let desc = admin
        .describe_window(&created.world, &created.name)
        .await
        .ok()?;
    (desc.id == window)
        .then_some(desc.info.element_type)
        .flatten()
}

fn grouped_hex(bytes: &[u8], unit: usize) -> String {
    if bytes.is_empty() {
        return "(empty)".into();
    }
    bytes
        .chunks(unit.max(1))
        .map(hex)
        .collect::<Vec<_>>()
        .join(" ")
}

async fn replay(global: &Global, audit: &Audit, args: ReplayArgs) -> Result<ExitCode> {
    let dtype = args
        .dtype
        .as_deref()
        .map(crate::admin::datatype)
        .transpose()?;
    let window = resolve(audit, &args.window).await?;
    let replayed = audit.replay(window, args.at).await?;
    let created = shape(audit, window).await;
    let dtype = match (dtype, &created) {
        (None, Some(created)) => live_element_type(global, window, created).await,
        _ => dtype,
    };
    let disp_units = created
        .map(|created| created.disp_units)
        .unwrap_or_default();
    let mut ranks = Vec::new();
    for (rank, copy) in replayed.ranks.iter().enumerate() {
        let values = match dtype {
            Some(dtype) => Some(datatype::decode(dtype, copy).map_err(|_| {
                Usage(format!(
                    "rank {rank}'s copy of {} bytes is not a whole number of {dtype} elements",
                    copy.len()
                ))
            })?),
            None => None,
        };
        ranks.push((rank, copy, values));
    }
    if global.json {
        let list: Vec<Json> = ranks
            .iter()
            .map(|(rank, copy, values)| {
                let mut doc = json!({
                    "rank": rank,
                    "size": copy.len(),
                    "disp_unit": disp_units.get(*rank),
                    "bytes": hex(copy),
                });
                if let Some(values) = values {
                    doc["values"] = json::values(values);
                }
                doc
            })
            .collect();
        json::print(&json!({
            "window": window,
            "at": replayed.at,
            "type": dtype.map(Datatype::name),
            "ranks": list,
        }));
    } else {
        outln!("window {window} after seq {}", replayed.at);
        for (rank, copy, values) in &ranks {
            let text = match values {
                Some(values) => values
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" "),
                None => grouped_hex(copy, disp_units.get(*rank).copied().unwrap_or(1) as usize),
            };
            outln!("rank {rank}: {text}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn verify(global: &Global, audit: &Audit, args: VerifyArgs) -> Result<ExitCode> {
    let window = resolve(audit, &args.window).await?;
    let verification = audit.verify(window).await?;
    let spans = |spans: &[ClientSpan]| -> Vec<Json> {
        spans
            .iter()
            .map(|span| {
                json!({"rank": span.rank, "incarnation": span.incarnation,
                       "from": span.from, "to": span.to})
            })
            .collect()
    };
    if global.json {
        let client_break = verification.client_break.map(|at| {
            json!({
                "rank": at.rank,
                "incarnation": at.incarnation,
                "cseq": at.cseq,
                "fault": at.fault.name(),
            })
        });
        json::print(&json!({
            "window": window,
            "events": verification.events,
            "client_events": verification.client_events,
            "intact": verification.first_bad.is_none(),
            "first_bad": verification.first_bad,
            "client_break": client_break,
            "pending": spans(&verification.pending),
            "unmarked": spans(&verification.unmarked),
        }));
    } else {
        let counts = match verification.client_events {
            0 => format!("{} events", verification.events),
            client => format!("{} events, {client} client events", verification.events),
        };
        match (verification.first_bad, verification.client_break) {
            (None, _) => outln!("window {window}: intact ({counts})"),
            (Some(seq), None) => outln!("window {window}: broken at seq {seq} ({counts})"),
            (Some(seq), Some(at)) => outln!(
                "window {window}: broken at seq {seq}: the client rows of rank {} incarnation {} \
                 it names are broken at cseq {} ({}) ({counts})",
                at.rank,
                at.incarnation,
                at.cseq,
                at.fault.describe(),
            ),
        }
        for span in &verification.pending {
            outln!(
                "rank {} incarnation {}: client rows {}..={} are named but not stored yet (the \
                 client is still attached and writing them)",
                span.rank,
                span.incarnation,
                span.from,
                span.to
            );
        }
        for span in &verification.unmarked {
            outln!(
                "rank {} incarnation {}: client rows {}..={} are named by no marker (the client \
                 stopped before shipping it, or is still running); they are not merged",
                span.rank,
                span.incarnation,
                span.from,
                span.to
            );
        }
    }
    Ok(match verification.first_bad {
        None => ExitCode::SUCCESS,
        Some(_) => ExitCode::from(1),
    })
}

fn side_json(side: &FindingSide) -> Json {
    json!({"seq": side.seq, "cseq": side.cseq, "rank": side.rank, "call": side.call})
}

pub(crate) fn finding_json(finding: &Finding) -> Json {
    json!({
        "rule": finding.rule.name(),
        "description": finding.rule.describe(),
        "target": finding.target,
        "bytes": [finding.bytes.0, finding.bytes.1],
        "first": side_json(&finding.first),
        "second": side_json(&finding.second),
        "message": finding.message,
    })
}

fn side_text(side: &FindingSide) -> String {
    let place = onesided_core::audit::place(side.seq, side.cseq);
    format!("seq {place} rank {} {}", side.rank, side.call)
}

/// One line: the rule, the bytes at the target, both sides, the message.
pub(crate) fn finding_text(finding: &Finding) -> String {
    let mut line = format!(
        "{} bytes [{},{}) at rank {}: {} / {}",
        finding.rule.name(),
        finding.bytes.0,
        finding.bytes.1,
        finding.target,
        side_text(&finding.first),
        side_text(&finding.second),
    );
    if !finding.message.is_empty() {
        line.push_str(": ");
        line.push_str(&finding.message);
    }
    line
}

async fn check(global: &Global, audit: &Audit, args: CheckArgs) -> Result<ExitCode> {
    let window = resolve(audit, &args.window).await?;
    let findings = audit.check(window).await?;
    if global.json {
        let list: Vec<Json> = findings.iter().map(finding_json).collect();
        json::print(&json!({
            "window": window,
            "findings": list,
            "ok": findings.is_empty(),
        }));
    } else {
        for finding in &findings {
            outln!("{}", finding_text(finding));
        }
        match findings.len() {
            0 => outln!("window {window}: no findings"),
            1 => outln!("window {window}: 1 finding"),
            n => outln!("window {window}: {n} findings"),
        }
    }
    Ok(if findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

async fn export(global: &Global, audit: &Audit, args: ExportArgs) -> Result<ExitCode> {
    let window = resolve(audit, &args.window).await?;
    let spinner = crate::progress::waiting(global, &format!("exporting window {window}"));
    let exported = match args.format {
        ExportFormat::Perfetto => audit.export_perfetto(window).await,
    };
    spinner.finish_and_clear();
    let trace = exported?;
    match &args.output {
        Some(path) => std::fs::write(path, trace.as_bytes())
            .map_err(|error| Usage(format!("cannot write {}: {error}", path.display())))?,
        None => {
            crate::out::bytes(trace.as_bytes());
            if !trace.ends_with('\n') {
                crate::out::bytes(b"\n");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_refs_parse() {
        assert_eq!("12".parse::<WindowRef>(), Ok(WindowRef::Id(12)));
        assert_eq!(
            "w/x".parse::<WindowRef>(),
            Ok(WindowRef::Named("w".into(), "x".into()))
        );
        assert!("nothing".parse::<WindowRef>().is_err());
        assert!("/x".parse::<WindowRef>().is_err());
    }

    #[test]
    fn summaries_are_readable() {
        // bodies as the server stores them; parsed with core's parser, so this stays true as
        // events gain fields
        let op = r#"{"event":"op","origin":1,"origin_incarnation":2,"op_id":7,
            "op":{"accumulate":"sum"},"datatype":"i64","disp":2,"runs":[[16,8]],
            "data":"0500000000000000","compare":"","result":""}"#;
        let fence = r#"{"event":"fence_enter","fence":3,"assert":18}"#;
        let pulled = r#"{"event":"pulled","ranges":[[0,8],[16,24]]}"#;
        let text = |body: &str| match AuditEvent::from_json(body) {
            Ok(event) => summary(&event, body),
            Err(_) => generic_summary(body),
        };
        assert_eq!(
            text(op),
            "accumulate(sum) origin=1 i64 disp=2 bytes=16+8 data=[5]"
        );
        assert_eq!(text(fence), "fence=3 assert=nostore,nosucceed");
        assert_eq!(text(pulled), "ranges=0..8,16..24");
        assert_eq!(
            generic_summary(r#"{"event":"x","target":null,"call":"lock"}"#),
            "call=lock target=-"
        );
    }
}
