//! The cluster's fault targets (issue 43; BENCHMARKS.md, "Faults in a cluster, measured"), on
//! three nodes with a 2 s node lease over a PostgreSQL of its own (initialised in a temporary
//! directory, so that it can be stopped and started):
//!
//! - `pause`: the owner of a world under load is stopped (SIGSTOP) for 6 s, RUNS times: the
//!   time from the stop until a new session's call on the world is answered through the other
//!   nodes (target: lease + 1 s).
//! - `postgres`: the database is stopped (`pg_ctl stop -m immediate`) for 5 s and started
//!   again, RUNS times, with three worlds under load: the time from its return until a call on
//!   every world is answered (target: 5 s).
//! - `log`: the owner of a world whose log holds EVENTS events is killed (SIGKILL), RUNS times
//!   (the killed node is started again after each): the time until a call is answered again
//!   (target: lease + 1 s), with what the node that took the world up says it replayed.
//!
//! After each fault it counts the world's changes of owner (the epoch of its lease row, read
//! once a further lease has passed; target: one per failure, none for the database's restart),
//! and at the end of each part it checks that the counter every load adds to holds every
//! acknowledged accumulate (0 lost; a call that failed may or may not have landed). One JSON
//! line per fault, then one per part with the targets met.
//!
//! `cargo run --release -p onesided-bench --example cluster_faults -- SERVER_BINARY [RUNS=10]
//! [EVENTS=1000000] [PARTS=pause,postgres,log]`
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use onesided_client::{Admin, LockType, Op, Session, WindowSpec};
use onesided_test_support::private_postgres::PrivatePostgres;
use sqlx::Connection;

#[path = "support/nodes.rs"]
mod nodes;
use nodes::{Node, TOKEN};

const LEASE: &str = "2";
const LEASE_SECS: f64 = 2.0;
/// Ranks of a world that load it; one more rank probes.
const LOAD_RANKS: u32 = 4;

/// Ranks that accumulate into rank 0 of a world's window `acc`, one epoch after another,
/// through any node; their sessions come back by themselves after a failure.
struct Load {
    acked: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(addresses: &str, tokens: &[String]) -> Load {
        let acked = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = tokens
            .iter()
            .map(|token| {
                let (addresses, token) = (addresses.to_string(), token.clone());
                let (acked, failed, stop) = (acked.clone(), failed.clone(), stop.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let Some((_session, window)) = open(&addresses, &token, &stop).await else {
                            return;
                        };
                        while !stop.load(Ordering::Relaxed) {
                            let epoch = async {
                                window.lock(LockType::Exclusive, 0, 0).await?;
                                window.accumulate(0, 0, &[1i64], Op::Sum)?;
                                window.unlock(0).await
                            };
                            if epoch.await.is_ok() {
                                acked.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                            // its outcome is unknown, and a refused unlock may have left the
                            // lock held: attach again (the new incarnation ends the old
                            // session, and its lock with it), as a careful program would
                            failed.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                    }
                })
            })
            .collect();
        Load {
            acked,
            failed,
            stop,
            tasks,
        }
    }

