//! Point-to-point messages between the ranks of a world (`MPI_Send`, `MPI_Recv`, `MPI_Probe`,
//! `MPI_Iprobe`), carried by the service and recorded in the audit as synchronization.
//!
//! Owns: the client's calls for them and the wire mapping of their answers. Must not: match
//! messages (the server's world does, by core's `Mailbox` rules) or interpret payloads.

use bytes::Bytes;
use futures::future::BoxFuture;
use onesided_core::messaging::Pattern;
use onesided_proto::v1::{self, client_message::Call, server_message::Reply};

use crate::error::{Error, Result};
use crate::session::Session;

/// Which messages a receive or probe takes: core's [`Pattern`], under the name the client's
/// calls have always used. `None` is any source (`MPI_ANY_SOURCE`) or any tag (`MPI_ANY_TAG`);
/// messages never cross contexts (the MPI library gives each communicator its own; 0 is
/// `MPI_COMM_WORLD`'s).
pub type Match = Pattern;

/// A message received, or one a probe saw (its payload then empty, `len` its size).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// The sender's world rank.
    pub source: u32,
    /// Its tag.
    pub tag: i32,
    /// Its id in the world (the audit's `sent` and `received` events name it).
    pub id: u64,
    /// Its data's length in bytes.
    pub len: u64,
    /// Its data (empty for a probe).
    pub payload: Bytes,
}

impl Session {
    /// `MPI_Send` to world rank `dest`: returns once the world holds the message (sends are
    /// buffered), recorded in the audit. Messages from this rank on one context are received
    /// in the order sent.
    ///
    /// # Errors
    /// `MPI_ERR_RANK` for a rank outside the world, `MPI_ERR_ARG` for a negative tag,
    /// `MPI_ERR_NO_MEM` when the world holds too many bytes unreceived; nothing is sent then.
    pub async fn send(&self, dest: u32, tag: i32, context: u64, payload: Bytes) -> Result<()> {
        self.note_accesses();
        self.call(Call::Send(v1::Send {
            dest,
            tag,
            context,
            payload,
        }))
        .await?;
        Ok(())
    }

    /// `MPI_Recv`: waits for the earliest message that matches and takes it.
    ///
    /// # Errors
    /// `MPI_ERR_RANK` for a source outside the world, `MPI_ERR_PROC_FAILED` when only a rank
    /// now gone could send it, or when the session ends.
    pub async fn receive(&self, from: Match) -> Result<Received> {
        self.post_receive(from).await
    }

    /// `MPI_Irecv`: the receive is posted now (receives of one rank are matched in the order
    /// posted); the future gives the message.
    ///
    /// # Errors
    /// As [`Session::receive`].
    pub fn post_receive(&self, from: Match) -> BoxFuture<'static, Result<Received>> {
        self.note_accesses();
        let reply = self.call(receive_call(from, false, false));
        Box::pin(async move {
            received(reply.await?)?
                .ok_or_else(|| Error::Protocol("a receive was answered with no message".into()))
        })
    }

    /// `MPI_Probe` (`wait`) or `MPI_Iprobe`: the envelope of the earliest message that
    /// matches, left for a receive; `None` when `wait` is false and none is there.
    ///
    /// # Errors
    /// As [`Session::receive`].
    pub async fn probe(&self, from: Match, wait: bool) -> Result<Option<Received>> {
        received(self.call(receive_call(from, true, !wait)).await?)
    }
}

fn receive_call(from: Match, probe: bool, immediate: bool) -> Call {
    Call::Receive(v1::Receive {
        source: from.source.unwrap_or(0),
        any_source: from.source.is_none(),
        tag: from.tag.unwrap_or(0),
        any_tag: from.tag.is_none(),
        context: from.context,
        probe,
        immediate,
    })
}

fn received(reply: Reply) -> Result<Option<Received>> {
    match reply {
        Reply::Received(received) if !received.found => Ok(None),
        Reply::Received(received) => Ok(Some(Received {
            source: received.source,
            tag: received.tag,
            id: received.message,
            len: received.len,
            payload: received.payload,
        })),
        other => Err(Error::Protocol(format!(
            "expected a received message, got {other:?}"
        ))),
    }
}
