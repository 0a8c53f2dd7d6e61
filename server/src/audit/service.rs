//! The Audit gRPC service: list recorded windows, stream a window's events (and follow live
//! ones, gap-free), replay, verify, check, export. Authenticated with the admin token.
//!
//! Every reader sees the window's chain with each `client_events` marker expanded into the
//! rows the client persisted itself (core's `merge`); verify checks both chains.
//!
//! Owns: the Audit service's methods and what each reads — stored rows (waiting for the
//! writer's flush when a window has none yet), live commits for a follower (`Committed`
//! from the writer's broadcast, the store polled every `FOLLOW_POLL` for another node's),
//! the client rows a live marker names (waited for up to `CLIENT_ROWS_WAIT`) — the refusal to
//! act on an unreadable row, and rows on the wire (every event shown as JSON). Must not: write
//! to the store, decide what verify, replay, check or export conclude (core does; proto's
//! `audit_wire` carries the verdicts and findings), or authenticate (the admin interceptor
//! did).

use std::pin::Pin;

use std::collections::BTreeMap;
use std::time::Duration;

use onesided_core::audit::{
    all_readable, merge, readable, replay, verify_history, AuditRecord, Body, Event, StoredRow,
};
use onesided_core::error::quoted;
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::v1::{self, audit_server::Audit};
use onesided_proto::{audit_wire, status_from_rma};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use super::store::ClientRows;
use super::{AuditHandle, AuditStore, Committed};

/// How long a follower waits for a commit of this node before it reads the store again: the
/// most a follower lags behind the commits of another node of a cluster.
const FOLLOW_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// How long a follower waits for the client rows a live marker names (the client commits them
/// while the server commits the marker), polling every [`CLIENT_ROWS_POLL`].
const CLIENT_ROWS_WAIT: Duration = Duration::from_secs(5);
const CLIENT_ROWS_POLL: Duration = Duration::from_millis(10);

/// How long a read of a window with no stored rows waits for the writer to commit what was
/// submitted before it (in `async` durability a window is created before its first row is
/// committed).
const COMMIT_WAIT: Duration = Duration::from_secs(5);

/// The Audit service.
#[derive(Clone, Debug)]
pub struct AuditService {
    store: Option<AuditStore>,
    live: AuditHandle,
}

impl AuditService {
    /// The window's rows and the rows of its client chains (none read when no marker names
    /// any).
    async fn stored(&self, window: u64) -> Result<(Vec<StoredRow>, Vec<StoredRow>), Status> {
        let store = self.store()?;
        let mut rows = store.rows(window, 1).await.map_err(internal)?;
        if rows.is_empty() {
            // under `async` durability a window's creation is committed after its answer: a
            // window that exists is never "not found", so wait for what was submitted before
            // this read, then look again
            if tokio::time::timeout(COMMIT_WAIT, self.live.flush())
                .await
                .is_err()
            {
                return Err(not_committed(window));
            }
            rows = store.rows(window, 1).await.map_err(internal)?;
        }
        if rows.is_empty() {
            return Err(no_window(window));
        }
        let client = if rows.iter().any(is_marker) {
            store
                .client_rows(window, ClientRows::All)
                .await
                .map_err(internal)?
        } else {
            Vec::new()
        };
        Ok((rows, client))
    }

    /// The window's history as readers see it: markers expanded into their client rows.
    async fn records(&self, window: u64) -> Result<Vec<AuditRecord>, Status> {
        let (rows, client) = self.stored(window).await?;
        let unreadable = |error: onesided_core::RmaError| Status::data_loss(error.message);
        // a client row that cannot be read must not silently drop out of the merge either
        all_readable(&client).map_err(unreadable)?;
        let records = readable(rows).map_err(unreadable)?;
        Ok(merge(records, &client))
    }

    /// Serves `store` (none when the audit is off); live rows come from `live`.
    pub fn new(store: Option<AuditStore>, live: AuditHandle) -> Self {
        AuditService { store, live }
    }

    /// Whether there is a log to read (the audit is on).
    pub fn has_store(&self) -> bool {
        self.store.is_some()
    }

    /// The window's timeline: the Perfetto trace `export` answers with (core's `export`), for
    /// the web view to draw.
    ///
    /// # Errors
    /// As `export`: NOT_FOUND for a window never recorded, FAILED_PRECONDITION when the audit
    /// is off, UNAVAILABLE when the store is.
    pub async fn timeline(&self, window: u64) -> Result<serde_json::Value, Status> {
        let records = self.records(window).await?;
        Ok(onesided_core::export::perfetto(&records))
    }

    /// The last `count` events of the window's chain (client rows behind their markers), as
    /// `events` streams them.
    ///
    /// # Errors
    /// FAILED_PRECONDITION when the audit is off, UNAVAILABLE when the store is.
    pub async fn recent(&self, window: u64, count: u64) -> Result<Vec<v1::AuditEvent>, Status> {
        let store = self.store()?;
        let Some((last, _)) = store.tail(window).await.map_err(internal)? else {
            return Ok(Vec::new());
        };
        let from = last.saturating_sub(count.saturating_sub(1)).max(1);
        stored_from(store, window, from).await.map_err(internal)
    }

