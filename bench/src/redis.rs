//! The durable Redis reference of issue 12: Redis INCR when every write is on disk before its
//! reply (`appendonly yes`, `appendfsync always`), with 1 and 50 clients.
//!
//! The bench starts a `redis-server` of its own for it — a free port on 127.0.0.1, its own
//! directory in the scratch directory beside the in-process servers' data directories (the file
//! system the audit store and `fdatasync_us` use), no RDB snapshots (`--save ""`) — checks
//! that it runs with that configuration, and times it with `redis-benchmark`. The server is
//! killed and its directory removed when [`durable`] returns, whichever way it returns.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::reference::{benchmark_limit, redis_benchmark};
use crate::storage::Scratch;

/// How long a started `redis-server` may take to answer PING.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// The interval between two tries while waiting for it.
const POLL: Duration = Duration::from_millis(10);

/// The configuration every write of the durable Redis is measured under, as `CONFIG GET`
/// answers it.
pub const CONFIGURATION: [(&str, &str); 3] = [
    ("appendonly", "yes"),
    ("appendfsync", "always"),
    ("save", ""),
];

/// Redis INCR with every write on disk before its reply.
#[derive(Clone, Debug, PartialEq)]
pub struct Durable {
    /// One client: p50 µs of `redis-benchmark`'s CSV, or 10⁶ / requests/s when the CSV has no
    /// p50 column (then `p50_from_csv` is false).
    pub incr_1_client_p50_us: f64,
    /// Whether `incr_1_client_p50_us` is the CSV's p50 (true) or the mean 10⁶ / requests/s.
    pub p50_from_csv: bool,
    /// One client: requests/s.
    pub incr_1_client_per_s: f64,
    /// 50 clients: requests/s (Redis shares one fsync among the writes of one event-loop turn).
    pub incr_50_clients_per_s: f64,
    /// Requests of each `redis-benchmark` run.
    pub requests: usize,
}

/// Starts a `redis-server` of its own (see the module) and runs `redis-benchmark -p PORT -q
/// --csv -n REQUESTS -t incr -c 1`, then the same with `-c 50`.
///
/// # Errors
/// When `redis-server` or `redis-benchmark` is not on `PATH`, the server does not answer within
/// [`READY_TIMEOUT`] or runs with another configuration, or a benchmark fails.
pub fn durable(requests: usize) -> anyhow::Result<Durable> {
    // both must be there before a server is started
    on_path("redis-benchmark")?;
    let server = RedisServer::start()?;
    let n = requests.to_string();
    let limit = benchmark_limit(requests);
    let incr = |clients: &str| -> anyhow::Result<(f64, Option<f64>)> {
        let rows = redis_benchmark(server.port, &["-n", &n, "-t", "incr", "-c", clients], limit)?;
        rows.into_iter()
            .find(|(test, _, _)| test.eq_ignore_ascii_case("INCR"))
            .map(|(_, rps, p50)| (rps, p50))
            .context("redis-benchmark printed no INCR line")
    };
    let (incr_1_client_per_s, p50) = incr("1").context("INCR with 1 client")?;
    let (incr_50_clients_per_s, _) = incr("50").context("INCR with 50 clients")?;
    // still the configuration it started with: every write was fsynced before its reply
    server.check_configuration()?;
    Ok(Durable {
        incr_1_client_p50_us: p50.unwrap_or(1e6 / incr_1_client_per_s),
        p50_from_csv: p50.is_some(),
        incr_1_client_per_s,
        incr_50_clients_per_s,
        requests,
    })
}

/// Whether `program --version` runs.
fn on_path(program: &str) -> anyhow::Result<()> {
    let output = Command::new(program)
        .arg("--version")
        .output()
        .with_context(|| format!("{program} is not on PATH"))?;
    if !output.status.success() {
        bail!("{program} --version failed ({})", output.status);
    }
    Ok(())
}

/// A `redis-server` started by the bench: killed, and its directory removed, on drop.
#[derive(Debug)]
struct RedisServer {
    child: Child,
    port: u16,
    // dropped after `drop` has killed the server
    dir: Scratch,
}

