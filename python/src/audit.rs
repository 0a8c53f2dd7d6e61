//! `Audit` (the admin token): the audit log of recorded windows — events, replay, verify,
//! check — as the Rust client's `Audit` reads it.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::admin::admin_connection;
use crate::wait;

/// A window the log holds events of.
#[pyclass(frozen, get_all, module = "onesided")]
#[derive(Debug)]
pub(crate) struct RecordedWindow {
    id: u64,
    world: String,
    name: String,
    events: u64,
}

#[pymethods]
impl RecordedWindow {
    fn __repr__(&self) -> String {
        format!(
            "RecordedWindow(id={}, world={:?}, name={:?}, events={})",
            self.id, self.world, self.name, self.events
        )
    }
}

/// One recorded event. `kind` is its name (`store`, `put`, `lock_granted`, …; None when this
/// library cannot read it), `body` the event as JSON.
#[pyclass(frozen, get_all, module = "onesided")]
#[derive(Debug)]
pub(crate) struct AuditEntry {
    window: u64,
    /// Gap-free sequence number (for a row a client stored itself: its marker's).
    seq: u64,
    /// For a row a client stored itself: its number in that client's chain.
    cseq: Option<u64>,
    at_ns: u64,
    rank: u32,
    incarnation: u64,
    kind: Option<&'static str>,
    body: String,
}

#[pymethods]
impl AuditEntry {
    fn __repr__(&self) -> String {
        format!(
            "AuditEntry(seq={}, cseq={:?}, rank={}, body={})",
            self.seq, self.cseq, self.rank, self.body
        )
    }
}

/// A pair of conflicting accesses that no synchronization orders. `first` and `second` are
/// `(seq, cseq, rank, call)`.
#[pyclass(frozen, get_all, module = "onesided")]
#[derive(Debug)]
pub(crate) struct Finding {
    /// The rule's name (`put_put`, `get_store`, `store_while_pending`, …).
    rule: &'static str,
    description: &'static str,
    /// The rank whose window the accesses touch.
    target: u32,
    /// The bytes concerned, `(start, end)`.
    bytes: (u64, u64),
    first: (u64, Option<u64>, u32, String),
    second: (u64, Option<u64>, u32, String),
    message: String,
}

#[pymethods]
impl Finding {
    fn __repr__(&self) -> String {
        format!("Finding({:?})", self.message)
    }
}

fn side(side: onesided_client::FindingSide) -> (u64, Option<u64>, u32, String) {
    (side.seq, side.cseq, side.rank, side.call)
}

/// The audit log, with the admin token.
#[pyclass(frozen, module = "onesided")]
#[derive(Debug)]
pub(crate) struct Audit {
    audit: onesided_client::Audit,
}

#[pymethods]
impl Audit {
    #[new]
    #[pyo3(signature = (url, token, *, ca_file = None, connect_timeout = None, timeout = None))]
    fn connect(
        py: Python<'_>,
        url: &str,
        token: &str,
        ca_file: Option<&str>,
        connect_timeout: Option<f64>,
        timeout: Option<f64>,
    ) -> PyResult<Self> {
        let connect = onesided_client::Audit::connect;
        let audit = admin_connection(py, url, token, ca_file, connect_timeout, timeout, connect)?;
        Ok(Audit { audit })
    }

    /// Every recorded window.
    fn windows(&self, py: Python<'_>) -> PyResult<Vec<RecordedWindow>> {
        let windows = wait(py, self.audit.windows())?;
        Ok(windows
            .into_iter()
            .map(|window| RecordedWindow {
                id: window.id,
                world: window.world,
                name: window.name,
                events: window.events,
            })
            .collect())
    }

    /// The events of window `window` from sequence number `start`, client rows merged.
    #[pyo3(signature = (window, start = 1))]
    fn events(&self, py: Python<'_>, window: u64, start: u64) -> PyResult<Vec<AuditEntry>> {
        let entries = wait(py, self.audit.events(window, start))?;
        Ok(entries
            .into_iter()
            .map(|entry| AuditEntry {
                window: entry.window,
                seq: entry.seq,
                cseq: entry.cseq,
                at_ns: entry.at_ns,
                rank: entry.rank,
                incarnation: entry.incarnation,
                kind: entry.event.as_ref().map(|event| event.kind()),
                body: entry.body,
            })
            .collect())
    }

    /// Conflicting accesses that no synchronization orders.
    fn check(&self, py: Python<'_>, window: u64) -> PyResult<Vec<Finding>> {
        let findings = wait(py, self.audit.check(window))?;
        Ok(findings
            .into_iter()
            .map(|finding| Finding {
                rule: finding.rule.name(),
                description: finding.rule.describe(),
                target: finding.target,
                bytes: finding.bytes,
                first: side(finding.first),
                second: side(finding.second),
                message: finding.message,
            })
            .collect())
    }

    /// Every rank's public copy at sequence number `at` (the end without): `(at, [bytes per
    /// rank])`.
    #[pyo3(signature = (window, at = None))]
    fn replay<'py>(
        &self,
        py: Python<'py>,
        window: u64,
        at: Option<u64>,
    ) -> PyResult<(u64, Vec<Bound<'py, PyBytes>>)> {
        let replayed = wait(py, self.audit.replay(window, at))?;
        let ranks = replayed
            .ranks
            .iter()
            .map(|bytes| PyBytes::new(py, bytes))
            .collect();
        Ok((replayed.at, ranks))
    }

    /// Whether the window's chain, and every client chain it names, is intact: `(events,
    /// first bad sequence number or None)`.
    fn verify(&self, py: Python<'_>, window: u64) -> PyResult<(u64, Option<u64>)> {
        let verification = wait(py, self.audit.verify(window))?;
        Ok((verification.events, verification.first_bad))
    }
}
