#!/usr/bin/env bash
# make console-test: the web console (package console) in a real browser.
# Installs puppeteer-core and axe-core, pinned, into $CONSOLE_DIR/node;
# needs Debian's chromium (make console-tools installs it, pinned, and
# this script fails, never skips, when it is missing); starts a real
# cloisond (local PostgreSQL from scripts/pg.sh, database cloison_console,
# --dev) with its console listener; makes the tenants, tokens, an
# incident, a report and hostile strings the journeys need; and runs
# scripts/console-test.mjs, which drives headless Chromium through the
# privacy officer's, the administrator's and a tenant's journeys, checks
# every page with axe-core, and saves screenshots into $CONSOLE_DIR/shots.
# The node serves two models and has a model directory with a synthetic
# LoRA adapter (cloisonctl model synth --lora), for the per-model
# attestation and a tenant's adapters.
#
# Needs go, node (≥ 18), npm, chromium. CONSOLE_DIR (default .cache/console-test).
set -euo pipefail
cd "$(dirname "$0")/.."
PUPPETEER_CORE_VERSION=24.43.1
AXE_CORE_VERSION=4.14.1
dir=${CONSOLE_DIR:-.cache/console-test}
CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
[ -x "$CHROMIUM" ] || { echo "console-test: chromium is needed (make console-tools installs Debian's, root)" >&2; exit 1; }
command -v node >/dev/null || { echo "console-test: node (≥ 18) is needed" >&2; exit 1; }
command -v npm >/dev/null || { echo "console-test: npm is needed" >&2; exit 1; }
# A fresh state directory every run, as the database is: checkpoints kept
# from an older run would (rightly) refuse the new, smaller log.
rm -rf "$dir/state"
mkdir -p "$dir/bin" "$dir/node" "$dir/state" "$dir/shots"
chmod 700 "$dir/state"
rm -f "$dir"/shots/*.png

go build -o "$dir/bin/cloisond" ./cmd/cloisond
go build -o "$dir/bin/cloisonctl" ./cmd/cloisonctl

# Two models (the context bag under its usual id, and a small "coder"),
# and a model directory holding a synthetic LoRA adapter of coder's that
# the administrator's journey registers for a tenant.
mkdir -p "$dir/models"
[ -s "$dir/models/bag.gguf" ] || "$dir/bin/cloisonctl" model synth --bag "$dir/models/bag.gguf" >/dev/null
[ -s "$dir/models/coder.gguf" ] || "$dir/bin/cloisonctl" model synth --d-model 128 --layers 2 --context 1024 "$dir/models/coder.gguf" >/dev/null
[ -s "$dir/models/support.gguf" ] || "$dir/bin/cloisonctl" model synth --lora "$dir/models/coder.gguf" --rank 8 "$dir/models/support.gguf" >/dev/null

want="puppeteer-core@$PUPPETEER_CORE_VERSION axe-core@$AXE_CORE_VERSION"
have=$(cd "$dir/node" && node -e '
const v = p => { try { return p + "@" + require(process.cwd() + "/node_modules/" + p + "/package.json").version } catch { return "" } };
console.log(["puppeteer-core", "axe-core"].map(v).join(" "))')
if [ "$have" != "$want" ]; then
	echo "== npm install $want into $dir/node"
	(cd "$dir/node" && { [ -f package.json ] || echo '{"private":true,"type":"module"}' > package.json; } &&
		npm install --no-audit --no-fund --save-exact $want >/dev/null)
fi

# The database URLs, as make run derives them (Makefile dburls).
admin=$(scripts/pg.sh)
base=${admin%%\?*}; base=${base%/*}; opts=""; case "$admin" in *\?*) opts="?${admin#*\?}";; esac
hostpart=${base#*://}; hostpart=${hostpart#*@}
admin="$base/cloison_console$opts"; runtime="postgres://cloison_runtime@$hostpart/cloison_console$opts"
psql -q "$base/postgres$opts" -c 'DROP DATABASE IF EXISTS cloison_console WITH (FORCE)' >/dev/null 2>&1
[ -s "$dir/state/db-runtime.password" ] || (umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$dir/state/db-runtime.password")

# An OpenID Connect provider for the console's sign-in (scripts/console-idp.mjs).
IDP_READY="$dir/state/idp-ready"; export IDP_READY
node scripts/console-idp.mjs & idp_pid=$!
for _ in $(seq 1 50); do [ -s "$IDP_READY" ] && break; sleep 0.1; done
[ -s "$IDP_READY" ] || { echo "console-test: the test identity provider did not start" >&2; kill $idp_pid; exit 1; }
idp="http://$(cat "$IDP_READY")"

# A witness (cloisonctl witness) cosigning the log: its key first, its
# port chosen now, started once the log's key is known (below).
wvkey=$("$dir/bin/cloisonctl" witness vkey --create --key "$dir/state/witness.key" --name witness.test/w1)
wport=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')

rm -f "$dir/state/ready" "$dir/state/console-ready"
"$dir/bin/cloisond" --addr 127.0.0.1:0 --grpc-addr '' --metrics-addr '' --database-url "$runtime" --migrate-database-url "$admin" \
	--db-runtime-password-file "$dir/state/db-runtime.password" --db-deployment dev --create-database --dev --dev-tenant dev \
	--model "$dir/models/bag.gguf,id=cloison-context-bag" --model "$dir/models/coder.gguf,id=coder" --model-dir "$dir/models" \
	--state-dir "$dir/state" --ready-file "$dir/state/ready" --console-ready-file "$dir/state/console-ready" \
	--jwks-url "$idp/jwks" --jwt-issuer "$idp" --console-oidc-authorize-url "$idp/authorize" --console-oidc-token-url "$idp/token" \
	--console-oidc-client-id cloison-console --witness "http://127.0.0.1:$wport=$wvkey" --witness-interval 200ms 2>"$dir/cloisond.log" & pid=$!
trap 'kill $pid $idp_pid ${wit_pid:-} 2>/dev/null || true; wait $pid $idp_pid ${wit_pid:-} 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do [ -s "$dir/state/ready" ] && break; kill -0 $pid 2>/dev/null || { tail -20 "$dir/cloisond.log" >&2; exit 1; }; sleep 0.5; done
[ -s "$dir/state/ready" ] || { echo "console-test: cloisond did not become ready" >&2; tail -20 "$dir/cloisond.log" >&2; exit 1; }
addr=$(cat "$dir/state/ready")
console=$(cat "$dir/state/console-ready")
logvkey=$(curl -sf "http://$addr/compliance/v1/tlog/key")
"$dir/bin/cloisonctl" witness --addr "127.0.0.1:$wport" --key "$dir/state/witness.key" --name witness.test/w1 --log "$logvkey" \
	--state "$dir/state/witness.state" 2>"$dir/witness.log" & wit_pid=$!

ctl() { CLOISON_STATE_DIR="$dir/state" "$dir/bin/cloisonctl" --database-url "$admin" "$@"; }
tok() { ctl token issue --tenant "$1" --subject "$2" --scopes "$3" --ttl 1h --state-dir "$dir/state"; }
# Hostile strings a tenant controls: its name and incident contact (as
# its onboarding form would give them) and the text of its report.
ctl tenant create acme --name '<img src=x onerror="window.__xss=1">ACME' --notice-deadline-hours 24 \
	--incident-contact '"><script>window.__xss=2</script>' >/dev/null
officer=$(tok dev officer-claire admin,compliance:read,compliance:write)
administrator=$(tok dev admin-alice admin)
acme_officer=$(tok acme dpo-acme compliance:read)
acme_infer=$(tok acme app-acme infer)
infer_only=$(tok dev app-dev infer)

# A request of acme's, and its report with hostile text: a tenant-reported
# incident under assessment.
rid=$(curl -sf -D - -o /dev/null "http://$addr/v1/chat/completions" -H "Authorization: Bearer $acme_infer" -H 'Content-Type: application/json' \
	-d '{"model":"cloison-context-bag","messages":[{"role":"user","content":"Bonjour"}],"max_tokens":4}' | tr -d '\r' | sed -n 's/^X-Request-Id: //Ip')
[ -n "$rid" ] || { echo "console-test: no request id" >&2; exit 1; }
report=$(curl -sf "http://$addr/v1/reports" -H "Authorization: Bearer $acme_infer" -H 'Content-Type: application/json' \
	-d "{\"request\":\"$rid\",\"reason\":\"foreign-content\",\"foreign_text\":\"<img src=x onerror=window.__xss=4>\",\"details\":\"<script>window.__xss=5</script>\"}")
report_id=$(node -e 'console.log(JSON.parse(process.argv[1]).report)' "$report")

root=$PWD
cp scripts/console-test.mjs "$dir/node/console-test.mjs"
cp console/assets/tlog.js "$dir/node/tlog.js" # its checks, also run against tampered inputs in node
(cd "$dir/node" && CHROMIUM="$CHROMIUM" CONSOLE_URL="http://$console" API_URL="http://$addr" OFFICER_TOKEN="$officer" ADMIN_TOKEN="$administrator" \
	ACME_TOKEN="$acme_officer" INFER_TOKEN="$infer_only" REPORT_ID="$report_id" WITNESS_VKEY="$wvkey" SHOTS="$PWD/../shots" POLICY_DIR="$root/policies/rego" node console-test.mjs)
