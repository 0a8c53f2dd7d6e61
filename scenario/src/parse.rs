//! The `.rma` parser: text to [`Scenario`], with a line and column on every error.
//!
//! Split by concern (issue 41): this file holds the [`Parser`], its state and the helpers that
//! several kinds of line share (values, target ranks, groups, variables, the window of a call);
//! `lines.rs` tokenizes a line, picks its kind and reads what every `R: CALL` shares,
//! `declarations.rs` the `window` and `alias` lines, `locations.rs` and `layouts.rs` the
//! locations, `calls.rs` each call's own arguments, and `expectations.rs` the `expect` lines.
//!
//! Owns: the grammar of docs/scenarios.md and the checks that need no server (names declared
//! before use, values of the window's type, value counts matching the location, which rank
//! may run which line). Must not: decide what a call means at run time; out-of-range indices
//! and ranks are left for the run, where they fail as MPI would (`RMA_RANGE`, `RANK`).

use std::collections::HashMap;

use onesided_core::datatype::{parse_value, Value};
use onesided_core::{Datatype, ErrorClass, RmaError};

use super::ast::{Loc, Scenario, Step, WindowDecl};

mod calls;
mod declarations;
mod expectations;
mod layouts;
mod lines;
mod locations;

pub(crate) use calls::returns_list;
use expectations::PendingExpect;
use lines::{is_identifier, split_list, Token};
use locations::location_name;

/// A file that does not parse: where and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// Parses a whole scenario file.
///
/// # Errors
/// The first line that does not parse, with its line and column.
pub fn parse(text: &str) -> Result<Scenario, ParseError> {
    let mut parser = Parser::new();
    for (index, line) in text.lines().enumerate() {
        parser.line(index + 1, line)?;
    }
    parser.finish()
}

/// The type a rank's variable holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct VarType {
    dtype: Datatype,
    list: bool,
    line: usize,
}

/// A region of a dynamic window, as the parser knows it.
#[derive(Clone, Debug)]
struct RegionDecl {
    /// Its window.
    window: usize,
    /// The rank that attaches it.
    owner: u32,
    /// The line of the attach.
    line: usize,
    /// How many `barrier` lines came before the attach: another rank may use the region
    /// only after one more (the barrier that orders the attach before the use, as an MPI
    /// program sends the address to the others).
    barriers: usize,
}

/// An alias whose location names a region not attached yet: its location's text, kept until
/// a line uses it.
#[derive(Clone, Debug)]
struct LaterAlias {
    /// The alias line.
    line: usize,
    /// The location's column on that line.
    column: usize,
    /// The location, `NAME[SEL]`.
    text: String,
}

/// An incremental parser: feed it lines; the shell feeds it one call at a time.
#[derive(Debug, Default)]
pub struct Parser {
    ranks: Option<u32>,
    windows: Vec<WindowDecl>,
    window_index: HashMap<String, usize>,
    aliases: HashMap<String, Loc>,
    /// Aliases naming a region no line has attached yet (`alias X = r[1]` above `B: attach 4
    /// -> r`), by name: resolved where they are used, once the region is known.
    later_aliases: HashMap<String, LaterAlias>,
    vars: HashMap<(u32, String), VarType>,
    requests: HashMap<(u32, String), usize>,
    crashed: HashMap<u32, usize>,
    /// The regions named by `attach N -> r`, by name.
    regions: HashMap<String, RegionDecl>,
    /// How many `barrier` lines came so far.
    barriers: usize,
    steps: Vec<Step>,
    expects: Vec<PendingExpect>,
}

fn err(line: usize, column: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        column,
        message: message.into(),
    }
}

/// A rank name: a number or a letter (`A` = 0 … `Z` = 25).
pub fn parse_rank(text: &str) -> Option<u32> {
    if let Ok(number) = text.parse::<u32>() {
        return Some(number);
    }
    match text.as_bytes() {
        [letter @ b'A'..=b'Z'] => Some(u32::from(letter - b'A')),
        _ => None,
    }
}

/// The name a rank is written with in reports: its letter when there are at most 26 ranks.
pub fn rank_name(rank: u32, ranks: u32) -> String {
    if ranks <= 26 && rank < 26 {
        char::from(b'A' + rank as u8).to_string()
    } else {
        rank.to_string()
    }
}

