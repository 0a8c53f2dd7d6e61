//! What the client records itself: the marker of rows it persisted, and its own events
//! (loads, stores, returns, flush_local) shipped with its calls.
//!
//! Owns: logging them in order on the window and when each answer leaves (a marker after its
//! commit, shipped events once handed to the writer, an empty batch after everything the
//! session submitted is committed). Must not: check them (admission bounded them and checked
//! them against the rank and window; the marker's chain is core's to verify), or write the
//! client's own rows (the client commits those itself).

use onesided_core::audit::Event;
use onesided_core::RmaError;

use super::{OnWindow, Session};

impl Session {
    /// The client persisted rows of its chain: record their marker, answered after its commit.
    pub(super) async fn client_rows(
        &mut self,
        on: OnWindow,
        marker: Event,
    ) -> Result<(), RmaError> {
        self.log(on.window, marker, Some(on.reply)).await;
        Ok(())
    }

    /// The client's own events, recorded in order and answered once handed to the log: the
    /// client's next completing call (or the drain at its close) waits for their commit, which
    /// is behind them. None at all is a drain, answered once everything this session submitted
    /// is committed.
    pub(super) async fn recorded(
        &mut self,
        on: OnWindow,
        events: Vec<Event>,
    ) -> Result<(), RmaError> {
        if events.is_empty() {
            self.registry.audit().flush().await;
        } else {
            for event in events {
                self.log(on.window, event, None).await;
            }
        }
        on.reply.done();
        Ok(())
    }
}
