//! Locations: `NAME[SEL]` or an alias, in a window or in a region of a dynamic window, and
//! the selection between the brackets.
//!
//! Owns: resolving a location's name (a window, a region, an alias, an alias of a region
//! attached on a later line), the selections `i`, `i..j` and `i..j:s` (a layout `KIND:ARGS`
//! is handed to `layouts`), element indices and numbers, whose memory a region is and which
//! ranks may use it yet (the owner at once, another rank after a barrier that follows the
//! attach), and that a location gets as many values as it has elements. Must not: check an
//! index against a window's size (the run does, as `RMA_RANGE`), or read a layout's arguments.

use super::super::ast::{FlavorDecl, Loc, RegionRef, Shape};
use super::layouts::{in_elements_of, layout_selection, LAYOUT_KINDS};
use super::lines::Token;
use super::{err, rank_name, ParseError, Parser};

/// The name a location `NAME[SEL]` starts with (the whole text when it has no `[`).
pub(super) fn location_name(text: &str) -> &str {
    text.split_once('[').map_or(text, |(name, _)| name)
}

impl Parser {
    /// `NAME[SEL]` (see [`selection`]) or an alias.
    pub(super) fn loc(&self, line: usize, token: &Token<'_>) -> Result<Loc, ParseError> {
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

    /// A location in a region must be in the memory of `rank` (the rank a call targets, or
    /// whose copy a store, a load or an expectation reads): a region is its owner's memory.
    pub(super) fn in_memory_of(
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
    pub(super) fn region_known_to(
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
}

/// What goes between a location's brackets, and after `origin=`, starting at `column`: its
/// first element and shape. `i`, `i..j`, `i..j:s`, or a layout `KIND:ARGS[@i]` (see
/// [`layout_selection`]); a layout starts with a letter, the others with a digit.
pub(super) fn selection(
    line: usize,
    column: usize,
    text: &str,
) -> Result<(u64, Shape), ParseError> {
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
pub(super) fn index_at(line: usize, column: usize, text: &str) -> Result<u64, ParseError> {
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
pub(super) fn number_at(
    line: usize,
    column: usize,
    text: &str,
    what: &str,
) -> Result<u64, ParseError> {
    text.parse::<u64>()
        .map_err(|_| err(line, column, format!("expected {what}, found \"{text}\"")))
}

/// A location must get as many values as it has elements.
pub(super) fn check_count(
    line: usize,
    column: usize,
    loc: &Loc,
    given: usize,
) -> Result<(), ParseError> {
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

#[cfg(test)]
mod tests {
    use onesided_core::datatype::Value;

    use crate::ast::{Call, FlavorDecl, Shape, Step};
    use crate::parse::parse;
    use crate::parse::tests::only_call;

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
}