impl RedisServer {
    /// Starts it and waits until it answers PING with the configuration of [`CONFIGURATION`].
    fn start() -> anyhow::Result<Self> {
        on_path("redis-server")?;
        let dir = Scratch::new("redis")?;
        let port = free_port()?.to_string();
        let log = dir.path().join("redis.log");
        let child = Command::new("redis-server")
            .args(["--port", &port, "--bind", "127.0.0.1", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir.path())
            .arg("--logfile")
            .arg(&log)
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start redis-server")?;
        // the guard owns the process from here: every error below kills it
        let mut server = RedisServer {
            child,
            port: port.parse()?,
            dir,
        };
        server.wait_until_ready(READY_TIMEOUT)?;
        server.check_configuration()?;
        Ok(server)
    }

    /// Polls PING until it answers `+PONG`, the process exits, or `limit` has passed.
    fn wait_until_ready(&mut self, limit: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "redis-server exited ({status}) before answering on port {}: {}",
                    self.port,
                    self.log_tail()
                );
            }
            let why = match self.command(&["PING"]) {
                Ok(Reply::Simple(pong)) if pong == "PONG" => return Ok(()),
                Ok(other) => format!("PING answered {other:?}"),
                Err(error) => format!("{error:#}"),
            };
            if Instant::now() >= deadline {
                bail!(
                    "redis-server did not answer on 127.0.0.1:{} within {} s ({why}): {}",
                    self.port,
                    limit.as_secs(),
                    self.log_tail()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// Fails unless `CONFIG GET` gives every value of [`CONFIGURATION`].
    fn check_configuration(&self) -> anyhow::Result<()> {
        for (name, expected) in CONFIGURATION {
            let reply = self.command(&["CONFIG", "GET", name])?;
            match reply.config_value(name) {
                Some(value) if value == expected => {}
                value => bail!(
                    "the bench's redis-server runs with {name} {value:?}, not {expected:?}: \
                     not the durable configuration"
                ),
            }
        }
        Ok(())
    }

    /// One command on a new connection; its reply.
    fn command(&self, words: &[&str]) -> anyhow::Result<Reply> {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let mut stream = TcpStream::connect_timeout(&address, Duration::from_millis(500))?;
        stream.set_read_timeout(Some(Duration::from_secs(2)))?;
        stream.write_all(&encode(words))?;
        let mut received = Vec::new();
        let mut buffer = [0u8; 512];
        loop {
            if let Some((reply, _)) = parse_reply(&received)? {
                return Ok(reply);
            }
            let read = stream.read(&mut buffer)?;
            if read == 0 {
                bail!("the connection closed before a whole reply");
            }
            received.extend_from_slice(&buffer[..read]);
        }
    }

    /// The last lines of the server's log, for an error message.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(5)..].join(" / ");
        if tail.is_empty() {
            "its log is empty".to_string()
        } else {
            format!("its log ends: {tail}")
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port that was free on 127.0.0.1 a moment ago (the listener is closed before
/// `redis-server` binds it; should another process take it first, the server exits and the
/// reference is reported missing with its log).
fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// `words` as a RESP array of bulk strings.
fn encode(words: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", words.len()).into_bytes();
    for word in words {
        out.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
        out.extend_from_slice(word.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A RESP (2) reply.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Reply {
    /// `+…`
    Simple(String),
    /// `-…`
    Error(String),
    /// `:…`
    Integer(i64),
    /// `$…`; `None` for `$-1`.
    Bulk(Option<String>),
    /// `*…`; `None` for `*-1`.
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The value of `name` in a `CONFIG GET name` reply (`[name, value]`).
    fn config_value(&self, name: &str) -> Option<&str> {
        let Reply::Array(Some(items)) = self else {
            return None;
        };
        match items.as_slice() {
            [Reply::Bulk(Some(key)), Reply::Bulk(Some(value))] if key == name => Some(value),
            _ => None,
        }
    }
}

/// One reply at the start of `bytes` and how many bytes it took; `None` while incomplete.
///
/// # Errors
/// When the bytes are not RESP.
fn parse_reply(bytes: &[u8]) -> anyhow::Result<Option<(Reply, usize)>> {
    let Some(end) = bytes.windows(2).position(|pair| pair == b"\r\n") else {
        return Ok(None);
    };
    let Some((&kind, line)) = bytes[..end].split_first() else {
        bail!("an empty RESP line");
    };
    let line = std::str::from_utf8(line).context("a RESP line that is not UTF-8")?;
    let after = end + 2;
    let reply = match kind {
        b'+' => (Reply::Simple(line.to_string()), after),
        b'-' => (Reply::Error(line.to_string()), after),
        b':' => (
            Reply::Integer(line.parse().context("a RESP integer")?),
            after,
        ),
        b'$' => {
            let length: i64 = line.parse().context("a RESP bulk length")?;
            let Ok(length) = usize::try_from(length) else {
                return Ok(Some((Reply::Bulk(None), after)));
            };
            if bytes.len() < after + length + 2 {
                return Ok(None);
            }
            if &bytes[after + length..after + length + 2] != b"\r\n" {
                bail!("a RESP bulk string not followed by CRLF");
            }
            let text = String::from_utf8_lossy(&bytes[after..after + length]).into_owned();
            (Reply::Bulk(Some(text)), after + length + 2)
        }
        b'*' => {
            let count: i64 = line.parse().context("a RESP array length")?;
            let Ok(count) = usize::try_from(count) else {
                return Ok(Some((Reply::Array(None), after)));
            };
            let mut items = Vec::with_capacity(count.min(64));
            let mut at = after;
            for _ in 0..count {
                let Some((item, used)) = parse_reply(&bytes[at..])? else {
                    return Ok(None);
                };
                items.push(item);
                at += used;
            }
            (Reply::Array(Some(items)), at)
        }
        other => bail!("unknown RESP type {:?}", char::from(other)),
    };
    Ok(Some(reply))
}

#[cfg(test)]
mod tests {
    use super::{encode, parse_reply, Reply};

    fn whole(bytes: &[u8]) -> Reply {
        let (reply, used) = parse_reply(bytes).unwrap().expect("a whole reply");
        assert_eq!(used, bytes.len());
        reply
    }

    #[test]
    fn encodes_commands_as_arrays_of_bulk_strings() {
        assert_eq!(
            encode(&["CONFIG", "GET", "save"]),
            b"*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$4\r\nsave\r\n"
        );
    }

    #[test]
    fn parses_simple_error_integer_and_null_replies() {
        assert_eq!(whole(b"+PONG\r\n"), Reply::Simple("PONG".into()));
        assert_eq!(
            whole(b"-LOADING Redis is loading\r\n"),
            Reply::Error("LOADING Redis is loading".into())
        );
        assert_eq!(whole(b":42\r\n"), Reply::Integer(42));
        assert_eq!(whole(b"$-1\r\n"), Reply::Bulk(None));
        assert_eq!(whole(b"*-1\r\n"), Reply::Array(None));
    }

    #[test]
    fn reads_a_config_get_reply_including_an_empty_value() {
        let reply = whole(b"*2\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n");
        assert_eq!(reply.config_value("appendfsync"), Some("always"));
        assert_eq!(reply.config_value("appendonly"), None);
        let save = whole(b"*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
        assert_eq!(save.config_value("save"), Some(""));
        // an unknown parameter: an empty array
        assert_eq!(whole(b"*0\r\n").config_value("save"), None);
        assert_eq!(Reply::Simple("OK".into()).config_value("save"), None);
    }

    #[test]
    fn waits_for_the_rest_of_a_split_reply() {
        let bytes = b"*2\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n";
        for cut in 0..bytes.len() {
            assert_eq!(parse_reply(&bytes[..cut]).unwrap(), None, "cut at {cut}");
        }
        // bytes after the reply are left for the next one
        let mut two = bytes.to_vec();
        two.extend_from_slice(b"+OK\r\n");
        let (_, used) = parse_reply(&two).unwrap().unwrap();
        assert_eq!(used, bytes.len());
    }

    #[test]
    fn rejects_what_is_not_resp() {
        assert!(parse_reply(b"HTTP/1.1 400\r\n").is_err());
        assert!(parse_reply(b"$3\r\nabcXY").is_err());
        assert!(parse_reply(b":x\r\n").is_err());
    }
}
