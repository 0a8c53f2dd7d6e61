//! `onesided run FILE`: parse a scenario, run it N times, print what was observed.
//!
//! Owns: the command's arguments, naming each run's world, the runs in sequence, how their
//! reports read (text, JSON, the distribution of outcomes over the runs), the warning about
//! rows a run did not record, and the exit status. Must not: parse or run a scenario itself
//! (the library's `scenario` does both), or decide whether an expectation held.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use clap::Args;
use futures::StreamExt;
use onesided_client::{Audit, AuditEvent, Finding};
use onesided_scenario::{self as scenario, rank_name, RunConfig, RunReport, Scenario};
use serde_json::{json, Value as Json};

use crate::exit::Usage;
use crate::{json, Global};

#[derive(Debug, Args)]
#[command(after_long_help = "\
The .rma format is described in docs/scenarios.md in the repository (the `window`, `alias`, \
`R: CALL`, `barrier` and `expect` lines, every call and its MPI counterpart). Each run creates \
a fresh world and fresh windows, attaches one session per rank, runs every rank concurrently, \
checks the expectations, and deletes the world. Exit status: 0 when every expectation held in \
every run, 1 when one did not (or a call failed without `!CLASS`, or a rank got stuck past \
--timeout, 30 s by default), 2 when the file does not parse (FILE:LINE:COLUMN: message), 3 when \
the server refused to set the run up, 4 when it cannot be reached.

`crash` ends the rank's session without any cleanup, as a killed process would: the server \
sees its stream end, revokes its locks, and fails with PROC_FAILED the fences, waits and \
barriers of other ranks that need it (a client that hangs instead of dying is treated so once \
its lease lapses, after the server's --lease-ttl). `attach` attaches a new session with the \
same token (a new incarnation) and reopens the windows, with a fresh, zeroed private copy.