/// The error a rank outside window `window`'s group gets, in the runner's words and the class
/// the call gives it: `MPI_ERR_GROUP` for a call on the window it has no part in,
/// `MPI_ERR_RANK` for a target (or a group member) outside it. `run` and `explore` both say it.
pub fn not_in_group(class: ErrorClass, rank: u32, ranks: u32, window: &str) -> RmaError {
    let who = rank_name(rank, ranks);
    RmaError::new(
        class,
        format!("rank {who} is not in the group of window {window}"),
    )
}

/// The error a request handle gets that is not active (waited for, tested complete or freed),
/// in the runner's words: `MPI_ERR_REQUEST`. `run` and `explore` both say it.
pub fn request_not_active(name: &str) -> RmaError {
    RmaError::new(
        ErrorClass::Request,
        format!("request {name} is not active (it was waited for, tested complete or freed)"),
    )
}

impl Parser {
    /// A parser for a file.
    pub fn new() -> Self {
        Parser::default()
    }

    /// A parser for calls of a world of `ranks` ranks whose windows are declared with
    /// [`Parser::declare_window`] (the shell's).
    pub fn for_world(ranks: u32) -> Self {
        Parser {
            ranks: Some(ranks),
            ..Parser::default()
        }
    }

    /// Declares a window (as a `window` line would) and returns its index.
    pub fn declare_window(&mut self, decl: WindowDecl) -> usize {
        let index = self.windows.len();
        self.window_index.insert(decl.name.clone(), index);
        self.windows.push(decl);
        index
    }

    /// The declared windows.
    pub fn windows(&self) -> &[WindowDecl] {
        &self.windows
    }

    /// The element type of `rank`'s variable `var` and whether it holds a list, if some line
    /// assigns it.
    pub fn var_type(&self, rank: u32, var: &str) -> Option<(Datatype, bool)> {
        self.vars
            .get(&(rank, var.to_string()))
            .map(|var| (var.dtype, var.list))
    }

    /// Checks the expectations and returns the scenario.
    ///
    /// # Errors
    /// The first expectation that does not parse; a file without any window.
    pub fn finish(mut self) -> Result<Scenario, ParseError> {
        let ranks = self.world(1, 1)?;
        // an alias of a region must name one some line attaches (in line order: the first
        // such alias)
        let mut later: Vec<_> = self.later_aliases.values().collect();
        later.sort_by_key(|alias| (alias.line, alias.column));
        if let Some(alias) = later
            .into_iter()
            .find(|alias| !self.regions.contains_key(location_name(&alias.text)))
        {
            return Err(err(
                alias.line,
                alias.column,
                format!(
                    "unknown window or region \"{}\"",
                    location_name(&alias.text)
                ),
            ));
        }
        let expects = std::mem::take(&mut self.expects);
        let mut expectations = Vec::new();
        for pending in expects {
            expectations.push(self.expectation(&pending)?);
        }
        Ok(Scenario {
            ranks,
            windows: self.windows,
            steps: self.steps,
            expectations,
        })
    }

    /// Whether `name` names a window, an alias or a region already.
    fn is_declared(&self, name: &str) -> bool {
        self.window_index.contains_key(name)
            || self.aliases.contains_key(name)
            || self.later_aliases.contains_key(name)
            || self.regions.contains_key(name)
    }

    fn world(&self, line: usize, column: usize) -> Result<u32, ParseError> {
        self.ranks.ok_or_else(|| {
            err(
                line,
                column,
                "no window declared yet: the first `window … ranks=N` sets the world size",
            )
        })
    }

    /// Picks the window of a call: its `W.` prefix, its location's, or the only one.
    fn pick_window(
        &self,
        line: usize,
        column: usize,
        prefix: Option<usize>,
        loc_window: Option<usize>,
    ) -> Result<usize, ParseError> {
        match (prefix, loc_window) {
            (Some(prefix), Some(loc_window)) if prefix != loc_window => Err(err(
                line,
                column,
                format!(
                    "the call names window {} but its location is in window {}",
                    self.windows[prefix].name, self.windows[loc_window].name
                ),
            )),
            (Some(window), _) => Ok(window),
            (None, Some(loc_window)) => Ok(loc_window),
            (None, None) => match self.windows.len() {
                0 => Err(err(line, column, "no window declared")),
                1 => Ok(0),
                _ => Err(err(
                    line,
                    column,
                    "several windows are declared: name the window, as `W.fence`",
                )),
            },
        }
    }

