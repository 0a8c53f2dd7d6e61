//! Attaching again by itself: the supervisor that watches a session's stream and, when it is
//! lost in a way attaching again may mend, attaches as the lost incarnation's successor,
//! reopens every open window and puts the new stream in place.
//!
//! Owns: what a session needs to attach again (`Reattach`, also the first attach's
//! configuration), how long it keeps trying (`DEFAULT_REATTACH_WITHIN`, the pauses between
//! attempts), which failures to attach may pass (`transient`), the supervisor (`supervise`,
//! `reattach`), and `install`: reopening the windows on the new stream and swapping it in
//! under every window's state and the lock that orders sends, ending the windows' epochs. Must
//! not: attach again after a final refusal (a newer incarnation, a lapsed lease, a refused
//! token or claim) or past the bound, supersede a newer incarnation (the server checks which
//! one a session succeeds), or send on the new stream a call deferred on the lost one (its
//! callers were failed with it).

use onesided_proto::v1::{self, OpenWindow};
use tokio::sync::oneshot;

use super::link::{connect, Attach, Lost};
use super::*;
use crate::connect::{Claim, Endpoint};

/// What a session needs to attach again by itself.
#[derive(Clone)]
pub(super) struct Reattach {
    pub(super) server: Endpoint,
    pub(super) token: String,
    pub(super) claim: Claim,
    pub(super) database: Option<String>,
    /// How long to keep trying after the stream was lost.
    pub(super) within: std::time::Duration,
    /// The session's open windows (the reader applies unified windows' updates to them).
    pub(super) windows: Arc<Mutex<Vec<Watched>>>,
}

impl std::fmt::Debug for Reattach {
    /// Never prints the token or the database URL.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reattach")
            .field("server", &self.server)
            .field("within", &self.within)
            .finish_non_exhaustive()
    }
}

/// How long a session keeps trying to attach again after its stream was lost, unless
/// [`SessionBuilder::reattach_within`] says otherwise: long enough for a cluster to take a dead
/// node's worlds up with its default 5 s node lease, several times over.
pub const DEFAULT_REATTACH_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// The first pause between attempts to attach again, doubled after each failed one up to
/// [`MAX_PAUSE`].
pub(super) const FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);
pub(super) const MAX_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);

/// Watches the session's stream; when it is lost in a way that attaching again may mend,
/// attaches again, for as long as the session lives.
pub(super) async fn supervise(session: Weak<Inner>, mut lost: oneshot::Receiver<Lost>) {
    loop {
        let Ok(ended) = lost.await else {
            return;
        };
        if !ended.reattach {
            return;
        }
        let Some(config) = session.upgrade().and_then(|inner| inner.reattach.clone()) else {
            return;
        };
        tracing::info!(error = %ended.error, "session lost; attaching again");
        match reattach(&session, &config).await {
            Some(next) => lost = next,
            None => return,
        }
    }
}

/// Whether a failure to attach may pass: the server, its node or its world's owner cannot be
/// reached or is not ready yet. Not a refusal of the token, of the claim, or of a session
/// that a newer incarnation replaced.
fn transient(error: &Error) -> bool {
    matches!(
        error.code(),
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
    )
}

