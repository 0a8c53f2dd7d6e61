//! `cluster status` and `cluster move` against a node of a one-node cluster on the real
//! PostgreSQL, several addresses in `--addr`, and the refusals of a server that is not part of
//! a cluster. (Three nodes, redirects and failover: `server/tests/it/cluster.rs`.)

use onesided_server::cluster::NodeConfig;

use crate::store::PgDatabase;
use crate::{Cli, Server};

#[test]
fn a_node_lists_the_cluster_and_moves_worlds_by_node_id() {
    let database = PgDatabase::create_blocking();
    // it advertises its own address: a node takes worlds only once it has reached itself there
    let server = Server::start_with_url(|config, url| {
        config.database_url = Some(database.url.clone());
        config.cluster = Some(NodeConfig::new("only", url));
    });
    server.world("w", 2);
    // a dead address first: the CLI goes on to the next one
    let bound = tokio::net::TcpSocket::new_v4().unwrap();
    bound.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let dead = format!("http://127.0.0.1:{}", bound.local_addr().unwrap().port());
    let both = format!("{dead},{}", server.url);
    let status = Cli::new(&both)
        .token(crate::ADMIN_TOKEN)
        .words("--json cluster status")
        .run();
    status.success();
    let document = status.json();
    assert_eq!(document["answered_by"], "only");
    let nodes = document["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{document}");
    assert_eq!(nodes[0]["node_id"], "only");
    assert_eq!(nodes[0]["alive"], true);
    assert_eq!(nodes[0]["worlds"], serde_json::json!(["w"]));
    assert_eq!(nodes[0]["ranks"], 2);
    assert_eq!(nodes[0]["moving"], serde_json::json!([]));
    let text = server.cli().words("cluster status").run();
    text.success();
    let row = text.stdout.lines().nth(1).unwrap_or_default().to_string();
    for expected in ["only", server.url.as_str(), "alive", "ms ago", "w"] {
        assert!(row.contains(expected), "{}", text.stdout);
    }
    // moving a world to the node that serves it changes nothing
    let moved = server.cli().words("--json cluster move w --to only").run();
    moved.success();
    assert_eq!(moved.json()["owner"], server.url.as_str());
    // no such node, no such world: refusals, one line each
    let nowhere = server.cli().words("cluster move w --to elsewhere").run();
    nowhere.code(3).stderr_has("no node \"elsewhere\"");
    assert_eq!(nowhere.stderr.lines().count(), 1);
    let unknown = server.cli().words("cluster move nope --to only").run();
    unknown.code(3).stderr_has("no world named");
}

#[test]
fn a_single_server_says_it_is_not_part_of_a_cluster() {
    let server = Server::start();
    let out = server.cli().words("cluster status").run();
    out.code(3).stderr_has("not part of a cluster");
    server.world("w", 1);
    let out = server.cli().words("cluster move w --to a").run();
    out.code(3).stderr_has("not part of a cluster");
}
