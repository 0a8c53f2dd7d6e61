//! The Audit service's answers, between core's types and v1's messages, in both directions:
//! the server sends what core's store listing, verifier and race checker give, and the client
//! hands its callers the same core types back. The one mapping, so the two sides cannot drift.
//!
//! Names a newer server may add (a rule, a client fault) are refused by name when read: a
//! client cannot report a finding or a break it does not know as one it does.
//!
//! Owns: the field-by-field mapping of `RecordedWindow`, `Verdict` (with its client break,
//! pending and unmarked spans) and race-checker `Finding`s to and from `onesided.v1`, and
//! `UnknownName`, the refusal of a rule or client fault this version does not know. Must not:
//! verify, check or list anything itself (core's verifier and checker and the server's store
//! produce what it carries), read a stream or a store, or guess a name it does not know.

use onesided_core::audit::{ClientBreak, ClientFault, ClientSpan, RecordedWindow, Verdict};
use onesided_core::check::{Finding, Rule, Side};

use crate::v1;

/// A name in an answer that this version does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the server names a {what} this version does not know ({name:?}): upgrade the client")]
pub struct UnknownName {
    /// What kind of name (`rule`, `client fault`).
    pub what: &'static str,
    /// The name as it came.
    pub name: String,
}

/// A recorded window on the wire.
pub fn window_to_wire(window: &RecordedWindow) -> v1::AuditWindow {
    v1::AuditWindow {
        id: window.id,
        world: window.world.clone(),
        name: window.name.clone(),
        events: window.events,
    }
}

/// A recorded window off the wire.
pub fn window_from_wire(window: v1::AuditWindow) -> RecordedWindow {
    RecordedWindow {
        id: window.id,
        world: window.world,
        name: window.name,
        events: window.events,
    }
}

fn span_to_wire(span: &ClientSpan) -> v1::ClientSpan {
    v1::ClientSpan {
        rank: span.rank,
        incarnation: span.incarnation,
        from: span.from,
        to: span.to,
    }
}

fn span_from_wire(span: v1::ClientSpan) -> ClientSpan {
    ClientSpan {
        rank: span.rank,
        incarnation: span.incarnation,
        from: span.from,
        to: span.to,
    }
}

/// The verdict of `verify` on the wire. The wire does not repeat a client break's marker: it
/// is the first bad sequence number.
pub fn verdict_to_wire(verdict: &Verdict) -> v1::VerifyResponse {
    v1::VerifyResponse {
        intact: verdict.first_bad.is_none(),
        first_bad: verdict.first_bad.unwrap_or(0),
        events: verdict.events,
        client_break: verdict.client_break.map(|at| v1::ClientBreak {
            rank: at.rank,
            incarnation: at.incarnation,
            cseq: at.cseq,
            fault: at.fault.name().to_string(),
        }),
        client_events: verdict.client_events,
        unmarked: verdict.unmarked.iter().map(span_to_wire).collect(),
        pending: verdict.pending.iter().map(span_to_wire).collect(),
    }
}

/// The verdict of `verify` off the wire.
///
/// # Errors
/// A client fault this version does not know.
pub fn verdict_from_wire(response: v1::VerifyResponse) -> Result<Verdict, UnknownName> {
    let first_bad = (!response.intact).then_some(response.first_bad);
    let client_break = response
        .client_break
        .map(|at| {
            let fault = ClientFault::parse(&at.fault).ok_or_else(|| UnknownName {
                what: "client fault",
                name: at.fault.clone(),
            })?;
            Ok(ClientBreak {
                marker: response.first_bad,
                rank: at.rank,
                incarnation: at.incarnation,
                cseq: at.cseq,
                fault,
            })
        })
        .transpose()?;
    Ok(Verdict {
        events: response.events,
        first_bad,
        client_break,
        client_events: response.client_events,
        pending: response.pending.into_iter().map(span_from_wire).collect(),
        unmarked: response.unmarked.into_iter().map(span_from_wire).collect(),
    })
}

fn side_to_wire(side: &Side) -> v1::FindingSide {
    v1::FindingSide {
        seq: side.seq,
        rank: side.rank,
        call: side.call.clone(),
        cseq: side.cseq.unwrap_or(0),
    }
}

