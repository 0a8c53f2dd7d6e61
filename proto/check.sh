#!/usr/bin/env bash
# Checks that the .proto files stand alone for other languages (proto/README.md):
#
#   1. `buf lint` with proto/buf.yaml: buf's STANDARD rules plus a comment on every element;
#   2. Python: grpcio-tools generates messages and stubs, and python3 imports them;
#   3. TypeScript: protoc-gen-es (run by buf) generates messages, enums and service
#      descriptors, tsc compiles them in strict mode with a small program that encodes calls and
#      decodes them back, and node runs it.
#
# What it installs, and where (nothing global but the Debian packages):
#   - npm packages @bufbuild/buf, @bufbuild/protoc-gen-es, @bufbuild/protobuf and typescript
#     (the versions below) under $tools/npm, with npm;
#   - PyPI package grpcio-tools in a virtualenv at $tools/venv, with pip.
# It needs python3 (with venv), node and npm.
# $tools is $PROTO_TOOLS_DIR, else $CARGO_TARGET_DIR/proto-tools, else target/proto-tools.
# Generated code goes to $tools/out and $tools/npm/ts, which each run starts afresh.
set -euo pipefail
cd "$(dirname "$0")"
proto_dir=$(pwd)
tools=${PROTO_TOOLS_DIR:-${CARGO_TARGET_DIR:-$proto_dir/../target}/proto-tools}
mkdir -p "$tools"
tools=$(cd "$tools" && pwd)
BUF_VERSION=1.75.0
ES_VERSION=2.17.0
TYPESCRIPT_VERSION=5.9.3
GRPCIO_TOOLS_VERSION=1.85.1
files=(onesided/v1/onesided.proto onesided/audit/v1/event.proto)
say() { echo "proto check: $*"; }
for tool in python3 node npm; do
  command -v "$tool" >/dev/null || { say "$tool is not on PATH (this machine kind has it)"; exit 1; }
done

# 1. lint
buf="$tools/npm/node_modules/.bin/buf"
npm_packages=("@bufbuild/buf@$BUF_VERSION" "@bufbuild/protoc-gen-es@$ES_VERSION"
  "@bufbuild/protobuf@$ES_VERSION" "typescript@$TYPESCRIPT_VERSION")
if [ "$(cat "$tools/npm/installed" 2>/dev/null)" != "${npm_packages[*]}" ]; then
  say "installing from npm into $tools/npm: ${npm_packages[*]}"
  npm install --prefix "$tools/npm" --no-audit --no-fund --loglevel=error "${npm_packages[@]}" >/dev/null
  echo "${npm_packages[*]}" >"$tools/npm/installed"
fi
say "buf lint (proto/buf.yaml)"
"$buf" lint

out="$tools/out"
rm -rf "$out"
mkdir -p "$out/python"

# 2. Python
venv="$tools/venv"
if ! "$venv/bin/python" -c "import grpc_tools" 2>/dev/null \
  || [ "$("$venv/bin/pip" show grpcio-tools 2>/dev/null | sed -n 's/^Version: //p')" != "$GRPCIO_TOOLS_VERSION" ]; then
  say "installing grpcio-tools $GRPCIO_TOOLS_VERSION from PyPI into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "grpcio-tools==$GRPCIO_TOOLS_VERSION"
fi
say "Python: generating and importing"
"$venv/bin/python" -m grpc_tools.protoc -Iproto --python_out="$out/python" \
  --pyi_out="$out/python" --grpc_python_out="$out/python" "${files[@]/#/proto/}"
