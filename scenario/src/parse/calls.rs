//! One function per call of the `.rma` format (`R: CALL`), found by name in [`CALLS`].
//!
//! [`Parser::rank_call`](super::Parser) reads what every call line shares (the rank, a `W.`
//! prefix, a trailing `!CLASS`) and hands the rest to the call's own function as a [`Site`].
//!
//! Owns: the `CALLS` table (every call name of the format) and each call's argument grammar:
//! its arguments in order, `assert=` lists, arrows, origin layouts (a get's origin buffer at
//! most `MAX_GET_ORIGIN_BYTES`), and whether a get-like call's variable holds a list
//! (`returns_list`). Must not: read a line's rank, window prefix or expected class (the
//! parser's `rank_call` does), check locations, values or variables other than through the
//! parser's shared helpers (`located`, `values`, `assign_var`), or decide what a call does at
//! run time.

use onesided_core::assert::Assert;
use onesided_core::datatype::{parse_value, Value};
use onesided_core::epoch::LockType;
use onesided_core::{Datatype, Op};

use super::super::ast::{Call, Loc, OpCall, OpCallSpec, Origin};
use super::layouts::in_elements_of;
use super::lines::{is_identifier, Token};
use super::locations::{check_count, selection};
use super::{err, ParseError, Parser, RegionDecl};

/// One call line, as a call's function sees it.
#[derive(Debug)]
pub(super) struct Site<'s> {
    /// 1-based line.
    pub(super) line: usize,
    /// The rank that runs the call.
    pub(super) rank: u32,
    /// The call's name, without its window prefix.
    pub(super) name: &'s str,
    /// Where the name starts.
    pub(super) name_column: usize,
    /// Where the call starts (its window prefix, if it has one).
    pub(super) head_column: usize,
    /// The window named with `W.`, if any.
    pub(super) prefix: Option<usize>,
    /// The tokens after the name, without the expected error class.
    pub(super) args: &'s [Token<'s>],
    /// Where a missing argument is reported: just past the last token.
    pub(super) end_column: usize,
    /// The line expects the call to fail (`!CLASS`).
    pub(super) expects_failure: bool,
}

impl Site<'_> {
    /// An error at the end of the line: something is missing.
    fn missing(&self, message: impl Into<String>) -> ParseError {
        err(self.line, self.end_column, message)
    }

    /// The argument at `index`, or the error saying what was `expected` there.
    fn arg(&self, index: usize, expected: &str) -> Result<&Token<'_>, ParseError> {
        self.args.get(index).ok_or_else(|| self.missing(expected))
    }

    /// Nothing may follow argument `from - 1`.
    fn no_more(&self, from: usize) -> Result<(), ParseError> {
        match self.args.get(from) {
            Some(extra) => Err(err(
                self.line,
                extra.column,
                format!("unexpected \"{}\"", extra.text),
            )),
            None => Ok(()),
        }
    }

    /// The optional `assert=A[,A...]` at `index` (0 when absent).
    fn assert_at(&self, index: usize) -> Result<u32, ParseError> {
        let Some(token) = self.args.get(index) else {
            return Ok(0);
        };
        let Some(list) = token.text.strip_prefix("assert=") else {
            return Err(err(
                self.line,
                token.column,
                format!("expected assert=A[,A...], found \"{}\"", token.text),
            ));
        };
        Assert::parse_bits(list).map_err(|e| err(self.line, token.column + 7, e.message))
    }

    /// The `->` at `index`, or the error naming what should follow it.
    fn arrow(&self, index: usize, arrow: &str, expected: &str) -> Result<(), ParseError> {
        match self.args.get(index) {
            Some(token) if token.text == arrow => Ok(()),
            Some(token) => Err(err(self.line, token.column, format!("expected `{arrow}`"))),
            None => Err(self.missing(format!("expected `{expected}`"))),
        }
    }
}

