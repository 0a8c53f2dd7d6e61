//! Expectations: the `expect` lines, read once every other line is (a variable may be assigned
//! below the expectation that names it).
//!
//! Owns: what an `expect` line may name (`R VAR`, `public R LOC`, `private R LOC`), the type
//! its values are read as (the variable's, or the location's window's), and `==` (one value,
//! or a list for a list) and `in {…}` (single values only). Must not: read anything of a run,
//! or accept a variable no line assigns.

use onesided_core::datatype::{Datatype, Value};

use super::super::ast::{Expectation, Observed, Subject};
use super::lines::Token;
use super::{err, parse_rank, ParseError, Parser};

/// An `expect` line kept until the file ends: its text and tokens.
#[derive(Clone, Debug)]
pub(super) struct PendingExpect {
    /// The line.
    pub(super) line: usize,
    /// Its comment-free text, trimmed.
    pub(super) text: String,
    /// Its tokens and their columns.
    pub(super) tokens: Vec<(String, usize)>,
}

impl Parser {
    /// The expectation of a kept `expect` line.
    pub(super) fn expectation(&self, pending: &PendingExpect) -> Result<Expectation, ParseError> {
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
        let (subject, dtype, list, rest) = self.subject(line, end, ranks, &tokens)?;
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
        let accepted = self.accepted(line, operator, values, dtype, list)?;
        Ok(Expectation {
            line,
            text: pending.text.clone(),
            subject,
            accepted,
        })
    }

    /// What an `expect` line's `tokens` name (`end` just past the last one): the subject, the
    /// type of its values, whether it is a list, and where the operator is.
    fn subject(
        &self,
        line: usize,
        end: usize,
        ranks: u32,
        tokens: &[Token<'_>],
    ) -> Result<(Subject, Datatype, bool, usize), ParseError> {
        match tokens.get(1).map(|t| t.text) {
            Some(which @ ("public" | "private")) => {
                let rank = rank_at(line, end, ranks, tokens.get(2))?;
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
                Ok((subject, dtype, list, 4))
            }
            _ => {
                let rank = rank_at(line, end, ranks, tokens.get(1))?;
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
                Ok((
                    Subject::Var {
                        rank,
                        var: var.text.to_string(),
                    },
                    known.dtype,
                    known.list,
                    3,
                ))
            }
        }
    }

    /// The observations an expectation accepts: `== V` (a list for a list) or `in {V1,V2}`.
    fn accepted(
        &self,
        line: usize,
        operator: &Token<'_>,
        values: &Token<'_>,
        dtype: Datatype,
        list: bool,
    ) -> Result<Vec<Observed>, ParseError> {
        Ok(match operator.text {
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
        })
    }
}

/// The rank an expectation names at `token` (`end` just past the line when it is missing):
/// one of the world's `ranks`.
fn rank_at(
    line: usize,
    end: usize,
    ranks: u32,
    token: Option<&Token<'_>>,
) -> Result<u32, ParseError> {
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
}

#[cfg(test)]
mod tests {
    use onesided_core::datatype::Value;

    use crate::ast::Observed;
    use crate::parse::parse;
    use crate::parse::tests::{error_of, HEAD};

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
}
