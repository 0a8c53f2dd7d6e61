//! Several nodes over one PostgreSQL (README, "A cluster of nodes"): three `onesided-server`
//! processes on loopback against the real database, broken as users break them — a world's
//! owner killed with SIGKILL under load, an owner frozen with SIGSTOP past its lease and woken
//! again — with every acknowledged update checked against the windows another node rebuilt.

use futures::StreamExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use onesided_client::{
    Admin, Audit, ClusterStatus, ErrorClass, LockType, Op, Session, Window, WindowSpec,
};
use onesided_server::audit::{AuditStore, Committer, Fenced, Guard, NewRow};

use crate::store::PgDatabase;
use crate::{
    get_shared, poll_until, server_binary, unique, Launched, TempDir, ADMIN_TOKEN, SERVER_BINARY,
};
use onesided_test_support::free_port;
use onesided_test_support::private_postgres::PrivatePostgres;

/// A node's lease in these tests: short, so that failover is quick.
const LEASE: &str = "2";

struct Node {
    id: String,
    url: String,
    port: u16,
    process: Launched,
    _data: TempDir,
}

/// The command line of a node `id` listening on `port`, advertising `advertise`, with
/// `admin_token`, in its own data directory.
fn node_command(
    database: &PgDatabase,
    id: &str,
    port: u16,
    advertise: &str,
    admin_token: &str,
    data: &TempDir,
) -> std::process::Command {
    let node = ["--node-id", id, "--advertise", advertise];
    let listen = format!("127.0.0.1:{port}");
    let log = "onesided_server=info";
    let mut command = server_binary::command(SERVER_BINARY, &listen, &data.0, &node, log);
    command
        .args(["--node-lease-ttl", LEASE, "--admin-token", admin_token])
        .env("DATABASE_URL", &database.url);
    command
}

/// What a node that refuses to start says (it must exit, unsuccessfully, within a minute).
fn refused_to_start(command: std::process::Command) -> String {
    server_binary::refused_to_start(command, Duration::from_secs(60))
}

/// [`refused_to_start`] off the test's runtime.
async fn refused_to_start_blocking(command: std::process::Command) -> String {
    tokio::task::spawn_blocking(move || refused_to_start(command))
        .await
        .unwrap()
}

impl Node {
    fn start(database: &PgDatabase, id: &str, port: u16) -> Node {
        let data = TempDir::new();
        let url = format!("http://127.0.0.1:{port}");
        let command = node_command(database, id, port, &url, ADMIN_TOKEN, &data);
        let process = Launched::start(command, "address=", Duration::from_secs(60));
        Node {
            id: id.to_string(),
            url,
            port,
            process,
            _data: data,
        }
    }

    /// Sends `signal`; after `-STOP`, returns once every thread of the node is stopped: `kill`
    /// returns when the signal is sent, and a thread still running on another core could
    /// otherwise answer a call the test sends next as if the node were awake.
    fn signal(&self, signal: &str) {
        let pid = self.process.id();
        let sent = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill {signal}");
        if signal != "-STOP" {
            return;
        }
        let stopped = || {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                return false;
            };
            tasks.flatten().all(|task| {
                std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
                    // the state follows the parenthesized command name
                    stat.rsplit_once(") ")
                        .is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
                })
            })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !stopped() {
            assert!(Instant::now() < deadline, "node {} never stopped", self.id);
            std::thread::yield_now();
        }
    }
}

fn start_nodes(database: &PgDatabase, count: usize) -> Vec<Node> {
    (0..count)
        .map(|index| Node::start(database, &format!("node-{index}"), free_port()))
        .collect()
}

/// Three nodes over `database`, every node's address ([`everyone`]), and an admin client
/// given them all.
async fn three_nodes(database: &PgDatabase) -> (Vec<Node>, String, Admin) {
    let nodes = start_nodes(database, 3);
    let all = everyone(&nodes);
    let admin = Admin::connect(all.as_str(), ADMIN_TOKEN).await.unwrap();
    (nodes, all, admin)
}

/// A PostgreSQL of the test's own (the machine's is every other test's), and a database on it.
async fn private_database() -> (PrivatePostgres, PgDatabase) {
    let postgres = tokio::task::spawn_blocking(PrivatePostgres::start)
        .await
        .unwrap();
    let database = PgDatabase::create_on(&postgres.url).await;
    (postgres, database)
}

/// A world named after `prefix` of `nranks` ranks, created through `admin`, with a window `w`
/// of one `u64` a rank: its name, its tokens, and the id of the node that owns it.
async fn world_with_w(admin: &Admin, prefix: &str, nranks: u32) -> (String, Vec<String>, String) {
    let world = unique(prefix);
    let tokens = admin.create_world(&world, nranks).await.unwrap().tokens;
    admin
        .create_window(&world, &WindowSpec::of::<u64>("w", nranks, 1))
        .await
        .unwrap();
    let owner = owner_of(&admin.cluster_status().await.unwrap(), &world)
        .unwrap()
        .to_string();
    (world, tokens, owner)
}

/// What the tests of a world's owner start from: [`three_nodes`] over a fresh database, a world
/// of two ranks of theirs ([`world_with_w`]), an admin client of a node that does not own it to
/// watch the cluster from, and rank 0's session at the owner.
struct OwnedWorld {
    nodes: Vec<Node>,
    admin: Admin,
    world: String,
    tokens: Vec<String>,
    /// The id of the node that owns the world.
    owner: String,
    watcher: Admin,
    _session: Session,
    /// Dropped after the nodes.
    _database: PgDatabase,
}

impl OwnedWorld {
    /// The world is named after `prefix`; returns rank 0's window `w` too.
    async fn start(prefix: &str) -> (Self, Window) {
        let database = PgDatabase::create().await;
        let (nodes, _, admin) = three_nodes(&database).await;
        let (world, tokens, owner) = world_with_w(&admin, prefix, 2).await;
        let (at_owner, other) = it_and_another(&nodes, &owner);
        let watcher = Admin::connect(other.url.as_str(), ADMIN_TOKEN)
            .await
            .unwrap();
        let session = Session::attach(at_owner.url.as_str(), &tokens[0])
            .await
            .unwrap();
        let w = session.window("w").await.unwrap();
        let owned = OwnedWorld {
            nodes,
            admin,
            _database: database,
            world,
            tokens,
            _session: session,
            owner,
            watcher,
        };
        (owned, w)
    }

    /// The node that owns the world (when it started).
    fn owner(&self) -> &Node {
        it_and_another(&self.nodes, &self.owner).0
    }

    /// A node that did not own the world when it started.
    fn other(&self) -> &Node {
        it_and_another(&self.nodes, &self.owner).1
    }