    fn values(
        &self,
        line: usize,
        token: &Token<'_>,
        dtype: Datatype,
    ) -> Result<Vec<Value>, ParseError> {
        let mut values = Vec::new();
        for (offset, part) in split_list(token.text) {
            let value = parse_value(dtype, part)
                .map_err(|e| err(line, token.column + offset, e.message))?;
            values.push(value);
        }
        Ok(values)
    }

    fn target(
        &self,
        line: usize,
        token: Option<&Token<'_>>,
        after: usize,
    ) -> Result<u32, ParseError> {
        let token = token.ok_or_else(|| err(line, after, "expected a target rank"))?;
        parse_rank(token.text).ok_or_else(|| {
            err(
                line,
                token.column,
                format!(
                    "\"{}\" is not a rank (a number or a letter A..Z)",
                    token.text
                ),
            )
        })
    }

    fn group(
        &self,
        line: usize,
        token: Option<&Token<'_>>,
        after: usize,
    ) -> Result<Vec<u32>, ParseError> {
        let token = token.ok_or_else(|| err(line, after, "expected a group {A,B}"))?;
        let inner = token
            .text
            .strip_prefix('{')
            .and_then(|rest| rest.strip_suffix('}'))
            .ok_or_else(|| {
                err(
                    line,
                    token.column,
                    format!(
                        "expected a group like {{A,B}} (no spaces), found \"{}\"",
                        token.text
                    ),
                )
            })?;
        let mut group = Vec::new();
        for (offset, part) in split_list(inner) {
            if part.is_empty() {
                continue;
            }
            let rank = parse_rank(part).ok_or_else(|| {
                err(
                    line,
                    token.column + 1 + offset,
                    format!("\"{part}\" is not a rank"),
                )
            })?;
            group.push(rank);
        }
        Ok(group)
    }

