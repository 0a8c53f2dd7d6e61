//! The `.rma` parser: text to [`Scenario`], with a line and column on every error.
//!
//! Owns: the grammar of docs/scenarios.md and the checks that need no server (names declared
//! before use, values of the window's type, value counts matching the location, which rank
//! may run which line). Must not: decide what a call means at run time; out-of-range indices
//! and ranks are left for the run, where they fail as MPI would (`RMA_RANGE`, `RANK`).

use std::collections::HashMap;

use onesided_core::datatype::{parse_value, Value};
use onesided_core::layout::{Block, ByteBlock, Layout, Order, StructBlock, Subarray, MAX_BLOCKS};
use onesided_core::{Datatype, ErrorClass};

use super::ast::{
    Expectation, FlavorDecl, Loc, Model, Observed, RankCall, RegionRef, Scenario, Shape, Step,
    Subject, WindowDecl,
};

mod calls;

pub(crate) use calls::returns_list;
use calls::Site;

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

#[derive(Clone, Debug)]
struct Token<'a> {
    text: &'a str,
    column: usize,
}

fn tokenize(line: &str) -> Vec<Token<'_>> {
    let code = line.split('#').next().unwrap_or("");
    let mut tokens = Vec::new();
    let mut start: Option<usize> = None;
    for (byte, ch) in code
        .char_indices()
        .chain(std::iter::once((code.len(), ' ')))
    {
        match (ch.is_whitespace(), start) {
            (true, Some(begin)) => {
                tokens.push(Token {
                    text: &code[begin..byte],
                    column: code[..begin].chars().count() + 1,
                });
                start = None;
            }
            (false, None) => start = Some(byte),
            _ => {}
        }
    }
    tokens
}