    /// Waits (at most 30 s) until another node owns the world; returns its id.
    async fn taken_over(&self) -> String {
        let taken = until_status(&self.watcher, Duration::from_secs(30), |status| {
            owner_of(status, &self.world).is_some_and(|node| node != self.owner)
        })
        .await;
        owner_of(&taken, &self.world).unwrap().to_string()
    }
}

/// The node `id` of `nodes`, and another.
fn it_and_another<'a>(nodes: &'a [Node], id: &str) -> (&'a Node, &'a Node) {
    let it = nodes.iter().find(|node| node.id == id).unwrap();
    let another = nodes.iter().find(|node| node.id != id).unwrap();
    (it, another)
}

/// Asserts that `status` refuses a session with UNAVAILABLE, naming `owner`, the address of
/// the node that serves the world (`x-onesided-owner`).
fn assert_redirected(status: &tonic::Status, owner: &str) {
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert_eq!(
        status
            .metadata()
            .get("x-onesided-owner")
            .and_then(|value| value.to_str().ok()),
        Some(owner),
        "{status:?}"
    );
}

/// Every node's address, as a client given the whole cluster has them.
fn everyone(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|node| node.url.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

fn owner_of<'a>(status: &'a ClusterStatus, world: &str) -> Option<&'a str> {
    status
        .nodes
        .iter()
        .find(|node| node.worlds.iter().any(|name| name == world))
        .map(|node| node.node_id.as_str())
}

/// Polls the cluster's status through `admin` until `done` holds (at most `within`).
async fn until_status(
    admin: &Admin,
    within: Duration,
    done: impl Fn(&ClusterStatus) -> bool,
) -> ClusterStatus {
    let status = || async { admin.cluster_status().await.unwrap() };
    let otherwise = |status: &ClusterStatus| format!("cluster never got there: {status:#?}");
    poll_until(within, Duration::from_millis(50), status, done, otherwise).await
}

