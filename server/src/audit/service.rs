//! The Audit gRPC service: list recorded windows, stream a window's events (and follow live
//! ones, gap-free), replay, verify. Authenticated with the admin token.

use std::pin::Pin;

use onesided_core::audit::{replay, verify, AuditRecord, StoredRow};
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::status_from_rma;
use onesided_proto::v1::{self, audit_server::Audit};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use super::{AuditHandle, AuditStore, Committed};

/// The Audit service.
#[derive(Clone, Debug)]
pub struct AuditService {
    store: Option<AuditStore>,
    live: AuditHandle,
}

impl AuditService {
    async fn records(&self, window: u64) -> Result<Vec<AuditRecord>, Status> {
        let rows = self.store()?.rows(window, 1).await.map_err(internal)?;
        if rows.is_empty() {
            return Err(no_window(window));
        }
        Ok(rows.into_iter().map(|row| row.record).collect())
    }

    /// Serves `store` (none when the audit is off); live rows come from `live`.
    pub fn new(store: Option<AuditStore>, live: AuditHandle) -> Self {
        AuditService { store, live }
    }

    fn store(&self) -> Result<&AuditStore, Status> {
        self.store
            .as_ref()
            .ok_or_else(|| Status::failed_precondition("the audit log is off on this server"))
    }
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

fn wire(record: &AuditRecord, body: &str, hash: &[u8]) -> v1::AuditEvent {
    v1::AuditEvent {
        window: record.window,
        seq: record.seq,
        at_ns: record.at_ns,
        rank: record.rank,
        incarnation: record.incarnation,
        kind: record.event.kind().to_string(),
        body: body.to_string(),
        hash: hash.to_vec().into(),
    }
}

fn wire_stored(row: &StoredRow) -> v1::AuditEvent {
    wire(&row.record, &row.body, &row.hash)
}

fn wire_committed(row: &Committed) -> v1::AuditEvent {
    wire(&row.record, &row.body, &row.hash)
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
            .into_iter()
            .map(|window| v1::AuditWindow {
                id: window.id,
                world: window.world,
                name: window.name,
                events: window.events,
            })
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
                let rows = match store.rows(window, next).await {
                    Ok(rows) => rows,
                    Err(error) => {
                        let _ = sender.send(Err(internal(error))).await;
                        return;
                    }
                };
                for row in &rows {
                    if sender.send(Ok(wire_stored(row))).await.is_err() {
                        return;
                    }
                    next = row.record.seq + 1;
                }
                let Some(live) = live.as_mut() else {
                    return;
                };
                // forward live rows; on overflow, read the gap back from the store
                loop {
                    match live.recv().await {
                        Ok(row) if row.record.window != window || row.record.seq < next => {}
                        Ok(row) if row.record.seq == next => {
                            if sender.send(Ok(wire_committed(&row))).await.is_err() {
                                return;
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
        let rows = self
            .store()?
            .rows(request.window, 1)
            .await
            .map_err(internal)?;
        if rows.is_empty() {
            return Err(no_window(request.window));
        }
        let at = (request.at != 0).then_some(request.at);
        let records: Vec<_> = rows.into_iter().map(|row| row.record).collect();
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
        let rows = self.store()?.rows(window, 1).await.map_err(internal)?;
        if rows.is_empty() {
            return Err(no_window(window));
        }
        let events = rows.len() as u64;
        let response = match verify(&rows) {
            Ok(()) => v1::VerifyResponse {
                intact: true,
                first_bad: 0,
                events,
            },
            Err(first_bad) => v1::VerifyResponse {
                intact: false,
                first_bad,
                events,
            },
        };
        Ok(Response::new(response))
    }

    async fn check(
        &self,
        request: Request<v1::CheckRequest>,
    ) -> Result<Response<v1::CheckResponse>, Status> {
        let window = request.into_inner().window;
        let records = self.records(window).await?;
        let side = |side: &onesided_core::check::Side| v1::FindingSide {
            seq: side.seq,
            rank: side.rank,
            call: side.call.clone(),
        };
        let findings = onesided_core::check::check(&records)
            .iter()
            .map(|finding| v1::Finding {
                rule: finding.rule.name().to_string(),
                description: finding.rule.describe().to_string(),
                target: finding.target,
                start: finding.bytes.0,
                end: finding.bytes.1,
                first: Some(side(&finding.first)),
                second: Some(side(&finding.second)),
                message: finding.message.clone(),
            })
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
                format!("unknown export format {:?}: use perfetto", request.format),
            )));
        }
        let records = self.records(request.window).await?;
        let trace = onesided_core::export::perfetto(&records).to_string();
        Ok(Response::new(v1::ExportResponse { trace }))
    }
}
