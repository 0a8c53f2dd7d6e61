//! Exports a window's audit log as Chrome trace-event JSON, which the Perfetto UI opens: one
//! track per rank, epochs and blocking calls as slices, operations as flow arrows from the
//! origin's issue to the target's application, local loads and stores as instants.
//!
//! Owns: the mapping of events to tracks, slices and flows. Must not: read or write files.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use crate::audit::{AuditRecord, Event};

const PID: u32 = 1;

fn ts(at_ns: u64) -> f64 {
    at_ns as f64 / 1000.0
}

struct Trace {
    events: Vec<Value>,
    /// Open slices: (rank, key) → (name, start ns, start seq).
    open: HashMap<(u32, String), (String, u64, u64)>,
}

impl Trace {
    fn open(
        &mut self,
        rank: u32,
        key: impl Into<String>,
        name: impl Into<String>,
        r: &AuditRecord,
    ) {
        self.open
            .insert((rank, key.into()), (name.into(), r.at_ns, r.seq));
    }

    fn close(&mut self, rank: u32, key: &str, at_ns: u64, seq: u64) {
        if let Some((name, start, start_seq)) = self.open.remove(&(rank, key.to_string())) {
            self.slice(
                rank,
                &name,
                start,
                at_ns,
                json!({"from_seq": start_seq, "to_seq": seq}),
            );
        }
    }

    fn slice(&mut self, rank: u32, name: &str, start: u64, end: u64, args: Value) {
        self.events.push(json!({
            "name": name,
            "cat": "epoch",
            "ph": "X",
            "ts": ts(start),
            "dur": ts(end.saturating_sub(start)),
            "pid": PID,
            "tid": rank,
            "args": args,
        }));
    }

    fn instant(&mut self, record: &AuditRecord, rank: u32, name: &str, cat: &str, args: Value) {
        let mut args = args;
        // a client row merged behind its marker: name its row in the client's chain too
        if let (Some(cseq), Some(fields)) = (record.cseq, args.as_object_mut()) {
            fields.insert("cseq".into(), json!(cseq));
        }
        self.events.push(json!({
            "name": name,
            "cat": cat,
            "ph": "i",
            "s": "t",
            "ts": ts(record.at_ns),
            "pid": PID,
            "tid": rank,
            "args": args,
        }));
    }

    fn flow(&mut self, record: &AuditRecord, rank: u32, ph: &str, id: u64, name: &str) {
        let mut event = json!({
            "name": name,
            "cat": "op",
            "ph": ph,
            "id": id,
            "ts": ts(record.at_ns),
            "pid": PID,
            "tid": rank,
        });
        if ph == "f" {
            event["bp"] = json!("e");
        }
        self.events.push(event);
    }
}

/// The operations that were applied, by `(origin, incarnation, op_id)`.
pub(crate) fn applied_ops(records: &[AuditRecord]) -> HashSet<(u32, u64, u64)> {
    records
        .iter()
        .filter_map(|record| match &record.event {
            Event::Op {
                origin,
                origin_incarnation,
                op_id,
                ..
            } => Some((*origin, *origin_incarnation, *op_id)),
            _ => None,
        })
        .collect()
}

impl Trace {
    /// An empty trace of window `window`, its process and each of its `nranks` ranks' threads
    /// named.
    fn named(window: u64, nranks: u32) -> Trace {
        let mut trace = Trace {
            events: Vec::new(),
            open: HashMap::new(),
        };
        trace.events.push(json!({
            "name": "process_name", "ph": "M", "ts": 0, "pid": PID, "tid": 0,
            "args": {"name": format!("onesided window {window}")},
        }));
        for rank in 0..nranks {
            trace.events.push(json!({
                "name": "thread_name", "ph": "M", "ts": 0, "pid": PID, "tid": rank,
                "args": {"name": format!("rank {rank}")},
            }));
        }
        trace
    }

    /// Ends every slice still open at `at` (record `seq`), marked unclosed.
    fn close_all(&mut self, at: u64, seq: u64) {
        let mut open: Vec<_> = self.open.drain().collect();
        open.sort_by_key(|((rank, _), (_, _, start_seq))| (*rank, *start_seq));
        for ((rank, _), (name, start, start_seq)) in open {
            self.slice(
                rank,
                &name,
                start,
                at,
                json!({"from_seq": start_seq, "to_seq": seq, "unclosed": true}),
            );
        }
    }
}

