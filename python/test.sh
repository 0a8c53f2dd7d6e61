#!/usr/bin/env bash
# Everything the Python package's tests need, from cargo and python3 alone: builds the server,
# makes a virtualenv under the cargo target directory (maturin, pytest, numpy and mypy from
# PyPI), lints the native module (its own workspace: the top-level clippy does not see it),
# builds the package into the venv with `maturin develop`, type-checks the package, its typed
# tests and the README's example with `mypy --strict`, checks that a wheel carries the types
# (`py.typed`, the `.pyi` stub), and runs the pytest suite against the real server. Extra
# arguments go to pytest (`python/test.sh -k forum -x`).
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

echo "python: building onesided-server and the CLI (tests/test_explore.py compares reports)"
cargo build --locked -p onesided-server -p onesided-cli

if [ ! -x "$venv/bin/python" ]; then
  echo "python: creating $venv"
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "maturin>=1.9.4,<2" "pytest>=7" "numpy>=1.21" "mypy>=1.8"

# PyO3's build script asks this interpreter what to build for
export PYO3_PYTHON=$venv/bin/python
echo "python: formatting and lints of the native module"
cargo fmt --manifest-path python/Cargo.toml -- --check
cargo clippy --locked --manifest-path python/Cargo.toml --all-targets -- -D warnings

echo "python: maturin develop"
(cd python && VIRTUAL_ENV=$venv PATH=$venv/bin:$PATH maturin develop --locked --quiet)

echo "python: mypy --strict (the package as installed, its typed tests, the README's example)"
readme_example=$CARGO_TARGET_DIR/python-readme-example.py
"$venv/bin/python" - "$readme_example" <<'EOF'
import re, sys
section = open("README.md").read().split("## Use it from Python", 1)[1]
open(sys.argv[1], "w").write(re.search(r"```python\n(.*?)```", section, re.S).group(1))
EOF
mypy=("$venv/bin/python" -m mypy --strict --cache-dir "$CARGO_TARGET_DIR/mypy-cache")
(cd python/tests && "${mypy[@]}" -p onesided &&
  "${mypy[@]}" conftest.py test_aio.py test_config.py "$readme_example")

# the wheel users install must carry the types: a debug build reuses what maturin develop
# compiled, and its file list is the release wheel's
echo "python: the wheel's files"
wheels=$CARGO_TARGET_DIR/python-wheels
rm -rf "$wheels"
(cd python && PATH=$venv/bin:$PATH maturin build --locked --quiet -i "$venv/bin/python" \
  -o "$wheels")
"$venv/bin/python" - "$wheels"/onesided-*.whl <<'EOF'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
wanted = {"onesided/py.typed", "onesided/_onesided.pyi", "onesided/aio.py"}
missing = sorted(wanted - names)
if not any(n.startswith("onesided/_onesided.") and not n.endswith(".pyi") for n in names):
    missing.append("the native module")
if missing:
    sys.exit("python: the wheel lacks {} (it has {})".format(missing, sorted(names)))
EOF

echo "python: pytest"
ONESIDED_SERVER=$CARGO_TARGET_DIR/debug/onesided-server \
  "$venv/bin/python" -m pytest python/tests -q "$@"