    fn store(&self) -> Result<&AuditStore, Status> {
        self.store
            .as_ref()
            .ok_or_else(|| Status::failed_precondition("the audit log is off on this server"))
    }
}

/// UNAVAILABLE, `MPI_ERR_IO`: the writer did not commit within [`COMMIT_WAIT`] (the store is
/// refusing commits), so whether the window exists cannot be told yet.
fn not_committed(window: u64) -> Status {
    status_from_rma(&RmaError::new(
        ErrorClass::Io,
        format!(
            "window {window} has no committed events yet (the audit store is behind); try again"
        ),
    ))
}

/// NOT_FOUND, `MPI_ERR_WIN`.
fn no_window(window: u64) -> Status {
    status_from_rma(&RmaError::new(
        ErrorClass::Win,
        format!("no recorded window {window}"),
    ))
}

fn internal(error: anyhow::Error) -> Status {
    tracing::error!(error = %format!("{error:#}"), "audit store failed");
    Status::unavailable("the audit store is unavailable")
}

fn wire(record: &AuditRecord, body: &Body, hash: &[u8]) -> v1::AuditEvent {
    v1::AuditEvent {
        window: record.window,
        seq: record.seq,
        at_ns: record.at_ns,
        rank: record.rank,
        incarnation: record.incarnation,
        kind: record.event.kind().to_string(),
        body: body.to_json(),
        hash: hash.to_vec().into(),
        cseq: 0,
    }
}

fn wire_stored(row: &StoredRow) -> v1::AuditEvent {
    wire(&row.record, &row.body, &row.hash)
}

fn is_marker(row: &StoredRow) -> bool {
    matches!(row.record.event, Event::ClientEvents { .. })
}

/// A client row as the log shows it: behind the marker at `marker_seq`, with its own cseq,
/// clock and hash (in its client's chain).
fn wire_client(marker_seq: u64, row: &StoredRow) -> v1::AuditEvent {
    let kind = row
        .body
        .decode()
        .map(|event| event.kind().to_string())
        .unwrap_or_else(|_| "unreadable".into());
    v1::AuditEvent {
        window: row.record.window,
        seq: marker_seq,
        at_ns: row.record.at_ns,
        rank: row.record.rank,
        incarnation: row.record.incarnation,
        kind,
        body: row.body.to_json(),
        hash: row.hash.clone().into(),
        cseq: row.record.seq,
    }
}

/// The range of client rows a marker names, as a query.
fn named_rows(marker: &AuditRecord) -> Option<(ClientRows, u64)> {
    match marker.event {
        Event::ClientEvents { from, to, .. } => Some((
            ClientRows::Range {
                rank: marker.rank,
                incarnation: marker.incarnation,
                from,
                to,
            },
            to.saturating_sub(from) + 1,
        )),
        _ => None,
    }
}

/// The client rows a live marker names, waiting up to [`CLIENT_ROWS_WAIT`] for the client to
/// commit them; whatever is stored then (verify names what is missing).
async fn live_client_rows(
    store: &AuditStore,
    marker: &AuditRecord,
) -> anyhow::Result<Vec<StoredRow>> {
    let Some((which, count)) = named_rows(marker) else {
        return Ok(Vec::new());
    };
    let deadline = tokio::time::Instant::now() + CLIENT_ROWS_WAIT;
    loop {
        let rows = store.client_rows(marker.window, which).await?;
        if rows.len() as u64 >= count || tokio::time::Instant::now() >= deadline {
            return Ok(rows);
        }
        tokio::time::sleep(CLIENT_ROWS_POLL).await;
    }
}

pub(crate) fn wire_committed(row: &Committed) -> v1::AuditEvent {
    // written just now from this event: no need to decode the body again
    v1::AuditEvent {
        body: row.record.event.to_json(),
        ..wire(&row.record, &Body::Json(String::new()), &row.hash)
    }
}

/// The stored rows of `window` from `from` on, each marker followed by the client rows it
/// names.
async fn stored_from(
    store: &AuditStore,
    window: u64,
    from: u64,
) -> anyhow::Result<Vec<v1::AuditEvent>> {
    let rows = store.rows(window, from).await?;
    let client = if rows.iter().any(is_marker) {
        store.client_rows(window, ClientRows::All).await?
    } else {
        Vec::new()
    };
    let mut chains: BTreeMap<(u32, u64), BTreeMap<u64, &StoredRow>> = BTreeMap::new();
    for row in &client {
        chains
            .entry((row.record.rank, row.record.incarnation))
            .or_default()
            .insert(row.record.seq, row);
    }
    let mut events = Vec::with_capacity(rows.len() + client.len());
    for row in &rows {
        events.push(wire_stored(row));
        let Event::ClientEvents { from, to, .. } = row.record.event else {
            continue;
        };
        let Some(chain) = chains.get(&(row.record.rank, row.record.incarnation)) else {
            continue;
        };
        for client_row in chain.range(from..=to).map(|(_, row)| *row) {
            events.push(wire_client(row.record.seq, client_row));
        }
    }
    Ok(events)
}

