//! `onesided shell`: one rank, interactively. Each line is a scenario call for this rank
//! (`lock shared 1`, `get 1 W[0] -> a`, `unlock 1`, `print a`), run at once. With a terminal it
//! has line editing and history; otherwise it reads lines from stdin (for scripts and tests).
//!
//! Owns: the shell's own commands (`open`, `alias`, `print`, `vars`, `barrier`, `help`,
//! `quit`), the windows it opens with their element types, its prompt, line editing, and the
//! exit status of a non-interactive run. Must not: parse or carry out a call itself (the
//! library's scenario `Parser` and `RankExecutor` do, as in `onesided run`), or decide an MPI
//! rule.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use onesided_client::{Datatype, Flavor};
use onesided_scenario::ast::{FlavorDecl, Model, WindowDecl};
use onesided_scenario::{Parser, RankExecutor};
use serde_json::json;

use crate::admin::datatype;
use crate::exit::Usage;
use crate::{json, Global};

#[derive(Debug, Args)]
#[command(after_long_help = "\
In the shell, `help` lists the commands; each call is written as in a .rma scenario file \
(docs/scenarios.md in the repository describes them). Without a terminal, lines are read from stdin, \
results go to stdout and errors to stderr, and the exit status is 1 when any line failed.")]
pub struct ShellArgs {
    /// The world (checked against the token)
    #[arg(long)]
    world: Option<String>,
    /// This rank (checked against the token)
    #[arg(long)]
    rank: Option<u32>,
}

