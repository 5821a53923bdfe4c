#!/usr/bin/env bash
# make sdk-test: the OpenAI-compatible API as its users call it (their
# clients are the oracle of compatibility, not our reading of the spec).
# Installs the official openai npm client, the AI SDK (ai,
# @ai-sdk/openai, zod) and LangChain's ChatOpenAI (@langchain/openai,
# @langchain/core), pinned, into $SDK_DIR/node; synthesizes the
# context-bag model with Qwen 2.5's chat template (Hermes tool calls), so
# that tools and forced calls work on a random-weight model; starts a real
# cloisond on it (local PostgreSQL from scripts/pg.sh, database
# cloison_sdk, --dev) with two tenants; and runs scripts/sdk-test.mjs, which
# asserts every check and exits non-zero on the first failed group.
#
# Needs go, node (≥ 20) and npm. SDK_DIR (default .cache/sdk-test).
set -euo pipefail
cd "$(dirname "$0")/.."
OPENAI_VERSION=6.49.0
AI_VERSION=6.0.325
AI_SDK_OPENAI_VERSION=3.0.141
ZOD_VERSION=4.6.7
LANGCHAIN_OPENAI_VERSION=0.6.17
LANGCHAIN_CORE_VERSION=0.3.80
MODEL=cloison-context-bag
dir=${SDK_DIR:-.cache/sdk-test}
mkdir -p "$dir/bin" "$dir/node" "$dir/state"
chmod 700 "$dir/state"

command -v node >/dev/null || { echo "sdk-test: node (≥ 20) is needed" >&2; exit 1; }
command -v npm >/dev/null || { echo "sdk-test: npm is needed" >&2; exit 1; }

go build -o "$dir/bin/cloisond" ./cmd/cloisond
go build -o "$dir/bin/cloisonctl" ./cmd/cloisonctl

want="openai@$OPENAI_VERSION ai@$AI_VERSION @ai-sdk/openai@$AI_SDK_OPENAI_VERSION zod@$ZOD_VERSION @langchain/openai@$LANGCHAIN_OPENAI_VERSION @langchain/core@$LANGCHAIN_CORE_VERSION"
have=$(cd "$dir/node" && node -e '
const v = p => { try { return p + "@" + require(process.cwd() + "/node_modules/" + p + "/package.json").version } catch { return "" } };
console.log(["openai", "ai", "@ai-sdk/openai", "zod", "@langchain/openai", "@langchain/core"].map(v).join(" "))')
if [ "$have" != "$want" ]; then
	echo "== npm install $want into $dir/node"
	(cd "$dir/node" && { [ -f package.json ] || echo '{"private":true,"type":"module"}' > package.json; } &&
		npm install --no-audit --no-fund --save-exact $want >/dev/null)
fi

model="$dir/context-bag-qwen.gguf"
"$dir/bin/cloisonctl" model synth --bag --pooling 1 --chat-template engine/chat/testdata/hf/templates/Qwen-Qwen2.5-7B-Instruct.jinja "$model" >/dev/null

# The database URLs, as make run derives them (Makefile dburls).
admin=$(scripts/pg.sh)
base=${admin%%\?*}; base=${base%/*}; opts=""; case "$admin" in *\?*) opts="?${admin#*\?}";; esac
hostpart=${base#*://}; hostpart=${hostpart#*@}
admin="$base/cloison_sdk$opts"; runtime="postgres://cloison_runtime@$hostpart/cloison_sdk$opts"
# A fresh database every run: one left by an older checkout may hold another migration history.
psql -q "$base/postgres$opts" -c 'DROP DATABASE IF EXISTS cloison_sdk WITH (FORCE)' >/dev/null
[ -s "$dir/state/db-runtime.password" ] || (umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$dir/state/db-runtime.password")

rm -f "$dir/state/ready"
"$dir/bin/cloisond" --addr 127.0.0.1:0 --database-url "$runtime" --migrate-database-url "$admin" \
	--db-runtime-password-file "$dir/state/db-runtime.password" --db-deployment dev --create-database --dev --dev-tenant dev \
	--state-dir "$dir/state" --ready-file "$dir/state/ready" --model "$model" --model-name "$MODEL" 2>"$dir/cloisond.log" & pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do [ -s "$dir/state/ready" ] && break; kill -0 $pid 2>/dev/null || { tail -20 "$dir/cloisond.log" >&2; exit 1; }; sleep 0.5; done
[ -s "$dir/state/ready" ] || { echo "sdk-test: cloisond did not become ready" >&2; tail -20 "$dir/cloisond.log" >&2; exit 1; }
addr=$(cat "$dir/state/ready")

ctl() { CLOISON_STATE_DIR="$dir/state" "$dir/bin/cloisonctl" --database-url "$admin" "$@"; } # the node's state: its log key signs tenant changes
ctl tenant create other --models "$MODEL" >/dev/null 2>&1 || true # exists from an earlier run
tok=$(ctl token issue --tenant dev --subject sdk-test --scopes infer --ttl 1h --state-dir "$dir/state")
other=$(ctl token issue --tenant other --subject sdk-test --scopes infer --ttl 1h --state-dir "$dir/state")

cp scripts/sdk-test.mjs "$dir/node/sdk-test.mjs"
(cd "$dir/node" && CLOISON_URL="http://$addr" CLOISON_TOKEN="$tok" CLOISON_OTHER_TOKEN="$other" CLOISON_MODEL="$MODEL" node sdk-test.mjs)