/// Attaches again as the successor of the lost incarnation, reopens every open window on the
/// new stream, then puts the stream in place ([`Session::install`]). Gives up (the session
/// then stays ended) when the server refuses for good, when the session was dropped, or after
/// `config.within`. Returns how the new stream will end.
async fn reattach(session: &Weak<Inner>, config: &Reattach) -> Option<oneshot::Receiver<Lost>> {
    let deadline = tokio::time::Instant::now() + config.within;
    let mut pause = FIRST_PAUSE;
    // the newest incarnation this session held: an attempt that attached but could not put
    // its stream in place (a window did not reopen) was one too, and the server now knows it
    let mut succeeds = {
        let inner = session.upgrade()?;
        let incarnation = lock(&inner.link).incarnation;
        incarnation
    };
    loop {
        let (received, busy) = {
            let inner = session.upgrade()?;
            (Arc::clone(&inner.received), inner.busy.clone())
        };
        let failure = match connect(config, Some(succeeds), &received, busy).await {
            Ok((attached, link, lost)) => {
                succeeds = succeeds.max(attached.incarnation);
                let session = Session {
                    inner: session.upgrade()?,
                };
                match session.install(attached, link).await {
                    Ok(()) => {
                        tracing::info!(
                            incarnation = session.incarnation(),
                            "session attached again"
                        );
                        return Some(lost);
                    }
                    Err(error) => error,
                }
            }
            Err(Attach::Failed(error) | Attach::OwnerUnreachable(error)) => error,
            Err(Attach::Moved(_)) => unreachable!("connect follows redirects"),
        };
        let give_up = if !transient(&failure) {
            Some(format!("attaching again was refused: {failure}"))
        } else if tokio::time::Instant::now() + pause >= deadline {
            Some(format!(
                "could not attach again within {:?}: {failure}",
                config.within
            ))
        } else {
            None
        };
        if let Some(why) = give_up {
            tracing::warn!(%why, "session not attached again");
            let inner = session.upgrade()?;
            let link = Arc::clone(&lock(&inner.link));
            lock(&link.waiters).closed = Some(Error::Disconnected(why));
            return None;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

impl Session {
    /// Puts a new incarnation's stream in place of the lost one. Every open window is reopened
    /// on it first (each keeps its id, its private copy and its stores not yet published);
    /// then, holding every window's state and the lock that orders sends, the stream is
    /// swapped in, the calls still waiting to travel on the lost one are dropped (their
    /// callers were failed with it), and every window's epochs end: the next call of a window
    /// whose epoch was open, or whose operations were in flight, fails saying why
    /// ([`crate::window`]'s `lose_epochs`).
    ///
    /// # Errors
    /// A window that cannot be reopened for a passing reason (the stream was lost again): the
    /// caller attaches again.
    async fn install(&self, attached: v1::Attached, link: Link) -> Result<()> {
        if attached.world != self.inner.world || attached.rank != self.inner.rank {
            return Err(Error::Protocol(format!(
                "attached again as rank {} of {:?}, not as rank {} of {:?}",
                attached.rank, attached.world, self.inner.rank, self.inner.world
            )));
        }
        let watched: Vec<Watched> = {
            let mut windows = lock(&self.inner.windows);
            windows.retain(|window| window.state.strong_count() > 0);
            windows.clone()
        };
        let mut reopening = Vec::with_capacity(watched.len());
        for window in &watched {
            let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
            let reply = link.register(id)?;
            let message = ClientMessage {
                id,
                // the handle keeps its private copy
                call: Some(Call::OpenWindow(OpenWindow {
                    name: window.name.clone(),
                    with_copy: false,
                })),
            };
            let _ = link.outbound.send(message);
            reopening.push(reply);
        }
        let mut gone = Vec::new();
        for (window, reply) in watched.iter().zip(reopening) {
            match reply.await {
                Ok(Reply::Window(desc)) if desc.id == window.id => {}
                // freed (and perhaps created again under its name) while the stream was lost
                Ok(_) => gone.push(window.id),
                Err(error) if error.class() == Some(onesided_core::ErrorClass::Win) => {
                    gone.push(window.id);
                }
                Err(error) => return Err(error),
            }
        }
        let incarnation = link.incarnation;
        let states: Vec<_> = watched
            .iter()
            .filter_map(|window| window.state.upgrade().map(|state| (window, state)))
            .collect();
        {
            let mut guards: Vec<_> = states.iter().map(|(_, state)| lock(state)).collect();
            let mut deferred = lock(&self.inner.deferred);
            *deferred = Deferred::default();
            let lost = std::mem::replace(&mut *lock(&self.inner.link), Arc::new(link));
            for ((window, _), state) in states.iter().zip(guards.iter_mut()) {
                let why = if gone.contains(&window.id) {
                    format!(
                        "window {:?} no longer exists: it was freed while the session attached \
                         again",
                        window.name
                    )
                } else {
                    format!(
                        "the epoch open on window {:?} was lost with incarnation {} of this rank \
                         (its node went away or let the world go); the session attached again as \
                         incarnation {incarnation}, and what the epoch did not complete is unknown",
                        window.name, lost.incarnation
                    )
                };
                crate::window::lose_epochs(state, why, gone.contains(&window.id));
            }
        }
        // unified windows: follow the public copy again, and publish what may have been lost
        for (window, state) in &states {
            if !gone.contains(&window.id) {
                crate::window::follow(self, window.id, state).await?;
            }
        }
        Ok(())
    }
}
