//! A server started in this process, on its own thread and tokio runtime (as a separate
//! process would have), listening on `127.0.0.1:0` with a temporary data directory.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use onesided_server::audit::Durability;
use onesided_server::ServerConfig;
use tokio::sync::oneshot;

use crate::{Audit, Threads};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A running in-process server; stopped (and its data directory removed) on drop.
#[derive(Debug)]
pub struct InProcess {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its admin token (random per run).
    pub admin_token: String,
    data_dir: PathBuf,
    stop: Option<oneshot::Sender<()>>,
}

impl InProcess {
    /// Starts a server with `audit` durability; `database_url` selects PostgreSQL.
    ///
    /// # Errors
    /// When the port cannot be bound or the runtime cannot be built.
    pub async fn start(
        audit: Audit,
        database_url: Option<String>,
        threads: Threads,
    ) -> anyhow::Result<Self> {
        Self::start_polling(audit, database_url, threads, None).await
    }

    /// [`InProcess::start`], the server busy-polling for `busy_poll` after each answer
    /// (`--busy-poll`).
    ///
    /// # Errors
    /// As [`InProcess::start`].
    pub async fn start_polling(
        audit: Audit,
        database_url: Option<String>,
        threads: Threads,
        busy_poll: Option<std::time::Duration>,
    ) -> anyhow::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let unique = unique();
        let admin_token = format!("bench-admin-{unique}");
        let data_dir = data_parent().join(format!("onesided-bench-{unique}"));
        let mut config = ServerConfig::new(&admin_token, data_dir.clone());
        config.database_url = database_url;
        config.sqlite_rows = crate::sqlite_rows();
        config.busy_poll = busy_poll;
        config.durability = match audit {
            Audit::Off => Durability::Off,
            Audit::Async => Durability::Async,
            Audit::Sync => Durability::Sync,
        };
        let runtime = threads
            .runtime("onesided-server")
            .context("cannot build the server's runtime")?;
        let (stop, stopped) = oneshot::channel::<()>();
        let (ready, started) = oneshot::channel::<anyhow::Result<()>>();
        std::thread::Builder::new()
            .name("onesided-server".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(e) => {
                            let _ = ready.send(Err(e.into()));
                            return;
                        }
                    };
                    let _ = ready.send(Ok(()));
                    let served = onesided_server::run(listener, config, async {
                        let _ = stopped.await;
                    })
                    .await;
                    if let Err(e) = served {
                        eprintln!("onesided-bench: in-process server failed: {e:#}");
                    }
                });
            })
            .context("cannot start the server thread")?;
        started.await.context("the server thread ended")??;
        let server = InProcess {
            url,
            admin_token,
            data_dir,
            stop: Some(stop),
        };
        // the first answer comes once the server runs (its audit store is open)
        let admin = onesided_client::Admin::connect(&server.url, &server.admin_token).await?;
        admin
            .list_worlds()
            .await
            .context("the in-process server does not answer")?;
        Ok(server)
    }
}

/// Where in-process servers make their data directories (and the storage references their
/// scratch files, so that both are on one file system).
pub(crate) fn data_parent() -> PathBuf {
    std::env::temp_dir()
}

/// A name no other server or scratch file of this or another bench process uses: the process
/// id, a counter and the clock's nanoseconds, joined by `-`.
pub(crate) fn unique() -> String {
    format!(
        "{}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    )
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}