type EventStream = Pin<Box<dyn Stream<Item = Result<v1::AuditEvent, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl Audit for AuditService {
    async fn list_windows(
        &self,
        _request: Request<v1::AuditWindowsRequest>,
    ) -> Result<Response<v1::AuditWindowsResponse>, Status> {
        let windows = self
            .store()?
            .windows()
            .await
            .map_err(internal)?
            .iter()
            .map(audit_wire::window_to_wire)
            .collect();
        Ok(Response::new(v1::AuditWindowsResponse { windows }))
    }

    type EventsStream = EventStream;

    async fn events(
        &self,
        request: Request<v1::EventsRequest>,
    ) -> Result<Response<Self::EventsStream>, Status> {
        let request = request.into_inner();
        let store = self.store()?.clone();
        // subscribe before reading so that nothing committed in between is missed
        let mut live = request.follow.then(|| self.live.subscribe());
        let (sender, receiver) = mpsc::channel(256);
        let window = request.window;
        tokio::spawn(async move {
            let mut next = request.from.max(1);
            loop {
                let stored = match stored_from(&store, window, next).await {
                    Ok(stored) => stored,
                    Err(error) => {
                        let _ = sender.send(Err(internal(error))).await;
                        return;
                    }
                };
                for event in stored {
                    next = event.seq + 1;
                    if sender.send(Ok(event)).await.is_err() {
                        return;
                    }
                }
                let Some(live) = live.as_mut() else {
                    return;
                };
                // forward live rows; on overflow, read the gap back from the store, and so
                // when nothing arrives for a while: in a cluster the window may be served by
                // another node (or move there), whose commits only the store shows here
                loop {
                    let Ok(received) = tokio::time::timeout(FOLLOW_POLL, live.recv()).await else {
                        break;
                    };
                    match received {
                        Ok(row) if row.record.window != window || row.record.seq < next => {}
                        Ok(row) if row.record.seq == next => {
                            if sender.send(Ok(wire_committed(&row))).await.is_err() {
                                return;
                            }
                            let client = match live_client_rows(&store, &row.record).await {
                                Ok(client) => client,
                                Err(error) => {
                                    let _ = sender.send(Err(internal(error))).await;
                                    return;
                                }
                            };
                            for client_row in &client {
                                let event = wire_client(row.record.seq, client_row);
                                if sender.send(Ok(event)).await.is_err() {
                                    return;
                                }
                            }
                            next += 1;
                        }
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => break,
                        Err(broadcast::error::RecvError::Closed) => return,
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(receiver))))
    }

    async fn replay(
        &self,
        request: Request<v1::ReplayRequest>,
    ) -> Result<Response<v1::ReplayResponse>, Status> {
        let request = request.into_inner();
        let records = self.records(request.window).await?;
        let at = (request.at != 0).then_some(request.at);
        let last = records.last().map_or(0, |record| record.seq);
        let copies = replay(&records, at).map_err(|error| Status::data_loss(error.message))?;
        Ok(Response::new(v1::ReplayResponse {
            ranks: copies.into_iter().map(Into::into).collect(),
            at: at.unwrap_or(last).min(last),
        }))
    }

    async fn verify(
        &self,
        request: Request<v1::VerifyRequest>,
    ) -> Result<Response<v1::VerifyResponse>, Status> {
        let window = request.into_inner().window;
        let (rows, client) = self.stored(window).await?;
        Ok(Response::new(audit_wire::verdict_to_wire(&verify_history(
            &rows, &client,
        ))))
    }

    async fn check(
        &self,
        request: Request<v1::CheckRequest>,
    ) -> Result<Response<v1::CheckResponse>, Status> {
        let window = request.into_inner().window;
        let records = self.records(window).await?;
        let findings = onesided_core::check::check(&records)
            .iter()
            .map(audit_wire::finding_to_wire)
            .collect();
        Ok(Response::new(v1::CheckResponse { findings }))
    }

    async fn export(
        &self,
        request: Request<v1::ExportRequest>,
    ) -> Result<Response<v1::ExportResponse>, Status> {
        let request = request.into_inner();
        if !matches!(request.format.as_str(), "" | "perfetto") {
            return Err(status_from_rma(&RmaError::new(
                ErrorClass::Arg,
                format!(
                    "unknown export format {}: use perfetto",
                    quoted(&request.format)
                ),
            )));
        }
        let records = self.records(request.window).await?;
        let trace = onesided_core::export::perfetto(&records).to_string();
        Ok(Response::new(v1::ExportResponse { trace }))
    }
}