/// How a call's arguments are parsed.
pub(super) type ParseCall = fn(&mut Parser, &Site<'_>) -> Result<Call, ParseError>;

/// Every call of the format, by name (docs/scenarios.md, "Calls").
pub(super) const CALLS: &[(&str, ParseCall)] = &[
    ("store", store),
    ("load", load),
    ("put", op),
    ("get", op),
    ("acc", op),
    ("get_acc", op),
    ("fop", op),
    ("cas", op),
    ("rput", op),
    ("rget", op),
    ("racc", op),
    ("rget_acc", op),
    ("wait_req", wait_req),
    ("test_req", test_req),
    ("test_all", test_all),
    ("wait_all", wait_all),
    ("wait_any", wait_any),
    ("free_req", free_req),
    ("fence", fence),
    ("post", post),
    ("start", start),
    ("complete", complete),
    ("wait", wait),
    ("test", test),
    ("lock", lock),
    ("unlock", unlock),
    ("lock_all", lock_all),
    ("unlock_all", unlock_all),
    ("flush", flush),
    ("flush_all", flush_all),
    ("flush_local", flush_local),
    ("flush_local_all", flush_local_all),
    ("sync", sync),
    ("set_info", set_info),
    ("sleep", sleep),
    ("crash", crash),
    ("attach", attach),
    ("detach", detach),
];

/// The function that parses the call `name`.
pub(super) fn find(name: &str) -> Option<ParseCall> {
    CALLS
        .iter()
        .find(|(call, _)| *call == name)
        .map(|(_, parse)| *parse)
}

impl Parser {
    /// The location at argument `index` and its window, checked against the call's prefix.
    /// A location in a region must be known to the rank (see [`Parser::region_known_to`]).
    fn located(&self, site: &Site<'_>, index: usize) -> Result<(Loc, Datatype), ParseError> {
        let token = site.arg(index, "expected a location")?;
        let loc = self.loc(site.line, token)?;
        self.pick_window(site.line, site.name_column, site.prefix, Some(loc.window))?;
        self.region_known_to(site.line, token.column, &loc, site.rank)?;
        let dtype = self.windows[loc.window].dtype;
        Ok((loc, dtype))
    }

    /// The window of a call that takes no location.
    fn window_of(&self, site: &Site<'_>) -> Result<usize, ParseError> {
        self.pick_window(site.line, site.name_column, site.prefix, None)
    }

    /// The window of a call that takes no arguments at all.
    fn bare(&self, site: &Site<'_>) -> Result<usize, ParseError> {
        let window = self.window_of(site)?;
        site.no_more(0)?;
        Ok(window)
    }

    /// The window and target of `unlock T`, `flush T`, `flush_local T`.
    fn to_target(&self, site: &Site<'_>) -> Result<(usize, u32), ParseError> {
        let window = self.window_of(site)?;
        let target = self.target(site.line, site.args.first(), site.end_column)?;
        site.no_more(1)?;
        Ok((window, target))
    }
}

/// `store LOC = V[,V...]`
fn store(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let (loc, dtype) = parser.located(site, 0)?;
    parser.in_memory_of(site.line, site.args[0].column, &loc, site.rank)?;
    site.arrow(1, "=", "= V")?;
    let values_token = site.arg(2, "expected values")?;
    let values = parser.values(site.line, values_token, dtype)?;
    check_count(site.line, values_token.column, &loc, values.len())?;
    site.no_more(3)?;
    Ok(Call::Store { loc, values })
}

/// `load LOC -> var`
fn load(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let (loc, dtype) = parser.located(site, 0)?;
    parser.in_memory_of(site.line, site.args[0].column, &loc, site.rank)?;
    site.arrow(1, "->", "-> var")?;
    let var = site.arg(2, "expected a variable")?;
    let list = loc.shape.is_list();
    parser.assign_var(site.line, var.column, site.rank, var.text, dtype, list)?;
    site.no_more(3)?;
    Ok(Call::Load {
        loc,
        var: var.text.to_string(),
    })
}

/// What may follow an operation's target and location, in any order.
#[derive(Debug, Default)]
struct OpArgs<'s> {
    /// `op=OP`
    op: Option<Op>,
    /// `compare=C`
    compare: Option<Value>,
    /// `= V[,V...]`, with the values' column.
    values: Option<(Vec<Value>, usize)>,
    /// `-> var`
    var: Option<&'s Token<'s>>,
    /// `as REQ`
    request: Option<&'s Token<'s>>,
    /// `origin=SEL`, with its column.
    origin: Option<(Origin, usize)>,
}

