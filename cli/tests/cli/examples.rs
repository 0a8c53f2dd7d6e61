//! Every `.rma` file in `examples/` must hold, five times in a row.

use crate::{example_files, Server};

#[test]
fn every_example_holds_five_times() {
    let server = Server::start();
    let files = example_files();
    assert!(
        files.len() >= 12,
        "the forum examples, their fixes and the fence semantics: {files:?}"
    );
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
        assert_eq!(document["runs"].as_array().unwrap().len(), 5);
        out.success();
    }
}