    fn assign_var(
        &mut self,
        line: usize,
        column: usize,
        rank: u32,
        var: &str,
        dtype: Datatype,
        list: bool,
    ) -> Result<(), ParseError> {
        if !is_identifier(var) {
            return Err(err(
                line,
                column,
                format!("\"{var}\" is not a variable name"),
            ));
        }
        let key = (rank, var.to_string());
        if let Some(known) = self.vars.get(&key) {
            if known.dtype != dtype || known.list != list {
                return Err(err(
                    line,
                    column,
                    format!(
                        "variable {var} already holds {} of {} (line {})",
                        if known.list { "a list" } else { "a value" },
                        known.dtype,
                        known.line
                    ),
                ));
            }
            return Ok(());
        }
        self.vars.insert(key, VarType { dtype, list, line });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{RankCall, Shape, Subject};

    /// A world of two ranks with one window of four i64.
    pub(super) const HEAD: &str = "window W ranks=2 size=4 type=i64\n";

    /// Where and why `text` does not parse.
    pub(super) fn error_of(text: &str) -> (usize, usize, String) {
        let error = parse(text).unwrap_err();
        (error.line, error.column, error.message)
    }

    /// Asserts that the text `text_of` makes of each case fails to parse at the case's
    /// `(line, column)` with a message containing the case's text.
    fn assert_errors(cases: &[(&str, (usize, usize), &str)], text_of: impl Fn(&str) -> String) {
        for &(case, position, message) in cases {
            let (line, column, actual) = error_of(&text_of(case));
            assert_eq!((line, column), position, "{case:?}: {actual}");
            assert!(actual.contains(message), "{case:?}: {actual}");
        }
    }

    /// [`assert_errors`] of calls, each after `HEAD`.
    pub(super) fn assert_call_errors(cases: &[(&str, (usize, usize), &str)]) {
        assert_errors(cases, |call| format!("{HEAD}{call}\n"));
    }

    /// The only step of `HEAD` and `text`, a call.
    pub(super) fn only_call(text: &str) -> RankCall {
        let scenario = parse(&format!("{HEAD}{text}\n")).unwrap();
        match scenario.steps.into_iter().next() {
            Some(Step::Call(call)) => *call,
            other => panic!("not a call: {other:?}"),
        }
    }

    #[test]
    fn the_published_example_parses() {
        let text = "\
# B stores X, then locks its own window shared; A reads X under a shared lock.
window W ranks=2 size=1 type=i64       # every rank exposes 1 element of i64
alias X = W[0]

B: store X = 7                          # private copy of B only
B: lock shared B
barrier
A: lock shared B
A: get B X -> a                         # reads B's public copy
A: unlock B
barrier
B: unlock B                             # rule 5: only now is X public

expect A a == 0                         # the separate model keeps the old value
expect public B X == 7                  # after the run, B's public copy holds 7
";
        let scenario = parse(text).unwrap();
        assert_eq!(scenario.ranks, 2);
        assert_eq!(scenario.windows[0].sizes, [1, 1]);
        assert_eq!(scenario.steps.len(), 8);
        assert_eq!(scenario.expectations.len(), 2);
        let Step::Call(get) = &scenario.steps[4] else {
            panic!("a call")
        };
        assert_eq!(get.line, 9);
        assert_eq!(get.rank, 0);
        assert_eq!(get.text, "get B X -> a");
        assert_eq!(
            scenario.expectations[1].subject,
            Subject::Public {
                rank: 1,
                loc: Loc {
                    window: 0,
                    index: 0,
                    shape: Shape::Single,
                    region: None,
                }
            }
        );
    }

    #[test]
    fn ranks_are_numbers_or_letters() {
        assert_eq!(parse_rank("0"), Some(0));
        assert_eq!(parse_rank("C"), Some(2));
        assert_eq!(parse_rank("Z"), Some(25));
        assert_eq!(parse_rank("c"), None);
        assert_eq!(parse_rank("AB"), None);
        assert_eq!(rank_name(1, 2), "B");
        assert_eq!(rank_name(30, 40), "30");
    }

    #[test]
    fn errors_name_line_and_column() {
        let cases: [(&str, (usize, usize), &str); 18] = [
            ("A: fence\n", (1, 1), "no window declared"),
            (
                "window W ranks=2 size=1 type=i64 by=nobody\n",
                (1, 37),
                "by is admin or ranks, not \"nobody\"",
            ),
            (
                "window W ranks=2 size=1 type=i64\nA: set_info accumulate_ops\n",
                (2, 13),
                "expected KEY=VALUE",
            ),
            (
                "window W ranks=2 size=1,2,3 type=i64\n",
                (1, 23),
                "3 sizes for 2 ranks",
            ),
            (
                "window W ranks=2 size=1 type=i64 colour=red\n",
                (1, 34),
                "unknown window attribute",
            ),
            (
                "window W ranks=2 size=1 type=i64\nwindow V ranks=3 size=1 type=i64\n",
                (2, 10),
                "the world has 2 ranks",
            ),
            (
                "window W ranks=2 size=1 type=i64\nA: put B W[0] = 1,2\n",
                (2, 17),
                "2 values for a location of 1 elements",
            ),
            (
                "window W ranks=2 size=1 type=i64\nA: put B Q[0] = 1\n",
                (2, 10),
                "unknown window \"Q\"",
            ),
            (
                "window W ranks=2 size=1 type=i64\nA: get B W[3..1] -> a\n",
                (2, 15),
                "ends before it starts",
            ),
            (
                "window W ranks=2 size=1 type=i64\nA: lock sideways B\n",
                (2, 9),
                "expected shared or exclusive",
            ),
            (
                "window W ranks=2 size=1 type=i64\nA: fence assert=nope\n",
                (2, 17),
                "unknown assertion nope",
            ),
            (
                "window W ranks=2 size=1 type=i64\nA: wait_req r\n",
                (2, 13),
                "has no request r",
            ),
            (
                "window W ranks=2 size=2 type=i64\nA: lock_all\nA: rget B W[0] -> v as r\nA: wait_all r,r\n",
                (4, 15),
                "request r is named twice",
            ),
            (
                "window W ranks=2 size=2 type=i64\nA: lock_all\nA: rget B W[0] -> v as r\nA: wait_any r,s -> i\n",
                (4, 15),
                "has no request s",
            ),
            (
                "window W ranks=2 size=2 type=i64\nA: lock_all\nA: rget B W[0] -> v as r\nB: test_req r -> f\n",
                (4, 13),
                "rank B has no request r",
            ),
            (
                "window W ranks=2 size=2 type=i64\nA: lock_all\nA: rget B W[0] -> v as r\nA: test_req r\n",
                (4, 15),
                "expected `-> flag`",
            ),
            (
                "window W ranks=2 size=1 type=i64\nA: crash\nA: fence\n",
                (3, 4),
                "only `attach` may follow",
            ),
            (
                "window W ranks=2 size=1 type=i64\nA: crash\nbarrier\n",
                (3, 1),
                "needs every rank",
            ),
        ];
        assert_errors(&cases, str::to_string);
    }
}
