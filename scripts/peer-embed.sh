#!/usr/bin/env bash
# peer-embed.sh (make peer-embed): Cloison's embeddings per second ÷
# llama.cpp's, on the same synthesized encoder GGUF, the same inputs and the
# same threads, the two sides alternating in one run.
#
# The models are MiniLM-L6-shaped (6 layers, d 384, 12 heads, FFN 1536,
# context 512, mean pooling; BenchmarkEncoderEmbed's shape), written by
# cloisonctl model synth: bert with Q8_0 and F16 weights and nomic-bert
# (RoPE, SwiGLU) with Q8_0. The inputs are one text file of PEER_INPUTS lines
# of PEER_TOKENS-2 whole words of the synthetic WordPiece vocabulary, so each
# line is exactly PEER_TOKENS tokens with [CLS] and [SEP] on both sides
# (checked: cloisonctl's --tokens and --inputs refuse any other count, and
# llama.cpp's count of evaluated tokens must be inputs × tokens).
#
# Ours: cloisonctl bench embed FILE --text INPUTS --threads T --reps 2 (the
# whole batch in one forward step, pooling and normalisation included; the
# best of the two, the first warming up). Theirs: llama.cpp's llama-embedding
# (built natively for this CPU by scripts/llama-native.sh) -f INPUTS
# --embd-normalize 2 -t T -tb T at each batch size B of PEER_LLAMA_BATCHES
# (-c = -b = -ub = B, -np B/PEER_TOKENS: llama-embedding forces -ub = -b for
# a non-causal model and packs as many whole inputs as fit into each batch;
# a batch of 8192 tokens attends over all 8192 positions under a mask, a
# smaller one over fewer), over the inputs three times: timed by its
# log's timestamps (it logs each batch before its llama_decode) over the
# second copy, from the batch that starts it to the batch that starts the
# third (the encode calls and the normalisation: no load, no warm-up, no
# printing; its "prompt eval time" reads 0 for an encoder here), its best
# batch size kept (PEER_INPUTS must be a multiple of B/PEER_TOKENS). Each
# round runs every (model, threads) point on both sides, the side that goes
# first alternating; each side's best over PEER_ROUNDS rounds is kept.
# Prints the table of ratios (ours ÷ theirs, above 1 is faster) and writes
# every run and the ratios to PEER_DIR/peer-embed.json.
#
# Environment: PEER_ROUNDS (3), PEER_THREADS (1,2), PEER_INPUTS (64),
# PEER_TOKENS (128), PEER_MODELS (bert-q8_0,bert-f16,nomic-bert-q8_0),
# PEER_LLAMA_BATCHES (1024,8192), PEER_DIR (.cache/peer-embed). Run it on an
# otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${PEER_DIR:-.cache/peer-embed}
rounds=${PEER_ROUNDS:-3}
inputs=${PEER_INPUTS:-64}
tokens=${PEER_TOKENS:-128}
IFS=, read -ra threads <<< "${PEER_THREADS:-1,2}"
IFS=, read -ra models <<< "${PEER_MODELS:-bert-q8_0,bert-f16,nomic-bert-q8_0}"
IFS=, read -ra batches <<< "${PEER_LLAMA_BATCHES:-1024,8192}"
log() { echo "peer-embed: $*" >&2; }
command -v jq >/dev/null || { log "jq is needed"; exit 1; }
[ "$tokens" -ge 3 ] || { log "PEER_TOKENS must be at least 3"; exit 1; }
for b in "${batches[@]}"; do
	[ "$b" -ge "$tokens" ] && [ $((inputs % (b / tokens))) = 0 ] || { log "PEER_LLAMA_BATCHES: $b must hold k inputs, PEER_INPUTS a multiple of k"; exit 1; }
