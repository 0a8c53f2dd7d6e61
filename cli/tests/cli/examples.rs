//! Every `.rma` file in `examples/` must hold, five times in a row; where MPI allows several
//! outcomes (the example says `in {…}`), onesided's server gives the one its comment names.

use crate::{example_files, Server};

/// What onesided's server gives where an example states a set MPI allows: (file, the
/// expectation's text, the value every run observes). The separate model's server publishes
/// and pulls only at the calls rules 5 and 6 name, so it gives the obsolete values
/// (server/tests/it/forum.rs holds the same through the client); the unified model's sends a
/// store or an update before anything sent after it, so it gives the new ones.
const SERVER_GIVES: &[(&str, &str, &str)] = &[
    ("forum1_store_without_lock", "expect A a in {0,42}", "0"),
    (
        "forum1_store_without_lock",
        "expect public B X in {0,42}",
        "0",
    ),
    ("forum2_load_without_lock", "expect B b in {0,42}", "0"),
    (
        "forum2_load_without_lock",
        "expect private B X in {0,42}",
        "0",
    ),
    (
        "forum3_store_before_shared_lock",
        "expect A a in {0,7}",
        "0",
    ),
    ("forum4_store_in_pscw", "expect B x in {0,22}", "0"),
    ("forum5_load_in_pscw", "expect B early in {0,42}", "0"),
    ("dynamic_detach", "expect private A r[0] in {0,1}", "0"),
    ("forum1_unified", "expect A a in {0,42}", "42"),
    ("forum2_unified", "expect B b in {0,42}", "42"),
    ("forum3_unified", "expect A a in {0,7}", "7"),
    ("forum4_unified", "expect B x in {0,22}", "22"),
    ("forum5_unified", "expect B early in {0,42}", "42"),
];

#[test]
fn every_example_holds_five_times_and_the_server_gives_its_own_outcome() {
    let server = Server::start();
    let files = example_files();
    assert!(
        files.len() >= 12,
        "the forum examples, their fixes and the fence semantics: {files:?}"
    );
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(
            text.starts_with("# "),
            "{} starts with a comment saying what it shows",
            file.display()
        );
        let out = server
            .cli()
            .arg("run")
            .arg(file)
            .words("--repeat 5 --json")
            .run();
        let document = out.json();
        assert_eq!(document["ok"], true, "{}: {document:#}", file.display());
        let runs = document["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 5);
        out.success();
        let stem = file.file_stem().unwrap().to_str().unwrap();
        for &(_, expectation, value) in SERVER_GIVES.iter().filter(|(name, ..)| *name == stem) {
            for run in runs {
                let observed = run["expectations"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|e| e["text"] == expectation)
                    .unwrap_or_else(|| panic!("{stem}: no `{expectation}`: {run:#}"));
                assert_eq!(
                    observed["observed"].to_string().trim_matches('"'),
                    value,
                    "{stem}: {expectation}"
                );
            }
            checked += 1;
        }
    }
    assert_eq!(
        checked,
        SERVER_GIVES.len(),
        "every example of the table ran"
    );
}
