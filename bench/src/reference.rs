//! The references measured in the same run: a raw TCP ping-pong, raw TCP bulk throughput, and
//! Redis through `redis-benchmark` when both are there. (MPICH is in `mpich.rs`.)

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::measure::{median, warm_up};

/// A blocking ping-pong of 8 bytes between two threads over loopback with `TCP_NODELAY`:
/// median µs per round trip.
///
/// # Errors
/// A socket error.
pub fn tcp_pingpong(iterations: usize) -> anyhow::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let total = iterations + warm_up(iterations);
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut stream, _) = listener.accept()?;
        stream.set_nodelay(true)?;
        let mut buffer = [0u8; 8];
        for _ in 0..total {
            stream.read_exact(&mut buffer)?;
            stream.write_all(&buffer)?;
        }
        Ok(())
    });
    let mut stream = TcpStream::connect(address)?;
    stream.set_nodelay(true)?;
    let mut buffer = [0u8; 8];
    let mut samples = Vec::with_capacity(total);
    for i in 0..total {
        let started = Instant::now();
        stream.write_all(&(i as u64).to_le_bytes())?;
        stream.read_exact(&mut buffer)?;
        samples.push(started.elapsed());
    }
    echo.join()
        .map_err(|_| anyhow::anyhow!("the echo thread panicked"))??;
    Ok(median(&samples[warm_up(iterations)..]))
}

/// The size of one message of [`tcp_bulk`].
pub const TCP_BULK_MESSAGE: usize = 4 << 20;

/// Raw TCP stream throughput over loopback: one thread writes `messages` messages of
/// [`TCP_BULK_MESSAGE`] bytes, the other reads them and answers one byte at the end; MiB/s from
/// the first write to that answer. The same, 10 % of the count (at least one message), runs
/// first unmeasured. Default socket options.
///
/// # Errors
/// A socket error.
pub fn tcp_bulk(messages: usize) -> anyhow::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let messages = messages.max(1);
    let rounds = [warm_up(messages), messages];
    let sink = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut stream, _) = listener.accept()?;
        let mut buffer = vec![0u8; TCP_BULK_MESSAGE];
        for count in rounds {
            for _ in 0..count {
                stream.read_exact(&mut buffer)?;
            }
            stream.write_all(&[1])?;
        }
        Ok(())
    });
    let mut stream = TcpStream::connect(address)?;
    let message: Vec<u8> = (0..TCP_BULK_MESSAGE).map(|i| (i % 251) as u8).collect();
    let mut done = [0u8; 1];
    let mut elapsed = Duration::ZERO;
    for count in rounds {
        let started = Instant::now();
        for _ in 0..count {
            stream.write_all(&message)?;
        }
        stream.read_exact(&mut done)?;
        elapsed = started.elapsed();
    }
    sink.join()
        .map_err(|_| anyhow::anyhow!("the reading thread panicked"))??;
    let mib = (messages * TCP_BULK_MESSAGE) as f64 / f64::from(1u32 << 20);
    Ok(mib / elapsed.as_secs_f64())
}

/// Whether a Redis answers PING on 127.0.0.1:6379.
fn redis_answers() -> anyhow::Result<()> {
    let address = "127.0.0.1:6379".parse()?;
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_millis(500))
        .context("no Redis on 127.0.0.1:6379")?;
    stream.set_read_timeout(Some(Duration::from_millis(500)))?;
    stream.write_all(b"PING\r\n")?;
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply)?;
    if &reply != b"+PONG\r\n" {
        bail!("127.0.0.1:6379 does not answer PING like Redis");
    }
    Ok(())
}

/// How long one `redis-benchmark` run of `requests` may take before it is killed: a minute, and
/// 20 ms a request (a request that waits for a slow disk's fsync can take a few ms).
pub(crate) fn benchmark_limit(requests: usize) -> Duration {
    Duration::from_secs(60)
        + Duration::from_millis(20) * u32::try_from(requests).unwrap_or(u32::MAX)
}