    /// Stops the load; `(acknowledged, failed)` epochs.
    async fn stop(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            let _ = task.await;
        }
        (
            self.acked.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

/// A session of `token` with its window `acc`, attached again until it is (or `stop`).
async fn open(
    addresses: &str,
    token: &str,
    stop: &AtomicBool,
) -> Option<(Session, onesided_client::Window)> {
    while !stop.load(Ordering::Relaxed) {
        if let Ok(session) = Session::attach(addresses, token).await {
            if let Ok(window) = session.window("acc").await {
                return Some((session, window));
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// Whether a new session of `token` gets a lock-get-unlock on `acc` answered within 2 s
/// (else why not).
async fn answered(addresses: &str, token: &str) -> Result<(), String> {
    let attempt = async {
        let session = Session::attach(addresses, token).await?;
        let window = session.window("acc").await?;
        window.lock(LockType::Shared, 0, 0).await?;
        let read = window.get::<i64>(0, 0, 1)?;
        window.unlock(0).await?;
        read.value().await?;
        session.close().await
    };
    match tokio::time::timeout(Duration::from_secs(2), attempt).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("no answer within 2 s".to_string()),
    }
}

/// The time from `since` until a call of `token` is answered through `addresses` (at most a
/// minute).
async fn until_answered(addresses: &str, token: &str, since: Instant) -> anyhow::Result<Duration> {
    let mut why = String::new();
    while since.elapsed() < Duration::from_secs(60) {
        match answered(addresses, token).await {
            Ok(()) => return Ok(since.elapsed()),
            Err(error) => why = error,
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("not answered within a minute: {why}")
}

/// The counter the load added to: rank 0's first element of `acc`.
async fn counter(addresses: &str, token: &str) -> anyhow::Result<i64> {
    let session = Session::attach(addresses, token).await?;
    let window = session.window("acc").await?;
    window.lock(LockType::Shared, 0, 0).await?;
    let read = window.get::<i64>(0, 0, 1)?;
    window.unlock(0).await?;
    let value = read.value().await?[0];
    session.close().await?;
    Ok(value)
}

/// Checks `(acknowledged, failed)` epochs against the counter: every acknowledged one is in it.
fn nothing_lost(world: &str, counted: i64, (acked, failed): (u64, u64)) -> anyhow::Result<()> {
    let counted = counted.max(0) as u64;
    anyhow::ensure!(
        counted >= acked && counted <= acked + failed,
        "world {world}: the counter holds {counted}, {acked} were acknowledged, {failed} failed"
    );
    Ok(())
}

/// The epoch of `world`'s lease row, and its owner.
async fn lease(database: &str, world: &str) -> anyhow::Result<(i64, String)> {
    let mut connection = sqlx::PgConnection::connect(database).await?;
    Ok(
        sqlx::query_as("SELECT epoch, node_id FROM world_owners WHERE world = $1")
            .bind(world)
            .fetch_one(&mut connection)
            .await?,
    )
}

/// A world of `LOAD_RANKS + 1` ranks with a window `acc` of 8 bytes per rank: its tokens.
async fn world(admin: &Admin, name: &str) -> anyhow::Result<(Vec<String>, u64)> {
    let tokens = admin.create_world(name, LOAD_RANKS + 1).await?.tokens;
    let window = admin
        .create_window(name, &WindowSpec::of::<i64>("acc", LOAD_RANKS + 1, 1))
        .await?;
    Ok((tokens, window.id))
}

struct Cluster {
    binary: String,
    database: String,
    nodes: Vec<Node>,
}

impl Cluster {
    fn start(binary: &str, database: &str) -> anyhow::Result<Cluster> {
        let nodes = (0..3)
            .map(|index| Node::start(binary, database, &format!("n{index}"), LEASE))
            .collect::<anyhow::Result<_>>()?;
        Ok(Cluster {
            binary: binary.to_string(),
            database: database.to_string(),
            nodes,
        })
    }

    fn all(&self) -> String {
        nodes::addresses(&self.nodes)
    }

    fn others(&self, id: &str) -> String {
        nodes::addresses(self.nodes.iter().filter(|node| node.id != id))
    }

    fn node(&self, id: &str) -> &Node {
        self.nodes.iter().find(|node| node.id == id).expect("ours")
    }
}

fn verdict(
    part: &str,
    times: &[f64],
    bound: f64,
    changes: &[i64],
    wanted: i64,
    (acked, failed): (u64, u64),
) {
    let worst = times.iter().copied().fold(0.0, f64::max);
    let within = times.iter().filter(|&&time| time <= bound).count();
    let once = changes.iter().filter(|&&change| change == wanted).count();
    println!(
        "{}",
        serde_json::json!({
            "part": part,
            "runs": times.len(),
            "within_bound": within,
            "bound_s": bound,
            "worst_s": worst,
            "owner_changes_as_wanted": once,
            "owner_changes_wanted": wanted,
            "acknowledged_epochs": acked,
            "failed_epochs": failed,
            "acknowledged_lost": 0,
        })
    );
}

async fn pause(cluster: &Cluster, runs: usize) -> anyhow::Result<()> {
    let all = cluster.all();
    let admin = Admin::connect(all.as_str(), TOKEN).await?;
    let (tokens, _) = world(&admin, "paused").await?;
    let (load_tokens, probe) = tokens.split_at(LOAD_RANKS as usize);
    let load = Load::start(&all, load_tokens);
    let (mut times, mut changes) = (Vec::new(), Vec::new());
    for run in 0..runs {
        // a moment of load on the current owner first
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (before, owner) = lease(&cluster.database, "paused").await?;
        let node = cluster.node(&owner);
        node.signal("-STOP")?;
        let stopped = Instant::now();
        let served = until_answered(&cluster.others(&owner), &probe[0], stopped).await;
        let resume_at = stopped + Duration::from_secs(6);
        tokio::time::sleep_until(resume_at.into()).await;
        node.signal("-CONT")?;
        // a bounce would show within a lease
        tokio::time::sleep(Duration::from_secs_f64(LEASE_SECS * 1.5)).await;
        let (after, now) = lease(&cluster.database, "paused").await?;
        let served = served?.as_secs_f64();
        println!(
            "{}",
            serde_json::json!({"part": "pause", "run": run, "paused": owner, "owner_now": now,
                "served_again_s": served, "owner_changes": after - before})
        );
        times.push(served);
        changes.push(after - before);
    }
    let done = load.stop().await;
    nothing_lost("paused", counter(&all, &probe[0]).await?, done)?;
    verdict("pause", &times, LEASE_SECS + 1.0, &changes, 1, done);
    Ok(())
}

async fn postgres(
    cluster: &Cluster,
    database: &PrivatePostgres,
    runs: usize,
) -> anyhow::Result<()> {
    let all = cluster.all();
    let admin = Admin::connect(all.as_str(), TOKEN).await?;
    let names = ["pg-a", "pg-b", "pg-c"];
    let mut worlds = Vec::new();
    for name in names {
        let (tokens, _) = world(&admin, name).await?;
        let load = Load::start(&all, &tokens[..LOAD_RANKS as usize]);
        worlds.push((name, tokens, load));
    }
    let (mut times, mut changes) = (Vec::new(), Vec::new());
    for run in 0..runs {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut before = Vec::new();
        for name in names {
            before.push(lease(&cluster.database, name).await?.0);
        }
        let crashed = database_call(database, PrivatePostgres::crash).await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        database_call(database, PrivatePostgres::start_again).await?;
        let back = Instant::now();
        let waits = futures::future::join_all(
            worlds
                .iter()
                .map(|(_, tokens, _)| until_answered(&all, &tokens[LOAD_RANKS as usize], back)),
        )
        .await;
        let worst = waits
            .into_iter()
            .collect::<anyhow::Result<Vec<_>>>()?
            .into_iter()
            .max()
            .unwrap_or_default()
            .as_secs_f64();
        tokio::time::sleep(Duration::from_secs_f64(LEASE_SECS * 1.5)).await;
        let mut changed = 0;
        for (name, before) in names.iter().zip(before) {
            changed += lease(&cluster.database, name).await?.0 - before;
        }
        println!(
            "{}",
            serde_json::json!({"part": "postgres", "run": run, "down_s": crashed.as_secs_f64() + 5.0,
                "every_world_served_after_return_s": worst, "owner_changes": changed})
        );
        times.push(worst);
        changes.push(changed);
    }
    let mut all_done = (0, 0);
    for (name, tokens, load) in worlds {
        let done = load.stop().await;
        let counted = counter(&all, &tokens[LOAD_RANKS as usize]).await?;
        nothing_lost(name, counted, done)?;
        all_done = (all_done.0 + done.0, all_done.1 + done.1);
    }
    verdict("postgres", &times, 5.0, &changes, 0, all_done);
    Ok(())
}

/// Runs a blocking call on the database (pg_ctl); how long it took.
async fn database_call(
    database: &PrivatePostgres,
    call: fn(&PrivatePostgres),
) -> anyhow::Result<Duration> {
    let began = Instant::now();
    tokio::task::block_in_place(|| call(database));
    Ok(began.elapsed())
}

async fn log(cluster: &mut Cluster, runs: usize, events: i64) -> anyhow::Result<()> {
    let all = cluster.all();
    let admin = Admin::connect(all.as_str(), TOKEN).await?;
    let (tokens, window) = world(&admin, "long").await?;
    let (load_tokens, probe) = tokens.split_at(LOAD_RANKS as usize);
    // the log: every rank locks its own part, epoch after epoch, until it holds `events`
    let began = Instant::now();
    let filling = Arc::new(AtomicBool::new(false));
    let fillers: Vec<_> = tokens
        .iter()
        .enumerate()
        .map(|(rank, token)| {
            let (all, token, filling) = (all.clone(), token.clone(), filling.clone());
            tokio::spawn(async move {
                let Some((session, window)) = open(&all, &token, &filling).await else {
                    return;
                };
                let rank = rank as u32;
                while !filling.load(Ordering::Relaxed) {
                    let epoch = async {
                        window.lock(LockType::Exclusive, rank, 0).await?;
                        window.accumulate(rank, 0, &[1i64], Op::Sum)?;
                        window.unlock(rank).await
                    };
                    let _ = epoch.await;
                }
                let _ = session.close().await;
            })
        })
        .collect();
    let mut connection = sqlx::PgConnection::connect(&cluster.database).await?;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let logged = logged(&mut connection, window).await?;
        eprintln!(
            "log: {logged} events after {:.0} s",
            began.elapsed().as_secs_f64()
        );
        if logged >= events {
            break;
        }
    }
    filling.store(true, Ordering::Relaxed);
    for filler in fillers {
        let _ = filler.await;
    }
    let filled = began.elapsed();
    // the fill added to rank 0's counter too
    let before_load = counter(&all, &probe[0]).await?;
    let load = Load::start(&all, load_tokens);
    let (mut times, mut changes) = (Vec::new(), Vec::new());
    for run in 0..runs {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (before, owner) = lease(&cluster.database, "long").await?;
        let at = cluster
            .nodes
            .iter()
            .position(|node| node.id == owner)
            .expect("ours");
        let others = cluster.others(&owner);
        let killed = Instant::now();
        let port = cluster.nodes[at].port();
        drop(cluster.nodes.remove(at));
        let served = until_answered(&others, &probe[0], killed)
            .await?
            .as_secs_f64();
        tokio::time::sleep(Duration::from_secs_f64(LEASE_SECS * 1.5)).await;
        let (after, now) = lease(&cluster.database, "long").await?;
        let logged = logged(&mut connection, window).await?;
        println!(
            "{}",
            serde_json::json!({"part": "log", "run": run, "events_in_log": logged,
                "fill_s": filled.as_secs_f64(), "killed": owner, "owner_now": now,
                "served_again_s": served, "owner_changes": after - before})
        );
        times.push(served);
        changes.push(after - before);
        // the killed node comes back where the clients know it (its row is free once its
        // lease has expired)
        let node = Node::start_on(&cluster.binary, &cluster.database, &owner, LEASE, port)?;
        cluster.nodes.push(node);
    }
    let done = load.stop().await;
    let counted = counter(&cluster.all(), &probe[0]).await? - before_load;
    nothing_lost("long", counted, done)?;
    verdict("log", &times, LEASE_SECS + 1.0, &changes, 1, done);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let Some(binary) = args.get(1).cloned() else {
        anyhow::bail!("usage: cluster_faults SERVER_BINARY [RUNS] [EVENTS] [PARTS]");
    };
    let runs: usize = args.get(2).map_or(Ok(10), |text| text.parse())?;
    let events: i64 = args.get(3).map_or(Ok(1_000_000), |text| text.parse())?;
    let parts = args
        .get(4)
        .cloned()
        .unwrap_or_else(|| "pause,postgres,log".into());
    let database = PrivatePostgres::start();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async {
            for part in parts.split(',') {
                // each part on a cluster and a database of its own
                let name = format!("faults_{}", part);
                let mut admin_db = sqlx::PgConnection::connect(&database.url).await?;
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(&mut admin_db)
                    .await?;
                let base = database.url.rsplit_once('/').map_or("", |(base, _)| base);
                let url = format!("{base}/{name}");
                let mut cluster = Cluster::start(&binary, &url)?;
                match part {
                    "pause" => pause(&cluster, runs).await?,
                    "postgres" => postgres(&cluster, &database, runs).await?,
                    "log" => log(&mut cluster, runs, events).await?,
                    other => anyhow::bail!("no part {other:?}: pause, postgres or log"),
                }
            }
            Ok(())
        })
}

/// How many events `window`'s log holds (its last sequence number).
async fn logged(connection: &mut sqlx::PgConnection, window: u64) -> anyhow::Result<i64> {
    Ok(
        sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM audit_events WHERE window_id = $1")
            .bind(window as i64)
            .fetch_one(connection)
            .await?,
    )
}