done
mkdir -p "$dir/bin" "$dir/models" "$dir/runs"
rm -f "$dir"/runs/*

llama=$(scripts/llama-native.sh)
go build -o "$dir/bin/cloisonctl" ./cmd/cloisonctl

# The inputs: whole words of synth.BertVocab (one token each), chosen by a
# fixed LCG so that every run reads the same file.
text="$dir/inputs-$inputs-$tokens.txt"
awk -v n="$inputs" -v w=$((tokens - 2)) 'BEGIN {
	split("the of and to in is was for on with as by at it from that this are be or an which not have has what how who cat dog sat mat paris france capital city river water tree hello world model tenant vector search query document rank score", v, " ")
	s = 12345
	for (i = 0; i < n; i++) { line = ""
		for (j = 0; j < w; j++) { s = (s * 69069 + 1) % 4294967296; line = line (j ? " " : "") v[1 + int(s / 65536) % length(v)] }
		print line }
}' > "$text"
text3="$dir/inputs-$inputs-$tokens-x3.txt"
cat "$text" "$text" "$text" > "$text3"

for m in "${models[@]}"; do
	case "$m" in
	bert-q8_0 | bert-f16 | nomic-bert-q8_0 | nomic-bert-f16) ;;
	*) log "PEER_MODELS: $m is not bert-q8_0, bert-f16, nomic-bert-q8_0 or nomic-bert-f16"; exit 1 ;;
	esac
	[ -f "$dir/models/$m.gguf" ] || "$dir/bin/cloisonctl" model synth --arch "${m%-*}" --layers 6 --d-model 384 --heads 12 \
		--ffn 1536 --context 512 --pooling 1 --dtype "${m##*-}" "$dir/models/$m.gguf" >/dev/null
done
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) CPUs"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
log "cpu: $cpu; load average $load0; $inputs inputs of $tokens tokens; threads ${threads[*]}; $rounds rounds"

# ours MODEL THREADS ROUND: one cloisonctl bench embed run.
ours() {
	local out="$dir/runs/ours-$1-t$2-r$3.json"
	"$dir/bin/cloisonctl" bench embed "$dir/models/$1.gguf" --text "$text" --inputs "$inputs" --tokens "$tokens" \
		--threads "$2" --reps 2 --json > "$out"
	jq -e --argjson n "$inputs" '.results[0].embeddings == $n' "$out" >/dev/null || { log "ours $1: not $inputs embeddings"; exit 1; }
}
# theirs MODEL THREADS ROUND: llama-embedding at every batch size.
theirs() {
	local b out logf ms n
	for b in "${batches[@]}"; do
		out="$dir/runs/llama-$1-t$2-b$b-r$3.json"; logf="$dir/runs/llama-$1-t$2-b$b-r$3.log"
		"$llama/llama-embedding" -m "$dir/models/$1.gguf" -f "$text3" --embd-normalize 2 -c "$b" -b "$b" -ub "$b" \
			-np $((b / tokens)) -t "$2" -tb "$2" >/dev/null 2>"$logf" || { log "llama-embedding failed: see $logf"; exit 1; }
		# Its log lines carry their time (minutes.seconds.ms.µs), and it logs
		# "batch_decode: n_tokens = N" before each batch's llama_decode: the
		# second copy of the inputs runs from the batch that starts at
		# inputs × tokens to the one that starts at twice that.
		read -r ms n < <(awk -v w=$((inputs * tokens)) '/ batch_decode: n_tokens = / {
				split($1, a, "."); t = ((a[1] * 60 + a[2]) * 1000 + a[3]) * 1000 + a[4]
				if (c == w) t0 = t; if (c == 2 * w) t1 = t; c += $6 }
			END { if (t0 && t1) printf "%.3f %d\n", (t1 - t0) / 1000, w; else print 0, 0 }' "$logf")
		[ "$n" = $((inputs * tokens)) ] || { log "llama-embedding $1 -b $b: no batch boundary at $((inputs * tokens)) and $((2 * inputs * tokens)) tokens: see $logf"; exit 1; }
		jq -n --argjson ms "$ms" --argjson b "$b" --argjson e "$inputs" \
			'{batch: $b, embeddings: $e, ms: $ms, embeddings_s: ($e / ($ms / 1000))}' > "$out"
	done
}
i=0
for r in $(seq 1 "$rounds"); do
	for m in "${models[@]}"; do
		for t in "${threads[@]}"; do
			log "round $r: $m at $t threads"
			if [ $((i % 2)) = 0 ]; then ours "$m" "$t" "$r"; theirs "$m" "$t" "$r"
			else theirs "$m" "$t" "$r"; ours "$m" "$t" "$r"; fi
			i=$((i + 1))
		done
	done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

# Each side's best per (model, threads), and the ratio.
rows=()
for m in "${models[@]}"; do
	for t in "${threads[@]}"; do
		rows+=("$(jq -n --arg m "$m" --argjson t "$t" \
			--slurpfile o <(cat "$dir"/runs/ours-"$m"-t"$t"-r*.json) --slurpfile l <(cat "$dir"/runs/llama-"$m"-t"$t"-b*-r*.json) '
			($o | map(.results[0].embeddings_s)) as $os | ($l | max_by(.embeddings_s)) as $lb |
			{model: $m, threads: $t, ours_embeddings_s: ($os | max), llama_embeddings_s: $lb.embeddings_s,
			 llama_best_batch: $lb.batch, ratio: ((($os | max) / $lb.embeddings_s * 100 | round) / 100),
			 ours_runs: $os, ours_cpu_runs: ($o | map(.results[0].embeddings_cpu_s)),
			 llama_runs: ($l | map({batch, embeddings_s}))}')")
	done
done
printf '%s\n' "${rows[@]}" | jq -s --arg cpu "$cpu" --arg load0 "$load0" --arg load1 "$load1" --argjson rounds "$rounds" \
	--argjson inputs "$inputs" --argjson tokens "$tokens" --arg llama "$(git -C "$(scripts/llama-src.sh)" rev-parse HEAD)" \
	'{cpu: $cpu, load_average_before: $load0, load_average_after: $load1, rounds: $rounds, inputs: $inputs,
	  tokens: $tokens, shape: "6 layers, d 384, 12 heads, FFN 1536 (MiniLM-L6)", llama_cpp: $llama, points: .}' > "$dir/peer-embed.json"
echo "cpu: $cpu; load average $load0 before, $load1 after; $inputs inputs of $tokens tokens; best of $rounds rounds"
echo "| model | threads | embeddings/s ours | llama-embedding (best -b) | ours ÷ theirs |"
echo "|---|---|---|---|---|"
jq -r '.points[] | "| \(.model) | \(.threads) | \(.ours_embeddings_s * 10 | round / 10) | \(.llama_embeddings_s * 10 | round / 10) (\(.llama_best_batch)) | \(.ratio) |"' "$dir/peer-embed.json"
echo "== results: $dir/peer-embed.json"