(cd "$out/python" && "$venv/bin/python" - <<'EOF'
from onesided.v1 import onesided_pb2 as pb, onesided_pb2_grpc as rpc
from onesided.audit.v1 import event_pb2

# the enums carry their meaning by name
op = pb.RmaOp(window=1, target=2, kind=pb.OP_KIND_ACCUMULATE, datatype=pb.DATATYPE_I32,
              op=pb.OP_SUM, disp=0, layout=pb.Layout(contiguous=pb.Contiguous(count=1)),
              data=(5).to_bytes(4, "little"))
back = pb.RmaOp.FromString(op.SerializeToString())
assert back == op and pb.Datatype.Name(back.datatype) == "DATATYPE_I32", back
assert pb.Op.Name(back.op) == "OP_SUM"
# `assert` is a Python keyword: the field is set and read by name
fence = pb.Fence(window=1, **{"assert": pb.ASSERT_NOSTORE | pb.ASSERT_NOPRECEDE})
assert getattr(pb.Fence.FromString(fence.SerializeToString()), "assert") == 10
assert pb.ErrorClass.Name(13) == "ERROR_CLASS_RANK"
assert pb.LockType.Value("LOCK_TYPE_EXCLUSIVE") == 2
# the stubs of every service
for stub in ("AdminStub", "AuditStub", "RmaStub"):
    assert hasattr(rpc, stub), stub
event = event_pb2.Event(op_issued=event_pb2.OpIssued(op_id=1, datatype="i32"))
assert event_pb2.Event.FromString(event.SerializeToString()).WhichOneof("event") == "op_issued"
print("proto check: Python imports onesided_pb2, onesided_pb2_grpc and event_pb2")
EOF
)

# 3. TypeScript: protobuf-es generates the messages, enums and service descriptors, tsc (strict)
# compiles them with a program that uses them, and node runs it
say "TypeScript: generating with protoc-gen-es $ES_VERSION, compiling with tsc $TYPESCRIPT_VERSION"
ts="$tools/npm/ts"
rm -rf "$ts"
mkdir -p "$ts/gen"
"$buf" generate --template "{\"version\":\"v2\",\"plugins\":[{\"local\":\"$tools/npm/node_modules/.bin/protoc-gen-es\",\"out\":\"$ts/gen\",\"opt\":[\"target=ts\",\"import_extension=js\"]}]}"
echo '{"type": "module"}' >"$ts/package.json"
cat >"$ts/tsconfig.json" <<'EOF_TS'
{
  "compilerOptions": {
    "strict": true,
    "target": "es2022",
    "module": "nodenext",
    "moduleResolution": "nodenext",
    "outDir": "js",
    "skipLibCheck": false
  },
  "include": ["check.ts", "gen/**/*.ts"]
}
EOF_TS
cat >"$ts/check.ts" <<'EOF_TS'
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  Admin, Assert, Audit, ClientMessageSchema, Datatype, ErrorClass, Op, OpKind, Rma,
} from "./gen/onesided/v1/onesided_pb.js";
import { EventSchema } from "./gen/onesided/audit/v1/event_pb.js";

const call = create(ClientMessageSchema, {
  id: 7n,
  call: {
    case: "op",
    value: {
      window: 1n, target: 2, kind: OpKind.FETCH_AND_OP, datatype: Datatype.I64, op: Op.SUM,
      layout: { kind: { case: "contiguous", value: { count: 1n } } },
    },
  },
});
const back = fromBinary(ClientMessageSchema, toBinary(ClientMessageSchema, call));
if (back.call.case !== "op" || back.call.value.datatype !== Datatype.I64) throw new Error("op");
const fence = create(ClientMessageSchema, {
  call: { case: "fence", value: { window: 1n, assert: Assert.NOSTORE | Assert.NOPRECEDE } },
});
const fenced = fromBinary(ClientMessageSchema, toBinary(ClientMessageSchema, fence));
if (fenced.call.case !== "fence" || fenced.call.value.assert !== 10) throw new Error("fence");
if (ErrorClass[13] !== "RANK") throw new Error("error class");
const services = [Admin, Audit, Rma].map((service) => service.typeName).join(", ");
const event = create(EventSchema, { event: { case: "opIssued", value: { datatype: "i64" } } });
fromBinary(EventSchema, toBinary(EventSchema, event));
console.log(`proto check: TypeScript compiled and ran (${services})`);
EOF_TS
"$tools/npm/node_modules/.bin/tsc" -p "$ts"
node "$ts/js/check.js"
say "ok"