/// The comment-free text of a line, trimmed.
fn code_of(line: &str) -> &str {
    line.split('#').next().unwrap_or("").trim()
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

#[derive(Clone, Debug)]
struct PendingExpect {
    line: usize,
    text: String,
    tokens: Vec<(String, usize)>,
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

/// The name a location `NAME[SEL]` starts with (the whole text when it has no `[`).
fn location_name(text: &str) -> &str {
    text.split_once('[').map_or(text, |(name, _)| name)
}

fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
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

    /// Parses one line of a file.
    ///
    /// # Errors
    /// When it does not parse.
    pub fn line(&mut self, line: usize, text: &str) -> Result<(), ParseError> {
        let tokens = tokenize(text);
        let Some(first) = tokens.first() else {
            return Ok(());
        };
        match first.text {
            "window" => self.window_line(line, &tokens),
            "alias" => self.alias_line(line, &tokens),
            "barrier" => {
                if let Some(extra) = tokens.get(1) {
                    return Err(err(line, extra.column, "barrier takes no arguments"));
                }
                if let Some((rank, crash_line)) = self.crashed.iter().next() {
                    return Err(err(
                        line,
                        first.column,
                        format!(
                            "rank {rank} crashed at line {crash_line} and has not attached again: \
                             a world barrier needs every rank"
                        ),
                    ));
                }
                self.world(line, first.column)?;
                self.barriers += 1;
                self.steps.push(Step::Barrier { line });
                Ok(())
            }
            "expect" => {
                self.expects.push(PendingExpect {
                    line,
                    text: code_of(text).to_string(),
                    tokens: tokens
                        .iter()
                        .map(|token| (token.text.to_string(), token.column))
                        .collect(),
                });
                Ok(())
            }
            word if word.ends_with(':') => {
                let name = &word[..word.len() - 1];
                let ranks = self.world(line, first.column)?;
                let rank = parse_rank(name).ok_or_else(|| {
                    err(
                        line,
                        first.column,
                        format!("\"{name}\" is not a rank (a number or a letter A..Z)"),
                    )
                })?;
                if rank >= ranks {
                    return Err(err(
                        line,
                        first.column,
                        format!("rank {name} is outside the world of {ranks} ranks"),
                    ));
                }
                let call = self.rank_call(line, rank, &tokens[1..], text)?;
                self.steps.push(Step::Call(Box::new(call)));
                Ok(())
            }
            word => Err(err(
                line,
                first.column,
                format!("expected window, alias, barrier, expect or `R: CALL`, found \"{word}\""),
            )),
        }
    }

    /// Parses the text of one call by `rank` (what follows `R:`), as the shell does.
    ///
    /// # Errors
    /// When it does not parse.
    pub fn call(&mut self, line: usize, rank: u32, text: &str) -> Result<RankCall, ParseError> {
        let tokens = tokenize(text);
        self.rank_call(line, rank, &tokens, text)
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

    /// A location in a region must be in the memory of `rank` (the rank a call targets, or
    /// whose copy a store, a load or an expectation reads): a region is its owner's memory.
    fn in_memory_of(
        &self,
        line: usize,
        column: usize,
        loc: &Loc,
        rank: u32,
    ) -> Result<(), ParseError> {
        match &loc.region {
            Some(region) if region.owner != rank => {
                let ranks = self.ranks.unwrap_or(26);
                Err(err(
                    line,
                    column,
                    format!(
                        "region {} is the memory of rank {} (attached at line {}), not of rank {}",
                        region.name,
                        rank_name(region.owner, ranks),
                        region.line,
                        rank_name(rank, ranks)
                    ),
                ))
            }
            _ => Ok(()),
        }
    }

    /// A use of a region by `rank` on this line: the rank that attached it may use it on
    /// any later line; another rank only after a `barrier` that follows the attach (it must
    /// have learned the address, as an MPI program sends it to the others).
    fn region_known_to(
        &self,
        line: usize,
        column: usize,
        loc: &Loc,
        rank: u32,
    ) -> Result<(), ParseError> {
        let Some(region) = &loc.region else {
            return Ok(());
        };
        let Some(decl) = self.regions.get(&region.name) else {
            return Ok(());
        };
        if rank != decl.owner && self.barriers <= decl.barriers {
            let ranks = self.ranks.unwrap_or(26);
            return Err(err(
                line,
                column,
                format!(
                    "region {} is attached by rank {} at line {}: rank {} may use it only after a \
                     barrier that follows the attach",
                    region.name,
                    rank_name(decl.owner, ranks),
                    decl.line,
                    rank_name(rank, ranks)
                ),
            ));
        }
        Ok(())
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

    fn window_line(&mut self, line: usize, tokens: &[Token<'_>]) -> Result<(), ParseError> {
        let Some(name) = tokens.get(1) else {
            return Err(err(line, tokens[0].column + 6, "window needs a name"));
        };
        if !is_identifier(name.text) {
            return Err(err(
                line,
                name.column,
                format!("\"{}\" is not a window name", name.text),
            ));
        }
        if self.is_declared(name.text) {
            return Err(err(
                line,
                name.column,
                format!("{} is already declared", name.text),
            ));
        }
        let mut ranks = None;
        let mut sizes: Option<(Vec<u64>, usize)> = None;
        let mut dtype = None;
        let mut model = Model::Separate;
        let mut flavor = FlavorDecl::Allocate;
        let mut by_ranks = false;
        let mut group: Option<Vec<u32>> = None;
        let mut info = Vec::new();
        let mut in_info = false;
        for token in &tokens[2..] {
            if token.text == "info" {
                in_info = true;
                continue;
            }
            let Some((key, value)) = token.text.split_once('=') else {
                return Err(err(
                    line,
                    token.column,
                    format!("expected KEY=VALUE, found \"{}\"", token.text),
                ));
            };
            let value_column = token.column + key.chars().count() + 1;
            if in_info {
                if key.is_empty() {
                    return Err(err(line, token.column, "info key is empty"));
                }
                info.push((key.to_string(), value.to_string()));
                continue;
            }
            match key {
                "ranks" => match value.parse::<u32>() {
                    Ok(n) if n > 0 => ranks = Some(n),
                    _ => {
                        return Err(err(
                            line,
                            value_column,
                            format!("ranks must be a positive number, not \"{value}\""),
                        ))
                    }
                },
                "size" => {
                    let mut list = Vec::new();
                    for (offset, part) in split_list(value) {
                        let size = part.parse::<u64>().map_err(|_| {
                            err(
                                line,
                                value_column + offset,
                                format!("size must be a number of elements, not \"{part}\""),
                            )
                        })?;
                        list.push(size);
                    }
                    sizes = Some((list, value_column));
                }
                "type" => {
                    dtype = Some(Datatype::parse(value).ok_or_else(|| {
                        err(
                            line,
                            value_column,
                            format!(
                            "unknown type \"{value}\" (i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 byte)"
                        ),
                        )
                    })?)
                }
                "model" => {
                    model = match value {
                        "separate" => Model::Separate,
                        "unified" => Model::Unified,
                        _ => {
                            return Err(err(
                                line,
                                value_column,
                                format!("model is separate or unified, not \"{value}\""),
                            ))
                        }
                    }
                }
                "group" => {
                    let token = Token {
                        text: value,
                        column: value_column,
                    };
                    let members = self.group(line, Some(&token), value_column)?;
                    if members.is_empty() {
                        return Err(err(line, value_column, "a window's group needs a rank"));
                    }
                    group = Some(members);
                }
                "by" => {
                    by_ranks = match value {
                        "ranks" => true,
                        "admin" => false,
                        _ => {
                            return Err(err(
                                line,
                                value_column,
                                format!("by is admin or ranks, not \"{value}\""),
                            ))
                        }
                    }
                }
                "flavor" => {
                    flavor = match value {
                        "create" => FlavorDecl::Create,
                        "allocate" => FlavorDecl::Allocate,
                        "dynamic" => FlavorDecl::Dynamic,
                        _ => {
                            return Err(err(
                                line,
                                value_column,
                                format!("flavor is create, allocate or dynamic, not \"{value}\""),
                            ))
                        }
                    }
                }
                _ => {
                    return Err(err(
                        line,
                        token.column,
                        format!(
                        "unknown window attribute \"{key}\" (ranks size type model flavor group by info)"
                    ),
                    ))
                }
            }
        }
        let end = tokens
            .last()
            .map_or(1, |t| t.column + t.text.chars().count());
        let ranks = ranks.ok_or_else(|| err(line, end, "window needs ranks=N"))?;
        let dtype = dtype.ok_or_else(|| err(line, end, "window needs type=T"))?;
        let (mut sizes, sizes_column) = match (sizes, flavor) {
            (Some((sizes, column)), FlavorDecl::Dynamic) => {
                if sizes.iter().any(|&size| size != 0) {
                    return Err(err(
                        line,
                        column,
                        "a dynamic window has no size (MPI_Win_create_dynamic): its memory is the \
                         regions its ranks attach (`attach N -> r`); write size=0 or leave it out",
                    ));
                }
                (sizes, column)
            }
            (Some(sizes), _) => sizes,
            (None, FlavorDecl::Dynamic) => (vec![0], end),
            (None, _) => return Err(err(line, end, "window needs size=S")),
        };
        if let Some(members) = &group {
            if let Some(&outside) = members.iter().find(|&&rank| rank >= ranks) {
                return Err(err(
                    line,
                    end,
                    format!(
                        "rank {} of the group is not one of the world's {ranks} ranks",
                        rank_name(outside, ranks)
                    ),
                ));
            }
            let mut seen = std::collections::BTreeSet::new();
            if let Some(&twice) = members.iter().find(|&&rank| !seen.insert(rank)) {
                return Err(err(
                    line,
                    end,
                    format!("rank {} is twice in the group", rank_name(twice, ranks)),
                ));
            }
        }
        // one size per rank of the window: every rank of the world, or of its group
        let members = group.as_ref().map_or(ranks, |members| members.len() as u32);
        if sizes.len() == 1 {
            sizes = vec![sizes[0]; members as usize];
        } else if sizes.len() != members as usize {
            return Err(err(
                line,
                sizes_column,
                format!("{} sizes for {members} ranks", sizes.len()),
            ));
        }
        match self.ranks {
            None => self.ranks = Some(ranks),
            Some(world) if world != ranks => {
                return Err(err(
                    line,
                    tokens[2].column,
                    format!("the world has {world} ranks (set by the first window), not {ranks}"),
                ))
            }
            Some(_) => {}
        }
        self.declare_window(WindowDecl {
            name: name.text.to_string(),
            line,
            dtype,
            sizes,
            model,
            flavor,
            info,
            by_ranks,
            group,
        });
        Ok(())
    }

    fn alias_line(&mut self, line: usize, tokens: &[Token<'_>]) -> Result<(), ParseError> {
        let (Some(name), Some(equals), Some(loc)) = (tokens.get(1), tokens.get(2), tokens.get(3))
        else {
            return Err(err(line, tokens[0].column, "expected `alias X = NAME[i]`"));
        };
        if !is_identifier(name.text) {
            return Err(err(
                line,
                name.column,
                format!("\"{}\" is not an alias name", name.text),
            ));
        }
        if self.is_declared(name.text) {
            return Err(err(
                line,
                name.column,
                format!("{} is already declared", name.text),
            ));
        }
        if equals.text != "=" {
            return Err(err(line, equals.column, "expected `=`"));
        }
        if let Some(extra) = tokens.get(4) {
            return Err(err(
                line,
                extra.column,
                "unexpected text after the location",
            ));
        }
        let target = location_name(loc.text);
        if loc.text.contains('[')
            && !self.window_index.contains_key(target)
            && !self.regions.contains_key(target)
            && is_identifier(target)
        {
            // a region a later line attaches (`attach N -> r`): the alias is a name for a
            // location, and the region's window is known only from its attach
            self.later_aliases.insert(
                name.text.to_string(),
                LaterAlias {
                    line,
                    column: loc.column,
                    text: loc.text.to_string(),
                },
            );
            return Ok(());
        }
        let loc = self.loc(line, loc)?;
        self.aliases.insert(name.text.to_string(), loc);
        Ok(())
    }

    /// `NAME[SEL]` (see [`selection`]) or an alias.
    fn loc(&self, line: usize, token: &Token<'_>) -> Result<Loc, ParseError> {
        let text = token.text;
        let Some(open) = text.find('[') else {
            if let Some(alias) = self.later_aliases.get(text) {
                let region = location_name(&alias.text);
                if !self.regions.contains_key(region) {
                    return Err(err(
                        line,
                        token.column,
                        format!(
                            "alias {text} (line {}) names region {region}, which no line \
                             before this one attaches",
                            alias.line
                        ),
                    ));
                }
                let named = Token {
                    text: &alias.text,
                    column: alias.column,
                };
                return self.loc(alias.line, &named);
            }
            return self.aliases.get(text).cloned().ok_or_else(|| {
                err(
                    line,
                    token.column,
                    format!("\"{text}\" is neither an alias nor a location NAME[i]"),
                )
            });
        };
        let name = &text[..open];
        let (window, region) = match self.regions.get(name) {
            Some(region) => (
                region.window,
                Some(Box::new(RegionRef {
                    name: name.to_string(),
                    owner: region.owner,
                    line: region.line,
                })),
            ),
            None => {
                let window = *self
                    .window_index
                    .get(name)
                    .ok_or_else(|| err(line, token.column, format!("unknown window \"{name}\"")))?;
                if self.windows[window].flavor == FlavorDecl::Dynamic {
                    return Err(err(
                        line,
                        token.column,
                        format!(
                            "{name} is a dynamic window: its memory is the regions attached to \
                             it; attach one (`attach N -> r`) and name it (`r[i]`)"
                        ),
                    ));
                }
                (window, None)
            }
        };
        let inner_column = token.column + name.chars().count() + 1;
        let Some(inner) = text[open + 1..].strip_suffix(']') else {
            return Err(err(
                line,
                token.column + text.chars().count(),
                "expected `]` at the end of the location",
            ));
        };
        let (index, shape) = selection(line, inner_column, inner)?;
        let shape = in_elements_of(line, inner_column, shape, self.windows[window].dtype)?;
        Ok(Loc {
            window,
            index,
            shape,
            region,
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

    /// One `R: CALL [!CLASS]` line: what every call shares (the expected error class, the
    /// `W.` prefix, a crashed rank's only way on) is read here, the call's own arguments by its
    /// function in [`calls::CALLS`].
    fn rank_call(
        &mut self,
        line: usize,
        rank: u32,
        tokens: &[Token<'_>],
        full_text: &str,
    ) -> Result<RankCall, ParseError> {
        let mut tokens: Vec<Token<'_>> = tokens.to_vec();
        let Some(first) = tokens.first().cloned() else {
            return Err(err(
                line,
                code_of(full_text).chars().count() + 1,
                "expected a call",
            ));
        };
        let text_start = first.column;
        let mut expect_fail = None;
        if let Some(last) = tokens.last() {
            if let Some(class) = last.text.strip_prefix('!') {
                expect_fail = Some(ErrorClass::parse(class).ok_or_else(|| {
                    err(
                        line,
                        last.column,
                        format!("unknown error class \"{class}\""),
                    )
                })?);
                tokens.pop();
            }
        }
        let Some(head) = tokens.first().cloned() else {
            return Err(err(
                line,
                text_start,
                "expected a call before the error class",
            ));
        };
        let end_column = tokens
            .last()
            .map_or(1, |t| t.column + t.text.chars().count() + 1);
        let (prefix, name, name_column) = match head.text.split_once('.') {
            Some((window, call)) => {
                let index = *self.window_index.get(window).ok_or_else(|| {
                    err(line, head.column, format!("unknown window \"{window}\""))
                })?;
                (Some(index), call, head.column + window.chars().count() + 1)
            }
            None => (None, head.text, head.column),
        };
        if let Some(crash_line) = self.crashed.get(&rank) {
            if name != "attach" {
                return Err(err(
                    line,
                    name_column,
                    format!("rank {rank} crashed at line {crash_line}: only `attach` may follow"),
                ));
            }
        }
        let parse_call = calls::find(name)
            .ok_or_else(|| err(line, name_column, format!("unknown call \"{name}\"")))?;
        let site = Site {
            line,
            rank,
            name,
            name_column,
            head_column: head.column,
            prefix,
            args: &tokens[1..],
            end_column,
            expects_failure: expect_fail.is_some(),
        };
        let call = parse_call(self, &site)?;
        let text_end = tokens
            .last()
            .map_or(text_start, |t| t.column + t.text.chars().count());
        let code: String = full_text
            .split('#')
            .next()
            .unwrap_or("")
            .chars()
            .skip(text_start - 1)
            .take(text_end - text_start)
            .collect();
        let mut text = code.trim().to_string();
        if let Some(class) = expect_fail {
            text.push_str(&format!(" !{}", class.name()));
        }
        Ok(RankCall {
            line,
            rank,
            text,
            call,
            expect_fail,
        })
    }

    fn expectation(&self, pending: &PendingExpect) -> Result<Expectation, ParseError> {
        let line = pending.line;
        let tokens: Vec<Token<'_>> = pending
            .tokens
            .iter()
            .map(|(text, column)| Token {
                text: text.as_str(),
                column: *column,
            })
            .collect();
        let end = tokens
            .last()
            .map_or(1, |t| t.column + t.text.chars().count() + 1);
        let ranks = self.world(line, 1)?;
        let rank_at = |token: Option<&Token<'_>>| -> Result<u32, ParseError> {
            let token = token.ok_or_else(|| err(line, end, "expected a rank"))?;
            let rank = parse_rank(token.text).ok_or_else(|| {
                err(
                    line,
                    token.column,
                    format!("\"{}\" is not a rank", token.text),
                )
            })?;
            if rank >= ranks {
                return Err(err(
                    line,
                    token.column,
                    format!("rank {} is outside the world of {ranks} ranks", token.text),
                ));
            }
            Ok(rank)
        };
        let (subject, dtype, list, rest) = match tokens.get(1).map(|t| t.text) {
            Some(which @ ("public" | "private")) => {
                let rank = rank_at(tokens.get(2))?;
                let loc_token = tokens
                    .get(3)
                    .ok_or_else(|| err(line, end, "expected a location"))?;
                let loc = self.loc(line, loc_token)?;
                self.in_memory_of(line, loc_token.column, &loc, rank)?;
                let dtype = self.windows[loc.window].dtype;
                let list = loc.shape.is_list();
                let subject = if which == "public" {
                    Subject::Public { rank, loc }
                } else {
                    Subject::Private { rank, loc }
                };
                (subject, dtype, list, 4)
            }
            _ => {
                let rank = rank_at(tokens.get(1))?;
                let var = tokens
                    .get(2)
                    .ok_or_else(|| err(line, end, "expected a variable"))?;
                let known = self
                    .vars
                    .get(&(rank, var.text.to_string()))
                    .ok_or_else(|| {
                        err(
                            line,
                            var.column,
                            format!(
                                "rank {} never assigns a variable {}",
                                tokens[1].text, var.text
                            ),
                        )
                    })?;
                (
                    Subject::Var {
                        rank,
                        var: var.text.to_string(),
                    },
                    known.dtype,
                    known.list,
                    3,
                )
            }
        };
        let operator = tokens
            .get(rest)
            .ok_or_else(|| err(line, end, "expected `==` or `in`"))?;
        let values = tokens
            .get(rest + 1)
            .ok_or_else(|| err(line, end, "expected a value"))?;
        if let Some(extra) = tokens.get(rest + 2) {
            return Err(err(
                line,
                extra.column,
                "unexpected text (lists are written without spaces: 1,2,3)",
            ));
        }
        let accepted = match operator.text {
            "==" => {
                let parsed = self.values(line, values, dtype)?;
                if list {
                    vec![Observed::List(parsed)]
                } else {
                    if parsed.len() != 1 {
                        return Err(err(
                            line,
                            values.column,
                            "expected one value (the subject is not a list)",
                        ));
                    }
                    vec![Observed::Scalar(
                        parsed.into_iter().next().unwrap_or(Value::Int(0)),
                    )]
                }
            }
            "in" => {
                if list {
                    return Err(err(
                        line,
                        operator.column,
                        "`in {…}` takes single values; compare a list with ==",
                    ));
                }
                let inner = values
                    .text
                    .strip_prefix('{')
                    .and_then(|rest| rest.strip_suffix('}'))
                    .ok_or_else(|| err(line, values.column, "expected {V1,V2,...}"))?;
                let inner_token = Token {
                    text: inner,
                    column: values.column + 1,
                };
                self.values(line, &inner_token, dtype)?
                    .into_iter()
                    .map(Observed::Scalar)
                    .collect()
            }
            other => {
                return Err(err(
                    line,
                    operator.column,
                    format!("expected `==` or `in`, found \"{other}\""),
                ))
            }
        };
        Ok(Expectation {
            line,
            text: pending.text.clone(),
            subject,
            accepted,
        })
    }
}

/// What goes between a location's brackets, and after `origin=`, starting at `column`: its
/// first element and shape. `i`, `i..j`, `i..j:s`, or a layout `KIND:ARGS[@i]` (see
/// [`layout_selection`]); a layout starts with a letter, the others with a digit.
fn selection(line: usize, column: usize, text: &str) -> Result<(u64, Shape), ParseError> {
    if text.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return layout_selection(line, column, text);
    }
    let Some((start, rest)) = text.split_once("..") else {
        let index = index_at(line, column, text)?;
        return Ok((index, Shape::Single));
    };
    let start_index = index_at(line, column, start)?;
    let end_column = column + start.chars().count() + 2;
    let (end, stride) = match rest.split_once(':') {
        Some((end, stride)) => {
            let stride_column = end_column + end.chars().count() + 1;
            let stride = number_at(line, stride_column, stride, "a stride")?;
            if stride == 0 {
                return Err(err(line, stride_column, "the stride must be at least 1"));
            }
            (end, Some(stride))
        }
        None => (rest, None),
    };
    let end_index = index_at(line, end_column, end)?;
    if end_index < start_index {
        return Err(err(
            line,
            end_column,
            format!("the range {start_index}..{end_index} ends before it starts"),
        ));
    }
    let span = end_index - start_index;
    let shape = match stride {
        Some(stride) => Shape::Strided {
            count: span.div_ceil(stride),
            stride,
        },
        None => Shape::Range { count: span },
    };
    Ok((start_index, shape))
}

/// An element index.
fn index_at(line: usize, column: usize, text: &str) -> Result<u64, ParseError> {
    text.parse::<u64>().map_err(|_| {
        let message = if text.starts_with(|c: char| c.is_ascii_alphabetic()) {
            format!(
                "expected an element index, found \"{text}\" (a layout is written \
                 KIND:ARGS, KIND one of {LAYOUT_KINDS})"
            )
        } else {
            format!("expected an element index, found \"{text}\"")
        };
        err(line, column, message)
    })
}

/// A number, `what` saying which.
fn number_at(line: usize, column: usize, text: &str, what: &str) -> Result<u64, ParseError> {
    text.parse::<u64>()
        .map_err(|_| err(line, column, format!("expected {what}, found \"{text}\"")))
}

/// The layout kinds a location may name.
const LAYOUT_KINDS: &str = "vector, indexed, hvector, hindexed, subarray, resized, struct";

/// `KIND:ARGS[@i]`, starting at `column`: a derived-datatype layout whose displacements count
/// from element `i` (0 without `@`).
///
/// - `vector:COUNT,BLOCKLEN,STRIDE` (MPI_Type_vector; stride in elements)
/// - `hvector:COUNT,BLOCKLEN,STRIDE` (MPI_Type_create_hvector; stride in bytes)
/// - `indexed:B[,B...]`, each block `i..j` (elements i to j-1) or `i` (MPI_Type_indexed)
/// - `hindexed:B[,B...]`, each block `OFFSET+LEN`: LEN elements from byte OFFSET
///   (MPI_Type_create_hindexed)
/// - `subarray:sizes=AxB..,subsizes=AxB..,starts=AxB..[,order=c|fortran]`
///   (MPI_Type_create_subarray)
/// - `resized:COUNT,EXTENT[,LB]:SEL`: COUNT copies of SEL (an element, a range, a strided
///   range or a layout, without `@`), EXTENT bytes apart, lower bound LB (MPI_Type_create_resized)
/// - `struct:B[,B...]`, each block `OFFSET+LEN:TYPE`: LEN elements of TYPE from byte OFFSET
///   (MPI_Type_create_struct)
fn layout_selection(line: usize, column: usize, text: &str) -> Result<(u64, Shape), ParseError> {
    let Some((kind, rest)) = text.split_once(':') else {
        return Err(err(
            line,
            column,
            format!(
                "expected an element index or a layout KIND:ARGS, found \"{text}\" \
                 (KIND one of {LAYOUT_KINDS})"
            ),
        ));
    };
    let args_column = column + kind.chars().count() + 1;
    let (args, base) = match rest.rsplit_once('@') {
        Some((args, base)) => {
            let base_column = args_column + args.chars().count() + 1;
            (args, index_at(line, base_column, base)?)
        }
        None => (rest, 0),
    };
    let layout = match kind {
        "vector" | "hvector" => {
            let parts = split_list(args);
            let stride_unit = if kind == "vector" { "" } else { "_BYTES" };
            if parts.len() != 3 {
                return Err(err(
                    line,
                    args_column,
                    format!(
                        "{kind} takes COUNT,BLOCKLEN,STRIDE{stride_unit} (3 numbers), not {} \
                         parts",
                        parts.len()
                    ),
                ));
            }
            let mut numbers = [0u64; 3];
            for ((offset, part), (slot, what)) in parts.iter().zip(numbers.iter_mut().zip([
                "a block count",
                "a block length",
                "a stride",
            ])) {
                *slot = number_at(line, args_column + offset, part, what)?;
            }
            let [count, blocklen, stride] = numbers;
            if kind == "vector" {
                Layout::Vector {
                    count,
                    blocklen,
                    stride,
                }
            } else {
                Layout::Hvector {
                    count,
                    blocklen,
                    stride_bytes: stride,
                }
            }
        }
        "indexed" => {
            let mut blocks = Vec::new();
            for (offset, part) in split_list(args) {
                let (disp, shape) = selection(line, args_column + offset, part)?;
                let len = match shape {
                    Shape::Single => 1,
                    Shape::Range { count } => count,
                    _ => {
                        return Err(err(
                            line,
                            args_column + offset,
                            format!(
                                "an indexed block is a range i..j or an element i, not \"{part}\""
                            ),
                        ))
                    }
                };
                blocks.push(Block { disp, len });
            }
            Layout::Indexed { blocks }
        }
        "hindexed" => {
            let mut blocks = Vec::new();
            for (offset, part) in split_list(args) {
                let Some((bytes, len)) = part.split_once('+') else {
                    return Err(err(
                        line,
                        args_column + offset,
                        format!(
                            "an hindexed block is OFFSET+LEN (LEN elements from byte OFFSET), \
                             not \"{part}\""
                        ),
                    ));
                };
                let len_column = args_column + offset + bytes.chars().count() + 1;
                blocks.push(ByteBlock {
                    offset: number_at(line, args_column + offset, bytes, "a byte offset")?,
                    len: number_at(line, len_column, len, "a number of elements")?,
                });
            }
            Layout::Hindexed { blocks }
        }
        "subarray" => subarray(line, args_column, args)?,
        "resized" => resized(line, args_column, args)?,
        "struct" => {
            let mut blocks = Vec::new();
            for (offset, part) in split_list(args) {
                let at = args_column + offset;
                let shape_error = || {
                    err(
                        line,
                        at,
                        format!(
                            "a struct block is OFFSET+LEN:TYPE (LEN elements of TYPE from byte \
                             OFFSET), not \"{part}\""
                        ),
                    )
                };
                let (bytes, rest) = part.split_once('+').ok_or_else(shape_error)?;
                let (len, dtype) = rest.split_once(':').ok_or_else(shape_error)?;
                let len_column = at + bytes.chars().count() + 1;
                let type_column = len_column + len.chars().count() + 1;
                blocks.push(StructBlock {
                    offset: number_at(line, at, bytes, "a byte offset")?,
                    len: number_at(line, len_column, len, "a number of elements")?,
                    dtype: Datatype::parse(dtype).ok_or_else(|| {
                        err(line, type_column, format!("unknown datatype \"{dtype}\""))
                    })?,
                });
            }
            Layout::Struct { blocks }
        }
        other => {
            return Err(err(
                line,
                column,
                format!("unknown layout \"{other}\" (one of {LAYOUT_KINDS})"),
            ))
        }
    };
    let count = layout.element_count().map_err(|e| {
        let message = if e.message.starts_with(kind) {
            e.message
        } else {
            format!("{kind}: {}", e.message)
        };
        err(line, column, message)
    })?;
    Ok((
        base,
        Shape::Layout {
            layout: Box::new(layout),
            count,
        },
    ))
}

/// The arguments of `resized:`, starting at `column`: `COUNT,EXTENT[,LB]:SEL`.
fn resized(line: usize, column: usize, args: &str) -> Result<Layout, ParseError> {
    let Some((head, inner)) = args.split_once(':') else {
        return Err(err(
            line,
            column,
            format!("resized takes COUNT,EXTENT[,LB]:SEL (copies of SEL), not \"{args}\""),
        ));
    };
    let parts = split_list(head);
    if !(2..=3).contains(&parts.len()) {
        return Err(err(
            line,
            column,
            format!(
                "resized takes COUNT,EXTENT[,LB] before its `:`, not {} parts",
                parts.len()
            ),
        ));
    }
    let count = number_at(line, column + parts[0].0, parts[0].1, "a number of copies")?;
    let extent = number_at(line, column + parts[1].0, parts[1].1, "an extent in bytes")?;
    let lb = match parts.get(2) {
        Some(&(offset, text)) => text.parse::<i64>().map_err(|_| {
            err(
                line,
                column + offset,
                format!("expected a lower bound in bytes, found \"{text}\""),
            )
        })?,
        None => 0,
    };
    let inner_column = column + head.chars().count() + 1;
    let (first, shape) = selection(line, inner_column, inner)?;
    let inner =
        match shape {
            _ if first == 0 => shape.layout(),
            Shape::Single | Shape::Range { .. } => Layout::Indexed {
                blocks: vec![Block {
                    disp: first,
                    len: shape.count(),
                }],
            },
            Shape::Strided { count, stride } => {
                if count > MAX_BLOCKS as u64 {
                    return Err(err(
                        line,
                        inner_column,
                        format!("{count} elements are more blocks than the limit of {MAX_BLOCKS}"),
                    ));
                }
                // the elements one by one, as a vector cannot start past 0
                Layout::Indexed {
                    blocks: (0..count)
                        .map(|i| Block {
                            disp: first.saturating_add(i.saturating_mul(stride)),
                            len: 1,
                        })
                        .collect(),
                }
            }
            Shape::Layout { .. } => return Err(err(
                line,
                inner_column,
                "a resized layout's inner layout takes no `@` (place the whole with its own `@`)",
            )),
        };
    Ok(Layout::resized(inner, lb, extent, count))
}

/// A shape in elements of a window of `dtype`: a struct's blocks carry their own datatypes,
/// so its values are its packed bytes read as elements of `dtype`, and each block must be a
/// whole number of them.
fn in_elements_of(
    line: usize,
    column: usize,
    shape: Shape,
    dtype: Datatype,
) -> Result<Shape, ParseError> {
    let Shape::Layout { layout, count } = shape else {
        return Ok(shape);
    };
    let size = dtype.size() as u64;
    let mut blocks_fit = true;
    let mut has_struct = false;
    struct_blocks(&layout, &mut |block| {
        has_struct = true;
        let bytes = block.len.saturating_mul(block.dtype.size() as u64);
        blocks_fit &= bytes % size == 0;
    });
    if !has_struct {
        return Ok(Shape::Layout { layout, count });
    }
    if !blocks_fit {
        return Err(err(
            line,
            column,
            format!(
                "a struct's values are elements of the window's type {dtype}: every block must \
                 be a whole number of its {size} bytes"
            ),
        ));
    }
    let bytes = layout
        .total_bytes(size)
        .map_err(|e| err(line, column, format!("struct: {}", e.message)))?;
    Ok(Shape::Layout {
        layout,
        count: bytes / size,
    })
}

/// Calls `f` for every struct block of a layout (in a resized layout's inner one too).
fn struct_blocks(layout: &Layout, f: &mut dyn FnMut(&StructBlock)) {
    match layout {
        Layout::Struct { blocks } => blocks.iter().for_each(f),
        Layout::Resized(resized) => struct_blocks(&resized.inner, f),
        _ => {}
    }
}

/// The arguments of `subarray:`, starting at `column`.
fn subarray(line: usize, column: usize, args: &str) -> Result<Layout, ParseError> {
    let mut sizes = None;
    let mut subsizes = None;
    let mut starts = None;
    let mut order = None;
    for (offset, part) in split_list(args) {
        let at = column + offset;
        let Some((key, value)) = part.split_once('=') else {
            return Err(err(
                line,
                at,
                format!("expected sizes=, subsizes=, starts= or order=, found \"{part}\""),
            ));
        };
        let value_column = at + key.chars().count() + 1;
        let dims = || -> Result<Vec<u64>, ParseError> {
            let mut dims = Vec::new();
            let mut dim_column = value_column;
            for dim in value.split('x') {
                dims.push(number_at(line, dim_column, dim, "a dimension (AxBxC)")?);
                dim_column += dim.chars().count() + 1;
            }
            Ok(dims)
        };
        let slot_taken = match key {
            "sizes" => sizes.replace(dims()?).is_some(),
            "subsizes" => subsizes.replace(dims()?).is_some(),
            "starts" => starts.replace(dims()?).is_some(),
            "order" => {
                let parsed = match value {
                    "c" | "C" => Order::C,
                    "fortran" | "Fortran" => Order::Fortran,
                    _ => {
                        return Err(err(
                            line,
                            value_column,
                            format!("order is c or fortran, not \"{value}\""),
                        ))
                    }
                };
                order.replace(parsed).is_some()
            }
            _ => {
                return Err(err(
                    line,
                    at,
                    format!("unknown subarray argument \"{key}\" (sizes, subsizes, starts, order)"),
                ))
            }
        };
        if slot_taken {
            return Err(err(line, at, format!("{key}= is given twice")));
        }
    }
    let end = column + args.chars().count();
    let missing = |what: &str| err(line, end, format!("subarray needs {what}=AxB..."));
    Ok(Layout::Subarray(Box::new(Subarray {
        sizes: sizes.ok_or_else(|| missing("sizes"))?,
        subsizes: subsizes.ok_or_else(|| missing("subsizes"))?,
        starts: starts.ok_or_else(|| missing("starts"))?,
        order: order.unwrap_or_default(),
    })))
}

fn check_count(line: usize, column: usize, loc: &Loc, given: usize) -> Result<(), ParseError> {
    let wanted = loc.shape.count();
    if given as u64 != wanted {
        return Err(err(
            line,
            column,
            format!("{given} values for a location of {wanted} elements"),
        ));
    }
    Ok(())
}

/// Splits `a,b,c` into its parts with their character offsets.
fn split_list(text: &str) -> Vec<(usize, &str)> {
    let mut parts = Vec::new();
    let mut offset = 0;
    for part in text.split(',') {
        parts.push((offset, part));
        offset += part.chars().count() + 1;
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{Call, OpCall};
    use onesided_core::assert::Assert;
    use onesided_core::Op;

    const HEAD: &str = "window W ranks=2 size=4 type=i64\n";

    #[test]
    fn regions_of_dynamic_windows_are_locations_of_their_owner() {
        let scenario = parse(
            "window W ranks=2 type=i32 flavor=dynamic\nB: attach 4 -> r\nbarrier\n\
             A: put B r[1..3] = 1,2\nB: detach r\n",
        )
        .unwrap();
        assert_eq!(scenario.windows[0].sizes, vec![0, 0]);
        assert_eq!(scenario.windows[0].flavor, FlavorDecl::Dynamic);
        let calls: Vec<&Call> = scenario
            .steps
            .iter()
            .filter_map(|step| match step {
                Step::Call(call) => Some(&call.call),
                Step::Barrier { .. } => None,
            })
            .collect();
        let attach = Call::AttachRegion {
            window: 0,
            count: 4,
            name: "r".into(),
        };
        assert_eq!(calls[0], &attach);
        let Call::Op(put) = calls[1] else {
            panic!("{:?}", calls[1])
        };
        assert_eq!((put.loc.index, put.loc.shape.count()), (1, 2));
        let region = put.loc.region.as_deref().unwrap();
        assert_eq!(
            (region.name.as_str(), region.owner, region.line),
            ("r", 1, 2)
        );
        let detach = Call::DetachRegion {
            window: 0,
            name: "r".into(),
        };
        assert_eq!(calls[2], &detach);
    }

    #[test]
    fn an_alias_may_name_a_region_attached_on_a_later_line() {
        let scenario = parse(
            "window W ranks=2 type=i32 flavor=dynamic\nalias X = r[1]\nB: attach 4 -> r\n\
             barrier\nA: put B X = 5\nexpect public B X == 5\n",
        )
        .unwrap();
        let Some(Step::Call(put)) = scenario.steps.get(2) else {
            panic!("{:?}", scenario.steps)
        };
        let Call::Op(put) = &put.call else {
            panic!("{put:?}")
        };
        assert_eq!(put.loc.index, 1);
        let region = put.loc.region.as_deref().unwrap();
        assert_eq!(
            (region.name.as_str(), region.owner, region.line),
            ("r", 1, 3)
        );
        let Subject::Public { loc, .. } = &scenario.expectations[0].subject else {
            panic!("{:?}", scenario.expectations[0])
        };
        assert_eq!(loc, &put.loc);
        // used before its region's attach line: the use is refused, naming both
        let (line, _, message) = error_of(
            "window W ranks=2 type=i32 flavor=dynamic\nalias X = r[1]\nB: store X = 1\n\
             B: attach 4 -> r\n",
        );
        assert_eq!(line, 3, "{message}");
        assert!(
            message.contains("alias X (line 2) names region r"),
            "{message}"
        );
        // a region no line attaches is an unknown name, at the alias
        let (line, column, message) =
            error_of("window W ranks=2 type=i32 flavor=dynamic\nalias X = q[1]\n");
        assert_eq!((line, column), (2, 11), "{message}");
        assert_eq!(message, "unknown window or region \"q\"");
    }

    fn error_of(text: &str) -> (usize, usize, String) {
        let error = parse(text).unwrap_err();
        (error.line, error.column, error.message)
    }

    fn only_call(text: &str) -> RankCall {
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
    fn locations_ranges_and_strides() {
        let call = only_call("A: get B W[1..8:3] -> v");
        let Call::Op(spec) = call.call else { panic!() };
        assert_eq!(spec.loc.index, 1);
        assert_eq!(
            spec.loc.shape,
            Shape::Strided {
                count: 3,
                stride: 3
            }
        );
        let call = only_call("A: put 1 W[2..4] = 1,2");
        let Call::Op(spec) = call.call else { panic!() };
        assert_eq!(spec.loc.shape, Shape::Range { count: 2 });
        assert_eq!(spec.values, [Value::Int(1), Value::Int(2)]);
        assert_eq!(spec.target, 1);
    }

    /// The layout and base of the only call's location.
    fn laid_out(location: &str) -> (u64, Layout) {
        let call = only_call(&format!("A: get B {location} -> v"));
        let Call::Op(spec) = call.call else { panic!() };
        match spec.loc.shape {
            Shape::Layout { layout, count } => {
                assert_eq!(layout.element_count().unwrap(), count);
                (spec.loc.index, *layout)
            }
            other => panic!("{location}: not a layout: {other:?}"),
        }
    }

    #[test]
    fn resized_and_struct_locations() {
        // copies of an element, a range, a strided range, a layout; the lower bound is kept
        assert_eq!(
            laid_out("W[resized:3,32:0@1]"),
            (1, Layout::resized(Layout::contiguous(1), 0, 32, 3))
        );
        assert_eq!(
            laid_out("W[resized:2,64,-8:1..3]"),
            (
                0,
                Layout::resized(
                    Layout::Indexed {
                        blocks: vec![Block { disp: 1, len: 2 }]
                    },
                    -8,
                    64,
                    2
                )
            )
        );
        assert_eq!(
            laid_out("W[resized:2,8:1..5:2]"),
            (
                0,
                Layout::resized(
                    Layout::Indexed {
                        blocks: vec![Block { disp: 1, len: 1 }, Block { disp: 3, len: 1 }]
                    },
                    0,
                    8,
                    2
                )
            )
        );
        assert_eq!(
            laid_out("W[resized:2,100:vector:2,1,3@4]"),
            (
                4,
                Layout::resized(
                    Layout::Vector {
                        count: 2,
                        blocklen: 1,
                        stride: 3
                    },
                    0,
                    100,
                    2
                )
            )
        );
        // a struct's values are its bytes in elements of the window's type (i64 here)
        let call = only_call("A: put B W[struct:24+1:i64,0+2:f64,16+2:i32] = 1,2,3,4");
        let Call::Op(spec) = call.call else { panic!() };
        let Shape::Layout { layout, count } = spec.loc.shape else {
            panic!("not a layout")
        };
        assert_eq!(count, 4);
        assert_eq!(
            *layout,
            Layout::Struct {
                blocks: vec![
                    StructBlock {
                        offset: 24,
                        dtype: Datatype::I64,
                        len: 1
                    },
                    StructBlock {
                        offset: 0,
                        dtype: Datatype::F64,
                        len: 2
                    },
                    StructBlock {
                        offset: 16,
                        dtype: Datatype::I32,
                        len: 2
                    },
                ]
            }
        );
        // inside a resized layout, and as an origin
        let call = only_call(
            "A: put B W[resized:2,16:struct:0+2:i32] = 1,2 origin=struct:8+1:u64,0+1:i64",
        );
        let Call::Op(spec) = call.call else { panic!() };
        assert_eq!(spec.loc.shape.count(), 2);
        assert_eq!(spec.origin.unwrap().shape.count(), 2);
        let cases: [(&str, (usize, usize), &str); 8] = [
            (
                "A: put B W[resized:3:0] = 1,2,3",
                (2, 20),
                "resized takes COUNT,EXTENT[,LB] before its `:`, not 1 parts",
            ),
            (
                "A: put B W[resized:3,8] = 1,2,3",
                (2, 20),
                "resized takes COUNT,EXTENT[,LB]:SEL",
            ),
            (
                "A: put B W[resized:3,8,x:0] = 1,2,3",
                (2, 24),
                "expected a lower bound in bytes, found \"x\"",
            ),
            (
                "A: put B W[resized:3,8:vector:1,1,1@2@0] = 1,2,3",
                (2, 24),
                "a resized layout's inner layout takes no `@`",
            ),
            (
                "A: put B W[resized:2,9223372036854775808:0] = 1,2",
                (2, 12),
                "resized layout: lower bound 0 plus extent 9223372036854775808 overflows",
            ),
            (
                "A: put B W[struct:0+1] = 1",
                (2, 19),
                "a struct block is OFFSET+LEN:TYPE",
            ),
            (
                "A: put B W[struct:0+1:int] = 1",
                (2, 23),
                "unknown datatype \"int\"",
            ),
            (
                "A: put B W[struct:0+1:i32] = 1",
                (2, 12),
                "every block must be a whole number of its 8 bytes",
            ),
        ];
        for (call, position, message) in cases {
            let (line, column, actual) = error_of(&format!("{HEAD}{call}\n"));
            assert_eq!((line, column), position, "{call:?}: {actual}");
            assert!(actual.contains(message), "{call:?}: {actual}");
        }
    }

    #[test]
    fn layout_locations() {
        assert_eq!(
            laid_out("W[vector:2,3,4]"),
            (
                0,
                Layout::Vector {
                    count: 2,
                    blocklen: 3,
                    stride: 4
                }
            )
        );
        assert_eq!(
            laid_out("W[hvector:3,1,6@2]"),
            (
                2,
                Layout::Hvector {
                    count: 3,
                    blocklen: 1,
                    stride_bytes: 6
                }
            )
        );
        assert_eq!(
            laid_out("W[indexed:6..8,1,3..3]"),
            (
                0,
                Layout::Indexed {
                    blocks: vec![
                        Block { disp: 6, len: 2 },
                        Block { disp: 1, len: 1 },
                        Block { disp: 3, len: 0 },
                    ]
                }
            )
        );
        assert_eq!(
            laid_out("W[hindexed:16+2,0+1@1]"),
            (
                1,
                Layout::Hindexed {
                    blocks: vec![
                        ByteBlock { offset: 16, len: 2 },
                        ByteBlock { offset: 0, len: 1 },
                    ]
                }
            )
        );
        let subarray = |order| {
            Layout::Subarray(Box::new(Subarray {
                sizes: vec![3, 4],
                subsizes: vec![2, 1],
                starts: vec![1, 3],
                order,
            }))
        };
        assert_eq!(
            laid_out("W[subarray:sizes=3x4,subsizes=2x1,starts=1x3]"),
            (0, subarray(Order::C))
        );
        assert_eq!(
            laid_out("W[subarray:starts=1x3,order=fortran,subsizes=2x1,sizes=3x4@5]"),
            (5, subarray(Order::Fortran))
        );
        // a layout location is a list of its elements, in values and in variables
        let call = only_call("A: put B W[indexed:3,0..2] = 1,2,3");
        let Call::Op(spec) = call.call else { panic!() };
        assert_eq!(spec.values.len(), 3);
        assert!(spec.loc.shape.is_list());
        let (line, column, message) =
            error_of(&format!("{HEAD}A: put B W[vector:2,2,4] = 1,2,3\n"));
        assert_eq!((line, column), (2, 28));
        assert!(
            message.contains("3 values for a location of 4 elements"),
            "{message}"
        );
        // aliases and expectations take them too
        let scenario = parse(&format!(
            "{HEAD}alias D = W[vector:2,1,3]\nA: get B D -> d\nexpect A d == 1,2\nexpect public B W[hindexed:8+1] == 4\n"
        ))
        .unwrap();
        assert_eq!(
            scenario.expectations[1].accepted,
            [Observed::List(vec![Value::Int(4)])]
        );
    }

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
    fn layout_errors_name_line_column_and_what_is_wrong() {
        let cases: [(&str, (usize, usize), &str); 17] = [
            (
                "A: put B W[vector:2,1] = 1,2",
                (2, 19),
                "vector takes COUNT,BLOCKLEN,STRIDE (3 numbers), not 2 parts",
            ),
            (
                "A: put B W[hvector:2,x,8] = 1,2",
                (2, 22),
                "expected a block length, found \"x\"",
            ),
            (
                "A: put B W[vector:2,1,2@z] = 1,2",
                (2, 25),
                "expected an element index, found \"z\"",
            ),
            ("A: put B W[blob:1] = 1", (2, 12), "unknown layout \"blob\""),
            (
                "A: put B W[x] = 1",
                (2, 12),
                "expected an element index or a layout KIND:ARGS",
            ),
            (
                "A: put B W[indexed:1..3:2] = 1",
                (2, 20),
                "an indexed block is a range i..j or an element i",
            ),
            (
                "A: put B W[indexed:4..2] = 1",
                (2, 23),
                "ends before it starts",
            ),
            (
                "A: put B W[indexed:] = 1",
                (2, 20),
                "expected an element index, found \"\"",
            ),
            (
                "A: put B W[hindexed:4] = 1",
                (2, 21),
                "an hindexed block is OFFSET+LEN",
            ),
            (
                "A: put B W[hindexed:4+q] = 1",
                (2, 23),
                "expected a number of elements, found \"q\"",
            ),
            (
                "A: put B W[subarray:sizes=3x4,subsizes=2x2] = 1,2,3,4",
                (2, 43),
                "subarray needs starts=",
            ),
            (
                "A: put B W[subarray:sizes=3x4,subsizes=4x1,starts=0x0] = 1,2,3,4",
                (2, 12),
                "subarray dimension 0: size 3, subsize 4",
            ),
            (
                "A: put B W[subarray:sizes=3x4,subsizes=2,starts=0x0] = 1,2",
                (2, 12),
                "2 sizes, 1 subsizes, 2 starts",
            ),
            (
                "A: put B W[subarray:sizes=3xy,subsizes=1x1,starts=0x0] = 1",
                (2, 29),
                "expected a dimension",
            ),
            (
                "A: put B W[subarray:sizes=3,sizes=3,subsizes=1,starts=0] = 1",
                (2, 29),
                "sizes= is given twice",
            ),
            (
                "A: put B W[subarray:sizes=3,subsizes=1,starts=0,order=f] = 1",
                (2, 55),
                "order is c or fortran",
            ),
            (
                "A: put B W[subarray:size=3,subsizes=1,starts=0] = 1",
                (2, 21),
                "unknown subarray argument \"size\"",
            ),
        ];
        for (call, position, message) in cases {
            let (line, column, actual) = error_of(&format!("{HEAD}{call}\n"));
            assert_eq!((line, column), position, "{call:?}: {actual}");
            assert!(actual.contains(message), "{call:?}: {actual}");
        }
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
        for (call, position, message) in origin_cases {
            let (line, column, actual) = error_of(&format!("{HEAD}{call}\n"));
            assert_eq!((line, column), position, "{call:?}: {actual}");
            assert!(actual.contains(message), "{call:?}: {actual}");
        }
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
    fn expected_failures_and_window_prefixes() {
        let text = "window W ranks=2 size=1 type=i64\nwindow V ranks=2 size=1 type=u8\nA: V.fence assert=nostore,noprecede !ASSERT\n";
        let scenario = parse(text).unwrap();
        let Step::Call(call) = &scenario.steps[0] else {
            panic!()
        };
        assert_eq!(call.expect_fail, Some(ErrorClass::Assert));
        assert_eq!(
            call.call,
            Call::Fence {
                window: 1,
                assert: Assert::NOSTORE | Assert::NOPRECEDE
            }
        );
        let (line, column, message) = error_of(
            "window W ranks=2 size=1 type=i64\nwindow V ranks=2 size=1 type=u8\nA: fence\n",
        );
        assert_eq!((line, column), (3, 4));
        assert!(message.contains("several windows"), "{message}");
        let (_, column, message) = error_of(
            "window W ranks=2 size=1 type=i64\nwindow V ranks=2 size=1 type=u8\nA: V.put B W[0] = 1\n",
        );
        assert_eq!(column, 6);
        assert!(message.contains("names window V but its location is in window W"));
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
        for (text, position, message) in cases {
            let (line, column, actual) = error_of(text);
            assert_eq!((line, column), position, "{text:?}: {actual}");
            assert!(actual.contains(message), "{text:?}: {actual}");
        }
    }

    #[test]
    fn expectations_are_typed_by_their_subject() {
        let text = format!(
            "{HEAD}A: get B W[0..2] -> pair\nA: test -> flag !RMA_SYNC\nexpect A pair == 1,2\nexpect A flag in {{true,false}}\nexpect private B W[3] in {{0,5}}\n"
        );
        let scenario = parse(&text).unwrap();
        assert_eq!(
            scenario.expectations[0].accepted,
            [Observed::List(vec![Value::Int(1), Value::Int(2)])]
        );
        assert_eq!(
            scenario.expectations[1].accepted,
            [
                Observed::Scalar(Value::Bool(true)),
                Observed::Scalar(Value::Bool(false))
            ]
        );
        assert_eq!(scenario.expectations[2].accepted.len(), 2);
        let (line, column, message) = error_of(&format!(
            "{HEAD}A: get B W[0..2] -> v\nexpect A v in {{1,2}}\n"
        ));
        assert_eq!((line, column), (3, 12));
        assert!(message.contains("takes single values"));
        let (_, _, message) = error_of(&format!(
            "{HEAD}A: get B W[0] -> v\nA: get B W[0..2] -> v\n"
        ));
        assert!(
            message.contains("already holds a value of i64"),
            "{message}"
        );
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
