//! A window's life in the session: opening it (`open_window`, the session's own call) and
//! freeing it (`MPI_Win_free`, a collective of the world).

use onesided_core::audit::Event;
use onesided_core::epoch::EpochState;
use onesided_core::target::Input;
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::v1::server_message;

use super::{OnWindow, OpenWindow, Session};
use crate::world::Collective;

impl Session {
    /// Opens window `name` in this session: a fresh epoch state, every rank's actor told that
    /// this rank may take part in its epochs again, then the window's description.
    pub(super) async fn open_window(&mut self, id: u64, name: &str) -> Result<(), RmaError> {
        let me = self.member.rank;
        let entry = self
            .registry
            .window(&self.member.world, name)
            .ok_or_else(|| onesided_core::window::unknown_window(name))?;
        if self.windows.contains_key(&entry.desc.id) {
            // the epoch state (and PSCW generations) live on: a second handle with a fresh
            // private copy would silently diverge from it
            return Err(RmaError::new(
                ErrorClass::Arg,
                format!("window {name} is already open in this session"),
            ));
        }
        let desc = onesided_proto::desc_to_wire(&entry.desc);
        let epoch = EpochState::new(me, entry.desc.nranks(), entry.desc.info.no_locks);
        let window_id = entry.desc.id;
        for actor in &entry.ranks {
            actor.send(Input::Opened { origin: me }).await?;
        }
        self.windows.insert(
            window_id,
            OpenWindow {
                entry,
                epoch,
                next_cseq: 1,
                fenced: None,
            },
        );
        self.log(window_id, Event::Attach, None).await;
        self.reply(id).send(Ok(server_message::Reply::Window(desc)));
        Ok(())
    }

    /// `MPI_Win_free`: recorded, the window closed in this session, then this rank enters the
    /// window's free collective (a barrier unless the window has `no_locks`), which answers.
    pub(super) async fn free(
        &mut self,
        on: OnWindow,
        event: Event,
        barrier: bool,
    ) -> Result<(), RmaError> {
        self.log(on.window, event, None).await;
        self.windows.remove(&on.window);
        let collective = Collective::Free {
            window: on.window,
            barrier,
        };
        self.member
            .collectives
            .arrive(collective, self.member.rank, on.reply)
            .await
    }
}
