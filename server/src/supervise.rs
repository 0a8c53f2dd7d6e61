//! Spawned actors whose panic is reported as one: a window server or world actor that panics
//! closes its inbox like one that stopped, and without this its callers would say "the window
//! was freed". [`spawn`] records the panic's message where the actor's handle can read it.
//!
//! Owns: the spawn of long-lived actors. Must not: restart them (their state is gone).

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, OnceLock};

use futures::FutureExt;
use tracing::Instrument;

/// What became of a spawned actor: set once it panicked.
#[derive(Clone, Debug, Default)]
pub struct Fate(Arc<OnceLock<String>>);

impl Fate {
    /// The panic's message, if the actor panicked.
    pub fn panicked(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }
}

/// Spawns `actor` (named `what` in the log) inside `span`. If it panics, the panic is logged
/// as an error and its message recorded in the returned [`Fate`] *before* the actor's state
/// (and so its inbox) is dropped: a sender that finds the inbox closed finds the fate set.
pub fn spawn<F>(what: &'static str, actor: F, span: tracing::Span) -> Fate
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let fate = Fate::default();
    let record = fate.clone();
    let supervised = async move {
        let mut guarded = std::pin::pin!(AssertUnwindSafe(actor).catch_unwind());
        if let Err(payload) = guarded.as_mut().await {
            let message = payload
                .downcast_ref::<&str>()
                .map(|text| (*text).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            tracing::error!(what, panic = %message, "actor panicked");
            let _ = record.0.set(message);
        }
        // `guarded` (the actor's state, its inbox among it) is dropped only now
    };
    tokio::spawn(supervised.instrument(span));
    fate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_is_recorded_before_the_inbox_closes() {
        let (sender, mut inbox) = tokio::sync::mpsc::channel::<u32>(1);
        let fate = spawn(
            "test actor",
            async move {
                let first = inbox.recv().await;
                assert_eq!(first, Some(7), "the actor panics at its first message");
                panic!("unreachable");
            },
            tracing::Span::none(),
        );
        assert_eq!(fate.panicked(), None);
        sender.send(1).await.unwrap();
        // once the inbox is closed, the fate is already set
        sender.closed().await;
        let message = fate.panicked().expect("the panic was recorded");
        assert!(
            message.contains("the actor panics at its first message"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn an_actor_that_ends_leaves_no_panic() {
        let (sender, mut inbox) = tokio::sync::mpsc::channel::<u32>(1);
        let fate = spawn(
            "test actor",
            async move {
                inbox.recv().await;
            },
            tracing::Span::none(),
        );
        sender.send(1).await.unwrap();
        sender.closed().await;
        assert_eq!(fate.panicked(), None);
    }
}
