//! The world's barrier (`MPI_Barrier`), and what a session call that orders notes first.
//!
//! Owns: `barrier`, and `note_accesses`: the open windows' local loads and stores not yet
//! recorded, recorded before a call that orders (a barrier here, a send or a receive in
//! `crate::messages`), so the log has them before it. Must not: decide when every rank has
//! called (the server's world does), or push or pull a window's copy (a barrier is no
//! synchronization call of a window).

use onesided_proto::v1::Barrier;

use super::*;
use crate::window::take_accesses;

impl Session {
    /// `MPI_Barrier` over the world: returns once every rank has called it.
    ///
    /// # Errors
    /// When the session ends.
    pub async fn barrier(&self) -> Result<()> {
        self.note_accesses();
        self.call(Call::Barrier(Barrier {})).await?;
        Ok(())
    }

    /// Records the local loads and stores not yet recorded on every open window: a session
    /// call that orders (a barrier, a send, a receive) notes them first, so the log has them
    /// before it.
    pub(crate) fn note_accesses(&self) {
        let windows: Vec<_> = lock(&self.inner.windows)
            .iter()
            .filter_map(|window| window.state.upgrade().map(|state| (window.id, state)))
            .collect();
        for (id, state) in windows {
            let (me, events) = take_accesses(&state);
            self.record(id, me, events);
        }
    }
}