impl Parser {
    /// The operation's arguments from the third on.
    fn op_args<'s>(&self, site: &Site<'s>, dtype: Datatype) -> Result<OpArgs<'s>, ParseError> {
        let (line, args) = (site.line, site.args);
        let mut parsed = OpArgs::default();
        let mut index = 2;
        while let Some(token) = args.get(index) {
            let next = args.get(index + 1);
            let after = |what: &str| next.ok_or_else(|| site.missing(what));
            if let Some(op_name) = token.text.strip_prefix("op=") {
                parsed.op = Some(Op::parse(op_name).ok_or_else(|| {
                    err(line, token.column + 3, format!("unknown op \"{op_name}\""))
                })?);
                index += 1;
            } else if let Some(text) = token.text.strip_prefix("origin=") {
                let column = token.column + 7;
                let (first, shape) = selection(line, column, text)?;
                let shape = in_elements_of(line, column, shape, dtype)?;
                parsed.origin = Some((
                    Origin {
                        index: first,
                        shape,
                    },
                    column,
                ));
                index += 1;
            } else if let Some(value) = token.text.strip_prefix("compare=") {
                let value = parse_value(dtype, value)
                    .map_err(|e| err(line, token.column + 8, e.message))?;
                parsed.compare = Some(value);
                index += 1;
            } else if token.text == "=" {
                let values_token = after("expected values after `=`")?;
                let values = self.values(line, values_token, dtype)?;
                parsed.values = Some((values, values_token.column));
                index += 2;
            } else if token.text == "->" {
                parsed.var = Some(after("expected a variable after `->`")?);
                index += 2;
            } else if token.text == "as" {
                parsed.request = Some(after("expected a request name after `as`")?);
                index += 2;
            } else {
                return Err(err(
                    line,
                    token.column,
                    format!("unexpected \"{}\"", token.text),
                ));
            }
        }
        Ok(parsed)
    }
}

/// Which operation `base` (the name without a request's `r`) is, given its `op=`.
fn op_kind(site: &Site<'_>, base: &str, op: Option<Op>) -> Result<OpCall, ParseError> {
    let name = site.name;
    let kind = match base {
        "put" => OpCall::Put,
        "get" => OpCall::Get,
        "acc" | "get_acc" | "fop" => {
            let op = op.ok_or_else(|| site.missing(format!("{name} needs op=OP")))?;
            match base {
                "acc" => OpCall::Acc(op),
                "get_acc" => OpCall::GetAcc(op),
                _ => OpCall::Fop(op),
            }
        }
        _ => OpCall::Cas,
    };
    let line = site.line;
    if op.is_some() && !matches!(kind, OpCall::Acc(_) | OpCall::GetAcc(_) | OpCall::Fop(_)) {
        return Err(err(line, site.name_column, format!("{name} takes no op=")));
    }
    Ok(kind)
}

/// The operation's values, if it takes any: `= V` is there exactly when it must be. They
/// match the location's elements, unless an origin layout selects from them.
fn op_values(
    site: &Site<'_>,
    kind: OpCall,
    loc: &Loc,
    values: Option<(Vec<Value>, usize)>,
    selected: bool,
) -> Result<Vec<Value>, ParseError> {
    let name = site.name;
    let takes_values = match kind {
        OpCall::Get => false,
        OpCall::GetAcc(Op::NoOp) | OpCall::Fop(Op::NoOp) => values.is_some(),
        _ => true,
    };
    match (takes_values, values) {
        (true, Some((values, column))) => {
            if !selected {
                check_count(site.line, column, loc, values.len())?;
            }
            Ok(values)
        }
        (true, None) => Err(site.missing(format!("{name} needs `= V`"))),
        (false, Some((_, column))) => {
            Err(err(site.line, column, format!("{name} takes no values")))
        }
        (false, None) => Ok(Vec::new()),
    }
}

