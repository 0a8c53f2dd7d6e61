//! How a session comes to be: `SessionBuilder`, its options, and the first attach.
//!
//! Owns: the options of attaching (where the rank's own audit events go, the claim checked
//! first, busy-polling, how long to attach again by itself), `Session::attach`, `attach_as`
//! and `builder`, and `open`: the first attach (through `link`'s `connect`, waiting while a
//! cluster takes a dead node's world up, for as long as the session would attach again), the
//! session's shared state, and starting its supervisor. Must not: print the token or the
//! database URL (`Debug` leaves them out), or wait for anything but an unreachable world's
//! node (any other failure to attach is the caller's at once).

use super::link::{connect, Attach};
use super::reattach::{supervise, FIRST_PAUSE, MAX_PAUSE};
use super::*;
use crate::connect::{Claim, Endpoint};

/// Where a session's own audit events go.
#[derive(Clone, PartialEq, Eq)]
enum AuditDestination {
    /// [`AUDIT_DATABASE_URL_ENV`] when set, else over the session.
    FromEnv,
    /// Written to this database.
    Database(String),
    /// Over the session.
    Ship,
}

/// How to attach: [`Session::builder`].
#[derive(Clone)]
pub struct SessionBuilder {
    server: Endpoint,
    token: String,
    audit: AuditDestination,
    claim: Claim,
    busy_poll: Option<std::time::Duration>,
    /// How long to keep trying to attach again after the stream was lost; `None`: never.
    reattach: Option<std::time::Duration>,
}

impl std::fmt::Debug for SessionBuilder {
    /// Never prints the token or the database URL (it may hold a password).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let audit = match self.audit {
            AuditDestination::FromEnv => "from the environment",
            AuditDestination::Database(_) => "database",
            AuditDestination::Ship => "shipped",
        };
        f.debug_struct("SessionBuilder")
            .field("server", &self.server)
            .field("audit", &audit)
            .field("busy_poll", &self.busy_poll)
            .field("reattach", &self.reattach)
            .finish_non_exhaustive()
    }
}

impl SessionBuilder {
    /// The session writes its own audit events (local loads and stores, returns of blocking
    /// calls, flush_local) to the audit store at `url` (`postgres://…` or `sqlite:…`, the
    /// database the server records into) itself, and ships only a marker naming them. Without
    /// this option, [`AUDIT_DATABASE_URL_ENV`] gives the URL when it is set.
    pub fn audit_database_url(mut self, url: impl Into<String>) -> Self {
        self.audit = AuditDestination::Database(url.into());
        self
    }

    /// The session ships its own audit events over its stream (the default without a URL),
    /// whatever [`AUDIT_DATABASE_URL_ENV`] says.
    pub fn ship_audit_events(mut self) -> Self {
        self.audit = AuditDestination::Ship;
        self
    }

    /// Attaches.
    ///
    /// # Errors
    /// [`Error::Connect`] when nobody answers or TLS fails; UNAUTHENTICATED for a bad token;
    /// [`Error::AuditStore`] when a database URL is given (and the server keeps an audit log)
    /// but the database cannot be opened or has no `client_events` table.
    pub async fn attach(self) -> Result<Session> {
        let database = match self.audit {
            AuditDestination::Database(url) => Some(url),
            AuditDestination::Ship => None,
            AuditDestination::FromEnv => std::env::var(AUDIT_DATABASE_URL_ENV)
                .ok()
                .filter(|url| !url.is_empty()),
        };
        Session::open(
            &self.server,
            &self.token,
            &self.claim,
            database,
            self.busy_poll,
            self.reattach,
        )
        .await
    }

    /// How long the session keeps trying to attach again by itself after its stream was lost
    /// ([`DEFAULT_REATTACH_WITHIN`] unless set; zero: never). A stream is lost when the node
    /// serving the world dies or the connection to it breaks, or when the node lets the
    /// world go (it moved, or the node lost its lease) or shuts down. The session then
    /// attaches again — through any of the endpoint's addresses, following redirects to the
    /// node that serves the world now, waiting while a cluster takes a dead node's worlds up
    /// — as a new incarnation of its rank, and reopens its windows, which keep their private
    /// copies and the stores not yet published. What was in flight when the stream was lost
    /// fails (`Error::Disconnected`), and so does the next call of every epoch that was open
    /// then: the epoch is gone, as when a server restarts. A session whose rank attached
    /// again elsewhere (a newer incarnation), whose lease lapsed, or that the server refused
    /// does not come back, nor does one that could not within the bound; a rank's newer
    /// incarnation is never superseded by a session coming back (the server checks which
    /// incarnation it succeeds).
    ///
    /// While it tries, this also lets the first attach wait for a cluster to take a dead
    /// node's world up, instead of failing at once.
    pub fn reattach_within(mut self, within: std::time::Duration) -> Self {
        self.reattach = (!within.is_zero()).then_some(within);
        self
    }

