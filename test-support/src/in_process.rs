//! The server in the test's own process, on 127.0.0.1:0, with a configuration the suite built:
//! in the test's tokio runtime ([`serve`], for async tests that drive it with the client
//! library) or on a thread with its own runtime ([`ServedOnThread`], for blocking tests that run
//! the CLI binary against it). The listener is bound before either returns, so clients connect
//! at once; no readiness sleep. A [`Served`] may also be stopped gracefully and waited for
//! ([`Served::stop`]), for a test that starts the server again on the same files.

use onesided_server::{run, ServerConfig};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// A server running as a task of the caller's runtime until dropped.
#[derive(Debug)]
pub struct Served {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Where it listens (for a URL of another form, `https://localhost:PORT`).
    pub addr: std::net::SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// Binds 127.0.0.1:0 and runs the server there as a task of the current runtime; it stops when
/// the returned [`Served`] is dropped (without waiting: the test's clients may still hold
/// their connections, and the server drops them after its grace).
///
/// # Panics
/// When no port can be bound; the task panics when the server fails.
pub async fn serve(config: ServerConfig) -> Served {
    serve_on(TcpListener::bind("127.0.0.1:0").await.unwrap(), config)
}

/// [`serve`] on a listener the caller bound (the address a server stopped before listened on,
/// so that its clients find it again).
///
/// # Panics
/// When the listener has no local address; the task panics when the server fails.
pub fn serve_on(listener: TcpListener, config: ServerConfig) -> Served {
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        run(listener, config, async {
            let _ = stopped.await;
        })
        .await
        .expect("server failed");
    });
    Served {
        url: format!("http://{addr}"),
        addr,
        stop,
        task,
    }
}

impl Served {
    /// Stops the server gracefully and waits until it has stopped (its store closed).
    ///
    /// # Panics
    /// When the server failed.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }
}

/// A server on its own thread and runtime, stopped and joined on drop.
#[derive(Debug)]
pub struct ServedOnThread {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServedOnThread {
    /// Binds 127.0.0.1:0 and runs the server there on a new thread with a two-worker runtime.
    ///
    /// # Panics
    /// When the runtime cannot be built or no port bound; the thread panics when the server
    /// fails.
    pub fn start(config: ServerConfig) -> Self {
        Self::start_at_url(|_| config)
    }

    /// As [`ServedOnThread::start`], with the configuration made once the server's URL is
    /// known (a cluster node advertises it, and reaches itself there before taking worlds).
    ///
    /// # Panics
    /// As [`ServedOnThread::start`].
    pub fn start_at_url(config: impl FnOnce(&str) -> ServerConfig) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let config = config(&url);
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            runtime
                .block_on(run(listener, config, async {
                    let _ = stopped.await;
                }))
                .expect("server failed");
        });
        ServedOnThread {
            url,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for ServedOnThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // a server that failed has said so on stderr (its thread panicked)
            let _ = thread.join();
        }
    }
}
