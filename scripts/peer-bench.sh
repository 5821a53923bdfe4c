#!/usr/bin/env bash
# make peer-bench: Cloison's CPU forward pass ÷ llama.cpp on synthesized
# GGUF files, 1 and 2 threads, 128- and 2,048-token prompts, measured
# alternately in one run. By default (PEER=native, below) against llama.cpp's
# own llama-bench built natively. PEER=node measures llama.cpp through
# node-llama-cpp (pinned; scripts/peer-bench.mjs) and then, on the F32 file,
# checks the logits at the last prompt token of each prompt length against
# llama.cpp's (within 1e-3, else the run fails): the logits check lives there,
# where that package is exact; its prebuilt binaries understate llama.cpp's
# speed.
#
# Environment: PEER_THREADS (1,2), PEER_PROMPTS (128,2048), PEER_DECODE (63),
# PEER_ROUNDS (3), PEER_REPS (2: repetitions a run on both sides, best kept
# on ours, averaged by llama-bench), PEER_TYPES (f32,f16,q8_0,q4_k; also bf16, q6_k, …: any
# cloisonctl model synth --dtype), PEER_SHAPES (small; also large, below),
# PEER_DIR (.cache/peer-bench),
# PEER_KV (f16: the KV element type of both sides' speed runs, llama.cpp's
# default; f32 also). The logits check runs on F32 KV on both sides.
# PEER=native (the default) measures against llama.cpp's own llama-bench, built
# natively for this CPU from the same pinned source (scripts/llama-native.sh:
# node-llama-cpp's prebuilt binaries understate llama.cpp's speed): per
# model, thread count and prompt length, PEER_ROUNDS rounds alternating which
# side goes first, `cloisonctl bench` (best of two repetitions) against
# `llama-bench -t T -p P -n 0` (prefill) and `llama-bench -t T -p 0
# -n DECODE+1 -d P` (decode with the prompt's P tokens in its KV cache,
# filled untimed: ours decodes after its prompt), both `-ctk KV -ctv KV -r 2
# -o json`, each side keeping its best round. Needs no node; the logits check stays with
# node-llama-cpp (the default mode), where it is exact, and is skipped here.
#
# Run it on an otherwise idle machine: figures taken while other work runs
# are noisy (the alternation shares the load between the sides, it does not
# remove it).
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_LLAMA_CPP_VERSION=3.22.1
dir=${PEER_DIR:-.cache/peer-bench}
mkdir -p "$dir/bin" "$dir/models" "$dir/node"

native=false
case "${PEER:-native}" in
native) native=true; command -v jq >/dev/null || { echo "peer-bench: jq is needed" >&2; exit 1; } ;;
node)
	command -v node >/dev/null || { echo "peer-bench: node (≥ 20) is needed" >&2; exit 1; }
	command -v npm >/dev/null || { echo "peer-bench: npm is needed" >&2; exit 1; } ;;
*) echo "peer-bench: PEER is native (the default) or node" >&2; exit 1 ;;
esac

go build -o "$dir/bin/cloisonctl" ./cmd/cloisonctl
if ! $native && [ "$(node -p "try{require('$PWD/$dir/node/node_modules/node-llama-cpp/package.json').version}catch{''}")" != "$NODE_LLAMA_CPP_VERSION" ]; then
	echo "== npm install node-llama-cpp@$NODE_LLAMA_CPP_VERSION into $dir/node"
	(cd "$dir/node" && { [ -f package.json ] || echo '{"private":true,"type":"module"}' > package.json; } &&
		npm install --no-audit --no-fund --save-exact "node-llama-cpp@$NODE_LLAMA_CPP_VERSION")
fi

# The benchmark models, synthesized, in each type of PEER_TYPES and each
# shape of PEER_SHAPES: small (8 layers, d=768, 12 heads over 4 KV heads,
# FFN 2048, vocabulary 8192) and large (a Qwen2.5-1.5B layer shape: 8
# layers, d=1536, 12 heads of 128 over 2 KV heads, FFN 8960, vocabulary
# 32,000). Every matrix in the type (Q4_K: every matrix Q4_K).
models=()
check=()
IFS=, read -ra types <<< "${PEER_TYPES:-f32,f16,q8_0,q4_k}"
IFS=, read -ra shapes <<< "${PEER_SHAPES:-small}"
for sh in "${shapes[@]}"; do
	case "$sh" in
	small) name=8L-d768; args=(--layers 8 --d-model 768 --heads 12 --kv-heads 4 --ffn 2048 --vocab 8192) ;;
	large) name=8L-d1536-gqa6; args=(--layers 8 --d-model 1536 --heads 12 --kv-heads 2 --ffn 8960 --vocab 32000) ;;
	*) echo "peer-bench: PEER_SHAPES holds small and large, not $sh" >&2; exit 1 ;;
	esac
	for t in "${types[@]}"; do
		f="$dir/models/$name-$t.gguf"
		[ -f "$f" ] || "$dir/bin/cloisonctl" model synth "${args[@]}" --context 16384 --dtype "$t" "$f" >/dev/null
		models+=("$PWD/$f")
		[ "$t" != f32 ] || [ "$sh" != small ] || check+=("$PWD/$f")
	done
