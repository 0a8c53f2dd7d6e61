//! What a client records beside its calls, checked: the bytes it pushes, the client-side
//! events it ships and the rows of its own chain it says it persisted.
//!
//! Owns: the bounds of a record message and the checks of its contents. Must not: decode a
//! wire message (proto's) or touch a window.

use crate::audit::Event;
use crate::target::Segment;
use crate::{ErrorClass, RmaError};

/// Rows `from..=to` of a client's own chain of a window, persisted, with the hash of the last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRows {
    /// The first row.
    pub from: u64,
    /// The last row.
    pub to: u64,
    /// The hash after the last row (32 bytes when well-formed).
    pub hash: Vec<u8>,
}

/// Checks that bytes a rank pushes to its own public copy (at a fence, post, unlock or sync)
/// lie inside its window of `size` bytes.
///
/// # Errors
/// `MPI_ERR_RMA_RANGE` for a segment that does not.
pub fn check_segments(size: u64, segments: &[Segment]) -> Result<(), RmaError> {
    for segment in segments {
        let end = segment.offset.checked_add(segment.data.len() as u64);
        if end.is_none_or(|end| end > size) {
            return Err(RmaError::new(
                ErrorClass::RmaRange,
                format!(
                    "pushed bytes at {} of length {} are outside the window of {size} bytes",
                    segment.offset,
                    segment.data.len()
                ),
            ));
        }
    }
    Ok(())
}

/// Most events one `Record` message may ship (the client sends a few per call).
pub const MAX_RECORDED_EVENTS: usize = 1024;

/// Most byte ranges the loads and stores of one `Record` message may name together.
pub const MAX_RECORDED_RANGES: usize = 65_536;

/// The client-side events a record ships (JSON `bodies`), decoded and checked against the
/// recording rank's window: its private copy has `own_size` bytes, the window `nranks` ranks.
///
/// # Errors
/// `MPI_ERR_ARG` for an event that does not decode, one a client may not record (only the
/// client-side kinds: loads, stores, returns, flush_local), or an empty or reversed byte
/// range; `MPI_ERR_RMA_RANGE` for bytes outside the private copy; `MPI_ERR_RANK` for a target
/// outside the window; `MPI_ERR_NO_MEM` for more than [`MAX_RECORDED_EVENTS`] events or
/// [`MAX_RECORDED_RANGES`] ranges in one message.
pub fn recorded_events(
    bodies: &[String],
    own_size: u64,
    nranks: u32,
) -> Result<Vec<Event>, RmaError> {
    if bodies.len() > MAX_RECORDED_EVENTS {
        return Err(RmaError::new(
            ErrorClass::NoMem,
            format!(
                "{} recorded events in one message: at most {MAX_RECORDED_EVENTS}",
                bodies.len()
            ),
        ));
    }
    let mut events = Vec::with_capacity(bodies.len());
    let mut ranges = 0usize;
    for body in bodies {
        let event =
            Event::from_json(body).map_err(|e| RmaError::new(ErrorClass::Arg, e.message))?;
        if !event.is_client_side() {
            return Err(RmaError::new(
                ErrorClass::Arg,
                format!("a client may not record {} events", event.kind()),
            ));
        }
        match &event {
            Event::Store { ranges: accessed } | Event::Load { ranges: accessed } => {
                ranges += accessed.len();
                if ranges > MAX_RECORDED_RANGES {
                    return Err(RmaError::new(
                        ErrorClass::NoMem,
                        format!(
                            "more than {MAX_RECORDED_RANGES} recorded byte ranges in one message"
                        ),
                    ));
                }
                for &(start, end) in accessed {
                    if start >= end {
                        return Err(RmaError::new(
                            ErrorClass::Arg,
                            format!(
                                "a recorded {} of bytes [{start}, {end}): a range must not be \
                                 empty or reversed",
                                event.kind()
                            ),
                        ));
                    }
                    if end > own_size {
                        return Err(RmaError::new(
                            ErrorClass::RmaRange,
                            format!(
                                "a recorded {} of bytes [{start}, {end}) of a private copy of \
                                 {own_size} bytes",
                                event.kind()
                            ),
                        ));
                    }
                }
            }
            Event::Returned {
                target: Some(target),
                ..
            }
            | Event::FlushLocal {
                target: Some(target),
            } if *target >= nranks => {
                return Err(RmaError::new(
                    ErrorClass::Rank,
                    format!(
                        "a recorded {} naming rank {target} of a window of {nranks} ranks",
                        event.kind()
                    ),
                ));
            }
            _ => {}
        }
        events.push(event);
    }
    Ok(events)
}

