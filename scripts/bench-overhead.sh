#!/usr/bin/env bash
# bench-overhead.sh (make bench-overhead): the platform's overhead — the
# same workload on cloisond (HTTP, JWT, policy, ledger in PostgreSQL) and on
# its engine alone, in process (cloisonctl bench serve --engine: no HTTP,
# auth, policy or ledger), in one run, the two sides alternating
# (docs/benchmarks.md).
#
# cloisond is started as make peer-serve starts it (its own database, a dev
# tenant and token, --max-running OVERHEAD_RUNNING, --max-batch-tokens
# OVERHEAD_BATCH, --threads OVERHEAD_THREADS, --kv-type f16) plus
# --server-timing, so that its side also reports where a request's time went
# (auth, admission, policy, ledger.append, queue, prefill, decode). The
# engine alone gets the same model file and the same engine flags. At each
# concurrency in OVERHEAD_CLIENTS each side runs OVERHEAD_PROMPTS requests
# (at least the clients) of OVERHEAD_INPUT prompt and OVERHEAD_OUTPUT output
# tokens, the same requests on both sides (--seed the concurrency), the side
# that goes first alternating. The last concurrency is the saturating point;
# then both sides get Poisson arrivals at half the engine alone's request
# throughput there (the half-load point, OVERHEAD_HALF_PROMPTS requests).
# Prints the platform ÷ engine ratios (efficiency: output throughput; TTFT
# p50 and p99; TPOT p50) and the platform's breakdown at each point, and
# writes every run and the ratios to OVERHEAD_DIR/bench-overhead.json.
#
# Environment: OVERHEAD_CLIENTS (1,4,16,64), OVERHEAD_PROMPTS (64),
# OVERHEAD_HALF_PROMPTS (the same), OVERHEAD_INPUT (128), OVERHEAD_OUTPUT
# (64), OVERHEAD_THREADS (the CPU count), OVERHEAD_RUNNING (64),
# OVERHEAD_BATCH (1024), OVERHEAD_MODEL_FILE (a GGUF; default one
# synthesized as make peer-serve's: OVERHEAD_DTYPE q4_k, OVERHEAD_LAYERS 8,
# OVERHEAD_DMODEL 768, OVERHEAD_HEADS 12, OVERHEAD_KV_HEADS 4, OVERHEAD_FFN
# 2048, OVERHEAD_VOCAB 8192), OVERHEAD_PROMPT_IDS (97:123),
# OVERHEAD_TIMING (1; 0 starts cloisond without --server-timing: no
# breakdown, not even its few timestamps a request),
# OVERHEAD_DIR (.cache/bench-overhead). Run it on an otherwise idle machine
# for figures to compare.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${OVERHEAD_DIR:-.cache/bench-overhead}
threads=${OVERHEAD_THREADS:-$(nproc)}
running=${OVERHEAD_RUNNING:-64}
batch=${OVERHEAD_BATCH:-1024}
prompts=${OVERHEAD_PROMPTS:-64}
half_prompts=${OVERHEAD_HALF_PROMPTS:-$prompts}
input=${OVERHEAD_INPUT:-128}
output=${OVERHEAD_OUTPUT:-64}
ids=${OVERHEAD_PROMPT_IDS:-97:123}
model=bench-overhead
log() { echo "bench-overhead: $*" >&2; }
command -v jq >/dev/null || { log "jq is needed"; exit 1; }
mkdir -p "$dir/bin" "$dir/models" "$dir/runs"; chmod 700 "$dir"
rm -f "$dir"/runs/*.json

go build -o "$dir/bin/cloisond" ./cmd/cloisond
go build -o "$dir/bin/cloisonctl" ./cmd/cloisonctl

if [ -n "${OVERHEAD_MODEL_FILE:-}" ]; then
	gguf=$(realpath "$OVERHEAD_MODEL_FILE"); shape=$(basename "$gguf" .gguf)
else
	dtype=${OVERHEAD_DTYPE:-q4_k}
	shape="${OVERHEAD_LAYERS:-8}L-d${OVERHEAD_DMODEL:-768}-h${OVERHEAD_HEADS:-12}-kv${OVERHEAD_KV_HEADS:-4}-f${OVERHEAD_FFN:-2048}-v${OVERHEAD_VOCAB:-8192}-$dtype"
	gguf="$PWD/$dir/models/$shape.gguf"
	[ -f "$gguf" ] || "$dir/bin/cloisonctl" model synth --layers "${OVERHEAD_LAYERS:-8}" --d-model "${OVERHEAD_DMODEL:-768}" \
		--heads "${OVERHEAD_HEADS:-12}" --kv-heads "${OVERHEAD_KV_HEADS:-4}" --ffn "${OVERHEAD_FFN:-2048}" --vocab "${OVERHEAD_VOCAB:-8192}" \
		--context 4096 --dtype "$dtype" "$gguf" >/dev/null
fi
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
log "cpu: $cpu; model $shape; $threads threads; max-running $running; max-batch-tokens $batch"

pids=()
cleanup() { local p; for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM

# cloisond as make peer-serve starts it, with --server-timing.
admin=$(scripts/pg.sh); base=${admin%%\?*}; base=${base%/*}; opts=""; case "$admin" in *\?*) opts="?${admin#*\?}";; esac
hostpart=${base#*://}; hostpart=${hostpart#*@}
# One database per OVERHEAD_DIR: its keys live there.
db=cloison_bench_overhead_$(realpath "$dir" | sha256sum | cut -c1-8)
admin="$base/$db$opts"; runtime="postgres://cloison_runtime@$hostpart/$db$opts"
[ -s "$dir/db-runtime.password" ] || (umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$dir/db-runtime.password")
rm -f "$dir/ready"
engine_flags=(--max-running "$running" --max-batch-tokens "$batch" --threads "$threads" --kv-type f16)
"$dir/bin/cloisond" --addr 127.0.0.1:0 --database-url "$runtime" --migrate-database-url "$admin" \
	--db-runtime-password-file "$dir/db-runtime.password" --db-deployment dev --create-database --dev --dev-tenant dev \
	--state-dir "$dir" --ready-file "$dir/ready" "${engine_flags[@]}" $([ "${OVERHEAD_TIMING:-1}" = 0 ] || echo --server-timing) \
	--model "$gguf" --model-name "$model" 2>"$dir/cloisond.log" &
cpid=$!; pids+=($cpid)
for _ in $(seq 1 240); do [ -s "$dir/ready" ] && break; kill -0 "$cpid" 2>/dev/null || { log "cloisond exited: see $dir/cloisond.log"; exit 1; }; sleep 0.5; done
[ -s "$dir/ready" ] || { log "cloisond not ready: see $dir/cloisond.log"; exit 1; }
tok=$("$dir/bin/cloisonctl" --database-url "$admin" token issue --tenant dev --subject bench-overhead --ttl 2h --state-dir "$dir")
url="http://$(cat "$dir/ready")"

# side NAME POINT ARGS…: one bench serve run, the platform over HTTP or the
# engine alone in process (tenant "dev" on both: the engine alone gives it
# the dev tenant's partition).
side() {
	local name=$1 point=$2; shift 2
	log "$name at $point"
	local target=(--base-url "$url" --tenant "dev=$tok")
	[ "$name" = engine ] && target=(--engine "$gguf" --tenant "dev=none" "${engine_flags[@]}")
	"$dir/bin/cloisonctl" bench serve "${target[@]}" --model "$model" --input-len "fixed:$input" --output-len "fixed:$output" \
		--prompt-ids "$ids" --json "$dir/runs/$name-$point.json" "$@" >&2 || [ -s "$dir/runs/$name-$point.json" ] # failed requests: counted in the table
}
pair() { # pair I POINT ARGS…: both sides, the first alternating with I
	local i=$1 point=$2; shift 2
	if [ $((i % 2)) = 0 ]; then side platform "$point" "$@"; side engine "$point" "$@"
	else side engine "$point" "$@"; side platform "$point" "$@"; fi
}
IFS=, read -ra clients <<< "${OVERHEAD_CLIENTS:-1,4,16,64}"
i=0
for c in "${clients[@]}"; do
	pair $i "c$c" --max-concurrency "$c" --num-prompts $((prompts > c ? prompts : c)) --seed "$c"
	i=$((i + 1))
done
sat="c${clients[-1]}"
half=$(jq -r '.request_throughput / 2 | . * 1000 | round / 1000' "$dir/runs/engine-$sat.json")
pair $i half --request-rate "$half" --num-prompts "$half_prompts" --seed 4242

# The ratios, one row per point.
rows=()
for p in "${clients[@]/#/c}" half; do
	rows+=("$(jq -n --arg p "$p" --slurpfile a "$dir/runs/platform-$p.json" --slurpfile b "$dir/runs/engine-$p.json" '
		def r(x; y): if (y // 0) == 0 then null else ((x / y) * 1000 | round) / 1000 end;
		{point: $p, platform: $a[0], engine: $b[0],
		 efficiency: r($a[0].output_throughput; $b[0].output_throughput),
		 ttft_p50: r($a[0].p50_ttft_ms; $b[0].p50_ttft_ms), ttft_p99: r($a[0].p99_ttft_ms; $b[0].p99_ttft_ms),
		 tpot_p50: r($a[0].p50_tpot_ms; $b[0].p50_tpot_ms)}')")
done
printf '%s\n' "${rows[@]}" | jq -s --arg cpu "$cpu" --arg model "$shape" --argjson threads "$threads" --argjson running "$running" \
	--argjson batch "$batch" --argjson prompts "$prompts" --argjson input "$input" --argjson output "$output" \
	--arg sat "$sat" --argjson half "$half" \
	'{cpu: $cpu, model: $model, threads: $threads, max_running: $running, max_batch_tokens: $batch, num_prompts: $prompts,
	  input_len: $input, output_len: $output, saturating_point: $sat, half_load_rate: $half, points: .,
	  efficiency_at_saturation: (.[] | select(.point == $sat) | .efficiency),
	  ttft_p99_ratio_at_half_load: (.[] | select(.point == "half") | .ttft_p99)}' > "$dir/bench-overhead.json"
echo "cpu: $cpu; model $shape; $threads threads; max-running $running; $prompts requests of $input+$output tokens per point"
echo "| point | output tok/s platform / engine | efficiency | TTFT p50 ratio | TTFT p99 ratio | TPOT p50 ratio | failed platform / engine |"
echo "|---|---|---|---|---|---|---|"
jq -r '.points[] | "| \(if .point == "half" then "\(.platform.request_rate) req/s (half load)" else "\(.point | ltrimstr("c")) clients" end) | \(.platform.output_throughput | round) / \(.engine.output_throughput | round) | \(.efficiency) | \(.ttft_p50) | \(.ttft_p99) | \(.tpot_p50) | \(.platform.failed) / \(.engine.failed) |"' "$dir/bench-overhead.json"
echo "(efficiency is platform ÷ engine output throughput, target ≥ 0.9 at saturation ($sat); TTFT ratios platform ÷ engine, target p99 ≤ 1.5 at half load)"
echo
echo "The platform's breakdown, p50 / p99 ms per request (Server-Timing):"
echo "| point | auth | admission | policy | ledger.append | queue | prefill | decode | platform (total − engine) |"
echo "|---|---|---|---|---|---|---|---|---|"
jq -r '.points[] | .point as $p | .platform.breakdown as $b | def s(k): if $b[k] then "\($b[k].p50_ms * 100 | round / 100) / \($b[k].p99_ms * 100 | round / 100)" else "–" end;
	"| \($p) | \(s("auth")) | \(s("admission")) | \(s("policy")) | \(s("ledger.append")) | \(s("queue")) | \(s("prefill")) | \(s("decode")) | \(s("platform")) |"' "$dir/bench-overhead.json"
echo "== results: $dir/bench-overhead.json"
