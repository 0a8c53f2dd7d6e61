#!/usr/bin/env bash
# What one operation costs a node and its PostgreSQL (BENCHMARKS.md, "A cluster of nodes"):
# one node (release build, sync audit into a fresh database on the local PostgreSQL) and the
# `capacity` example against it, three times with 64 ranks × 200 accumulate + flush, twice
# with 1 rank × 2000.
#
#   cargo build --release -p onesided-server -p onesided-bench --example capacity
#   bench/scripts/capacity.sh
set -euo pipefail
BIN=${CARGO_TARGET_DIR:-target}/release
PG=${POSTGRES:-postgres://postgres@127.0.0.1:5432}
TOKEN=capacity-bench-admin-token
db=capacity_$$
psql -q "$PG/postgres" -c "CREATE DATABASE $db"
"$BIN/onesided-server" --listen 127.0.0.1:52100 --data-dir "/tmp/capacity-$$" --node-id n1 \
  --advertise http://127.0.0.1:52100 --admin-token "$TOKEN" --database-url "$PG/$db" \
  > "/tmp/capacity-$$.log" 2>&1 &
pid=$!
sleep 2
for _ in 1 2 3; do "$BIN/examples/capacity" http://127.0.0.1:52100 "$TOKEN" "$PG/$db" "$pid" 64 200; done
for _ in 1 2; do "$BIN/examples/capacity" http://127.0.0.1:52100 "$TOKEN" "$PG/$db" "$pid" 1 2000; done
kill "$pid"; wait "$pid" 2>/dev/null || true
psql -q "$PG/postgres" -c "DROP DATABASE $db WITH (FORCE)"
