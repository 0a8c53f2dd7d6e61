//! The `ls` tables stay in line whatever the names' lengths (issue 17: `audit ls` overflowed
//! with long world names).

use crate::Server;

/// The character offset at which each line's `column`-th field (from 0) starts: fields are
/// separated by two or more spaces, and hold single spaces at most.
fn field_starts(text: &str, column: usize) -> Vec<usize> {
    text.lines()
        .map(|line| {
            let chars: Vec<char> = line.chars().collect();
            let mut starts = Vec::new();
            let mut spaces = 2;
            for (index, c) in chars.iter().enumerate() {
                if *c == ' ' {
                    spaces += 1;
                } else {
                    if spaces >= 2 {
                        starts.push(index);
                    }
                    spaces = 0;
                }
            }
            starts[column]
        })
        .collect()
}

#[track_caller]
fn aligned(text: &str, column: usize) {
    let starts = field_starts(text, column);
    assert!(
        starts.windows(2).all(|pair| pair[0] == pair[1]),
        "column {column} is not in line ({starts:?}):\n{text}"
    );
}

#[test]
fn long_names_widen_their_column_and_the_rows_stay_in_line() {
    let server = Server::start();
    let long_world = format!(
        "a-world-whose-name-is-much-longer-than-forty-characters-{}",
        "x".repeat(20)
    );
    let long_window = "a_window_with_a_name_longer_than_twenty_four";
    for (world, window) in [("w", "W"), (long_world.as_str(), long_window)] {
        server.world(world, 2);
        server.window(world, window, "--count 2 --type i64");
    }
    let audit = server.cli().words("audit ls").run();
    audit.success();
    assert_eq!(audit.stdout.lines().count(), 3, "{}", audit.stdout);
    audit.stdout_has(&long_world);
    // ID, WORLD, NAME, EVENTS: the names start in line, the numbers (the last) end in line
    aligned(&audit.stdout, 1);
    aligned(&audit.stdout, 2);
    let ends: Vec<usize> = audit.stdout.lines().map(|l| l.chars().count()).collect();
    assert!(ends.windows(2).all(|p| p[0] == p[1]), "{}", audit.stdout);

    let worlds = server.cli().words("world ls").run();
    worlds.success();
    let ends: Vec<usize> = worlds.stdout.lines().map(|l| l.chars().count()).collect();
    // RANKS and WINDOWS are numbers: they end in line
    assert!(ends.windows(2).all(|p| p[0] == p[1]), "{}", worlds.stdout);

    let windows = server
        .cli()
        .args(["window", "ls", "--world", &long_world])
        .run();
    windows.success();
    // NAME, ID, then FLAVOR, TYPE, SIZES, DISP_UNITS start in line
    for column in 2..=5 {
        aligned(&windows.stdout, column);
    }
    assert!(
        windows.stdout.lines().nth(1).unwrap().contains("  i64  "),
        "the TYPE column: {}",
        windows.stdout
    );
}