const HELP: &str = "\
commands (one rank, the token's):
  open NAME [type=T]        open a window of the world; T defaults to the window's element
                            type, else to a signed integer of its disp_unit (bytes for 1)
  alias X = NAME[i]         name a location
  CALL [!CLASS]             any scenario call of this rank, for example:
    store W[0] = 7          load W[0] -> v
    lock shared|exclusive T [assert=nocheck]    unlock T    lock_all    unlock_all
    put T W[0..4] = 1,2,3,4                     get T W[0..8:2] -> v
    put T W[vector:2,2,4] = 1,2,3,4             get T W[indexed:5,0..2] -> v
    put T W[0..2] = 1,2,3,4 origin=0..4:2       (layouts, @i, origin=: docs/scenarios.md)
    acc T W[0] op=sum = 5   get_acc T W[0] op=no_op -> v   fop T W[0] op=sum = 1 -> v
    cas T W[0] compare=0 = 1 -> v               rget T W[0] -> v as r   wait_req r
    test_req r -> flag   test_all r,s -> flag   wait_all r,s   wait_any r,s -> i   free_req r
    fence [assert=…]   post {A,B}   start {A}   complete   wait   test -> flag
    flush T   flush_all   flush_local T   flush_local_all   sync   sleep MS
    attach N -> r   store r[0] = 7   get T r[0..N] -> v   detach r   (a dynamic window's
                            regions of this rank: r[i] counts from the region's start)
    (with several windows open, name one: W.fence)
  barrier                   the world barrier (every rank must call it)
  print VAR                 a variable's value (defined once its operation completed)
  vars                      every variable
  help                      this text
  quit                      leave (also end of input)";

fn default_type(disp_unit: u32) -> Datatype {
    match disp_unit {
        2 => Datatype::I16,
        4 => Datatype::I32,
        8 => Datatype::I64,
        _ => Datatype::U8,
    }
}

struct Shell {
    executor: RankExecutor,
    parser: Parser,
    json: bool,
    line: usize,
}

impl Shell {
    fn say(&self, text: &str, value: serde_json::Value) {
        if self.json {
            json::print(&value);
        } else {
            outln!("{text}");
        }
    }

    /// Runs one line; `Ok(false)` to leave.
    async fn line(&mut self, text: &str) -> Result<bool, String> {
        self.line += 1;
        let code = text.split('#').next().unwrap_or("").trim();
        let mut words = code.split_whitespace();
        let Some(first) = words.next() else {
            return Ok(true);
        };
        match first {
            "quit" | "exit" => return Ok(false),
            "help" => outln!("{HELP}"),
            "vars" => self.vars(),
            "print" => {
                let name = words.next().ok_or("print needs a variable")?;
                let value = self.executor.var(name)?;
                self.say(
                    &format!("{name} = {}", value.value),
                    json!({"var": name, "value": json::observed(&value.value)}),
                );
            }
            "barrier" => {
                self.executor.barrier().await.map_err(|e| e.to_string())?;
                self.say("ok", json!({"ok": true}));
            }
            "open" => self.open(code, words).await?,
            "alias" => {
                self.parser
                    .line(self.line, code)
                    .map_err(|e| format!("column {}: {}", e.column, e.message))?;
            }
            "expect" | "window" => {
                return Err(format!(
                    "`{first}` belongs in scenario files (onesided run); the shell opens existing windows with `open NAME`"
                ));
            }
            _ => return self.call(code).await,
        }
        Ok(true)
    }

    /// `vars`: every variable of this rank, with its value.
    fn vars(&mut self) {
        let vars = self.executor.vars();
        let mut document = serde_json::Map::new();
        for (name, value) in &vars {
            if !self.json {
                outln!("{name} = {}", value.value);
            }
            document.insert(name.clone(), json::observed(&value.value));
        }
        if self.json {
            json::print(&serde_json::Value::Object(document));
        }
    }

    /// `open NAME [type=T]`: opens an existing window for this rank's calls.
    async fn open(
        &mut self,
        code: &str,
        mut words: std::str::SplitWhitespace<'_>,
    ) -> Result<(), String> {
        let name = words.next().ok_or("open needs a window name")?;
        let dtype = match words.next() {
            Some(word) => {
                let text = word
                    .strip_prefix("type=")
                    .ok_or_else(|| format!("expected type=T, found \"{word}\""))?;
                datatype(text).map_err(|e| e.to_string())?
            }
            None => Datatype::U8,
        };
        let explicit = code.contains("type=");
        let line = self.line;
        let (index, window) = self
            .executor
            .open(name, dtype)
            .await
            .map_err(|e| e.to_string())?;
        let desc = window.desc().clone();
        let me = window.rank() as usize;
        let dtype = match (explicit, desc.info.element_type) {
            (true, _) => dtype,
            (false, Some(window_type)) => window_type,
            (false, None) => default_type(desc.disp_units.get(me).copied().unwrap_or(1)),
        };
        let unit = dtype.size() as u64;
        self.executor.set_window_type(index, dtype);
        self.parser.declare_window(WindowDecl {
            name: name.to_string(),
            line,
            dtype,
            sizes: desc.sizes.iter().map(|bytes| bytes / unit).collect(),
            model: Model::Separate,
            group: None,
            flavor: match desc.flavor {
                Flavor::Dynamic => FlavorDecl::Dynamic,
                Flavor::Create => FlavorDecl::Create,
                Flavor::Allocate => FlavorDecl::Allocate,
            },
            info: Vec::new(),
            by_ranks: false,
        });
        let sizes: Vec<String> = desc.sizes.iter().map(|s| (s / unit).to_string()).collect();
        self.say(
            &format!(
                "window {name} (id {}): {} ranks, {} elements of {dtype} each",
                desc.id,
                desc.nranks(),
                sizes.join(",")
            ),
            json!({"window": name, "id": desc.id, "type": dtype.name(), "sizes": desc.sizes}),
        );
        Ok(())
    }

    /// A scenario call, run at once; what it assigns is shown.
    async fn call(&mut self, code: &str) -> Result<bool, String> {
        let call = self
            .parser
            .call(self.line, self.executor.rank(), code)
            .map_err(|e| format!("column {}: {}", e.column, e.message))?;
        if let Some(error) = self.executor.execute(&call).await {
            let matched = call.expect_fail.is_some() && error.class() == call.expect_fail;
            if !matched {
                return Err(error.to_string());
            }
            self.say(
                &format!("failed as expected: {error}"),
                json!({"ok": true, "failed_as_expected": error.to_string()}),
            );
            return Ok(true);
        }
        if call.expect_fail.is_some() {
            return Err(format!("`{}` succeeded but must fail", call.text));
        }
        let assigned = match &call.call {
            onesided_scenario::Call::Load { var, .. }
            | onesided_scenario::Call::Test { var, .. } => Some(var.clone()),
            onesided_scenario::Call::Op(spec) => spec.var.clone(),
            _ => None,
        };
        match assigned.map(|var| (self.executor.var(&var), var)) {
            Some((Ok(value), var)) => self.say(
                &format!("{var} = {}", value.value),
                json!({"ok": true, "var": var, "value": json::observed(&value.value)}),
            ),
            Some((Err(_), var)) => self.say(
                &format!("ok ({var} is defined once the operation completes)"),
                json!({"ok": true, "var": var, "pending": true}),
            ),
            None => self.say("ok", json!({"ok": true})),
        }
        Ok(true)
    }
}

pub async fn shell(global: &Global, args: ShellArgs) -> Result<ExitCode> {
    let token = global.token("the token of the rank to act as")?;
    let executor = RankExecutor::attach(global.endpoint()?, token, Vec::new()).await?;
    let Some(session) = executor.session() else {
        return Err(Usage("the session ended".into()).into());
    };
    if let Err(error) = crate::epoch::check_membership(session, args.world.as_deref(), args.rank) {
        let _ = session.clone().close().await;
        return Err(error.into());
    }
    let ranks = session.nranks();
    let banner = format!(
        "onesided shell: rank {} of {} in world {} (type `help`)",
        session.rank(),
        ranks,
        session.world()
    );
    let mut shell = Shell {
        executor,
        parser: Parser::for_world(ranks),
        json: global.json,
        line: 0,
    };
    let interactive = std::io::stdin().is_terminal();
    let mut failures = 0;
    if interactive {
        eprintln!("{banner}");
        let mut editor = rustyline::DefaultEditor::new()?;
        let history = std::env::var_os("HOME")
            .map(|home| std::path::PathBuf::from(home).join(".onesided_history"));
        if let Some(path) = &history {
            let _ = editor.load_history(path);
        }
        let prompt = format!("{}> ", session_prompt(&shell));
        loop {
            match editor.readline(&prompt) {
                Ok(line) => {
                    let _ = editor.add_history_entry(line.as_str());
                    match shell.line(&line).await {
                        Ok(true) => {}
                        Ok(false) => break,
                        Err(message) => eprintln!("error: {message}"),
                    }
                }
                Err(rustyline::error::ReadlineError::Interrupted) => continue,
                Err(_) => break,
            }
        }
        if let Some(path) = &history {
            let _ = editor.save_history(path);
        }
    } else {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let line = line?;
            match shell.line(&line).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(message) => {
                    failures += 1;
                    eprintln!("onesided: line {}: {message}", shell.line);
                }
            }
            std::io::stdout().flush()?;
        }
    }
    // the session ends cleanly: its last loads and stores and its own audit rows are in the
    // log, and the server sees it leave rather than its stream break at exit
    if let Some(session) = shell.executor.session().cloned() {
        if let Err(error) = session.close().await {
            failures += 1;
            eprintln!("onesided: closing the session failed: {error}");
        }
    }
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn session_prompt(shell: &Shell) -> String {
    format!("rank {}", shell.executor.rank())
}