done
(IFS=,; echo "== cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | xargs), family $(grep -m1 'cpu family' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | xargs); KV ${PEER_KV:-f16} on both sides; models: ${models[*]}")

if $native; then
	llama=$(scripts/llama-native.sh)
	decode=${PEER_DECODE:-63}; kv=${PEER_KV:-f16}
	IFS=, read -ra threads <<< "${PEER_THREADS:-1,2}"
	IFS=, read -ra prompts <<< "${PEER_PROMPTS:-128,2048}"
	rows=()
	for m in "${models[@]}"; do for t in "${threads[@]}"; do for p in "${prompts[@]}"; do
		best='{"ours":{"prefill":0,"decode":0},"llama_bench":{"prefill":0,"decode":0}}'
		for r in $(seq 1 "${PEER_ROUNDS:-3}"); do
			for s in $( [ $((r % 2)) = 1 ] && echo "ours theirs" || echo "theirs ours"); do
				if [ "$s" = ours ]; then
					v=$("$dir/bin/cloisonctl" bench "$m" --json --reps "${PEER_REPS:-2}" --threads "$t" --prompt "$p" --decode "$decode" --kv-type "$kv" |
						jq -c '{prefill: .results[0].prefill_tok_s, decode: .results[0].decode_tok_s}')
					k=ours
				else
					# Prefill from an empty context; decode with the prompt's
					# tokens already in the KV cache (-d: filled untimed), as
					# ours decodes after its prompt.
					pp=$("$llama/llama-bench" -m "$m" -t "$t" -p "$p" -n 0 -ctk "$kv" -ctv "$kv" -r "${PEER_REPS:-2}" -o json 2>/dev/null | jq '.[0].avg_ts')
					tg=$("$llama/llama-bench" -m "$m" -t "$t" -p 0 -n $((decode + 1)) -d "$p" -ctk "$kv" -ctv "$kv" -r "${PEER_REPS:-2}" -o json 2>/dev/null | jq '.[0].avg_ts')
					v=$(jq -nc --argjson pp "$pp" --argjson tg "$tg" '{prefill: $pp, decode: $tg}')
					k=llama_bench
				fi
				best=$(jq -c --arg k "$k" --argjson v "$v" '.[$k].prefill = ([.[$k].prefill, $v.prefill] | max) | .[$k].decode = ([.[$k].decode, $v.decode] | max)' <<< "$best")
			done
		done
		row=$(jq -c --arg m "$m" --argjson t "$t" --argjson p "$p" --argjson d "$decode" '{model: $m, threads: $t, prompt: $p, decode_steps: $d} + .
			| .prefill_ratio = (.ours.prefill / .llama_bench.prefill) | .decode_ratio = (.ours.decode / .llama_bench.decode)' <<< "$best")
		jq -r '"\(.model | split("/") | last)  threads=\(.threads) prompt=\(.prompt): prefill \(.ours.prefill | round) / \(.llama_bench.prefill | round) tok/s (\(.prefill_ratio * 100 | round / 100)), decode \(.ours.decode | round) / \(.llama_bench.decode | round) tok/s (\(.decode_ratio * 100 | round / 100))"' <<< "$row"
		rows+=("$row")
	done; done; done
	printf '%s\n' "${rows[@]}" | jq -s --arg llama "$(git -C .cache/llama.cpp rev-parse HEAD)" --arg kv "$kv" \
		'{peer: "llama-bench (native)", llama_cpp: $llama, kv_type: $kv, results: .}' > "$dir/peer-bench-native.json"
	echo "== results: $dir/peer-bench-native.json (the logits check runs with PEER=node)"
	exit 0
fi

cp scripts/peer-bench.mjs "$dir/node/peer-bench.mjs"
(IFS=,; cd "$dir/node" && node peer-bench.mjs --cloisonctl "$PWD/../bin/cloisonctl" --models "${models[*]}" \
	--threads "${PEER_THREADS:-1,2}" --prompts "${PEER_PROMPTS:-128,2048}" --decode "${PEER_DECODE:-63}" \
	--rounds "${PEER_ROUNDS:-3}" --kv "${PEER_KV:-f16}" --check-logits "${check[*]}" --json "$PWD/../peer-bench.json")
echo "== results: $dir/peer-bench.json"