/// Whether the variable of a get-like call holds a list: when its location does, and always
/// for a get with an origin layout (the variable is the origin buffer).
pub(crate) fn returns_list(kind: OpCall, loc: &Loc, origin: Option<&Origin>) -> bool {
    loc.shape.is_list() || (kind == OpCall::Get && origin.is_some())
}

/// The largest origin buffer a get with an origin layout may unpack into: the runner
/// allocates it, and a few characters of layout could otherwise ask for any size.
pub(crate) const MAX_GET_ORIGIN_BYTES: u64 = 1 << 26;

/// The origin layout, where the operation has one: as many elements as the location, and for
/// a get a buffer of at most [`MAX_GET_ORIGIN_BYTES`].
fn origin_of(
    site: &Site<'_>,
    kind: OpCall,
    loc: &Loc,
    dtype: Datatype,
    origin: Option<(Origin, usize)>,
) -> Result<Option<Box<Origin>>, ParseError> {
    let Some((origin, column)) = origin else {
        return Ok(None);
    };
    let name = site.name;
    match kind {
        OpCall::Put | OpCall::Get | OpCall::Acc(_) | OpCall::GetAcc(_) => {}
        OpCall::Fop(_) | OpCall::Cas => {
            return Err(err(
                site.line,
                column - 7,
                format!("{name} takes one element and no origin="),
            ))
        }
    }
    if kind == OpCall::GetAcc(Op::NoOp) {
        return Err(err(
            site.line,
            column - 7,
            format!("{name} op=no_op sends no values: there is no origin= to select them"),
        ));
    }
    let (wanted, given) = (loc.shape.count(), origin.shape.count());
    if wanted != given {
        return Err(err(
            site.line,
            column,
            format!("the origin selects {given} elements, the location has {wanted}"),
        ));
    }
    if kind == OpCall::Get {
        let size = dtype.size() as u64;
        let end = origin
            .shape
            .layout()
            .extent(size)
            .ok()
            .and_then(|extent| origin.index.checked_mul(size)?.checked_add(extent));
        if end.is_none_or(|end| end > MAX_GET_ORIGIN_BYTES) {
            return Err(err(
                site.line,
                column,
                format!(
                    "the origin buffer of a get may be at most {MAX_GET_ORIGIN_BYTES} bytes; \
                     this one reaches further"
                ),
            ));
        }
    }
    Ok(Some(Box::new(origin)))
}

/// `put`, `get`, `acc`, `get_acc`, `fop`, `cas T LOC …` and the request-based `rput`, `rget`,
/// `racc`, `rget_acc` (one grammar: docs/scenarios.md).
fn op(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let (line, name) = (site.line, site.name);
    let request_based = name.starts_with('r');
    let base = if request_based { &name[1..] } else { name };
    let target = parser.target(line, site.args.first(), site.end_column)?;
    let (loc, dtype) = parser.located(site, 1)?;
    parser.in_memory_of(line, site.args[1].column, &loc, target)?;
    let OpArgs {
        op,
        compare,
        values,
        var,
        request,
        origin,
    } = parser.op_args(site, dtype)?;
    let kind = op_kind(site, base, op)?;
    if compare.is_some() != (kind == OpCall::Cas) {
        return Err(err(
            line,
            site.name_column,
            if kind == OpCall::Cas {
                "cas needs compare=C"
            } else {
                "only cas takes compare="
            },
        ));
    }
    let origin = origin_of(site, kind, &loc, dtype, origin)?;
    let values = op_values(site, kind, &loc, values, origin.is_some())?;
    let returns = matches!(
        kind,
        OpCall::Get | OpCall::GetAcc(_) | OpCall::Fop(_) | OpCall::Cas
    );
    match (returns, var) {
        (true, Some(token)) => {
            let list = returns_list(kind, &loc, origin.as_deref());
            parser.assign_var(line, token.column, site.rank, token.text, dtype, list)?;
        }
        (true, None) => return Err(site.missing(format!("{name} needs `-> var`"))),
        (false, Some(token)) => {
            return Err(err(line, token.column, format!("{name} returns no value")))
        }
        (false, None) => {}
    }
    if request_based {
        match request {
            Some(token) => {
                if !is_identifier(token.text) {
                    return Err(err(
                        line,
                        token.column,
                        format!("\"{}\" is not a request name", token.text),
                    ));
                }
                parser
                    .requests
                    .insert((site.rank, token.text.to_string()), line);
            }
            None if returns => {
                return Err(site.missing(format!(
                    "{name} needs `as REQ` (its value arrives at wait_req)"
                )))
            }
            None => {}
        }
        if matches!(kind, OpCall::Fop(_) | OpCall::Cas) {
            return Err(err(line, site.name_column, format!("there is no {name}")));
        }
    } else if let Some(token) = request {
        return Err(err(
            line,
            token.column,
            format!("{name} is not request-based (use r{name})"),
        ));
    }
    Ok(Call::Op(OpCallSpec {
        kind,
        request_based,
        target,
        loc,
        values,
        origin,
        compare,
        var: var.map(|token| token.text.to_string()),
        request: request.map(|token| token.text.to_string()),
    }))
}

