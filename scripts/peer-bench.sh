#!/usr/bin/env bash
# make peer-bench: Cloison's CPU forward pass ÷ llama.cpp (node-llama-cpp,
# pinned) on synthesized GGUF files, 1 and 2 threads, 128- and 2,048-token
# prompts, measured alternately in one run (scripts/peer-bench.mjs); then,
# on the F32 file, the logits at the last prompt token of each prompt length
# against llama.cpp's (within 1e-3, else the run fails).
#
# Environment: PEER_THREADS (1,2), PEER_PROMPTS (128,2048), PEER_DECODE (63),
# PEER_ROUNDS (3), PEER_TYPES (f32,f16,q8_0,q4_k), PEER_DIR (.cache/peer-bench),
# PEER_KV (f16: the KV element type of both sides' speed runs, llama.cpp's
# default; f32 also). The logits check runs on F32 KV on both sides.
# Run it on an otherwise idle machine: figures taken while other work runs
# are noisy (the alternation shares the load between the sides, it does not
# remove it).
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_LLAMA_CPP_VERSION=3.22.1
dir=${PEER_DIR:-.cache/peer-bench}
mkdir -p "$dir/bin" "$dir/models" "$dir/node"

command -v node >/dev/null || { echo "peer-bench: node (≥ 20) is needed" >&2; exit 1; }
command -v npm >/dev/null || { echo "peer-bench: npm is needed" >&2; exit 1; }

go build -o "$dir/bin/cloisonctl" ./cmd/cloisonctl
if [ "$(node -p "try{require('$PWD/$dir/node/node_modules/node-llama-cpp/package.json').version}catch{''}")" != "$NODE_LLAMA_CPP_VERSION" ]; then
	echo "== npm install node-llama-cpp@$NODE_LLAMA_CPP_VERSION into $dir/node"
	(cd "$dir/node" && { [ -f package.json ] || echo '{"private":true,"type":"module"}' > package.json; } &&
		npm install --no-audit --no-fund --save-exact "node-llama-cpp@$NODE_LLAMA_CPP_VERSION")
fi

# The benchmark models (small enough for a CPU, shaped like a real GQA
# model): 8 layers, d=768, 12 heads over 4 KV heads, FFN
# 2048, vocabulary 8192, in F32, F16, Q8_0 and Q4_K (every matrix Q4_K).
models=()
check=()
IFS=, read -ra types <<< "${PEER_TYPES:-f32,f16,q8_0,q4_k}"
for t in "${types[@]}"; do
	f="$dir/models/8L-d768-$t.gguf"
	[ -f "$f" ] || "$dir/bin/cloisonctl" model synth --layers 8 --d-model 768 --heads 12 --kv-heads 4 --ffn 2048 \
		--vocab 8192 --context 4096 --dtype "$t" "$f" >/dev/null
	models+=("$PWD/$f")
	[ "$t" != f32 ] || check+=("$PWD/$f")
done
(IFS=,; echo "== cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | xargs), family $(grep -m1 'cpu family' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | xargs); KV ${PEER_KV:-f16} on both sides; models: ${models[*]}")

cp scripts/peer-bench.mjs "$dir/node/peer-bench.mjs"
(IFS=,; cd "$dir/node" && node peer-bench.mjs --cloisonctl "$PWD/../bin/cloisonctl" --models "${models[*]}" \
	--threads "${PEER_THREADS:-1,2}" --prompts "${PEER_PROMPTS:-128,2048}" --decode "${PEER_DECODE:-63}" \
	--rounds "${PEER_ROUNDS:-3}" --kv "${PEER_KV:-f16}" --check-logits "${check[*]}" --json "$PWD/../peer-bench.json")
echo "== results: $dir/peer-bench.json"
