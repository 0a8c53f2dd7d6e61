//! Declarations: the `window` lines (the world's size, each window's attributes) and the
//! `alias` lines.
//!
//! Owns: a window's attributes (`ranks`, `size`, `type`, `model`, `flavor`, `group`, `by`,
//! `info`) and the checks between them (a dynamic window has no size; one size per rank of
//! the window, or one for all; a group's ranks in the world and each once; every window in the
//! same world), and an alias's name and location, kept as text while it names a region that
//! a later line attaches. Must not: create anything (the run does), or resolve a location
//! other than through `locations`.

use onesided_core::Datatype;

use super::super::ast::{FlavorDecl, Model, WindowDecl};
use super::lines::{is_identifier, split_list, Token};
use super::locations::location_name;
use super::{err, rank_name, LaterAlias, ParseError, Parser};

/// The attributes of a `window` line, as written.
#[derive(Debug)]
struct WindowAttributes {
    ranks: Option<u32>,
    /// The sizes, and the column of their value.
    sizes: Option<(Vec<u64>, usize)>,
    dtype: Option<Datatype>,
    model: Model,
    flavor: FlavorDecl,
    by_ranks: bool,
    group: Option<Vec<u32>>,
    info: Vec<(String, String)>,
}

impl Parser {
    /// Refuses `name` unless it is an identifier not declared yet; `what` names what it would
    /// be (`a window`, `an alias`, `a region`).
    pub(super) fn new_name(
        &self,
        line: usize,
        name: &Token<'_>,
        what: &str,
    ) -> Result<(), ParseError> {
        if !is_identifier(name.text) {
            return Err(err(
                line,
                name.column,
                format!("\"{}\" is not {what} name", name.text),
            ));
        }
        if self.is_declared(name.text) {
            return Err(err(
                line,
                name.column,
                format!("{} is already declared", name.text),
            ));
        }
        Ok(())
    }

