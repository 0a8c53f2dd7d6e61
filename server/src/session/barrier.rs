//! The world barrier (`MPI_Barrier`), recorded on every window the rank has open.
//!
//! Owns: recording `barrier_enter` on every window open at the call and `barrier_exit` on the
//! same windows when it returns, the answer riding on the last exit's commit. Must not: count
//! arrivals or decide when the barrier completes or fails (the world actor's core
//! `Collectives` does), or block the session while it waits (the answer comes back through a
//! reply).

use onesided_core::audit::Event;
use onesided_core::RmaError;
use tokio::sync::oneshot;

use super::{Control, Session};
use crate::reply::{Answer, Reply};
use crate::world::Collective;

impl Session {
    /// Enters the world barrier: recorded on every open window, then the world's actor
    /// answers this session ([`Session::barrier_exited`]) once every rank arrived.
    pub(super) async fn barrier(&mut self, id: u64) -> Result<(), RmaError> {
        let open: Vec<u64> = self.windows.keys().copied().collect();
        for &window in &open {
            self.log(window, Event::BarrierEnter, None).await;
        }
        let reply = self.reply(id);
        let (sender, answer) = oneshot::channel();
        self.member
            .collectives
            .arrive(
                Collective::Barrier,
                self.member.rank,
                Vec::new(),
                Reply::Session(sender),
            )
            .await?;
        self.back_from_world(Control::Barrier(open), reply, answer);
        Ok(())
    }

    /// The barrier returned: its exit is recorded on every window open at its entry, and it is
    /// answered once the last exit is in the log (sync durability).
    pub(super) async fn barrier_exited(&mut self, windows: Vec<u64>, reply: Reply, answer: Answer) {
        let Some((&last, others)) = windows.split_last().filter(|_| answer.is_ok()) else {
            reply.send(answer);
            return;
        };
        for &window in others {
            self.log(window, Event::BarrierExit, None).await;
        }
        self.log(last, Event::BarrierExit, Some(reply)).await;
    }
}