fn side_from_wire(side: Option<v1::FindingSide>) -> Side {
    let side = side.unwrap_or_default();
    Side {
        seq: side.seq,
        cseq: (side.cseq != 0).then_some(side.cseq),
        rank: side.rank,
        call: side.call,
    }
}

/// A race checker finding on the wire (with its rule's description, for readers that do not
/// know the rule).
pub fn finding_to_wire(finding: &Finding) -> v1::Finding {
    v1::Finding {
        rule: finding.rule.name().to_string(),
        description: finding.rule.describe().to_string(),
        target: finding.target,
        start: finding.bytes.0,
        end: finding.bytes.1,
        first: Some(side_to_wire(&finding.first)),
        second: Some(side_to_wire(&finding.second)),
        message: finding.message.clone(),
    }
}

/// A race checker finding off the wire.
///
/// # Errors
/// A rule this version does not know.
pub fn finding_from_wire(finding: v1::Finding) -> Result<Finding, UnknownName> {
    let rule = Rule::parse(&finding.rule).ok_or_else(|| UnknownName {
        what: "rule",
        name: finding.rule.clone(),
    })?;
    Ok(Finding {
        rule,
        target: finding.target,
        bytes: (finding.start, finding.end),
        first: side_from_wire(finding.first),
        second: side_from_wire(finding.second),
        message: finding.message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(client_break: Option<ClientBreak>) -> Verdict {
        let span = |from| ClientSpan {
            rank: 2,
            incarnation: 7,
            from,
            to: from + 3,
        };
        Verdict {
            events: 40,
            first_bad: client_break.map(|at| at.marker),
            client_break,
            client_events: 12,
            pending: vec![span(5)],
            unmarked: vec![span(9), span(20)],
        }
    }

    #[test]
    fn every_verdict_comes_back_as_it_left() {
        let mut verdicts = vec![verdict(None)];
        for fault in ClientFault::ALL {
            verdicts.push(verdict(Some(ClientBreak {
                marker: 17,
                rank: 3,
                incarnation: 4,
                cseq: 6,
                fault,
            })));
        }
        for sent in verdicts {
            assert_eq!(verdict_from_wire(verdict_to_wire(&sent)), Ok(sent));
        }
        // a window chain broken at a row of its own, not a client's
        let own = Verdict {
            first_bad: Some(3),
            ..verdict(None)
        };
        assert_eq!(verdict_from_wire(verdict_to_wire(&own)), Ok(own));
    }

    #[test]
    fn every_finding_comes_back_as_it_left() {
        for rule in Rule::ALL {
            let sent = Finding {
                rule,
                target: 1,
                bytes: (8, 16),
                first: Side {
                    seq: 4,
                    cseq: None,
                    rank: 0,
                    call: "put".into(),
                },
                second: Side {
                    seq: 9,
                    cseq: Some(2),
                    rank: 1,
                    call: "store".into(),
                },
                message: "a message".into(),
            };
            assert_eq!(finding_from_wire(finding_to_wire(&sent)), Ok(sent));
        }
    }

    #[test]
    fn names_from_a_newer_server_are_refused_by_name() {
        let mut response = verdict_to_wire(&verdict(Some(ClientBreak {
            marker: 17,
            rank: 3,
            incarnation: 4,
            cseq: 6,
            fault: ClientFault::Missing,
        })));
        response.client_break.as_mut().unwrap().fault = "reordered".into();
        let refused = verdict_from_wire(response).unwrap_err();
        assert_eq!(
            (refused.what, refused.name.as_str()),
            ("client fault", "reordered")
        );
        let finding = v1::Finding {
            rule: "put_free".into(),
            ..v1::Finding::default()
        };
        let refused = finding_from_wire(finding).unwrap_err();
        assert_eq!((refused.what, refused.name.as_str()), ("rule", "put_free"));
    }

    #[test]
    fn a_recorded_window_comes_back_as_it_left() {
        let sent = RecordedWindow {
            id: 9,
            world: "w".into(),
            name: "counters".into(),
            events: 123,
        };
        assert_eq!(window_from_wire(window_to_wire(&sent)), sent);
    }
}
