#!/usr/bin/env bash
# peer-serve.sh (make peer-serve): Cloison's server ÷ llama.cpp's
# llama-server, measured as users measure a server (cloisonctl bench serve,
# docs/benchmarks.md), on the same synthesized GGUF and the same threads, at
# 1, 4, 16 and 64 clients, the two sides alternating in one run.
#
# llama-server is built natively for this CPU by scripts/llama-native.sh
# (once per CPU kind) and started with continuous batching, --parallel equal
# to cloisond's --max-running (each slot PEER_CTX tokens of context: --ctx-size
# slots×PEER_CTX), -t and -tb PEER_THREADS, F16 KV (its default). cloisond is
# started as make bench-serve starts it (its own database, a dev tenant and
# token, --max-batch-tokens 1024) with --threads PEER_THREADS and --kv-type
# f16. Both stay up for the whole run; at each concurrency the side that goes
# first alternates, and each side gets PEER_PROMPTS requests (at least as
# many as the clients) of PEER_INPUT prompt and PEER_OUTPUT output tokens
# (lengths enforced with ignore_eos and min_tokens; the same requests on both sides, new ones at each concurrency
# so that no prefix cache serves a prompt again). Prints the table of ratios
# (Cloison ÷ llama-server: output throughput, TTFT p50 and p99, TPOT p50) and
# writes every run's JSON and the ratios to PEER_DIR/peer-serve.json.
#
# Environment: PEER_CLIENTS (1,4,16,64), PEER_PROMPTS (64), PEER_INPUT (128),
# PEER_OUTPUT (64), PEER_THREADS (the CPU count), PEER_RUNNING (64),
# PEER_CTX (512), PEER_DTYPE (q4_k), PEER_LAYERS (8), PEER_DMODEL (768),
# PEER_HEADS (12), PEER_KV_HEADS (4), PEER_FFN (2048), PEER_VOCAB (8192),
# PEER_DIR (.cache/peer-serve). Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${PEER_DIR:-.cache/peer-serve}
threads=${PEER_THREADS:-$(nproc)}
running=${PEER_RUNNING:-64}
ctx=${PEER_CTX:-512}
prompts=${PEER_PROMPTS:-64}
input=${PEER_INPUT:-128}
output=${PEER_OUTPUT:-64}
dtype=${PEER_DTYPE:-q4_k}
model=peer-serve
log() { echo "peer-serve: $*" >&2; }
command -v jq >/dev/null || { log "jq is needed"; exit 1; }
mkdir -p "$dir/bin" "$dir/models" "$dir/runs"; chmod 700 "$dir"
rm -f "$dir"/runs/*.json

llama=$(scripts/llama-native.sh)
go build -o "$dir/bin/cloisond" ./cmd/cloisond
go build -o "$dir/bin/cloisonctl" ./cmd/cloisonctl

shape="${PEER_LAYERS:-8}L-d${PEER_DMODEL:-768}-h${PEER_HEADS:-12}-kv${PEER_KV_HEADS:-4}-f${PEER_FFN:-2048}-v${PEER_VOCAB:-8192}-$dtype"
gguf="$PWD/$dir/models/$shape.gguf"
[ -f "$gguf" ] || "$dir/bin/cloisonctl" model synth --layers "${PEER_LAYERS:-8}" --d-model "${PEER_DMODEL:-768}" \
	--heads "${PEER_HEADS:-12}" --kv-heads "${PEER_KV_HEADS:-4}" --ffn "${PEER_FFN:-2048}" --vocab "${PEER_VOCAB:-8192}" \
	--context 4096 --dtype "$dtype" "$gguf" >/dev/null
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
log "cpu: $cpu; model $shape; $threads threads; $running slots of $ctx tokens"

pids=()
cleanup() { local p; for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM

# llama-server on a free port.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 18089)
"$llama/llama-server" -m "$gguf" -a "$model" --host 127.0.0.1 --port "$port" -t "$threads" -tb "$threads" \
	--parallel "$running" --ctx-size $((running * ctx)) --cont-batching --no-webui 2>"$dir/llama-server.log" &
pids+=($!)
llama_url="http://127.0.0.1:$port"

# cloisond as make bench-serve starts it.
admin=$(scripts/pg.sh); base=${admin%%\?*}; base=${base%/*}; opts=""; case "$admin" in *\?*) opts="?${admin#*\?}";; esac
hostpart=${base#*://}; hostpart=${hostpart#*@}
db=cloison_peer_serve
admin="$base/$db$opts"; runtime="postgres://cloison_runtime@$hostpart/$db$opts"
[ -s "$dir/db-runtime.password" ] || (umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$dir/db-runtime.password")
rm -f "$dir/ready"
"$dir/bin/cloisond" --addr 127.0.0.1:0 --database-url "$runtime" --migrate-database-url "$admin" \
	--db-runtime-password-file "$dir/db-runtime.password" --db-deployment dev --create-database --dev --dev-tenant dev \
	--state-dir "$dir" --ready-file "$dir/ready" --max-running "$running" --max-batch-tokens 1024 \
	--threads "$threads" --kv-type f16 --model "$gguf" --model-name "$model" 2>"$dir/cloisond.log" &
cpid=$!; pids+=($cpid)
for _ in $(seq 1 240); do [ -s "$dir/ready" ] && break; kill -0 "$cpid" 2>/dev/null || { log "cloisond exited: see $dir/cloisond.log"; exit 1; }; sleep 0.5; done
[ -s "$dir/ready" ] || { log "cloisond not ready: see $dir/cloisond.log"; exit 1; }
tok=$("$dir/bin/cloisonctl" --database-url "$admin" token issue --tenant dev --subject peer-serve --ttl 2h --state-dir "$dir")
cloison_url="http://$(cat "$dir/ready")"
for _ in $(seq 1 240); do curl -fsS "$llama_url/health" >/dev/null 2>&1 && break; kill -0 "${pids[0]}" 2>/dev/null || { log "llama-server exited: see $dir/llama-server.log"; exit 1; }; sleep 0.5; done
curl -fsS "$llama_url/health" >/dev/null || { log "llama-server not ready: see $dir/llama-server.log"; exit 1; }

# side NAME URL TOKEN CLIENTS: one bench serve run at a fixed concurrency.
side() {
	log "$1 at $4 clients"
	"$dir/bin/cloisonctl" bench serve --base-url "$2" --api-key "$3" --model "$model" --num-prompts $((prompts > $4 ? prompts : $4)) \
		--max-concurrency "$4" --input-len "fixed:$input" --output-len "fixed:$output" --seed "$4" \
		--json "$dir/runs/$1-$4.json" >&2 || [ -s "$dir/runs/$1-$4.json" ] # failed requests: counted in the table
}
IFS=, read -ra clients <<< "${PEER_CLIENTS:-1,4,16,64}"
i=0
for c in "${clients[@]}"; do
	if [ $((i % 2)) = 0 ]; then side cloison "$cloison_url" "$tok" "$c"; side llama "$llama_url" none "$c"
	else side llama "$llama_url" none "$c"; side cloison "$cloison_url" "$tok" "$c"; fi
	i=$((i + 1))
done

# The ratios, one row per concurrency.
rows=()
for c in "${clients[@]}"; do
	rows+=("$(jq -n --argjson c "$c" --slurpfile a "$dir/runs/cloison-$c.json" --slurpfile b "$dir/runs/llama-$c.json" '
		def r(x; y): if (y // 0) == 0 then null else ((x / y) * 100 | round) / 100 end;
		{clients: $c, cloison: $a[0], llama_server: $b[0],
		 output_throughput: r($a[0].output_throughput; $b[0].output_throughput),
		 ttft_p50: r($a[0].p50_ttft_ms; $b[0].p50_ttft_ms), ttft_p99: r($a[0].p99_ttft_ms; $b[0].p99_ttft_ms),
		 tpot_p50: r($a[0].p50_tpot_ms; $b[0].p50_tpot_ms)}')")
done
printf '%s\n' "${rows[@]}" | jq -s --arg cpu "$cpu" --arg model "$shape" --argjson threads "$threads" --argjson slots "$running" \
	--argjson ctx "$ctx" --argjson prompts "$prompts" --argjson input "$input" --argjson output "$output" \
	--arg llama "$(git -C .cache/llama.cpp rev-parse HEAD)" \
	'{cpu: $cpu, model: $model, threads: $threads, slots: $slots, slot_context: $ctx, num_prompts: $prompts,
	  input_len: $input, output_len: $output, llama_cpp: $llama, points: .}' > "$dir/peer-serve.json"
echo "cpu: $cpu; model $shape; $threads threads; $running slots; $prompts requests of $input+$output tokens per point"
echo "| clients | output tok/s ours / llama-server | ratio | TTFT p50 ratio | TTFT p99 ratio | TPOT p50 ratio | failed ours / theirs |"
echo "|---|---|---|---|---|---|---|"
jq -r '.points[] | "| \(.clients) | \(.cloison.output_throughput | round) / \(.llama_server.output_throughput | round) | \(.output_throughput) | \(.ttft_p50) | \(.ttft_p99) | \(.tpot_p50) | \(.cloison.failed) / \(.llama_server.failed) |"' "$dir/peer-serve.json"
echo "(ratios are Cloison ÷ llama-server: above 1 is better for throughput, below 1 better for TTFT and TPOT)"
echo "== results: $dir/peer-serve.json"