    /// `window NAME KEY=VALUE... [info KEY=VALUE...]`.
    pub(super) fn window_line(
        &mut self,
        line: usize,
        tokens: &[Token<'_>],
    ) -> Result<(), ParseError> {
        let Some(name) = tokens.get(1) else {
            return Err(err(line, tokens[0].column + 6, "window needs a name"));
        };
        self.new_name(line, name, "a window")?;
        let attributes = self.window_attributes(line, &tokens[2..])?;
        let end = tokens
            .last()
            .map_or(1, |t| t.column + t.text.chars().count());
        let ranks = attributes
            .ranks
            .ok_or_else(|| err(line, end, "window needs ranks=N"))?;
        let dtype = attributes
            .dtype
            .ok_or_else(|| err(line, end, "window needs type=T"))?;
        let (mut sizes, sizes_column) =
            declared_sizes(line, end, attributes.sizes, attributes.flavor)?;
        if let Some(members) = &attributes.group {
            check_group(line, end, members, ranks)?;
        }
        // one size per rank of the window: every rank of the world, or of its group
        let members = attributes
            .group
            .as_ref()
            .map_or(ranks, |members| members.len() as u32);
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
            model: attributes.model,
            flavor: attributes.flavor,
            info: attributes.info,
            by_ranks: attributes.by_ranks,
            group: attributes.group,
        });
        Ok(())
    }

    /// The words after a window's name: `KEY=VALUE` attributes, then after `info` the
    /// window's info pairs.
    fn window_attributes(
        &self,
        line: usize,
        tokens: &[Token<'_>],
    ) -> Result<WindowAttributes, ParseError> {
        let mut attributes = WindowAttributes {
            ranks: None,
            sizes: None,
            dtype: None,
            model: Model::Separate,
            flavor: FlavorDecl::Allocate,
            by_ranks: false,
            group: None,
            info: Vec::new(),
        };
        let mut in_info = false;
        for token in tokens {
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
                attributes.info.push((key.to_string(), value.to_string()));
                continue;
            }
            self.window_attribute(line, token, (key, value), value_column, &mut attributes)?;
        }
        Ok(attributes)
    }

    /// One attribute of a window: `token`, `KEY=VALUE`, its value at `value_column`.
    fn window_attribute(
        &self,
        line: usize,
        token: &Token<'_>,
        (key, value): (&str, &str),
        value_column: usize,
        attributes: &mut WindowAttributes,
    ) -> Result<(), ParseError> {
        match key {
            "ranks" => match value.parse::<u32>() {
                Ok(n) if n > 0 => attributes.ranks = Some(n),
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
                attributes.sizes = Some((list, value_column));
            }
            "type" => {
                attributes.dtype = Some(Datatype::parse(value).ok_or_else(|| {
                    err(
                        line,
                        value_column,
                        format!(
                            "unknown type \"{value}\" (i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 byte)"
                        ),
                    )
                })?)
            }
            "model" => attributes.model = model(line, value_column, value)?,
            "group" => {
                let token = Token {
                    text: value,
                    column: value_column,
                };
                let members = self.group(line, Some(&token), value_column)?;
                if members.is_empty() {
                    return Err(err(line, value_column, "a window's group needs a rank"));
                }
                attributes.group = Some(members);
            }
            "by" => attributes.by_ranks = by_ranks(line, value_column, value)?,
            "flavor" => attributes.flavor = flavor(line, value_column, value)?,
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
        Ok(())
    }

    pub(super) fn alias_line(
        &mut self,
        line: usize,
        tokens: &[Token<'_>],
    ) -> Result<(), ParseError> {
        let (Some(name), Some(equals), Some(loc)) = (tokens.get(1), tokens.get(2), tokens.get(3))
        else {
            return Err(err(line, tokens[0].column, "expected `alias X = NAME[i]`"));
        };
        self.new_name(line, name, "an alias")?;
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
}

/// `model=`'s value, at `column`.
fn model(line: usize, column: usize, value: &str) -> Result<Model, ParseError> {
    match value {
        "separate" => Ok(Model::Separate),
        "unified" => Ok(Model::Unified),
        _ => Err(err(
            line,
            column,
            format!("model is separate or unified, not \"{value}\""),
        )),
    }
}

/// `flavor=`'s value, at `column`.
fn flavor(line: usize, column: usize, value: &str) -> Result<FlavorDecl, ParseError> {
    match value {
        "create" => Ok(FlavorDecl::Create),
        "allocate" => Ok(FlavorDecl::Allocate),
        "dynamic" => Ok(FlavorDecl::Dynamic),
        _ => Err(err(
            line,
            column,
            format!("flavor is create, allocate or dynamic, not \"{value}\""),
        )),
    }
}

/// `by=`'s value, at `column`: whether the ranks create the window (else the admin does).
fn by_ranks(line: usize, column: usize, value: &str) -> Result<bool, ParseError> {
    match value {
        "ranks" => Ok(true),
        "admin" => Ok(false),
        _ => Err(err(
            line,
            column,
            format!("by is admin or ranks, not \"{value}\""),
        )),
    }
}

/// The sizes a window declares, and the column they are reported at: a dynamic window has
/// no size (`size=0` or none; `end`, the end of the line, for none); every other window needs
/// `size=`.
fn declared_sizes(
    line: usize,
    end: usize,
    sizes: Option<(Vec<u64>, usize)>,
    flavor: FlavorDecl,
) -> Result<(Vec<u64>, usize), ParseError> {
    match (sizes, flavor) {
        (Some((sizes, column)), FlavorDecl::Dynamic) => {
            if sizes.iter().any(|&size| size != 0) {
                return Err(err(
                    line,
                    column,
                    "a dynamic window has no size (MPI_Win_create_dynamic): its memory is the \
                     regions its ranks attach (`attach N -> r`); write size=0 or leave it out",
                ));
            }
            Ok((sizes, column))
        }
        (Some(sizes), _) => Ok(sizes),
        (None, FlavorDecl::Dynamic) => Ok((vec![0], end)),
        (None, _) => Err(err(line, end, "window needs size=S")),
    }
}

/// A window's group: each member one of the world's `ranks`, and only once (reported at
/// `end`, the end of the line).
fn check_group(line: usize, end: usize, members: &[u32], ranks: u32) -> Result<(), ParseError> {
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ast::{Call, Step, Subject};
    use crate::parse::parse;
    use crate::parse::tests::error_of;

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
}
