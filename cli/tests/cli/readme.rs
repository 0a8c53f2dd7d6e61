//! The README's walk-through, run as a newcomer would paste it (issue 17): its lines in order in
//! one bash, against a real server, from a directory holding `onesided-data/admin-token`, with
//! the built `onesided` first on PATH. Every line must succeed, every `# prints: X` comment must
//! be exactly what its line printed, and the audit commands must show the story.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::docs::{fenced_blocks, repository_file};
use crate::{Server, TempDir, ADMIN_TOKEN};

const MARKER: &str = "<!-- walk-through:";

/// The first ```sh block after the walk-through marker, as (README line, text) pairs.
fn walk_through() -> Vec<(usize, String)> {
    let readme = repository_file("README.md");
    let (before, after) = readme
        .split_once(MARKER)
        .expect("README.md marks its walk-through");
    let offset = before.lines().count();
    let (start, block) = fenced_blocks(after, "sh")
        .into_iter()
        .next()
        .expect("a ```sh block follows the marker");
    block
        .lines()
        .enumerate()
        .map(|(index, line)| (offset + start + index, line.to_string()))
        .collect()
}

#[test]
fn the_readme_walk_through_runs_as_written() {
    let lines = walk_through();
    assert!(lines.len() >= 8, "{lines:?}");
    let server = Server::start();
    let dir = TempDir::new();
    std::fs::create_dir(dir.0.join("onesided-data")).unwrap();
    std::fs::write(dir.0.join("onesided-data/admin-token"), ADMIN_TOKEN).unwrap();

    // each line announced on stdout, so its output can be told apart
    let mut script = String::from("set -euo pipefail\n");
    for (line, text) in &lines {
        script.push_str(&format!("echo '@@ {line}'\n{text}\n"));
    }
    let binary_dir = Path::new(env!("CARGO_BIN_EXE_onesided")).parent().unwrap();
    let path = format!(
        "{}:{}",
        binary_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(&dir.0)
        .env_clear()
        .env("PATH", path)
        .env("ONESIDED_ADDR", &server.url)
        .stdin(Stdio::null())
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the walk-through failed:\n{stdout}\n{stderr}"
    );
    assert_eq!(stderr, "", "nothing on stderr");

    let mut printed: BTreeMap<usize, String> = BTreeMap::new();
    let mut current = None;
    for row in stdout.lines() {
        if let Some(line) = row.strip_prefix("@@ ") {
            current = Some(line.parse::<usize>().unwrap());
            printed.insert(current.unwrap(), String::new());
        } else if let Some(line) = current {
            let text = printed.get_mut(&line).unwrap();
            text.push_str(row);
            text.push('\n');
        }
    }
    assert_eq!(printed.len(), lines.len(), "every line ran:\n{stdout}");
    let output_of = |command: &str| -> &str {
        let (line, _) = lines
            .iter()
            .find(|(_, text)| text.starts_with(command))
            .unwrap_or_else(|| panic!("the walk-through has `{command}`"));
        &printed[line]
    };
    let mut checked = 0;
    for (line, text) in &lines {
        if let Some((_, expected)) = text.split_once("# prints: ") {
            assert_eq!(
                printed[line].trim_end(),
                expected.trim(),
                "README.md:{line}: {text}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 2, "the walk-through says what it prints");
    assert!(output_of("onesided world create").contains("rank 1: "));
    let log = output_of("onesided audit log");
    for kind in [
        "window_created",
        "attach",
        "lock_request",
        "lock_grant",
        "op",
        "lock_release",
        "detach",
    ] {
        assert!(
            log.lines()
                .any(|row| row.split_whitespace().nth(4) == Some(kind)),
            "{kind} in:\n{log}"
        );
    }
    assert!(
        output_of("onesided audit replay").contains("rank 0: 0 5 17 0\n"),
        "{}",
        output_of("onesided audit replay")
    );
    assert!(output_of("onesided audit check").contains("no findings"));
}