    /// Busy-polls: after each message the session sends or receives, its runtime keeps polling
    /// for the answer for `budget` instead of parking its thread (as MPI libraries spin before
    /// they block), which saves the wake-up of an idle thread on every round trip at the cost
    /// of up to `budget` of one core's time after each message ([`crate::busy_poll`]; README,
    /// "Busy-polling"). At most [`crate::busy_poll::MAX_BUDGET`]; zero turns it off, the
    /// default.
    pub fn busy_poll(mut self, budget: std::time::Duration) -> Self {
        self.busy_poll = (!budget.is_zero()).then_some(budget.min(crate::busy_poll::MAX_BUDGET));
        self
    }

    /// Has the server check first that the token is of the world and rank `claim` names
    /// (PERMISSION_DENIED otherwise).
    pub fn claim(mut self, claim: &Claim) -> Self {
        self.claim = claim.clone();
        self
    }
}

impl Session {
    /// Attaches to the server (a URL or an [`Endpoint`]) as the rank whose token this is; the
    /// session's own audit events go to the database [`AUDIT_DATABASE_URL_ENV`] names, or over
    /// the session without it ([`Session::builder`] chooses).
    ///
    /// # Errors
    /// As [`SessionBuilder::attach`].
    pub async fn attach(server: impl Into<Endpoint>, token: &str) -> Result<Self> {
        Session::builder(server, token).attach().await
    }

    /// Attaches as the rank whose token this is, after the server checked that it is the world
    /// and rank `claim` names.
    ///
    /// # Errors
    /// As [`Session::attach`]; PERMISSION_DENIED when the token is of another world or rank.
    pub async fn attach_as(
        server: impl Into<Endpoint>,
        token: &str,
        claim: &Claim,
    ) -> Result<Self> {
        Session::builder(server, token).claim(claim).attach().await
    }

    /// A session to attach to the server (a URL or an [`Endpoint`]) with options.
    pub fn builder(server: impl Into<Endpoint>, token: &str) -> SessionBuilder {
        SessionBuilder {
            server: server.into(),
            token: token.to_string(),
            audit: AuditDestination::FromEnv,
            claim: Claim::default(),
            busy_poll: None,
            reattach: Some(DEFAULT_REATTACH_WITHIN),
        }
    }

    /// Opens the session (following redirects, [`connect`]); in a cluster, when the node
    /// that serves the token's world cannot be reached — it died and its lease has not
    /// expired yet — tries again until another node took the world up, for as long as the
    /// session would try to attach again by itself.
    async fn open(
        server: &Endpoint,
        token: &str,
        claim: &Claim,
        database: Option<String>,
        busy_poll: Option<std::time::Duration>,
        reattach: Option<std::time::Duration>,
    ) -> Result<Self> {
        let busy = busy_poll.or(server.busy_poll_budget()).map(BusyPoll::start);
        let received = Arc::new(AtomicU64::new(0));
        let windows = Arc::new(Mutex::new(Vec::new()));
        let config = Reattach {
            windows: Arc::clone(&windows),
            server: server.clone(),
            token: token.to_string(),
            claim: claim.clone(),
            database,
            within: reattach.unwrap_or_default(),
        };
        let deadline = tokio::time::Instant::now() + config.within;
        let mut pause = FIRST_PAUSE;
        let (attached, link, lost) = loop {
            match connect(&config, None, &received, busy.clone()).await {
                Ok(opened) => break opened,
                Err(Attach::OwnerUnreachable(error))
                    if tokio::time::Instant::now() + pause < deadline =>
                {
                    tracing::debug!(%error, "the world's node is unreachable; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                Err(Attach::OwnerUnreachable(error) | Attach::Failed(error)) => return Err(error),
                Err(Attach::Moved(_)) => unreachable!("connect follows redirects"),
            }
        };
        let inner = Arc::new(Inner {
            world: attached.world,
            rank: attached.rank,
            nranks: attached.ranks,
            audited: attached.audited,
            link: Mutex::new(Arc::new(link)),
            next_id: AtomicU64::new(1),
            deferred: Mutex::new(Deferred::default()),
            windows,
            sent: AtomicU64::new(0),
            received,
            busy,
            reattach: reattach.map(|_| config),
            supervisor: Mutex::new(None),
        });
        let supervisor = tokio::spawn(supervise(Arc::downgrade(&inner), lost));
        *lock(&inner.supervisor) = Some(supervisor);
        Ok(Session { inner })
    }
}