/// `wait_req REQ`
fn wait_req(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let request = one_request(parser, site)?;
    site.no_more(1)?;
    Ok(Call::WaitReq(request))
}

/// `free_req REQ`
fn free_req(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let request = one_request(parser, site)?;
    site.no_more(1)?;
    Ok(Call::FreeReq(request))
}

/// `test_req REQ -> flag`
fn test_req(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let request = one_request(parser, site)?;
    let var = result_var(parser, site, 1, "flag", Datatype::Bool)?;
    Ok(Call::TestReq { request, var })
}

/// `test_all REQ[,REQ...] -> flag`
fn test_all(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let requests = request_list(parser, site)?;
    let var = result_var(parser, site, 1, "flag", Datatype::Bool)?;
    Ok(Call::TestAll { requests, var })
}

/// `wait_all REQ[,REQ...]`
fn wait_all(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let requests = request_list(parser, site)?;
    site.no_more(1)?;
    Ok(Call::WaitAll(requests))
}

/// `wait_any REQ[,REQ...] -> index`
fn wait_any(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let requests = request_list(parser, site)?;
    let var = result_var(parser, site, 1, "index", Datatype::I64)?;
    Ok(Call::WaitAny { requests, var })
}

/// The request named at argument 0 (one this rank made on an earlier line).
fn one_request(parser: &Parser, site: &Site<'_>) -> Result<String, ParseError> {
    let token = site.arg(0, "expected a request name")?;
    known_request(parser, site, token.text, token.column)?;
    Ok(token.text.to_string())
}

/// The requests named at argument 0, comma separated, each once.
fn request_list(parser: &Parser, site: &Site<'_>) -> Result<Vec<String>, ParseError> {
    let token = site.arg(0, "expected request names (REQ[,REQ...])")?;
    let mut names: Vec<String> = Vec::new();
    let mut column = token.column;
    for name in token.text.split(',') {
        if names.iter().any(|seen| seen == name) {
            return Err(err(
                site.line,
                column,
                format!("request {name} is named twice"),
            ));
        }
        known_request(parser, site, name, column)?;
        names.push(name.to_string());
        column += name.len() + 1;
    }
    Ok(names)
}

fn known_request(
    parser: &Parser,
    site: &Site<'_>,
    name: &str,
    column: usize,
) -> Result<(), ParseError> {
    if parser.requests.contains_key(&(site.rank, name.to_string())) {
        return Ok(());
    }
    let what = if name.is_empty() {
        "expected a request name".to_string()
    } else {
        let rank = super::rank_name(site.rank, parser.ranks.unwrap_or(26));
        format!("rank {rank} has no request {name} before this line")
    };
    Err(err(site.line, column, what))
}

/// `-> var` at `arrow`: a fresh variable of `dtype`, the last argument.
fn result_var(
    parser: &mut Parser,
    site: &Site<'_>,
    arrow: usize,
    what: &str,
    dtype: Datatype,
) -> Result<String, ParseError> {
    site.arrow(arrow, "->", &format!("-> {what}"))?;
    let var = site.arg(arrow + 1, "expected a variable")?;
    parser.assign_var(site.line, var.column, site.rank, var.text, dtype, false)?;
    site.no_more(arrow + 2)?;
    Ok(var.text.to_string())
}

