#!/usr/bin/env bash
# Everything the Python package's tests need, from cargo and python3 alone: builds the server,
# makes a virtualenv under the cargo target directory (maturin, pytest and numpy from PyPI),
# lints the native module (its own workspace: the top-level clippy does not see it), builds the
# package into the venv with `maturin develop`, and runs the pytest suite against the real
# server. Extra arguments go to pytest (`python/test.sh -k forum -x`).
set -euo pipefail
cd "$(dirname "$0")/.."
repository=$PWD
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repository/target}
venv=$CARGO_TARGET_DIR/python-venv

# python/Cargo.lock is its own (python/ is its own workspace); it must know every crate the
# client now uses, in the versions the top Cargo.lock has
if ! cargo metadata --locked --format-version 1 --manifest-path python/Cargo.toml >/dev/null; then
  echo "python: python/Cargo.lock is out of date; refresh it from the top one with"
  echo "  cp Cargo.lock python/Cargo.lock && cargo metadata --format-version 1 --manifest-path python/Cargo.toml >/dev/null"
  exit 1
fi

echo "python: building onesided-server"
cargo build --locked -p onesided-server

if [ ! -x "$venv/bin/python" ]; then
  echo "python: creating $venv"
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "maturin>=1.9.4,<2" "pytest>=7" "numpy>=1.21"

# PyO3's build script asks this interpreter what to build for
export PYO3_PYTHON=$venv/bin/python
echo "python: formatting and lints of the native module"
cargo fmt --manifest-path python/Cargo.toml -- --check
cargo clippy --locked --manifest-path python/Cargo.toml --all-targets -- -D warnings

echo "python: maturin develop"
(cd python && VIRTUAL_ENV=$venv PATH=$venv/bin:$PATH maturin develop --locked --quiet)

echo "python: pytest"
ONESIDED_SERVER=$CARGO_TARGET_DIR/debug/onesided-server \
  "$venv/bin/python" -m pytest python/tests -q "$@"
