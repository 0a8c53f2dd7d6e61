//! The audit log, as an admin reads it: recorded windows, their events (live too), replay and
//! verification. Rows a client persisted itself appear behind the `client_events` marker that
//! names them, with their `cseq`.
//!
//! Owns: `Audit`, the admin token's connection to the Audit service and its calls, and the
//! caller's view of their answers (`AuditEntry` with its event parsed when this version can,
//! `Replayed`, and core's `Verdict`, findings and spans handed back through proto's
//! `audit_wire`). Must not: verify, replay or check anything itself (the server runs core's
//! code over the store), read the store directly, or report a rule or fault it does not know
//! as one it does.

use futures::{Stream, StreamExt};
use onesided_core::audit::Event;
use onesided_proto::audit_wire;
use onesided_proto::v1::{self, audit_client::AuditClient};

use crate::connect::{AdminChannel, CallLimit, Endpoint};
use crate::error::{Error, Result};

/// One recorded event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditEntry {
    /// Window id.
    pub window: u64,
    /// Gap-free sequence number, from 1 (for a client row: its marker's).
    pub seq: u64,
    /// For a row a client persisted itself: its number in that client's chain (window, rank,
    /// incarnation); it follows the `client_events` marker at `seq` that names it. `None` for
    /// the window's own rows.
    pub cseq: Option<u64>,
    /// Monotonic nanoseconds since the recording server started (for a client row: since its
    /// session attached, on the client's clock).
    pub at_ns: u64,
    /// Where it happened.
    pub rank: u32,
    /// Session incarnation (0 for what a target did).
    pub incarnation: u64,
    /// The event, parsed (`None` when this library cannot read it).
    pub event: Option<Event>,
    /// The event as stored (JSON).
    pub body: String,
    /// The row's hash in its chain (the window's, or for a client row its client's).
    pub hash: Vec<u8>,
}

impl AuditEntry {
    /// Where the entry is, as a person reads it: `12`, or `12:3` for row 3 of a client's chain
    /// behind the marker at seq 12.
    pub fn place(&self) -> String {
        onesided_core::audit::place(self.seq, self.cseq)
    }
}

pub use onesided_core::audit::{ClientBreak, ClientFault, ClientSpan, RecordedWindow};
pub use onesided_core::check::{Finding, Rule, Side as FindingSide};

/// The result of `verify`: core's verdict, as the server gave it.
pub type Verification = onesided_core::audit::Verdict;

/// Every rank's public copy at a sequence number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replayed {
    /// The sequence number replayed to.
    pub at: u64,
    /// Public copy per rank.
    pub ranks: Vec<Vec<u8>>,
}

/// An answer naming something this version does not know.
fn unknown(error: audit_wire::UnknownName) -> Error {
    Error::Protocol(error.to_string())
}

fn entry(event: v1::AuditEvent) -> AuditEntry {
    AuditEntry {
        window: event.window,
        seq: event.seq,
        cseq: (event.cseq != 0).then_some(event.cseq),
        at_ns: event.at_ns,
        rank: event.rank,
        incarnation: event.incarnation,
        event: Event::from_json(&event.body).ok(),
        body: event.body,
        hash: event.hash.to_vec(),
    }
}

/// An audit connection (admin token).
#[derive(Clone, Debug)]
pub struct Audit {
    client: AuditClient<AdminChannel>,
    limit: CallLimit,
    silence: crate::connect::Silence,
}

impl Audit {
    /// Connects to the server (a URL or an [`Endpoint`]) with the admin token.
    ///
    /// # Errors
    /// [`Error::Connect`] when nobody answers or TLS fails.
    pub async fn connect(server: impl Into<Endpoint>, token: &str) -> Result<Self> {
        let server = server.into();
        let (channel, limit) = server.admin_channel(token).await?;
        Ok(Audit {
            client: AuditClient::new(channel).max_decoding_message_size(usize::MAX),
            limit,
            silence: server.silence(),
        })
    }