--audit prints the ids of the windows each run created (with --json: a top-level \"windows\" list \
of {name, id} over all runs, and the same per run); read their history with `onesided audit log \
ID`, `audit replay ID`, `audit verify ID`. The server records whenever its audit is on (the \
default); --audit warns on stderr when it is off.

--check runs the race checker (`onesided audit check`) over every window of every run once the \
run's log is complete, prints its findings (with --json: a top-level \"findings\" list of \
{run, window, id, findings}) and exits 1 when there is one, as when an expectation failed: the \
`_broken` examples then fail with what they break.")]
pub struct RunArgs {
    /// The scenario file (.rma)
    file: PathBuf,
    /// Run it this many times and print the distribution of observed values
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Report the ids of the windows each run created, to read with `onesided audit`
    #[arg(long)]
    audit: bool,
    /// Run the race checker over every window each run created; a finding fails the command
    #[arg(long)]
    check: bool,
    /// Admin token (default: --token / ONESIDED_TOKEN)
    #[arg(long, env = "ONESIDED_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
}

fn observed_text(value: &scenario::Observed) -> String {
    value.to_string()
}

fn report_json(report: &RunReport, scenario: &Scenario, audit: bool) -> Json {
    let ranks: Vec<Json> = report
        .ranks
        .iter()
        .map(|rank| {
            let vars: serde_json::Map<String, Json> = rank
                .vars
                .iter()
                .map(|(name, value)| (name.clone(), json::observed(&value.value)))
                .collect();
            let failed: Vec<Json> = rank
                .failed_calls
                .iter()
                .map(|call| {
                    json!({
                        "line": call.line,
                        "call": call.call,
                        "class": call.class.map(|class| class.name()),
                        "message": call.message,
                        "expected": call.expected,
                    })
                })
                .collect();
            json!({
                "rank": rank.rank,
                "name": rank_name(rank.rank, scenario.ranks),
                "vars": vars,
                "failed_calls": failed,
            })
        })
        .collect();
    let expectations: Vec<Json> = report
        .expectations
        .iter()
        .map(|outcome| {
            json!({
                "line": outcome.line,
                "text": outcome.text,
                "held": outcome.held,
                "observed": outcome.observed.as_ref().map(json::observed),
                "note": outcome.note,
            })
        })
        .collect();
    let problems: Vec<Json> = report
        .problems
        .iter()
        .map(|problem| json!({"line": problem.line, "message": problem.message}))
        .collect();
    let mut run = json!({
        "run": report.run,
        "ok": report.ok(),
        "ranks": ranks,
        "expectations": expectations,
        "problems": problems,
    });
    if audit {
        run["windows"] = report
            .windows
            .iter()
            .map(|window| json!({"name": window.name, "id": window.id}))
            .collect();
    }
    run
}

/// Per variable (`A a`), how often each value was observed.
type Distribution = BTreeMap<String, BTreeMap<String, u32>>;

fn distribution(reports: &[RunReport], scenario: &Scenario) -> Distribution {
    let mut seen: Distribution = BTreeMap::new();
    for report in reports {
        for rank in &report.ranks {
            for (name, value) in &rank.vars {
                let key = format!("{} {name}", rank_name(rank.rank, scenario.ranks));
                *seen
                    .entry(key)
                    .or_default()
                    .entry(observed_text(&value.value))
                    .or_default() += 1;
            }
        }
    }
    seen
}

fn print_text(file: &str, reports: &[RunReport], scenario: &Scenario, audit: bool) {
    let single = reports.len() == 1;
    for report in reports {
        let verdict = if report.ok() { "ok" } else { "FAILED" };
        outln!("run {}: {verdict}", report.run);
        if audit {
            for window in &report.windows {
                outln!("  window {} id {}", window.name, window.id);
            }
        }
        for problem in &report.problems {
            outln!("  {file}:{}: {}", problem.line, problem.message);
        }
        for outcome in &report.expectations {
            if single || !outcome.held {
                let observed = match (&outcome.observed, &outcome.note) {
                    (Some(value), _) => format!("observed {value}"),
                    (None, Some(note)) => note.clone(),
                    (None, None) => "nothing observed".into(),
                };
                let verdict = if outcome.held { "held" } else { "did NOT hold" };
                outln!(
                    "  {file}:{}: {}: {verdict} ({observed})",
                    outcome.line,
                    outcome.text
                );
            }
        }
        if single {
            for rank in &report.ranks {
                for call in rank.failed_calls.iter().filter(|call| call.expected) {
                    outln!(
                        "  {file}:{}: {} `{}` failed as expected: {}",
                        call.line,
                        rank_name(rank.rank, scenario.ranks),
                        call.call,
                        call.message
                    );
                }
            }
        }
    }
    let seen = distribution(reports, scenario);
    if !seen.is_empty() {
        outln!("variables over {} run(s):", reports.len());
        for (var, values) in &seen {
            let parts: Vec<String> = values
                .iter()
                .map(|(value, count)| format!("{value} ×{count}"))
                .collect();
            outln!("  {var}: {}", parts.join(", "));
        }
    }
    let runs = reports.len();
    let failed = reports.iter().filter(|r| !r.ok()).count();
    let expectations = scenario.expectations.len();
    if failed == 0 {
        outln!("ok: {expectations} expectation(s) held in {runs} run(s)");
    } else {
        outln!("FAILED: {failed} of {runs} run(s) failed");
    }
}

/// The race checker's findings over one window of one run.
struct Checked {
    run: usize,
    name: String,
    id: u64,
    findings: Vec<Finding>,
}

/// Checks every window of every run, once its log holds the window's end (`window_freed`: the
/// run deleted its world; the answer to that may come before the event's commit).
async fn check_runs(config: &RunConfig, reports: &[RunReport]) -> Result<Vec<Checked>> {
    let audit = Audit::connect(&config.endpoint, &config.admin_token).await?;
    let mut checked = Vec::new();
    for report in reports {
        for window in &report.windows {
            let ended = until_freed(&audit, window.id);
            tokio::time::timeout(config.timeout, ended)
                .await
                .map_err(|_| {
                    anyhow::anyhow!(
                        "the log of window {} (id {}) did not end within {} s: cannot check it",
                        window.name,
                        window.id,
                        config.timeout.as_secs_f64()
                    )
                })??;
            checked.push(Checked {
                run: report.run,
                name: window.name.clone(),
                id: window.id,
                findings: audit.check(window.id).await?,
            });
        }
    }
    Ok(checked)
}

/// Follows window `id`'s log until its `window_freed` event.
async fn until_freed(audit: &Audit, id: u64) -> Result<()> {
    let mut events = std::pin::pin!(audit.follow(id, 1).await?);
    while let Some(entry) = events.next().await {
        if matches!(entry?.event, Some(AuditEvent::WindowFreed)) {
            return Ok(());
        }
    }
    Err(anyhow::anyhow!(
        "the log of window {id} ended before the window was freed"
    ))
}

fn print_findings(checked: &[Checked]) {
    for checked in checked {
        let count = match checked.findings.len() {
            0 => "no findings".to_string(),
            1 => "1 finding".to_string(),
            n => format!("{n} findings"),
        };
        outln!(
            "run {}: window {} (id {}): {count}",
            checked.run,
            checked.name,
            checked.id
        );
        for finding in &checked.findings {
            outln!("  {}", crate::audit::finding_text(finding));
        }
    }
}

/// Warns on stderr about windows the run created that the server did not record (its audit is
/// off, or its store failed): their ids lead nowhere.
async fn warn_unrecorded(config: &RunConfig, reports: &[RunReport]) {
    let recorded = match Audit::connect(&config.endpoint, &config.admin_token).await {
        Ok(audit) => audit.windows().await,
        Err(error) => Err(error),
    };
    match recorded {
        Ok(recorded) => {
            for window in reports.iter().flat_map(|report| &report.windows) {
                if !recorded.iter().any(|r| r.id == window.id) {
                    eprintln!(
                        "onesided: warning: window {} (id {}) is not in the audit log",
                        window.name, window.id
                    );
                }
            }
        }
        Err(error) => eprintln!("onesided: warning: cannot read the audit log: {error}"),
    }
}

pub async fn run(global: &Global, args: RunArgs) -> Result<ExitCode> {
    let file = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| Usage(format!("cannot read {file}: {e}")))?;
    let scenario = scenario::parse(&text).map_err(|e| Usage(format!("{file}:{e}")))?;
    let admin_token = match args.admin_token.as_deref() {
        Some(token) => token.to_string(),
        None => global
            .token("the admin token, to create the run's world")?
            .to_string(),
    };
    let stem: String = args
        .file
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(40)
        .collect();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let config = RunConfig {
        endpoint: global.endpoint()?,
        admin_token,
        timeout: global.timeout,
        prefix: format!("run-{stem}-{}-{nanos}", std::process::id()),
    };
    let mut reports = Vec::new();
    for index in 1..=args.repeat {
        reports.push(scenario::run(&scenario, &config, index as usize).await?);
    }
    let checked = if args.check {
        Some(check_runs(&config, &reports).await?)
    } else {
        None
    };
    let clean = checked
        .iter()
        .flatten()
        .all(|checked| checked.findings.is_empty());
    let ok = reports.iter().all(RunReport::ok) && clean;
    if args.audit {
        warn_unrecorded(&config, &reports).await;
    }
    if global.json {
        let runs: Vec<Json> = reports
            .iter()
            .map(|report| report_json(report, &scenario, args.audit))
            .collect();
        let mut document = json!({
            "file": file,
            "runs": runs,
            "distribution": distribution(&reports, &scenario),
            "ok": ok,
        });
        if args.audit {
            document["windows"] = reports
                .iter()
                .flat_map(|report| &report.windows)
                .map(|window| json!({"name": window.name, "id": window.id}))
                .collect();
        }
        if let Some(checked) = &checked {
            document["findings"] = checked
                .iter()
                .map(|checked| {
                    json!({
                        "run": checked.run,
                        "window": checked.name,
                        "id": checked.id,
                        "findings": checked
                            .findings
                            .iter()
                            .map(crate::audit::finding_json)
                            .collect::<Vec<_>>(),
                    })
                })
                .collect();
        }
        json::print(&document);
    } else {
        print_text(&file, &reports, &scenario, args.audit);
        if let Some(checked) = &checked {
            print_findings(checked);
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
