#!/usr/bin/env bash
# One node against three on this machine (BENCHMARKS.md, "A cluster of nodes"): for each round,
# a fresh database, a cluster of 1 then of 3 `onesided-server` nodes (release build, sync
# audit into the local PostgreSQL), and `onesided-bench --addr` against it with every node's
# address; one JSON file per run in OUT (default /tmp/cluster-nodes).
#
#   cargo build --release -p onesided-server -p onesided-bench
#   bench/scripts/cluster-nodes.sh [ROUNDS=2] [ITERATIONS=300]
set -euo pipefail
BIN=${CARGO_TARGET_DIR:-target}/release
PG=${POSTGRES:-postgres://postgres@127.0.0.1:5432}
OUT=${OUT:-/tmp/cluster-nodes}
TOKEN=cluster-bench-admin-token
ROUNDS=${1:-2}
ITERATIONS=${2:-300}
mkdir -p "$OUT"
for round in $(seq 1 "$ROUNDS"); do
  for size in 1 3; do
    db=cluster_nodes_${size}_${round}_$$
    psql -q "$PG/postgres" -c "CREATE DATABASE $db"
    pids=() addresses=()
    for i in $(seq 1 "$size"); do
      port=$((52000 + size * 10 + i))
      "$BIN/onesided-server" --listen "127.0.0.1:$port" --data-dir "$OUT/data-n$i" \
        --node-id "n$i" --advertise "http://127.0.0.1:$port" --admin-token "$TOKEN" \
        --database-url "$PG/$db" > "$OUT/n$i-$size-$round.log" 2>&1 &
      pids+=($!) addresses+=("http://127.0.0.1:$port")
    done
    sleep 2
    "$BIN/onesided-bench" --addr "$(IFS=,; echo "${addresses[*]}")" --token "$TOKEN" \
      --iterations "$ITERATIONS" --json > "$OUT/bench-$size-$round.json"
    kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
    psql -q "$PG/postgres" -c "DROP DATABASE $db WITH (FORCE)"
    echo "round $round, $size node(s): $OUT/bench-$size-$round.json"
  done
done