    /// Every recorded window.
    ///
    /// # Errors
    /// FAILED_PRECONDITION when the server records nothing; UNAVAILABLE when its store is.
    pub async fn windows(&self) -> Result<Vec<RecordedWindow>> {
        let response = self
            .limit
            .bound(self.client.clone().list_windows(v1::AuditWindowsRequest {}))
            .await?
            .into_inner();
        Ok(response
            .windows
            .into_iter()
            .map(audit_wire::window_from_wire)
            .collect())
    }

    /// A window's events with `seq >= from`, as recorded so far.
    ///
    /// # Errors
    /// As [`Audit::windows`].
    pub async fn events(&self, window: u64, from: u64) -> Result<Vec<AuditEntry>> {
        let stream = self.stream(window, from, false).await?;
        stream.collect::<Vec<_>>().await.into_iter().collect()
    }

    /// A window's events from `from` on, then the live ones as they are committed, without
    /// gaps; the stream ends when the connection does.
    ///
    /// # Errors
    /// As [`Audit::windows`].
    pub async fn follow(
        &self,
        window: u64,
        from: u64,
    ) -> Result<impl Stream<Item = Result<AuditEntry>> + Send + 'static> {
        self.stream(window, from, true).await
    }

    /// The events stream. Only its opening is bounded by the endpoint's timeout, since a
    /// follower waits for new events as long as the server lives.
    async fn stream(
        &self,
        window: u64,
        from: u64,
        follow: bool,
    ) -> Result<impl Stream<Item = Result<AuditEntry>> + Send + 'static> {
        let stream = self
            .limit
            .bound(self.client.clone().events(v1::EventsRequest {
                window,
                from,
                follow,
            }))
            .await?
            .into_inner();
        let silence = self.silence.clone();
        Ok(stream.map(move |event| event.map(entry).map_err(|status| silence.name(status))))
    }

    /// Every rank's public copy after event `at` (`None`: the end of the log).
    ///
    /// # Errors
    /// NOT_FOUND for a window with no events; DATA_LOSS for a history that cannot be replayed.
    pub async fn replay(&self, window: u64, at: Option<u64>) -> Result<Replayed> {
        let response = self
            .limit
            .bound(self.client.clone().replay(v1::ReplayRequest {
                window,
                at: at.unwrap_or(0),
            }))
            .await?
            .into_inner();
        Ok(Replayed {
            at: response.at,
            ranks: response
                .ranks
                .into_iter()
                .map(|rank| rank.to_vec())
                .collect(),
        })
    }

    /// Finds the pairs of conflicting accesses in the window's history that no synchronization
    /// orders (happens-before from fences, PSCW, locks, flushes and barriers).
    ///
    /// # Errors
    /// NOT_FOUND for a window with no events.
    pub async fn check(&self, window: u64) -> Result<Vec<Finding>> {
        let response = self
            .limit
            .bound(self.client.clone().check(v1::CheckRequest { window }))
            .await?
            .into_inner();
        response
            .findings
            .into_iter()
            .map(|finding| audit_wire::finding_from_wire(finding).map_err(unknown))
            .collect()
    }

    /// The window's timeline as Chrome trace-event JSON (opens in the Perfetto UI): one track
    /// per rank, epochs as slices, operations as flow arrows.
    ///
    /// # Errors
    /// NOT_FOUND for a window with no events.
    pub async fn export_perfetto(&self, window: u64) -> Result<String> {
        let response = self
            .limit
            .bound(self.client.clone().export(v1::ExportRequest {
                window,
                format: "perfetto".into(),
            }))
            .await?
            .into_inner();
        Ok(response.trace)
    }

    /// Checks the window's hash chain and sequence, and for every `client_events` marker that
    /// the client rows it names exist, chain correctly and end at the marker's hash.
    ///
    /// # Errors
    /// NOT_FOUND for a window with no events.
    pub async fn verify(&self, window: u64) -> Result<Verification> {
        let response = self
            .limit
            .bound(self.client.clone().verify(v1::VerifyRequest { window }))
            .await?
            .into_inner();
        audit_wire::verdict_from_wire(response).map_err(unknown)
    }
}