/// Attaches through any node, retrying while the world is between owners.
async fn attach_retrying(addresses: &str, token: &str, within: Duration) -> Session {
    let deadline = Instant::now() + within;
    loop {
        match Session::attach(addresses, token).await {
            Ok(session) => return session,
            Err(error) => {
                assert!(Instant::now() < deadline, "cannot attach: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worlds_spread_over_three_nodes_and_any_node_serves_any_world() {
    let database = PgDatabase::create().await;
    let nodes = start_nodes(&database, 3);
    let admins = futures::future::join_all(nodes.iter().map(|node| async {
        Admin::connect(node.url.as_str(), ADMIN_TOKEN)
            .await
            .unwrap()
    }))
    .await;
    // six worlds of two ranks, created through different nodes, each with a window created
    // through yet another node (forwarded to the owner when it is elsewhere)
    let mut worlds = Vec::new();
    for index in 0..6 {
        let name = unique(&format!("spread{index}"));
        let tokens = admins[index % 3].create_world(&name, 2).await.unwrap();
        admins[(index + 1) % 3]
            .create_window(&name, &WindowSpec::of::<u64>("w", 2, 4))
            .await
            .unwrap();
        worlds.push((name, tokens.tokens));
    }
    let status = admins[2].cluster_status().await.unwrap();
    assert_eq!(status.node_id, "node-2");
    assert_eq!(status.nodes.len(), 3, "{status:#?}");
    for node in &status.nodes {
        assert!(node.alive, "{status:#?}");
        // least load first: two worlds of two ranks each on every node
        assert_eq!(node.worlds.len(), 2, "{status:#?}");
        assert_eq!(node.ranks, 4, "{status:#?}");
    }
    // ties go to the smallest id: created one after another, the worlds go round in id order
    for (index, (name, _)) in worlds.iter().enumerate() {
        let expected = format!("node-{}", index % 3);
        assert_eq!(
            owner_of(&status, name),
            Some(expected.as_str()),
            "{status:#?}"
        );
    }
    // every node lists every world
    for admin in &admins {
        let listed = admin.list_worlds().await.unwrap();
        for (name, _) in &worlds {
            assert!(listed.iter().any(|world| &world.name == name), "{listed:?}");
        }
    }
    // each world's ranks attach through a node that does not serve it, are redirected, and
    // see each other's updates
    for (name, tokens) in &worlds {
        let owner = owner_of(&status, name).unwrap();
        let elsewhere: Vec<&Node> = nodes.iter().filter(|node| node.id != owner).collect();
        assert_eq!(elsewhere.len(), 2);
        // a follower of the window's log on a node that does not serve it
        let id = admins[0].describe_window(name, "w").await.unwrap().id;
        let follower = Audit::connect(elsewhere[1].url.as_str(), ADMIN_TOKEN)
            .await
            .unwrap();
        let mut followed = follower.follow(id, 1).await.unwrap();
        // a session asked of a node that does not serve the world is refused, naming the
        // owner's address: the client attaches there
        let mut grpc = crate::raw::raw(&elsewhere[0].url).await;
        let redirected =
            crate::raw::RawSession::open(&mut grpc, &crate::raw::Meta::bearer(&tokens[0]))
                .await
                .err()
                .expect("a node that does not serve the world attached a session to it");
        let owner_url = &nodes.iter().find(|node| node.id == owner).unwrap().url;
        assert_redirected(&redirected, owner_url);
        let writer = Session::attach(elsewhere[0].url.as_str(), &tokens[0])
            .await
            .unwrap();
        let reader = Session::attach(elsewhere[1].url.as_str(), &tokens[1])
            .await
            .unwrap();
        let w = writer.window("w").await.unwrap();
        w.lock(LockType::Exclusive, 1, 0).await.unwrap();
        w.put::<u64>(1, 2, &[42, 43]).unwrap();
        w.unlock(1).await.unwrap();
        let r = reader.window("w").await.unwrap();
        assert_eq!(
            get_shared::<u64>(&r, 1, 0, 4).await,
            vec![0, 0, 42, 43],
            "world {name}"
        );
        // the follower elsewhere sees every event the owner committed, in order
        let logged = follower.events(id, 1).await.unwrap();
        assert!(logged.len() >= 4, "{logged:?}");
        // all of it committed: the follower elsewhere has it within its 100 ms poll (and
        // what a loaded machine adds), not only eventually
        let committed = Instant::now();
        let seen = tokio::time::timeout(Duration::from_secs(10), async {
            let mut seen = Vec::new();
            while seen.len() < logged.len() {
                let entry = followed.next().await.unwrap().unwrap();
                seen.push(entry.seq);
            }
            seen
        })
        .await
        .expect("the follower on another node saw the owner's commits");
        let lag = committed.elapsed();
        assert!(
            lag < Duration::from_secs(1),
            "the follower on another node saw the commits {lag:?} after them"
        );
        let stored: Vec<u64> = logged.iter().map(|entry| entry.seq).collect();
        assert_eq!(seen, stored);
        // admin calls about the world answer from any node
        for admin in &admins {
            let desc = admin.describe_window(name, "w").await.unwrap();
            assert_eq!(desc.sizes, vec![32, 32]);
        }
    }
    // a world deleted through a node that does not serve it: its window's log still ends
    // with its freeing (committed under the lease before the lease went)
    let (name, _) = &worlds[0];
    let owner = owner_of(&status, name).unwrap();
    let elsewhere = nodes.iter().position(|node| node.id != owner).unwrap();
    let id = admins[elsewhere]
        .describe_window(name, "w")
        .await
        .unwrap()
        .id;
    admins[elsewhere].delete_world(name).await.unwrap();
    assert!(admins[0]
        .list_worlds()
        .await
        .unwrap()
        .iter()
        .all(|w| &w.name != name));
    let audit = Audit::connect(nodes[elsewhere].url.as_str(), ADMIN_TOKEN)
        .await
        .unwrap();
    let log = audit.events(id, 1).await.unwrap();
    assert_eq!(
        log.last().and_then(|entry| entry.event.clone()),
        Some(onesided_core::audit::Event::WindowFreed),
        "{:?}",
        log.last()
    );
    assert_eq!(audit.verify(id).await.unwrap().first_bad, None);
}

/// Ranks of the world under load in the failover test.
const RANKS: u32 = 64;

/// When a disruption happened, and how long after it a session attached since answered.
type Disruption = (Instant, Option<Duration>);

/// What a client of the load does when its epoch fails because its node went away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recovery {
    /// It attaches a new session itself (as an application that never heard of
    /// `reattach_within` does) and opens the window again.
    AttachAgain,
    /// Nothing: it keeps its `Session` and `Window`, which attach again by themselves, and
    /// retries the epoch.
    ByItself,
}

/// Every rank of a world adding 1 to its own element of rank 0's window `acc` in lock epochs,
/// through any node, going on as `Recovery` says whenever its node goes away (a new
/// incarnation); it counts what was acknowledged and what was tried.
struct Load {
    acked: Arc<Vec<AtomicU64>>,
    tried: Arc<Vec<AtomicU64>>,
    /// Calls that failed (their ranks attached again).
    failed: Arc<AtomicU64>,
    /// Set when the disruption happened: the time of the first acknowledgement after it.
    since: Arc<std::sync::Mutex<Option<Disruption>>>,
    /// Per rank: updates acknowledged to a session attached since the disruption.
    back: Arc<Vec<AtomicU64>>,
    stop: tokio_util::sync::CancellationToken,
    /// Each client's incarnations gained by its first session (with `Recovery::ByItself`).
    clients: Vec<tokio::task::JoinHandle<u64>>,
}

impl Load {
    fn start(addresses: &str, tokens: &[String]) -> Load {
        Load::start_with(addresses, tokens, Recovery::AttachAgain)
    }

    fn start_with(addresses: &str, tokens: &[String], recovery: Recovery) -> Load {
        let ranks = tokens.len();
        let acked: Arc<Vec<AtomicU64>> = Arc::new((0..ranks).map(|_| AtomicU64::new(0)).collect());
        let tried: Arc<Vec<AtomicU64>> = Arc::new((0..ranks).map(|_| AtomicU64::new(0)).collect());
        let since: Arc<std::sync::Mutex<Option<Disruption>>> = Arc::default();
        let back: Arc<Vec<AtomicU64>> = Arc::new((0..ranks).map(|_| AtomicU64::new(0)).collect());
        let failed = Arc::new(AtomicU64::new(0));
        let stop = tokio_util::sync::CancellationToken::new();
        let clients = tokens
            .iter()
            .enumerate()
            .map(|(rank, token)| {
                let (token, addresses) = (token.clone(), addresses.to_string());
                let (acked, tried, since, stop) = (
                    Arc::clone(&acked),
                    Arc::clone(&tried),
                    Arc::clone(&since),
                    stop.clone(),
                );
                let (failed, back) = (Arc::clone(&failed), Arc::clone(&back));
                tokio::spawn(async move {
                    let (mut attached, mut window) = open_retrying(&addresses, &token).await;
                    let first = window.session().incarnation();
                    while !stop.is_cancelled() {
                        tried[rank].fetch_add(1, Ordering::SeqCst);
                        let epoch = async {
                            window.lock(LockType::Shared, 0, 0).await?;
                            window.accumulate::<u64>(0, rank as u64, &[1], Op::Sum)?;
                            window.unlock(0).await
                        };
                        match epoch.await {
                            Ok(()) => {
                                acked[rank].fetch_add(1, Ordering::SeqCst);
                                // service is back once a session attached after the
                                // disruption gets an answer (not a call already in flight)
                                if let Some((at, first_back)) = since.lock().unwrap().as_mut() {
                                    let fresh = match recovery {
                                        Recovery::AttachAgain => attached > *at,
                                        Recovery::ByItself => {
                                            window.session().incarnation() > first
                                        }
                                    };
                                    if fresh {
                                        first_back.get_or_insert_with(|| at.elapsed());
                                        back[rank].fetch_add(1, Ordering::SeqCst);
                                    }
                                }
                            }
                            // the node went away: attach again wherever the world is now
                            Err(_) if recovery == Recovery::AttachAgain => {
                                failed.fetch_add(1, Ordering::SeqCst);
                                (attached, window) = open_retrying(&addresses, &token).await;
                            }
                            // the session attaches again by itself; paced while it does
                            Err(_) => {
                                failed.fetch_add(1, Ordering::SeqCst);
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                        }
                    }
                    window.session().incarnation() - first
                })
            })
            .collect();
        Load {
            acked,
            tried,
            failed,
            since,
            back,
            stop,
            clients,
        }
    }

    fn acknowledged(&self) -> u64 {
        self.acked.iter().map(|n| n.load(Ordering::SeqCst)).sum()
    }

    /// Waits until `more` further updates were acknowledged (at most `within`).
    async fn progress(&self, more: u64, within: Duration, what: &str) {
        let goal = self.acknowledged() + more;
        let deadline = Instant::now() + within;
        while self.acknowledged() < goal {
            assert!(Instant::now() < deadline, "no progress: {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until every rank had an update acknowledged by a session attached since the
    /// disruption (at most `within`).
    async fn every_rank_back(&self, within: Duration, what: &str) {
        let deadline = Instant::now() + within;
        loop {
            let behind: Vec<usize> = (0..self.back.len())
                .filter(|&rank| self.back[rank].load(Ordering::SeqCst) == 0)
                .collect();
            if behind.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: ranks {behind:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Marks the disruption; [`Load::recovered_after`] tells when service came back.
    fn disrupted(&self) {
        *self.since.lock().unwrap() = Some((Instant::now(), None));
    }

    fn recovered_after(&self) -> Option<Duration> {
        self.since.lock().unwrap().and_then(|(_, first)| first)
    }

    /// Stops the clients, then checks through `address` that every acknowledged update is in
    /// the window and nothing beyond what was tried, and that its log verifies.
    async fn stop_and_check(self, address: &str, token: &str) -> Vec<u64> {
        self.stop.cancel();
        let mut gained = Vec::new();
        for client in self.clients {
            gained.push(client.await.unwrap());
        }
        let reader = attach_retrying(address, token, Duration::from_secs(30)).await;
        let w = reader.window("acc").await.unwrap();
        let ranks = self.acked.len() as u64;
        w.lock(LockType::Shared, 0, 0).await.unwrap();
        let values = w.get::<u64>(0, 0, ranks).unwrap();
        w.unlock(0).await.unwrap();
        let values = values.value().await.unwrap();
        for (rank, value) in values.iter().enumerate() {
            let (acked, tried) = (
                self.acked[rank].load(Ordering::SeqCst),
                self.tried[rank].load(Ordering::SeqCst),
            );
            assert!(
                acked <= *value && *value <= tried,
                "rank {rank}: {acked} acknowledged, {tried} tried, {value} in the window"
            );
        }
        // the log the owners wrote in turn is one unbroken chain
        let audit = Audit::connect(address.split(',').next().unwrap(), ADMIN_TOKEN)
            .await
            .unwrap();
        assert_eq!(audit.verify(w.desc().id).await.unwrap().first_bad, None);
        gained
    }
}

/// Attaches through any node and opens the window `acc`, retrying both while the world is
/// between nodes (a session may attach just before its node lets the world go); returns when
/// it attached and the window.
async fn open_retrying(addresses: &str, token: &str) -> (Instant, onesided_client::Window) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let session = attach_retrying(addresses, token, Duration::from_secs(60)).await;
        let attached = Instant::now();
        match session.window("acc").await {
            Ok(window) => return (attached, window),
            Err(error) => {
                assert!(Instant::now() < deadline, "cannot open the window: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A world of `ranks` ranks with the window `acc` the load works on.
async fn loaded_world(admin: &Admin, ranks: u32) -> (String, Vec<String>) {
    let world = unique("loaded");
    let tokens = admin.create_world(&world, ranks).await.unwrap().tokens;
    admin
        .create_window(
            &world,
            &WindowSpec::of::<u64>("acc", ranks, u64::from(ranks)),
        )
        .await
        .unwrap();
    (world, tokens)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_owner_loses_no_acknowledged_accumulate_and_another_node_takes_over() {
    kill_the_owner_under_load(Recovery::AttachAgain).await;
}

/// The clients never attach anything themselves: every `Session` finds the world's new node
/// by itself, as a new incarnation, and the same `Window` goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_follow_a_killed_owner_by_themselves_and_lose_nothing_acknowledged() {
    let gained = kill_the_owner_under_load(Recovery::ByItself).await;
    assert!(
        gained.iter().all(|&more| more >= 1),
        "every rank's first session attached again by itself: {gained:?}"
    );
}

/// SIGKILLs the node serving a world of [`RANKS`] ranks under [`Load`], checks that another
/// node serves it and that nothing acknowledged is lost; returns the incarnations each
/// client's first session gained.
async fn kill_the_owner_under_load(recovery: Recovery) -> Vec<u64> {
    let database = PgDatabase::create().await;
    let (mut nodes, all, admin) = three_nodes(&database).await;
    // one rank more than the load has: it attaches only once the owner is dead
    let (world, tokens) = loaded_world(&admin, RANKS + 1).await;
    let (tokens, newcomer) = tokens.split_at(RANKS as usize);
    let owner = owner_of(&admin.cluster_status().await.unwrap(), &world)
        .unwrap()
        .to_string();
    let load = Load::start_with(&all, tokens, recovery);
    load.progress(
        u64::from(RANKS) * 3,
        Duration::from_secs(60),
        "before the kill",
    )
    .await;
    let victim = nodes.iter_mut().find(|node| node.id == owner).unwrap();
    victim.process.kill();
    load.disrupted();
    let victim_port = victim.port;
    // a plain attach while the dead node still holds the lease waits for the new owner (the
    // live nodes name the dead one until its lease runs out) instead of failing
    let newcomer = {
        let (all, token) = (all.clone(), newcomer[0].clone());
        tokio::spawn(async move {
            let session = Session::attach(all.as_str(), &token).await?;
            session.window("acc").await
        })
    };
    // every rank gets through again on the new owner
    load.every_rank_back(
        Duration::from_secs(90),
        "the world was not served again after its owner died",
    )
    .await;
    let back = load.recovered_after().unwrap();
    let newcomer = newcomer.await.unwrap();
    assert!(
        newcomer.is_ok(),
        "an attach during the failover: {:?}",
        newcomer.err()
    );
    eprintln!(
        "cluster failover ({recovery:?}): first call served again {back:?} after SIGKILL \
         (lease {LEASE} s)"
    );
    let survivors: Vec<&Node> = nodes
        .iter()
        .filter(|node| node.port != victim_port)
        .collect();
    let admin = Admin::connect(survivors[0].url.as_str(), ADMIN_TOKEN)
        .await
        .unwrap();
    let status = admin.cluster_status().await.unwrap();
    assert_ne!(owner_of(&status, &world).unwrap(), owner, "{status:#?}");
    let dead = status
        .nodes
        .iter()
        .find(|node| node.node_id == owner)
        .unwrap();
    assert!(!dead.alive, "{status:#?}");
    load.stop_and_check(&survivors[1].url, &tokens[0]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_restarted_in_turn_under_load_loses_nothing_acknowledged() {
    let database = PgDatabase::create().await;
    let (mut nodes, all, admin) = three_nodes(&database).await;
    let (world, tokens) = loaded_world(&admin, 16).await;
    let load = Load::start(&all, &tokens);
    load.progress(48, Duration::from_secs(60), "before the restarts")
        .await;
    for index in 0..nodes.len() {
        let (id, port) = (nodes[index].id.clone(), nodes[index].port);
        let owned = owner_of(&admin.cluster_status().await.unwrap(), &world) == Some(id.as_str());
        let watcher = Admin::connect(nodes[(index + 1) % nodes.len()].url.as_str(), ADMIN_TOKEN)
            .await
            .unwrap();
        let stopping = nodes.remove(index);
        let (status, _) = stopping.process.terminate(Duration::from_secs(30));
        assert!(status.success(), "{id} stopped with {status}");
        if owned {
            // its worlds are taken up elsewhere at once (it gave them up): at another node's
            // next heartbeat (a quarter of a lease) and a rebuild, before the lease it had
            // renewed would have run out
            let stopped = Instant::now();
            until_status(&watcher, Duration::from_secs(30), |status| {
                owner_of(status, &world).is_some_and(|node| node != id)
            })
            .await;
            let taken = stopped.elapsed();
            assert!(
                taken < Duration::from_secs(LEASE.parse().unwrap()),
                "{id}'s world was taken up {taken:?} after it stopped (lease {LEASE} s)"
            );
        }
        // the load goes on
        load.progress(48, Duration::from_secs(60), &format!("while {id} was down"))
            .await;
        nodes.insert(index, Node::start(&database, &id, port));
        load.progress(
            48,
            Duration::from_secs(60),
            &format!("after {id} came back"),
        )
        .await;
    }
    let status = admin.cluster_status().await.unwrap();
    assert!(status.nodes.iter().all(|node| node.alive), "{status:#?}");
    load.stop_and_check(&all, &tokens[0]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_and_restart_of_postgresql_under_load_loses_nothing_acknowledged() {
    let (postgres, database) = private_database().await;
    let (_nodes, all, admin) = three_nodes(&database).await;
    let (_, tokens) = loaded_world(&admin, 16).await;
    let load = Load::start(&all, &tokens);
    load.progress(48, Duration::from_secs(60), "before the database crashed")
        .await;
    let postgres = tokio::task::spawn_blocking(move || {
        postgres.crash_and_restart();
        postgres
    })
    .await
    .unwrap();
    load.progress(48, Duration::from_secs(60), "after the database came back")
        .await;
    // the crash reached the clients: calls in flight failed (not acknowledged)
    assert!(
        load.failed.load(Ordering::SeqCst) > 0,
        "no call noticed the crash"
    );
    // every node is alive again within seconds, by itself
    until_status(&admin, Duration::from_secs(5), |status| {
        status.nodes.iter().all(|node| node.alive)
    })
    .await;
    load.stop_and_check(&all, &tokens[0]).await;
    drop(database);
    drop(postgres);
}

/// One lock epoch of `w` adding 1 to rank 1's element. An unlock refused unchanged left the
/// epoch open, here as at the target: it is made again (and then reports a refused accumulate).
async fn one_epoch(w: &onesided_client::Window) -> Result<(), onesided_client::Error> {
    w.lock(LockType::Exclusive, 1, 0).await?;
    w.accumulate::<u64>(1, 0, &[1], Op::Sum)?;
    loop {
        match w.unlock(1).await {
            Err(error) if error.unchanged() => tokio::time::sleep(Duration::from_millis(50)).await,
            done => return done,
        }
    }
}

/// Repeats `epoch` until it succeeds; how long that took (panics past `within`).
async fn until_an_epoch_succeeds<F, Fut>(within: Duration, what: &str, epoch: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), onesided_client::Error>>,
{
    let began = Instant::now();
    loop {
        match tokio::time::timeout(within, epoch()).await {
            Ok(Ok(())) => return began.elapsed(),
            Ok(Err(error)) => assert!(
                began.elapsed() < within,
                "{what}: no epoch succeeded within {within:?}: {error}"
            ),
            Err(_) => panic!("{what}: an epoch hung for {within:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// PostgreSQL stopped for longer than the nodes' lease and started again: every world is
/// served again within 5 s of its return — through the sessions attached before, idle during
/// the outage, and through new ones — and every node comes back alive by itself (issue 43,
/// item 12: a node stayed "unavailable" for good, and idle worlds failed for 20 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_postgresql_is_down_and_back_every_world_is_served_within_seconds() {
    let (postgres, database) = private_database().await;
    let (_nodes, all, admin) = three_nodes(&database).await;
    let mut worlds = Vec::new();
    for index in 0..3 {
        let world = unique(&format!("outage{index}"));
        let tokens = admin.create_world(&world, 2).await.unwrap().tokens;
        admin
            .create_window(&world, &WindowSpec::of::<u64>("w", 2, 1))
            .await
            .unwrap();
        let session = Session::attach(all.as_str(), &tokens[0]).await.unwrap();
        let w = session.window("w").await.unwrap();
        one_epoch(&w).await.unwrap();
        worlds.push((tokens, session, w));
    }
    let status = admin.cluster_status().await.unwrap();
    assert!(
        status.nodes.iter().all(|node| node.worlds.len() == 1),
        "one world per node: {status:#?}"
    );
    // down for 5 s: past the nodes' 2 s lease, so every lease has expired when it returns
    let postgres = tokio::task::spawn_blocking(move || {
        postgres.crash();
        std::thread::sleep(Duration::from_secs(5));
        postgres.start_again();
        postgres
    })
    .await
    .unwrap();
    let back = Instant::now();
    let served = futures::future::join_all(worlds.iter().map(|(tokens, _session, w)| {
        let all = all.clone();
        async move {
            let idle =
                until_an_epoch_succeeds(Duration::from_secs(5), "an idle session", || one_epoch(w))
                    .await;
            let fresh = until_an_epoch_succeeds(Duration::from_secs(5), "a new session", || {
                let all = all.clone();
                let token = tokens[1].clone();
                async move {
                    let session = Session::attach(all.as_str(), &token).await?;
                    one_epoch(&session.window("w").await?).await
                }
            })
            .await;
            (idle, fresh)
        }
    }))
    .await;
    eprintln!(
        "served again after {served:?} ({:?} since the database returned)",
        back.elapsed()
    );
    assert!(
        back.elapsed() < Duration::from_secs(8),
        "{:?} after the database returned",
        back.elapsed()
    );
    let status = until_status(&admin, Duration::from_secs(5), |status| {
        status.nodes.iter().all(|node| node.alive)
    })
    .await;
    // no node took a live node's world when the database returned
    assert!(
        status.nodes.iter().all(|node| node.worlds.len() == 1),
        "{status:#?}"
    );
    drop(database);
    drop(postgres);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_moves_a_world_to_a_named_node_and_its_clients_follow() {
    let database = PgDatabase::create().await;
    let (nodes, all, admin) = three_nodes(&database).await;
    let (world, tokens) = loaded_world(&admin, 4).await;
    let from = owner_of(&admin.cluster_status().await.unwrap(), &world)
        .unwrap()
        .to_string();
    let to = nodes.iter().find(|node| node.id != from).unwrap();
    let load = Load::start(&all, &tokens);
    load.progress(40, Duration::from_secs(60), "before the move")
        .await;
    // asked through a node that does not serve it: forwarded to the owner
    let through = nodes
        .iter()
        .find(|node| node.id != from && node.id != to.id)
        .unwrap();
    let asked = Instant::now();
    let moved = Admin::connect(through.url.as_str(), ADMIN_TOKEN)
        .await
        .unwrap()
        .move_world(&world, &to.id)
        .await
        .unwrap();
    let took = asked.elapsed();
    eprintln!("a move under load took {took:?} (its bound: the {LEASE} s node lease)");
    // the drain waits at most one lease; the rest is a commit and a claim
    assert!(
        took < Duration::from_secs(LEASE.parse::<u64>().unwrap() + 1),
        "a move under load took {took:?}, past its bound of one {LEASE} s lease"
    );
    assert_eq!(moved, to.url);
    let status = admin.cluster_status().await.unwrap();
    assert_eq!(
        owner_of(&status, &world),
        Some(to.id.as_str()),
        "{status:#?}"
    );
    load.progress(40, Duration::from_secs(60), "after the move")
        .await;
    // no node of another id, no world of another name
    let refused = admin.move_world(&world, "no-such-node").await.unwrap_err();
    assert!(refused.to_string().contains("no-such-node"), "{refused}");
    assert!(admin.move_world("no-such-world", &to.id).await.is_err());
    load.stop_and_check(&all, &tokens[0]).await;
    let status = admin.cluster_status().await.unwrap();
    assert_eq!(
        owner_of(&status, &world),
        Some(to.id.as_str()),
        "{status:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_owner_past_its_lease_commits_nothing_and_its_clients_move() {
    let (cluster, w) = OwnedWorld::start("frozen").await;
    let (owner, other, tokens) = (cluster.owner(), cluster.other(), &cluster.tokens);
    // rank 0 on the owner: one acknowledged accumulate
    w.lock(LockType::Exclusive, 1, 0).await.unwrap();
    w.accumulate::<u64>(1, 0, &[1], Op::Sum).unwrap();
    w.unlock(1).await.unwrap();
    // frozen: its calls sit in its socket, and its lease runs out
    owner.signal("-STOP");
    let late = tokio::spawn(async move {
        w.lock(LockType::Exclusive, 1, 0).await?;
        w.accumulate::<u64>(1, 0, &[100], Op::Sum)?;
        w.unlock(1).await
    });
    let new_owner = cluster.taken_over().await;
    // the new owner serves what was acknowledged
    let read = |token: String, address: String| async move {
        let session = attach_retrying(&address, &token, Duration::from_secs(30)).await;
        let w = session.window("w").await.unwrap();
        get_shared::<u64>(&w, 1, 0, 1).await[0]
    };
    assert_eq!(read(tokens[1].clone(), other.url.clone()).await, 1);
    // woken, the old owner finds its lease gone: the frozen calls are not acknowledged
    owner.signal("-CONT");
    let answered = tokio::time::timeout(Duration::from_secs(30), late)
        .await
        .expect("the frozen calls were never answered")
        .unwrap();
    let refused = answered.expect_err("a node without the lease acknowledged an update");
    // README: calls to a node that lost the world fail with MPI_ERR_IO (not acknowledged)
    assert_eq!(refused.class(), Some(ErrorClass::Io), "{refused}");
    // nothing it tried landed, and its clients go to the new owner
    assert_eq!(read(tokens[0].clone(), owner.url.clone()).await, 1);
    let status = until_status(&cluster.watcher, Duration::from_secs(30), |status| {
        status
            .nodes
            .iter()
            .find(|node| node.node_id == owner.id)
            .is_some_and(|node| node.alive)
    })
    .await;
    assert_eq!(owner_of(&status, &cluster.world), Some(new_owner.as_str()));
    let audit = Audit::connect(other.url.as_str(), ADMIN_TOKEN)
        .await
        .unwrap();
    let id = cluster
        .admin
        .describe_window(&cluster.world, "w")
        .await
        .unwrap()
        .id;
    assert_eq!(audit.verify(id).await.unwrap().first_bad, None);
}

/// A node paused (SIGSTOP) past its lease, whose world another node took meanwhile, attaches
/// no new session to the world and grants no lock of it when it resumes — not even to calls
/// that reached it while it was paused, before its heartbeat has heard of the loss: the new
/// session is redirected to the new owner (`x-onesided-owner`), and the lock is refused with
/// `MPI_ERR_IO` (issue 43, item 14).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_lost_a_world_while_paused_attaches_and_locks_nothing_of_it() {
    use crate::raw::{raw, Meta, RawSession};
    let (cluster, w) = OwnedWorld::start("lost").await;
    let (owner, tokens) = (cluster.owner(), &cluster.tokens);
    one_epoch(&w).await.unwrap();
    let mut grpc = raw(&owner.url).await;
    owner.signal("-STOP");
    // both reach the paused node's socket and wait there
    let attaching = tokio::spawn({
        let meta = Meta::bearer(&tokens[1]);
        async move { RawSession::open(&mut grpc, &meta).await.map(|_| ()) }
    });
    let locking = tokio::spawn(async move {
        let locked = w.lock(LockType::Exclusive, 0, 0).await;
        (w, locked)
    });
    let new_owner = cluster.taken_over().await;
    let new_url = &cluster
        .nodes
        .iter()
        .find(|node| node.id == new_owner)
        .unwrap()
        .url;
    owner.signal("-CONT");
    let refused = tokio::time::timeout(Duration::from_secs(10), attaching)
        .await
        .expect("the attach was answered")
        .unwrap()
        .expect_err("a node that lost the world attached a session to it");
    assert_redirected(&refused, new_url);
    let (_w, locked) = tokio::time::timeout(Duration::from_secs(10), locking)
        .await
        .expect("the lock was answered")
        .unwrap();
    let refused = locked.expect_err("a node that lost the world granted a lock of it");
    assert_eq!(refused.class(), Some(ErrorClass::Io), "{refused}");
}

/// The creation of window `window` of `world`: the first row of its chain.
fn created_row(world: &str, window: u64) -> NewRow {
    use onesided_core::audit::{AuditRecord, Body, Event, GENESIS};
    let event = Event::WindowCreated {
        unified: false,
        world: world.into(),
        name: format!("w{window}"),
        sizes: vec![8],
        disp_units: vec![1],
        info: Default::default(),
    };
    NewRow {
        body: Body::encode(&event),
        record: AuditRecord {
            window,
            seq: 1,
            at_ns: window,
            rank: 0,
            incarnation: 0,
            cseq: None,
            event,
        },
        prev_hash: GENESIS,
        hash: [window as u8; 32],
    }
}

/// A store on `database` holding `worlds` (one rank each), served by `node` at epoch 1.
async fn store_serving(database: &PgDatabase, node: &str, worlds: &[&str]) -> AuditStore {
    let store = AuditStore::open(Some(&database.url), std::path::Path::new("."))
        .await
        .unwrap();
    for (index, name) in worlds.iter().enumerate() {
        let world = onesided_server::audit::StoredWorld {
            name: (*name).into(),
            nranks: 1,
            tokens: vec![([index as u8; 32], 0)],
        };
        store
            .save_world(&world, Some((node, true, Duration::from_secs(5))))
            .await
            .unwrap();
    }
    store
}

/// Another node claims `world` as a claim does (the epoch grows), waiting for no lock longer
/// than `patience`.
async fn claim_within(database: &PgDatabase, world: &str, node: &str, patience: Duration) {
    use sqlx::Connection;
    let mut other = sqlx::PgConnection::connect(&database.url).await.unwrap();
    sqlx::query(&format!("SET lock_timeout = {}", patience.as_millis()))
        .execute(&mut other)
        .await
        .unwrap();
    let claimed =
        sqlx::query("UPDATE world_owners SET node_id = $2, epoch = epoch + 1 WHERE world = $1")
            .bind(world)
            .bind(node)
            .execute(&mut other)
            .await;
    assert!(
        claimed.is_ok(),
        "{node}'s claim of {world} waited on a lock: {claimed:?}"
    );
}

/// Connections of `database` inside a transaction that is waiting for its client.
async fn idle_in_transaction(database: &PgDatabase) -> i64 {
    use sqlx::Connection;
    let mut watcher = sqlx::PgConnection::connect(&database.url).await.unwrap();
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() \
         AND state LIKE 'idle in transaction%'",
    )
    .fetch_one(&mut watcher)
    .await
    .unwrap()
}

/// A commit refused as fenced ends its transaction before the refusal is returned: the
/// committer keeps its connection, and a node with no further traffic would otherwise leave
/// it open, holding the leases of the batch's other worlds against every claim (issue 43,
/// item 11).
/// The worlds `committer` names when it refuses to insert `rows` under `guard`: it must refuse,
/// fenced ([`Fenced`]).
async fn refused_as_fenced(
    committer: &mut Committer,
    rows: &[NewRow],
    guard: &Guard,
) -> Vec<String> {
    let refused = committer
        .insert_guarded(rows, &[], Some(guard))
        .await
        .unwrap_err();
    match refused.downcast_ref::<Fenced>() {
        Some(fenced) => fenced.worlds.clone(),
        None => panic!("refused, but not fenced: {refused:#}"),
    }
}

#[tokio::test]
async fn a_fenced_commit_ends_its_transaction_at_once() {
    let database = PgDatabase::create().await;
    let store = store_serving(&database, "node-a", &["kept", "taken"]).await;
    claim_within(&database, "taken", "node-b", Duration::from_secs(5)).await;
    let guard = Guard {
        node: "node-a".into(),
        leases: vec![("kept".into(), 1), ("taken".into(), 1)],
    };
    let mut committer = Committer::new(store.clone());
    let refused = refused_as_fenced(&mut committer, &[created_row("kept", 1)], &guard).await;
    assert_eq!(refused, ["taken"]);
    // the committer sits idle now, as a node with no traffic does
    assert_eq!(idle_in_transaction(&database).await, 0);
    claim_within(&database, "kept", "node-b", Duration::from_secs(1)).await;
    assert!(store.windows().await.unwrap().is_empty());
    drop(committer);
}

#[tokio::test]
async fn a_commit_under_a_lease_another_node_took_stores_nothing() {
    let database = PgDatabase::create().await;
    let store = store_serving(&database, "node-a", &["fenced"]).await;
    let row = |seq: u64| created_row("fenced", seq);
    let guard = Guard {
        node: "node-a".into(),
        leases: vec![("fenced".into(), 1)],
    };
    let mut committer = Committer::new(store.clone());
    committer
        .insert_guarded(&[row(1)], &[], Some(&guard))
        .await
        .unwrap();
    // another node takes the world over
    let AuditStore::Postgres(pool) = &store else {
        unreachable!()
    };
    sqlx::query("UPDATE world_owners SET node_id = 'node-b', epoch = 2 WHERE world = 'fenced'")
        .execute(pool)
        .await
        .unwrap();
    let refused = refused_as_fenced(&mut committer, &[row(2)], &guard).await;
    assert_eq!(refused, ["fenced"]);
    assert_eq!(
        store.windows().await.unwrap().len(),
        1,
        "the refused row is not stored"
    );
    // the new owner's epoch commits
    let current = Guard {
        node: "node-b".into(),
        leases: vec![("fenced".into(), 2)],
    };
    committer
        .insert_guarded(&[row(3)], &[], Some(&current))
        .await
        .unwrap();
    assert_eq!(store.windows().await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_lets_an_open_epoch_finish_and_new_sessions_wait_for_it() {
    let database = PgDatabase::create().await;
    let (nodes, all, admin) = three_nodes(&database).await;
    let (world, tokens, from) = world_with_w(&admin, "drained", 3).await;
    let (_, to) = it_and_another(&nodes, &from);
    // rank 0 holds rank 1's lock, its put applied: an epoch is open on the owner
    let holder = Session::attach(all.as_str(), &tokens[0]).await.unwrap();
    let w = holder.window("w").await.unwrap();
    w.lock(LockType::Exclusive, 1, 0).await.unwrap();
    w.put::<u64>(1, 0, &[7]).unwrap();
    w.flush(1).await.unwrap();
    // rank 2 is attached too, with no epoch open
    let idle = Session::attach(all.as_str(), &tokens[2]).await.unwrap();
    let idle_window = Arc::new(idle.window("w").await.unwrap());
    let mover = Admin::connect(all.as_str(), ADMIN_TOKEN).await.unwrap();
    let target = to.id.clone();
    let world_name = world.clone();
    let moving = tokio::spawn(async move { mover.move_world(&world_name, &target).await.unwrap() });
    // the status says it is moving while the epoch stays open
    until_status(&admin, Duration::from_secs(30), |status| {
        status.nodes.iter().any(|node| node.moving.contains(&world))
    })
    .await;
    // a new session of the world waits for the move, then lands on the new node
    let all_again = all.clone();
    let token = tokens[1].clone();
    let mut newcomer =
        tokio::spawn(async move { Session::attach(all_again.as_str(), &token).await });
    // it waits while the epoch is open (it attached within milliseconds otherwise)
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut newcomer)
            .await
            .is_err(),
        "a new session attached while the world was moving"
    );
    // a new epoch of an attached session waits too (granted now, it would keep the world
    // busy), and fails once the world has gone: nothing was locked here
    let held = {
        let idle_window = Arc::clone(&idle_window);
        tokio::spawn(async move { idle_window.lock(LockType::Shared, 2, 0).await })
    };
    // the open epoch finishes, acknowledged, on the old owner
    w.unlock(1).await.unwrap();
    assert_eq!(moving.await.unwrap(), to.url);
    let refused = held.await.unwrap().unwrap_err();
    assert_eq!(refused.class(), Some(ErrorClass::Io), "{refused}");
    // the same session follows the world to its new node by itself and locks there
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match idle_window.lock(LockType::Shared, 2, 0).await {
            Ok(()) => break,
            Err(error) => {
                assert!(
                    Instant::now() < deadline,
                    "rank 2 never locked again: {error}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    idle_window.unlock(2).await.unwrap();
    assert_eq!(idle.incarnation(), 2);
    let status = admin.cluster_status().await.unwrap();
    assert_eq!(
        owner_of(&status, &world),
        Some(to.id.as_str()),
        "{status:#?}"
    );
    assert!(
        status.nodes.iter().all(|node| node.moving.is_empty()),
        "{status:#?}"
    );
    let session = newcomer.await.unwrap().unwrap();
    let r = session.window("w").await.unwrap();
    assert_eq!(
        get_shared::<u64>(&r, 1, 0, 1).await,
        vec![7],
        "the finished epoch's put moved along"
    );
}

/// Misconfigured nodes refuse to start rather than being given worlds (issue 43, item 15): a
/// node with another admin token than the live nodes' (its token would read any world it is
/// given, and the cluster's would be refused on it), one with the id of a live node — even
/// at the same address — and one advertising `https://` over a plain listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misconfigured_nodes_refuse_to_start() {
    let database = PgDatabase::create().await;
    let nodes = start_nodes(&database, 1);
    let data = TempDir::new();
    let other_token = "another-admin-token-of-32-characters-x";
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let command = node_command(&database, "node-9", port, &url, other_token, &data);
    let said = refused_to_start_blocking(command).await;
    assert!(said.contains("admin token"), "{said}");
    // the same id as the live node, at its very address (from another listener)
    let command = node_command(
        &database,
        "node-0",
        free_port(),
        &nodes[0].url,
        ADMIN_TOKEN,
        &data,
    );
    let said = refused_to_start_blocking(command).await;
    assert!(said.contains("held by a live node"), "{said}");
    let port = free_port();
    let https = format!("https://127.0.0.1:{port}");
    let command = node_command(&database, "node-8", port, &https, ADMIN_TOKEN, &data);
    let said = refused_to_start_blocking(command).await;
    assert!(said.contains("listens without TLS"), "{said}");
    // the live node was not disturbed: it is the only one, alive, serving
    let admin = Admin::connect(nodes[0].url.as_str(), ADMIN_TOKEN)
        .await
        .unwrap();
    let status = admin.cluster_status().await.unwrap();
    let live: Vec<&str> = status
        .nodes
        .iter()
        .filter(|node| node.alive)
        .map(|node| node.node_id.as_str())
        .collect();
    assert_eq!(live, vec!["node-0"], "{status:#?}");
    assert_eq!(status.nodes[0].advertise, nodes[0].url);
}

/// Issue 43, item 15: a node advertising an address where nobody listens, or another node's
/// address, stays up but takes no world until it reaches itself there: it says why, and
/// placement passes over it (it used to be given worlds nobody could reach).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_that_cannot_reach_themselves_at_their_advertised_url_take_no_worlds() {
    let database = PgDatabase::create().await;
    let nodes = start_nodes(&database, 1);
    let nobody = format!("http://127.0.0.1:{}", free_port());
    let mut lost = Vec::new();
    for (id, advertise) in [("node-a", &nobody), ("node-b", &nodes[0].url)] {
        let data = TempDir::new();
        let command = node_command(&database, id, free_port(), advertise, ADMIN_TOKEN, &data);
        let process = Launched::start(
            command,
            "cannot reach itself at its advertised URL",
            Duration::from_secs(60),
        );
        lost.push((process, data));
    }
    let admin = Admin::connect(nodes[0].url.as_str(), ADMIN_TOKEN)
        .await
        .unwrap();
    for index in 0..4 {
        admin.create_world(&format!("w{index}"), 2).await.unwrap();
    }
    let status = admin.cluster_status().await.unwrap();
    let alive = status.nodes.iter().filter(|node| node.alive).count();
    assert_eq!(alive, 3, "they are up: {status:#?}");
    for index in 0..4 {
        assert_eq!(
            owner_of(&status, &format!("w{index}")),
            Some("node-0"),
            "{status:#?}"
        );
    }
}

#[test]
fn a_cluster_node_refuses_sqlite_and_an_audit_that_is_off() {
    let data = TempDir::new();
    let node = |extra: &[&str]| {
        let cluster = ["--node-id", "a", "--advertise", "http://127.0.0.1:1"];
        let flags = [&cluster[..], &["--admin-token", ADMIN_TOKEN], extra].concat();
        let mut command = crate::server_command(&data, &flags, "info");
        command.env_remove("DATABASE_URL");
        refused_to_start(command)
    };
    // the default store, SQLite in the data directory
    let said = node(&[]);
    assert!(said.contains("a cluster needs PostgreSQL"), "{said}");
    let said = node(&["--audit-durability", "off"]);
    assert!(
        said.contains("a cluster node needs the audit store"),
        "{said}"
    );
    // --node-id without --advertise is a usage error
    let mut command = std::process::Command::new(SERVER_BINARY);
    command.args(["--node-id", "a"]).env("NO_COLOR", "1");
    let out = onesided_test_support::run_to_exit(command, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// An operator's actions asked of a node that does not serve the world go to the one that
/// does, as the other Admin calls do, and are recorded there with the caller's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_actions_are_forwarded_to_the_worlds_node() {
    let database = PgDatabase::create().await;
    let (nodes, all, admin) = three_nodes(&database).await;
    let (world, tokens, owner) = world_with_w(&admin, "operated", 2).await;
    let holder = attach_retrying(&all, &tokens[1], Duration::from_secs(10)).await;
    let window = holder.window("w").await.unwrap();
    window.lock(LockType::Exclusive, 0, 0).await.unwrap();
    window.put(0, 0, &[5u64]).unwrap();
    window.flush(0).await.unwrap();
    let elsewhere = nodes.iter().find(|node| node.id != owner).unwrap();
    let through = Admin::connect(elsewhere.url.as_str(), ADMIN_TOKEN)
        .await
        .unwrap();
    let (incarnation, targets) = through.revoke_locks(&world, "w", 1).await.unwrap();
    assert_eq!((incarnation, targets), (1, vec![0]));
    let error = window.unlock(0).await.unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::RmaSync), "{error}");
    // nothing held now: the owner's refusal comes back as it is
    let refused = through.revoke_locks(&world, "w", 1).await.unwrap_err();
    assert_eq!(refused.class(), Some(ErrorClass::RmaSync), "{refused}");
    assert_eq!(through.end_session(&world, 1).await.unwrap(), 1);
    let audit = Audit::connect(elsewhere.url.as_str(), ADMIN_TOKEN)
        .await
        .unwrap();
    let id = window.desc().id;
    let actions: Vec<(String, String)> = audit
        .events(id, 1)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|entry| match entry.event? {
            onesided_core::audit::Event::Admin { action, by } => Some((action, by)),
            _ => None,
        })
        .collect();
    assert_eq!(actions.len(), 2, "{actions:?}");
    assert_eq!(
        (actions[0].0.as_str(), actions[1].0.as_str()),
        ("revoke_locks", "end_session")
    );
    // who asked, with the address the call came from
    for (_, by) in &actions {
        assert!(by.starts_with("admin from 127.0.0.1:"), "{by}");
    }
    drop(nodes);
}
