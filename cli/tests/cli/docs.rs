//! The repository's documentation holds: every ```` ```rma ```` block of docs/scenarios.md runs
//! and its expectations hold (issue 17).

use std::path::Path;

use crate::{Server, TempDir};

/// The fenced blocks of `markdown` whose info string is `language`, with the line each starts on.
pub fn fenced_blocks(markdown: &str, language: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (index, line) in markdown.lines().enumerate() {
        match current.as_mut() {
            None if line.trim_end() == format!("```{language}") => {
                current = Some((index + 2, String::new()));
            }
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.extend(current.take()),
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    assert!(current.is_none(), "an unclosed ```{language} block");
    blocks
}

/// A file of the repository.
pub fn repository_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

#[test]
fn every_scenario_in_the_format_documentation_runs_and_holds() {
    let doc = repository_file("docs/scenarios.md");
    let blocks = fenced_blocks(&doc, "rma");
    assert!(blocks.len() >= 3, "the page shows its examples");
    let server = Server::start();
    let dir = TempDir::new();
    for (line, text) in blocks {
        let file = dir.file(&format!("line{line}.rma"), &text);
        let out = server.cli().arg("run").arg(&file).run();
        assert_eq!(
            out.code,
            Some(0),
            "docs/scenarios.md, the block at line {line}:\n{}{}",
            out.stdout,
            out.stderr
        );
        out.stdout_starts("run 1: ok\n");
    }
}

#[test]
fn the_help_of_run_and_shell_points_to_the_format_documentation() {
    assert!(Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/scenarios.md")
        .is_file());
    for command in ["run", "shell"] {
        let out = crate::Cli::new("http://127.0.0.1:1")
            .args([command, "--help"])
            .run();
        out.success();
        assert!(
            out.stdout.contains("docs/scenarios.md"),
            "{command}: {}",
            out.stdout
        );
        assert!(
            !out.stdout.contains("no leases"),
            "{command}: {}",
            out.stdout
        );
    }
}