/// `fence [assert=A[,A...]]`
fn fence(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let window = parser.window_of(site)?;
    let assert = site.assert_at(0)?;
    site.no_more(1)?;
    Ok(Call::Fence { window, assert })
}

/// The window, group and assertions of `post {G} [assert=…]` and `start {G} [assert=…]`.
fn group_call(parser: &Parser, site: &Site<'_>) -> Result<(usize, Vec<u32>, u32), ParseError> {
    let window = parser.window_of(site)?;
    let group = parser.group(site.line, site.args.first(), site.end_column)?;
    let assert = site.assert_at(1)?;
    site.no_more(2)?;
    Ok((window, group, assert))
}

/// `post {G} [assert=…]`
fn post(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let (window, group, assert) = group_call(parser, site)?;
    Ok(Call::Post {
        window,
        group,
        assert,
    })
}

/// `start {G} [assert=…]`
fn start(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let (window, group, assert) = group_call(parser, site)?;
    Ok(Call::Start {
        window,
        group,
        assert,
    })
}

/// `complete`
fn complete(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let window = parser.bare(site)?;
    Ok(Call::Complete { window })
}

/// `wait`
fn wait(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let window = parser.bare(site)?;
    Ok(Call::Wait { window })
}

/// `test -> flag`
fn test(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let window = parser.window_of(site)?;
    match site.args.first() {
        Some(token) if token.text == "->" => {}
        Some(token) => return Err(err(site.line, token.column, "expected `-> flag`")),
        None => return Err(site.missing("expected `-> flag`")),
    }
    let var = site.arg(1, "expected a variable")?;
    parser.assign_var(
        site.line,
        var.column,
        site.rank,
        var.text,
        Datatype::Bool,
        false,
    )?;
    site.no_more(2)?;
    Ok(Call::Test {
        window,
        var: var.text.to_string(),
    })
}

/// `lock shared|exclusive T [assert=nocheck]`
fn lock(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let window = parser.window_of(site)?;
    let kind = site.arg(0, "expected shared or exclusive")?;
    let lock_type = match kind.text {
        "shared" => LockType::Shared,
        "exclusive" => LockType::Exclusive,
        other => {
            return Err(err(
                site.line,
                kind.column,
                format!("expected shared or exclusive, found \"{other}\""),
            ))
        }
    };
    let target = parser.target(site.line, site.args.get(1), site.end_column)?;
    let assert = site.assert_at(2)?;
    site.no_more(3)?;
    Ok(Call::Lock {
        window,
        lock_type,
        target,
        assert,
    })
}

/// `unlock T`
fn unlock(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let (window, target) = parser.to_target(site)?;
    Ok(Call::Unlock { window, target })
}

/// `lock_all [assert=nocheck]`
fn lock_all(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let window = parser.window_of(site)?;
    let assert = site.assert_at(0)?;
    site.no_more(1)?;
    Ok(Call::LockAll { window, assert })
}

/// `unlock_all`
fn unlock_all(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let window = parser.bare(site)?;
    Ok(Call::UnlockAll { window })
}

/// `flush T`
fn flush(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let (window, target) = parser.to_target(site)?;
    Ok(Call::Flush { window, target })
}

/// `flush_all`
fn flush_all(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let window = parser.bare(site)?;
    Ok(Call::FlushAll { window })
}

/// `set_info KEY=VAL [KEY=VAL ...]`
fn set_info(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let window = parser.window_of(site)?;
    if site.args.is_empty() {
        return Err(site.missing("set_info needs at least one KEY=VALUE"));
    }
    let mut info = Vec::new();
    for token in site.args {
        match token.text.split_once('=') {
            Some((key, value)) if !key.is_empty() => {
                info.push((key.to_string(), value.to_string()));
            }
            _ => {
                return Err(err(
                    site.line,
                    token.column,
                    format!("expected KEY=VALUE, not {:?}", token.text),
                ))
            }
        }
    }
    Ok(Call::SetInfo { window, info })
}

/// `flush_local T`
fn flush_local(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let (window, target) = parser.to_target(site)?;
    Ok(Call::FlushLocal { window, target })
}

