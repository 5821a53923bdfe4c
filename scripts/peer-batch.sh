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
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_LLAMA_CPP_VERSION=3.22.1
dir=${PEER_DIR:-.cache/peer-bench}
mkdir -p "$dir/bin" "$dir/models" "$dir/node"

command -v node >/dev/null || { echo "peer-batch: node (≥ 20) is needed" >&2; exit 1; }
command -v npm >/dev/null || { echo "peer-batch: npm is needed" >&2; exit 1; }

go build -o "$dir/bin/cloisonctl" ./cmd/cloisonctl
if [ "$(node -p "try{require('$PWD/$dir/node/node_modules/node-llama-cpp/package.json').version}catch{''}")" != "$NODE_LLAMA_CPP_VERSION" ]; then
	echo "== npm install node-llama-cpp@$NODE_LLAMA_CPP_VERSION into $dir/node"
	(cd "$dir/node" && { [ -f package.json ] || echo '{"private":true,"type":"module"}' > package.json; } &&
		npm install --no-audit --no-fund --save-exact "node-llama-cpp@$NODE_LLAMA_CPP_VERSION")
fi

models=()
IFS=, read -ra types <<< "${PEER_TYPES:-f16,q8_0,q4_k}"
for t in "${types[@]}"; do
	f="$dir/models/8L-d768-$t.gguf"
	[ -f "$f" ] || "$dir/bin/cloisonctl" model synth --layers 8 --d-model 768 --heads 12 --kv-heads 4 --ffn 2048 \
		--vocab 8192 --context 4096 --dtype "$t" "$f" >/dev/null
	models+=("$PWD/$f")
done
(IFS=,; echo "== cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | xargs); load: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null); models: ${models[*]}")

cp scripts/peer-batch.mjs "$dir/node/peer-batch.mjs"
(IFS=,; cd "$dir/node" && node peer-batch.mjs --cloisonctl "$PWD/../bin/cloisonctl" --models "${models[*]}" \
	--threads "${PEER_THREADS:-1}" --batch "${PEER_BATCH:-16}" --prompt "${PEER_PROMPT:-16}" --decode "${PEER_DECODE:-32}" \
	--rounds "${PEER_ROUNDS:-3}" --kv "${PEER_KV:-f16}" --json "$PWD/../peer-batch.json")
echo "== results: $dir/peer-batch.json"
