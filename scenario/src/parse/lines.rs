//! A line of a `.rma` file: its tokens, which kind of line it is, and what every `R: CALL`
//! line shares.
//!
//! Owns: tokenizing (words between whitespace, a `#` comment to the end of the line, 1-based
//! columns in characters), the words every line may use (identifiers, comma lists),
//! [`Parser::line`]'s choice between `window`, `alias`, `barrier`, `expect` and `R: CALL`
//! (a barrier needs every rank attached), and `rank_call`: a call line's rank, `W.` prefix and
//! trailing `!CLASS`, a crashed rank's only way on, and the call's text as reported. Must not:
//! read a call's own arguments (its function in `calls` does), a declaration's
//! (`declarations`) or an expectation's (`expectations`, once every line is read).

use onesided_core::ErrorClass;

use super::super::ast::{RankCall, Step};
use super::calls::{self, Site};
use super::expectations::PendingExpect;
use super::{err, parse_rank, ParseError, Parser};

/// One word of a line.
#[derive(Clone, Debug)]
pub(super) struct Token<'a> {
    /// The word.
    pub(super) text: &'a str,
    /// Its 1-based column (in characters).
    pub(super) column: usize,
}

/// The words of a line, comments left out.
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

/// Whether `text` is a name: a letter or `_`, then letters, digits and `_`.
pub(super) fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Splits `a,b,c` into its parts with their character offsets.
pub(super) fn split_list(text: &str) -> Vec<(usize, &str)> {
    let mut parts = Vec::new();
    let mut offset = 0;
    for part in text.split(',') {
        parts.push((offset, part));
        offset += part.chars().count() + 1;
    }
    parts
}

impl Parser {
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
}

#[cfg(test)]
mod tests {
    use onesided_core::assert::Assert;
    use onesided_core::ErrorClass;

    use crate::ast::{Call, Step};
    use crate::parse::parse;
    use crate::parse::tests::error_of;

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
}