/// `flush_local_all`
fn flush_local_all(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let window = parser.bare(site)?;
    Ok(Call::FlushLocalAll { window })
}

/// `sync`
fn sync(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let window = parser.bare(site)?;
    Ok(Call::Sync { window })
}

/// `sleep MS`
fn sleep(_: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let token = site.arg(0, "expected milliseconds")?;
    let ms = token.text.parse::<u64>().map_err(|_| {
        err(
            site.line,
            token.column,
            format!("expected milliseconds, found \"{}\"", token.text),
        )
    })?;
    site.no_more(1)?;
    Ok(Call::Sleep { ms })
}

/// What `crash` and `attach` share: they concern the rank, take nothing, cannot fail.
fn rank_only(site: &Site<'_>) -> Result<(), ParseError> {
    let name = site.name;
    if site.prefix.is_some() {
        return Err(err(
            site.line,
            site.head_column,
            format!("{name} concerns the rank, not a window"),
        ));
    }
    if site.expects_failure {
        return Err(err(
            site.line,
            site.head_column,
            format!("{name} cannot be expected to fail"),
        ));
    }
    site.no_more(0)
}

/// `crash`
fn crash(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    rank_only(site)?;
    parser.crashed.insert(site.rank, site.line);
    Ok(Call::Crash)
}

/// `attach` (after a `crash` of the same rank), or with arguments `attach N -> r`
/// (`MPI_Win_attach`, see [`attach_region`]).
fn attach(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    if !site.args.is_empty() || site.prefix.is_some() {
        return attach_region(parser, site);
    }
    rank_only(site)?;
    if parser.crashed.remove(&site.rank).is_none() {
        return Err(err(
            site.line,
            site.head_column,
            "attach follows a crash of the same rank (to attach memory to a dynamic window: \
             attach N -> r)",
        ));
    }
    Ok(Call::Attach)
}

/// `attach N -> r`: a region of N elements of the window's type in this rank's memory,
/// named `r` for every rank of the file (each name is attached by one line). A window of
/// another flavor is left to the run (`RMA_FLAVOR`), as is N = 0 (`SIZE`).
fn attach_region(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    if let Some(crash_line) = parser.crashed.get(&site.rank) {
        return Err(err(
            site.line,
            site.head_column,
            format!(
                "rank {} crashed at line {crash_line}: only `attach` (without arguments) may follow",
                site.rank
            ),
        ));
    }
    let window = parser.window_of(site)?;
    let token = site.arg(0, "expected a number of elements (attach N -> r)")?;
    let count = token.text.parse::<u64>().map_err(|_| {
        err(
            site.line,
            token.column,
            format!(
                "expected a number of elements, found \"{}\" (attach N -> r)",
                token.text
            ),
        )
    })?;
    site.arrow(1, "->", "-> r")?;
    let name = site.arg(2, "expected a region name")?;
    site.no_more(3)?;
    if let Some(region) = parser.regions.get(name.text) {
        return Err(err(
            site.line,
            name.column,
            format!(
                "region {} is attached at line {} already (each region name is attached once)",
                name.text, region.line
            ),
        ));
    }
    parser.new_name(site.line, name, "a region")?;
    parser.regions.insert(
        name.text.to_string(),
        RegionDecl {
            window,
            owner: site.rank,
            line: site.line,
            barriers: parser.barriers,
        },
    );
    Ok(Call::AttachRegion {
        window,
        count,
        name: name.text.to_string(),
    })
}

