#!/usr/bin/env bash
# make peer-batch: decode batches, 16 sequences decoded together ÷
# one sequence, Cloison's CPU forward pass (cloisonctl bench --batch 1,16)
# side by side with llama.cpp's (node-llama-cpp, pinned, a context of
# `sequences: 16`), on the synthesized 8-layer d=768 models of make
# peer-bench, measured alternately in one run (scripts/peer-batch.mjs).
#
# Environment: PEER_THREADS (1), PEER_BATCH (16), PEER_PROMPT (16),
# PEER_DECODE (32), PEER_ROUNDS (3), PEER_KV (f16, both sides; or f32), PEER_TYPES (f16,q8_0,q4_k), PEER_DIR
# (.cache/peer-bench: the models and node-llama-cpp install of make
# peer-bench are shared). Run it on an otherwise idle machine.
#
# PEER=native (the default) measures against llama.cpp's own llama-batched-bench, built
# natively for this CPU from the same pinned source (scripts/llama-native.sh),
# instead of node-llama-cpp: per model and thread count, PEER_ROUNDS rounds
# alternating which side goes first, `cloisonctl bench --batch 1,N` (best of
# two repetitions) against `llama-batched-bench -npp PROMPT -ntg DECODE
# -npl 1,N` (its speed_tg: N·DECODE tokens over the decode steps' time),
# each side keeping its best round; writes PEER_DIR/peer-batch-native.json.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_LLAMA_CPP_VERSION=3.22.1
dir=${PEER_DIR:-.cache/peer-bench}
mkdir -p "$dir/bin" "$dir/models" "$dir/node"

native=false
case "${PEER:-native}" in
native) native=true; command -v jq >/dev/null || { echo "peer-batch: jq is needed" >&2; exit 1; } ;;
node)
	command -v node >/dev/null || { echo "peer-batch: node (≥ 20) is needed" >&2; exit 1; }
	command -v npm >/dev/null || { echo "peer-batch: npm is needed" >&2; exit 1; } ;;
*) echo "peer-batch: PEER is native (the default) or node" >&2; exit 1 ;;
esac

go build -o "$dir/bin/cloisonctl" ./cmd/cloisonctl
if ! $native && [ "$(node -p "try{require('$PWD/$dir/node/node_modules/node-llama-cpp/package.json').version}catch{''}")" != "$NODE_LLAMA_CPP_VERSION" ]; then
	echo "== npm install node-llama-cpp@$NODE_LLAMA_CPP_VERSION into $dir/node"
	(cd "$dir/node" && { [ -f package.json ] || echo '{"private":true,"type":"module"}' > package.json; } &&
		npm install --no-audit --no-fund --save-exact "node-llama-cpp@$NODE_LLAMA_CPP_VERSION")
fi

# The files make peer-bench synthesizes, with its context (its 8,192-token
# prompts must fit whichever target made them first).
models=()
IFS=, read -ra types <<< "${PEER_TYPES:-f16,q8_0,q4_k}"
for t in "${types[@]}"; do
	f="$dir/models/8L-d768-$t.gguf"
	[ -f "$f" ] || "$dir/bin/cloisonctl" model synth --layers 8 --d-model 768 --heads 12 --kv-heads 4 --ffn 2048 \
		--vocab 8192 --context 16384 --dtype "$t" "$f" >/dev/null
	models+=("$PWD/$f")
done
(IFS=,; echo "== cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | xargs); load: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null); models: ${models[*]}")

if $native; then
	llama=$(scripts/llama-native.sh)
	n=${PEER_BATCH:-16}; prompt=${PEER_PROMPT:-16}; decode=${PEER_DECODE:-32}; kv=${PEER_KV:-f16}
	IFS=, read -ra threads <<< "${PEER_THREADS:-1}"
	rows=()
	for m in "${models[@]}"; do for t in "${threads[@]}"; do
		best='{"ours":{"one":0,"many":0},"llama_cpp":{"one":0,"many":0}}'
		for r in $(seq 1 "${PEER_ROUNDS:-3}"); do
			for s in $( [ $((r % 2)) = 1 ] && echo "ours theirs" || echo "theirs ours"); do
				if [ "$s" = ours ]; then
					v=$("$dir/bin/cloisonctl" bench "$m" --json --reps 2 --threads "$t" --prompt "$prompt" --decode "$decode" \
						--batch "1,$n" --kv-type "$kv" | jq -c --argjson n "$n" '{one: (.results[] | select(.batch == 1) | .decode_tok_s),
						many: (.results[] | select(.batch == $n) | .decode_tok_s)}')
					k=ours
				else
					v=$("$llama/llama-batched-bench" -m "$m" -c $(( n * (prompt + decode) + 64 )) -b 2048 -ub 512 -npp "$prompt" \
						-ntg "$decode" -npl "1,$n" -t "$t" -tb "$t" -ctk "$kv" -ctv "$kv" --output-format jsonl 2>/dev/null |
						grep '^{' | jq -sc --argjson n "$n" '{one: (.[] | select(.pl == 1) | .speed_tg), many: (.[] | select(.pl == $n) | .speed_tg)}')
					k=llama_cpp
				fi
				best=$(jq -c --arg k "$k" --argjson v "$v" '.[$k].one = ([.[$k].one, $v.one] | max) | .[$k].many = ([.[$k].many, $v.many] | max)' <<< "$best")
			done
		done
		row=$(jq -c --arg m "$m" --argjson t "$t" --argjson p "$prompt" --argjson d "$decode" --argjson n "$n" \
			'{model: $m, threads: $t, prompt: $p, decode_steps: $d, batch: $n} + . | .ours.ratio = (.ours.many / .ours.one)
			| .llama_cpp.ratio = (.llama_cpp.many / .llama_cpp.one) | .many_ratio = (.ours.many / .llama_cpp.many)' <<< "$best")
		jq -r '"\(.model | split("/") | last)  threads=\(.threads): decode tok/s, 1 → \(.batch) sequences: ours \(.ours.one | round) → \(.ours.many | round) (\(.ours.ratio * 100 | round / 100)×), llama.cpp \(.llama_cpp.one | round) → \(.llama_cpp.many | round) (\(.llama_cpp.ratio * 100 | round / 100)×); \(.batch) sequences ours ÷ llama.cpp \(.many_ratio * 100 | round / 100)"' <<< "$row"
		rows+=("$row")
	done; done
	printf '%s\n' "${rows[@]}" | jq -s --arg llama "$(git -C .cache/llama.cpp rev-parse HEAD)" --arg kv "$kv" \
		'{peer: "llama-batched-bench (native)", llama_cpp: $llama, kv_type: $kv, results: .}' > "$dir/peer-batch-native.json"
	echo "== results: $dir/peer-batch-native.json"
	exit 0
fi

cp scripts/peer-batch.mjs "$dir/node/peer-batch.mjs"
(IFS=,; cd "$dir/node" && node peer-batch.mjs --cloisonctl "$PWD/../bin/cloisonctl" --models "${models[*]}" \
	--threads "${PEER_THREADS:-1}" --batch "${PEER_BATCH:-16}" --prompt "${PEER_PROMPT:-16}" --decode "${PEER_DECODE:-32}" \
	--rounds "${PEER_ROUNDS:-3}" --kv "${PEER_KV:-f16}" --json "$PWD/../peer-batch.json")
echo "== results: $dir/peer-batch.json"
