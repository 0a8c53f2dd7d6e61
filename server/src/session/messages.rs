//! Point-to-point messages (`MPI_Send`, `MPI_Recv`, `MPI_Probe`, `MPI_Iprobe`): the session's
//! half — recorded on every window the rank has open, carried by the world's actor.
//!
//! Owns: the order of the three steps of a send (admitted at the world, recorded, released to
//! receivers), so that a message's `sent` event is in every log before its `received` event can
//! be; and a receive's `received` events, recorded before its answer goes out. Must not: match
//! messages (core's `Mailbox`, in the world actor) or interpret payloads.

use onesided_core::audit::Event;
use onesided_core::messaging::{Outgoing, Pattern};
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::v1::{self, server_message, Done};
use tokio::sync::oneshot;

use super::{Control, Session};
use crate::reply::{Answer, Reply};

impl Session {
    /// `MPI_Send`: answered with `Done` once the world holds the message and its `sent`
    /// events are recorded (committed, in sync durability).
    pub(super) async fn send_message(&mut self, id: u64, send: v1::Send) -> Result<(), RmaError> {
        let me = self.member.rank;
        let world = &self.member.collectives;
        // admitted inline: the world answers at once, and the next call of this session (a
        // second send) must not be admitted before this one is released, or it could overtake
        let sent = Outgoing {
            source: me,
            dest: send.dest,
            tag: send.tag,
            context: send.context,
            payload: send.payload,
        };
        let message = world.admit(sent).await?;
        let event = Event::Sent {
            to: send.dest,
            tag: send.tag,
            message,
        };
        let events = self.on_open_windows(&event);
        let reply = self.reply(id);
        let audit = self.registry.audit().clone();
        // handed to the audit writer first, so a receive's record comes after it in every log
        let done = Ok(server_message::Reply::Done(Done {}));
        let recorded = audit.submit(events, vec![(reply, done)]);
        recorded.await;
        world.release(message).await;
        Ok(())
    }

    /// `MPI_Recv`, `MPI_Probe` or `MPI_Iprobe`: the world's actor matches it; the answer comes
    /// back here ([`Session::message_received`]) to be recorded first.
    pub(super) async fn receive_message(
        &mut self,
        id: u64,
        receive: v1::Receive,
    ) -> Result<(), RmaError> {
        if receive.immediate && !receive.probe {
            return Err(RmaError::new(
                ErrorClass::Arg,
                "an immediate receive is a probe (MPI_Iprobe): set probe too",
            ));
        }
        let pattern = Pattern {
            source: (!receive.any_source).then_some(receive.source),
            tag: (!receive.any_tag).then_some(receive.tag),
            context: receive.context,
        };
        let reply = self.reply(id);
        let (sender, answer) = oneshot::channel();
        self.member
            .collectives
            .receive(
                (self.member.rank, self.incarnation),
                pattern,
                receive.probe,
                !receive.immediate,
                Reply::Session(sender),
            )
            .await?;
        self.back_from_world(Control::Received(receive.probe), reply, answer);
        Ok(())
    }

    /// A receive was matched: a message taken is recorded (`received`) on every window open
    /// now, and answered once that is in the log (committed, in sync durability); a probe's
    /// answer goes out at once (it orders nothing).
    pub(super) async fn message_received(&mut self, probe: bool, reply: Reply, answer: Answer) {
        let event = match &answer {
            Ok(server_message::Reply::Received(received)) if received.found && !probe => {
                Event::Received {
                    from: received.source,
                    tag: received.tag,
                    message: received.message,
                }
            }
            _ => {
                reply.send(answer);
                return;
            }
        };
        let events = self.on_open_windows(&event);
        self.registry
            .audit()
            .submit(events, vec![(reply, answer)])
            .await;
    }

    /// `event` of this rank on every window it has open, as the audit writer takes them.
    fn on_open_windows(&self, event: &Event) -> Vec<crate::audit::Pending> {
        let mut windows: Vec<u64> = self.windows.keys().copied().collect();
        windows.sort_unstable();
        windows
            .into_iter()
            .flat_map(|window| self.pending(window, event.clone()))
            .collect()
    }
}