/// The window's log as a trace: `{"traceEvents": [...], "displayTimeUnit": "ns"}`, with
/// timestamps in microseconds.
pub fn perfetto(records: &[AuditRecord]) -> Value {
    let window = records.first().map(|record| record.window).unwrap_or(0);
    let nranks = records
        .iter()
        .find_map(|record| match &record.event {
            Event::WindowCreated { sizes, .. } => Some(sizes.len() as u32),
            _ => None,
        })
        .unwrap_or(0)
        .max(records.iter().map(|r| r.rank + 1).max().unwrap_or(0));
    let mut trace = Trace::named(window, nranks);
    let applied = applied_ops(records);
    let mut flows: HashMap<(u32, u64, u64), u64> = HashMap::new();
    for r in records {
        let rank = r.rank;
        let (at, seq) = (r.at_ns, r.seq);
        match &r.event {
            Event::FenceEnter { fence, .. } => {
                trace.close(rank, "fence_epoch", at, seq);
                trace.open(rank, "fence", format!("fence {fence}"), r);
            }
            Event::FenceExit { fence } => {
                trace.close(rank, "fence", at, seq);
                trace.open(rank, "fence_epoch", format!("fence epoch {fence}"), r);
            }
            Event::Post { group, .. } => {
                trace.open(rank, "exposure", format!("exposure {group:?}"), r);
            }
            Event::WaitEnter => trace.open(rank, "wait", "wait", r),
            Event::WaitExit => {
                trace.close(rank, "wait", at, seq);
                trace.close(rank, "exposure", at, seq);
            }
            Event::Start { group, .. } => {
                trace.open(rank, "access", format!("access {group:?}"), r);
            }
            Event::Complete => trace.close(rank, "access", at, seq),
            Event::BarrierEnter => trace.open(rank, "barrier", "barrier", r),
            Event::BarrierExit => trace.close(rank, "barrier", at, seq),
            Event::Issued { call, target } => match (call.as_str(), target) {
                ("lock", Some(t)) => trace.open(rank, format!("lock {t}"), format!("lock {t}"), r),
                ("lock_all", _) => trace.open(rank, "lock_all", "lock_all", r),
                _ => trace.instant(r, rank, call, "call", json!({"seq": seq, "target": target})),
            },
            Event::Returned { call, target } => match (call.as_str(), target) {
                ("unlock", Some(t)) => trace.close(rank, &format!("lock {t}"), at, seq),
                ("unlock_all", _) => trace.close(rank, "lock_all", at, seq),
                _ => {}
            },
            Event::OpIssued {
                op_id,
                target,
                op,
                runs,
                ..
            } => {
                let name = op.to_string();
                let key = (rank, r.incarnation, *op_id);
                trace.instant(
                    r,
                    rank,
                    &format!("{name} → {target}"),
                    "op",
                    json!({"seq": seq, "op_id": op_id, "runs": runs}),
                );
                if applied.contains(&key) {
                    let id = flows.len() as u64 + 1;
                    flows.insert(key, id);
                    trace.flow(r, rank, "s", id, &name);
                }
            }
            Event::Op {
                origin,
                origin_incarnation,
                op_id,
                op,
                runs,
                ..
            } => {
                let name = op.to_string();
                trace.instant(
                    r,
                    rank,
                    &format!("{name} from {origin}"),
                    "op",
                    json!({"seq": seq, "op_id": op_id, "runs": runs}),
                );
                if let Some(id) = flows.get(&(*origin, *origin_incarnation, *op_id)).copied() {
                    trace.flow(r, rank, "f", id, &name);
                }
            }
            Event::Store { ranges } | Event::Load { ranges } => {
                trace.instant(
                    r,
                    rank,
                    r.event.kind(),
                    "local",
                    json!({"seq": seq, "ranges": ranges}),
                );
            }
            other => {
                let args = serde_json::to_value(other).unwrap_or(Value::Null);
                trace.instant(
                    r,
                    rank,
                    other.kind(),
                    "event",
                    json!({"seq": seq, "event": args}),
                );
            }
        }
    }
    // whatever is still open ends at the last record, marked unclosed
    if let Some(last) = records.last() {
        trace.close_all(last.at_ns, last.seq);
    }
    json!({"traceEvents": trace.events, "displayTimeUnit": "ns"})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::fixtures::op_event;
    use crate::audit::RecordedOp;

    /// Fence `fence` of the three ranks with `assert`: each enters (attaching first when
    /// `attaching`), then each leaves.
    fn fence_of_all(
        push: &mut impl FnMut(u32, u64, Event),
        fence: u64,
        assert: u32,
        attaching: bool,
    ) {
        for rank in 0..3 {
            if attaching {
                push(rank, 1, Event::Attach);
            }
            push(rank, 1, Event::FenceEnter { fence, assert });
        }
        for rank in 0..3 {
            push(rank, 0, Event::FenceExit { fence });
        }
    }

    fn history() -> Vec<AuditRecord> {
        let mut records = Vec::new();
        let mut push = |rank: u32, incarnation: u64, event: Event| {
            let seq = records.len() as u64 + 1;
            records.push(AuditRecord {
                window: 9,
                seq,
                at_ns: seq * 1500,
                rank,
                incarnation,
                cseq: None,
                event,
            });
        };
        push(
            0,
            0,
            Event::WindowCreated {
                unified: false,
                world: "w".into(),
                name: "x".into(),
                sizes: vec![16, 16, 16],
                disp_units: vec![1, 1, 1],
                info: std::collections::BTreeMap::new(),
            },
        );
        fence_of_all(&mut push, 1, 8, true);
        push(
            0,
            1,
            Event::OpIssued {
                op_id: 4,
                target: 2,
                op: RecordedOp::Put,
                datatype: "u8".into(),
                runs: vec![(0, 4)],
            },
        );
        push(
            2,
            0,
            op_event(
                0,
                4,
                RecordedOp::Put,
                "u8",
                0,
                vec![(0, 4)],
                vec![1, 2, 3, 4],
            ),
        );
        push(
            1,
            1,
            Event::Store {
                ranges: vec![(8, 12)],
            },
        );
        // an operation never applied gets no flow start
        push(
            1,
            1,
            Event::OpIssued {
                op_id: 5,
                target: 0,
                op: RecordedOp::Get,
                datatype: "u8".into(),
                runs: vec![(0, 1)],
            },
        );
        fence_of_all(&mut push, 2, 0, false);
        push(
            1,
            1,
            Event::Issued {
                call: "lock".into(),
                target: Some(0),
            },
        );
        push(
            0,
            0,
            Event::LockGrant {
                origin: 1,
                lock_type: "exclusive".into(),
                token: 1,
            },
        );
        push(
            1,
            1,
            Event::Returned {
                call: "unlock".into(),
                target: Some(0),
            },
        );
        push(2, 1, Event::BarrierEnter);
        records
    }

    #[test]
    fn trace_is_valid_trace_event_json() {
        let trace = perfetto(&history());
        let text = serde_json::to_string(&trace).unwrap();
        let parsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["displayTimeUnit"], "ns");
        let events = parsed["traceEvents"].as_array().unwrap();
        for event in events {
            for field in ["ph", "ts", "pid", "tid"] {
                assert!(event.get(field).is_some(), "{field} missing in {event}");
            }
        }
        let threads: Vec<u64> = events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .map(|e| e["tid"].as_u64().unwrap())
            .collect();
        assert_eq!(threads, vec![0, 1, 2]);
        assert!(events
            .iter()
            .any(|e| e["name"] == "process_name" && e["args"]["name"] == "onesided window 9"));
        let starts: Vec<&Value> = events.iter().filter(|e| e["ph"] == "s").collect();
        assert_eq!(starts.len(), 1);
        for start in &starts {
            let end = events
                .iter()
                .find(|e| e["ph"] == "f" && e["id"] == start["id"] && e["cat"] == start["cat"])
                .expect("matching flow end");
            assert_eq!(end["bp"], "e");
            assert_eq!(start["tid"], 0);
            assert_eq!(end["tid"], 2);
        }
        let slices: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert!(slices.iter().all(|s| s["dur"].as_f64().unwrap() >= 0.0));
        let names: Vec<&str> = slices.iter().map(|s| s["name"].as_str().unwrap()).collect();
        for expected in ["fence 1", "fence epoch 1", "fence 2", "lock 0", "barrier"] {
            assert!(names.contains(&expected), "{expected} not in {names:?}");
        }
        assert!(events
            .iter()
            .any(|e| e["ph"] == "i" && e["name"] == "store" && e["tid"] == 1));
    }

    #[test]
    fn empty_log_is_an_empty_trace() {
        let trace = perfetto(&[]);
        assert_eq!(trace["traceEvents"].as_array().unwrap().len(), 1);
    }
}