/// `events` in messages [`recorded_events`] takes: at most [`MAX_RECORDED_EVENTS`] events
/// and [`MAX_RECORDED_RANGES`] ranges each, a load or store over more ranges split into
/// several of the same kind, in order.
pub fn recorded_chunks(events: Vec<Event>) -> Vec<Vec<Event>> {
    let mut chunks = Vec::new();
    let mut chunk: Vec<Event> = Vec::new();
    let mut ranges = 0;
    let mut push = |event: Event, count: usize, chunk: &mut Vec<Event>, ranges: &mut usize| {
        if chunk.len() == MAX_RECORDED_EVENTS || *ranges + count > MAX_RECORDED_RANGES {
            chunks.push(std::mem::take(chunk));
            *ranges = 0;
        }
        chunk.push(event);
        *ranges += count;
    };
    for event in events {
        match event {
            Event::Store { ranges: accessed } if accessed.len() > MAX_RECORDED_RANGES => {
                for part in accessed.chunks(MAX_RECORDED_RANGES) {
                    let event = Event::Store {
                        ranges: part.to_vec(),
                    };
                    push(event, part.len(), &mut chunk, &mut ranges);
                }
            }
            Event::Load { ranges: accessed } if accessed.len() > MAX_RECORDED_RANGES => {
                for part in accessed.chunks(MAX_RECORDED_RANGES) {
                    let event = Event::Load {
                        ranges: part.to_vec(),
                    };
                    push(event, part.len(), &mut chunk, &mut ranges);
                }
            }
            event => {
                let count = match &event {
                    Event::Store { ranges } | Event::Load { ranges } => ranges.len(),
                    _ => 0,
                };
                push(event, count, &mut chunk, &mut ranges);
            }
        }
    }
    if !chunk.is_empty() {
        chunks.push(chunk);
    }
    chunks
}

/// The `client_events` marker of `rows` of `window`, once they continue the session's chain
/// of that window, whose next row is `next_cseq`; and the chain's next row after them.
///
/// # Errors
/// `MPI_ERR_ARG` for rows that do not start at `next_cseq`, end before they start or at the
/// last possible cseq, or a hash that is not 32 bytes.
pub fn client_rows_marker(
    window: u64,
    rows: &ClientRows,
    next_cseq: u64,
) -> Result<(Event, u64), RmaError> {
    if rows.from != next_cseq || rows.to < rows.from {
        return Err(RmaError::new(
            ErrorClass::Arg,
            format!(
                "client rows {}..={} do not continue this session's chain of window {window}: \
                 the next is {next_cseq}",
                rows.from, rows.to
            ),
        ));
    }
    if rows.hash.len() != 32 {
        return Err(RmaError::new(
            ErrorClass::Arg,
            format!(
                "the hash of client rows is 32 bytes, not {}",
                rows.hash.len()
            ),
        ));
    }
    let Some(next) = rows.to.checked_add(1) else {
        return Err(RmaError::new(
            ErrorClass::Arg,
            format!(
                "client rows may not end at cseq {}: no row could follow",
                rows.to
            ),
        ));
    };
    let marker = Event::ClientEvents {
        from: rows.from,
        to: rows.to,
        hash: rows.hash.clone(),
    };
    Ok((marker, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushed_segments_must_lie_inside_the_window() {
        let segment = |offset: u64, len: usize| Segment {
            offset,
            data: vec![0u8; len].into(),
        };
        assert_eq!(check_segments(8, &[segment(0, 8), segment(8, 0)]), Ok(()));
        for bad in [segment(1, 8), segment(9, 0), segment(u64::MAX, 1)] {
            let error = check_segments(8, &[segment(0, 1), bad]).unwrap_err();
            assert_eq!(error.class, ErrorClass::RmaRange);
        }
    }

    #[test]
    fn client_rows_must_continue_the_chain() {
        let rows = |from: u64, to: u64, hash: usize| ClientRows {
            from,
            to,
            hash: vec![7u8; hash],
        };
        let (marker, next) = client_rows_marker(1, &rows(3, 5, 32), 3).unwrap();
        assert_eq!(
            marker,
            Event::ClientEvents {
                from: 3,
                to: 5,
                hash: vec![7u8; 32]
            }
        );
        assert_eq!(next, 6);
        // a gap, a repeat, a backwards range, the last cseq (no next row), a short hash
        for (bad, next_cseq) in [
            (rows(4, 5, 32), 3),
            (rows(2, 5, 32), 3),
            (rows(3, 2, 32), 3),
            (rows(u64::MAX, u64::MAX, 32), u64::MAX),
            (rows(3, 5, 31), 3),
        ] {
            let error = client_rows_marker(1, &bad, next_cseq).unwrap_err();
            assert_eq!(error.class, ErrorClass::Arg, "{bad:?}");
        }
    }

    #[test]
    fn recorded_chunks_fit_the_bounds_and_keep_every_range_in_order() {
        let many: Vec<(u64, u64)> = (0..(MAX_RECORDED_RANGES as u64 * 2 + 5))
            .map(|i| (2 * i, 2 * i + 1))
            .collect();
        let mut events = vec![Event::Store {
            ranges: many.clone(),
        }];
        events.extend((0..MAX_RECORDED_EVENTS + 3).map(|_| Event::FlushLocal { target: None }));
        events.push(Event::Load {
            ranges: vec![(0, 1)],
        });
        let chunks = recorded_chunks(events.clone());
        let size = 2 * many.len() as u64;
        let mut stored = Vec::new();
        let mut flushes = 0;
        for chunk in &chunks {
            let bodies: Vec<String> = chunk.iter().map(Event::to_json).collect();
            let accepted = recorded_events(&bodies, size, 1).unwrap();
            assert_eq!(&accepted, chunk);
            for event in chunk {
                match event {
                    Event::Store { ranges } => stored.extend(ranges.iter().copied()),
                    Event::FlushLocal { .. } => flushes += 1,
                    _ => {}
                }
            }
        }
        assert_eq!(stored, many);
        assert_eq!(flushes, MAX_RECORDED_EVENTS + 3);
        assert!(matches!(
            chunks.last().unwrap().last(),
            Some(Event::Load { .. })
        ));
    }
}