/// `detach r`: the rank that attached the region detaches it (`MPI_Win_detach`); a second
/// detach is left to the run (`RMA_ATTACH`).
fn detach(parser: &mut Parser, site: &Site<'_>) -> Result<Call, ParseError> {
    let token = site.arg(0, "expected a region name (detach r)")?;
    site.no_more(1)?;
    let region = parser.regions.get(token.text).ok_or_else(|| {
        err(
            site.line,
            token.column,
            format!("no region {} is attached before this line", token.text),
        )
    })?;
    let window = parser.pick_window(
        site.line,
        site.name_column,
        site.prefix,
        Some(region.window),
    )?;
    if region.owner != site.rank {
        let ranks = parser.ranks.unwrap_or(26);
        return Err(err(
            site.line,
            token.column,
            format!(
                "region {} is the memory of rank {} (attached at line {}): only it detaches it",
                token.text,
                super::rank_name(region.owner, ranks),
                region.line
            ),
        ));
    }
    Ok(Call::DetachRegion {
        window,
        name: token.text.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use onesided_core::datatype::Value;
    use onesided_core::layout::Layout;
    use onesided_core::Op;

    use crate::ast::{Call, Observed, OpCall, Shape};
    use crate::parse::parse;
    use crate::parse::tests::{assert_call_errors, error_of, only_call, HEAD};

    #[test]
    fn origin_layouts() {
        let call = only_call("A: put B W[0..2] = 1,2,3,4 origin=vector:2,1,3");
        let Call::Op(spec) = call.call else { panic!() };
        assert_eq!(spec.values.len(), 4, "the values are the origin buffer");
        let origin = spec.origin.unwrap();
        assert_eq!(origin.index, 0);
        assert_eq!(
            origin.shape.layout(),
            Layout::Vector {
                count: 2,
                blocklen: 1,
                stride: 3
            }
        );
        let call = only_call("A: get_acc B W[indexed:1,3] op=sum = 5,6,7 origin=1..3 -> old");
        let Call::Op(spec) = call.call else { panic!() };
        let origin = spec.origin.unwrap();
        assert_eq!((origin.index, origin.shape), (1, Shape::Range { count: 2 }));
        // a get's variable is its origin buffer: a list even for one element
        let scenario = parse(&format!(
            "{HEAD}A: get B W[2] -> spread origin=3\nexpect A spread == 0,0,0,5\n"
        ))
        .unwrap();
        assert_eq!(
            scenario.expectations[0].accepted[0],
            Observed::List(vec![
                Value::Int(0),
                Value::Int(0),
                Value::Int(0),
                Value::Int(5)
            ])
        );
        let call = only_call("A: rput B W[0] = 1,2 origin=1 as r");
        let Call::Op(spec) = call.call else { panic!() };
        assert!(spec.request_based);
        assert!(spec.origin.is_some());
    }

    #[test]
    fn origin_errors_name_line_column_and_what_is_wrong() {
        let origin_cases: [(&str, (usize, usize), &str); 6] = [
            (
                "A: get B W[0..2] -> v origin=vector:2,1,10000000",
                (2, 30),
                "the origin buffer of a get may be at most 67108864 bytes",
            ),
            (
                "A: put B W[0..2] = 1,2,3 origin=0..3",
                (2, 33),
                "the origin selects 3 elements, the location has 2",
            ),
            (
                "A: fop B W[0] op=sum = 1 origin=0 -> x",
                (2, 26),
                "fop takes one element and no origin=",
            ),
            (
                "A: cas B W[0] compare=1 = 2 origin=0 -> x",
                (2, 29),
                "cas takes one element and no origin=",
            ),
            (
                "A: get_acc B W[0] op=no_op origin=0 -> x",
                (2, 28),
                "op=no_op sends no values",
            ),
            (
                "A: put B W[0] = 1 origin=vector:1",
                (2, 33),
                "vector takes COUNT,BLOCKLEN,STRIDE",
            ),
        ];
        assert_call_errors(&origin_cases);
    }

    #[test]
    fn request_calls_need_a_name_when_they_return_data() {
        let call = only_call("A: rget B W[0] -> v as r");
        let Call::Op(spec) = call.call else { panic!() };
        assert!(spec.request_based);
        assert_eq!(spec.request.as_deref(), Some("r"));
        let (_, _, message) = error_of(&format!("{HEAD}A: rget B W[0] -> v\n"));
        assert!(message.contains("needs `as REQ`"));
        let (_, _, message) = error_of(&format!("{HEAD}A: put B W[0] = 1 as r\n"));
        assert!(message.contains("not request-based"));
        let call = only_call("A: get_acc B W[0] op=no_op -> v");
        let Call::Op(spec) = call.call else { panic!() };
        assert_eq!(spec.kind, OpCall::GetAcc(Op::NoOp));
        assert!(spec.values.is_empty());
    }
}
