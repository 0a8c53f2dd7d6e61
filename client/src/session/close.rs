//! Ending a session cleanly (`Session::close`): what the rank did last is shipped and answered,
//! then the stream ends on both sides.
//!
//! Owns: `close`, `drain` (every open window's pending loads and stores and every deferred call
//! shipped, and — when the server keeps a log — an empty record whose answer says everything
//! before it is in the log) and `end` (the supervisor stopped, the stream ended after
//! everything written to it, and the server's end awaited). Must not: attach again afterwards,
//! or fail a close for a window freed meanwhile (`MPI_ERR_WIN` from the drain's record).

use super::*;
use crate::window::take_accesses;

impl Session {
    /// Ends the session cleanly: ships every open window's pending loads and stores (what a
    /// rank did after its last call) and every deferred call, and waits until the server has
    /// answered them — in sync durability, until they are in the audit log — and, when the
    /// session persists its own events, until its writer has committed them; then ends the
    /// stream and waits until the server ended it too (the session left, not broken: no
    /// `departed` row). Calls on its windows fail afterwards. Dropping a session instead may
    /// lose what it did last, and the server sees a broken stream once the process exits.
    ///
    /// # Errors
    /// When the session already ended.
    pub async fn close(self) -> Result<()> {
        let drained = self.drain().await;
        self.end().await;
        drained
    }

    /// Ends the stream after everything written to it, and waits until the server ended its
    /// side (or the stream broke). The session does not attach again afterwards.
    async fn end(&self) {
        if let Some(supervisor) = lock(&self.inner.supervisor).take() {
            supervisor.abort();
        }
        let ended = {
            let mut deferred = lock(&self.inner.deferred);
            let link = self.link();
            self.write(&link, &mut deferred, None);
            // a waiter for an id never sent: only the end of the stream answers it (the
            // reader fails every waiter then)
            let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
            let ended = link.register(id);
            let _ = link.outbound.send(ClientMessage { id: 0, call: None });
            ended
        };
        if let Ok(ended) = ended {
            let _ = ended.await;
        }
    }

    /// Ships the windows' pending accesses and the deferred calls, and waits until they are
    /// answered and recorded ([`Session::close`]).
    async fn drain(&self) -> Result<()> {
        let watched: Vec<_> = lock(&self.inner.windows).clone();
        for window in &watched {
            if let Some(state) = window.state.upgrade() {
                let (me, events) = take_accesses(&state);
                self.record(window.id, me, events);
            }
        }
        // an empty record is answered once everything before it is in the audit log
        let Some(&Watched { id: window, .. }) = watched.first() else {
            self.flush_deferred();
            return Ok(());
        };
        if !self.audited() {
            self.flush_deferred();
            return Ok(());
        }
        let drained = self
            .call(Call::Record(Record {
                window,
                events: Vec::new(),
                rows: None,
            }))
            .await;
        match drained {
            Err(error) if error.class() == Some(onesided_core::ErrorClass::Win) => Ok(()),
            other => other.map(drop),
        }
    }
}