/// One `redis-benchmark -h 127.0.0.1 -p PORT -q --csv` run against the Redis on `port`, killed
/// after `limit`: (test name, requests/s, p50 µs if reported).
pub(crate) fn redis_benchmark(
    port: u16,
    args: &[&str],
    limit: Duration,
) -> anyhow::Result<Vec<(String, f64, Option<f64>)>> {
    let port = port.to_string();
    let mut child = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port, "-q", "--csv"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("redis-benchmark is not on PATH")?;
    // its output is a few lines, far less than a pipe holds, so polling cannot block it
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "redis-benchmark {} did not finish in {} s and was killed",
                args.join(" "),
                limit.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        pipe.read_to_string(&mut stdout)?;
    }
    if let Some(mut pipe) = child.stderr.take() {
        pipe.read_to_string(&mut stderr)?;
    }
    if !status.success() {
        bail!("redis-benchmark failed ({status}): {}", stderr.trim());
    }
    parse_csv(&stdout)
}

/// Parses `redis-benchmark --csv`: a header naming the columns (Redis 7: `"test","rps",
/// "avg_latency_ms","min_latency_ms","p50_latency_ms",…`), or bare `"TEST","rps"` lines.
pub fn parse_csv(text: &str) -> anyhow::Result<Vec<(String, f64, Option<f64>)>> {
    let mut p50_column = None;
    let mut rows = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line
            .split(',')
            .map(|f| f.trim().trim_matches('"'))
            .collect();
        if fields.len() < 2 {
            continue;
        }
        if fields[0] == "test" {
            p50_column = fields.iter().position(|f| *f == "p50_latency_ms");
            continue;
        }
        let Ok(rps) = fields[1].parse::<f64>() else {
            continue;
        };
        let p50 = p50_column
            .and_then(|column| fields.get(column))
            .and_then(|f| f.parse::<f64>().ok())
            .map(|ms| ms * 1000.0);
        rows.push((fields[0].to_string(), rps, p50));
    }
    if rows.is_empty() {
        bail!("redis-benchmark printed no results");
    }
    Ok(rows)
}

/// Redis GET/SET with one client (mean of the two p50s, µs; 1/rps when no p50 is printed)
/// and INCR with 50 clients (requests/s).
///
/// # Errors
/// When no Redis answers or `redis-benchmark` is missing or fails.
pub fn redis(requests: usize) -> anyhow::Result<(f64, f64)> {
    redis_answers()?;
    let n = requests.to_string();
    let limit = benchmark_limit(requests);
    let get_set = redis_benchmark(6379, &["-n", &n, "-t", "get,set", "-c", "1"], limit)?;
    let latencies: Vec<f64> = get_set
        .iter()
        .map(|(_, rps, p50)| p50.unwrap_or(1e6 / rps))
        .collect();
    let get_set_us = latencies.iter().sum::<f64>() / latencies.len() as f64;
    let incr = redis_benchmark(6379, &["-n", &n, "-t", "incr", "-c", "50"], limit)?;
    let incr_rps = incr
        .iter()
        .find(|(test, _, _)| test.eq_ignore_ascii_case("INCR"))
        .map(|(_, rps, _)| *rps)
        .context("redis-benchmark printed no INCR line")?;
    Ok((get_set_us, incr_rps))
}

#[cfg(test)]
mod tests {
    use super::parse_csv;

    #[test]
    fn parses_redis_7_csv_with_a_header() {
        let text = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\"\n\
                    \"SET\",\"41666.67\",\"0.024\",\"0.008\",\"0.023\",\"0.031\"\n\
                    \"GET\",\"43478.26\",\"0.022\",\"0.008\",\"0.021\",\"0.031\"\n";
        let rows = parse_csv(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].0, "SET");
        assert!((rows[1].1 - 43478.26).abs() < 1e-6);
        assert!((rows[1].2.unwrap() - 21.0).abs() < 1e-9);
    }

    #[test]
    fn parses_bare_lines_without_p50() {
        let rows = parse_csv("\"INCR\",\"100000.00\"\n").unwrap();
        assert_eq!(rows, [("INCR".to_string(), 100000.0, None)]);
    }
}
