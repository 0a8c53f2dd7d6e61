//! The Admin service's answers that have no counterpart in core, as one plain type each that
//! the server builds and the client hands its callers, with the one mapping to and from v1's
//! messages, so the two sides cannot drift: a cluster node as the cluster's status shows it.
//!
//! Owns: `ClusterNode` and its field-by-field mapping to and from `onesided.v1`. Must not: read
//! a store or decide a node's liveness or load (the server's cluster does), or call a service.

use crate::v1;

/// One node of a cluster, as the cluster's status shows it (`Admin.ClusterStatus`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    /// Its id (`--node-id`).
    pub node_id: String,
    /// The URL it is reached at (`--advertise`).
    pub advertise: String,
    /// Whether its lease is current.
    pub alive: bool,
    /// Milliseconds since its last heartbeat, by the database's clock.
    pub heartbeat_age_ms: u64,
    /// The worlds it serves.
    pub worlds: Vec<String>,
    /// Their ranks together (the load placement balances).
    pub ranks: u64,
    /// Those of its worlds an admin's move is draining away right now.
    pub moving: Vec<String>,
}

/// A cluster node on the wire.
pub fn node_to_wire(node: ClusterNode) -> v1::ClusterNode {
    v1::ClusterNode {
        node_id: node.node_id,
        advertise: node.advertise,
        alive: node.alive,
        heartbeat_age_ms: node.heartbeat_age_ms,
        worlds: node.worlds,
        ranks: node.ranks,
        moving: node.moving,
    }
}

/// A cluster node off the wire.
pub fn node_from_wire(node: v1::ClusterNode) -> ClusterNode {
    ClusterNode {
        node_id: node.node_id,
        advertise: node.advertise,
        alive: node.alive,
        heartbeat_age_ms: node.heartbeat_age_ms,
        worlds: node.worlds,
        ranks: node.ranks,
        moving: node.moving,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_comes_back_as_it_left() {
        let sent = ClusterNode {
            node_id: "node-a".into(),
            advertise: "http://127.0.0.1:50051".into(),
            alive: true,
            heartbeat_age_ms: 1234,
            worlds: vec!["w1".into(), "w2".into()],
            ranks: 6,
            moving: vec!["w2".into()],
        };
        assert_eq!(node_from_wire(node_to_wire(sent.clone())), sent);
    }
}
