//! Cluster nodes for the bench's examples (`failover`, `cluster_faults`): `onesided-server`
//! processes on loopback over one database, each in a data directory of its own.
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The admin token every node of the examples' clusters shares.
pub const TOKEN: &str = "cluster-bench-admin-token-of-some-length";

/// One node; killed (SIGKILL) when dropped.
pub struct Node {
    pub id: String,
    pub url: String,
    pub child: Child,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Node {
    /// Starts node `id` of the cluster on `database`, with a node lease of `lease` seconds,
    /// and waits for the line saying where it listens.
    pub fn start(binary: &str, database: &str, id: &str, lease: &str) -> anyhow::Result<Node> {
        Self::start_on(
            binary,
            database,
            id,
            lease,
            onesided_test_support::free_port(),
        )
    }

    /// As [`Node::start`], listening on `port` (a node started again where clients know it).
    pub fn start_on(
        binary: &str,
        database: &str,
        id: &str,
        lease: &str,
        port: u16,
    ) -> anyhow::Result<Node> {
        let url = format!("http://127.0.0.1:{port}");
        let data = std::env::temp_dir().join(onesided_test_support::unique(&format!(
            "onesided-cluster-bench-{id}"
        )));
        let mut child = Command::new(binary)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(&data)
            .args(["--node-id", id, "--advertise", &url])
            .args(["--node-lease-ttl", lease])
            .args(["--admin-token", TOKEN, "--database-url", database])
            .env("RUST_LOG", "warn,onesided_server=info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        // the log goes to stdout
        let stdout = child.stdout.take().expect("piped");
        let (seen, listening) = std::sync::mpsc::channel();
        // kept beside its data: what a node said, when a figure needs explaining
        std::fs::create_dir_all(&data)?;
        let mut log = std::fs::File::create(data.join("node.log"))?;
        std::thread::spawn(move || {
            use std::io::Write;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = writeln!(log, "{line}");
                if line.contains("address=") {
                    let _ = seen.send(());
                }
            }
        });
        listening
            .recv_timeout(Duration::from_secs(60))
            .map_err(|_| anyhow::anyhow!("node {id} did not start"))?;
        Ok(Node {
            id: id.to_string(),
            url,
            child,
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.url
            .rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .unwrap_or(0)
    }

    /// Sends `signal` (`-STOP`, `-CONT`, …) to the node.
    pub fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let sent = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()?;
        anyhow::ensure!(sent.success(), "kill {signal} failed");
        Ok(())
    }
}

/// The nodes' URLs, comma-separated (a client tries them in order).
pub fn addresses<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> String {
    nodes
        .into_iter()
        .map(|node| node.url.as_str())
        .collect::<Vec<_>>()
        .join(",")
}
