#!/usr/bin/env bash
# make lora-check: records llama.cpp's logits (node-llama-cpp, pinned as in
# scripts/peer-bench.sh) on the synthetic base models and LoRA adapters of
# engine/model/testdata/loracheck into engine/model/testdata/llamacpp_lora_logits.json,
# the oracle of TestLlamaCppLoRALogits. Rerun it when the cases change.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_LLAMA_CPP_VERSION=3.22.1
dir=${PEER_DIR:-.cache/peer-bench}
mkdir -p "$dir/node"
command -v node >/dev/null || { echo "lora-check: node (≥ 20) is needed" >&2; exit 1; }
if [ "$(node -p "try{require('$PWD/$dir/node/node_modules/node-llama-cpp/package.json').version}catch{''}")" != "$NODE_LLAMA_CPP_VERSION" ]; then
	echo "== npm install node-llama-cpp@$NODE_LLAMA_CPP_VERSION into $dir/node" >&2
	(cd "$dir/node" && { [ -f package.json ] || echo '{"private":true,"type":"module"}' > package.json; } &&
		npm install --no-audit --no-fund --save-exact "node-llama-cpp@$NODE_LLAMA_CPP_VERSION") >&2
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
go run ./engine/model/testdata/loracheck "$tmp"
cp scripts/lora-check.mjs "$dir/node/lora-check.mjs"
node "$dir/node/lora-check.mjs" "$tmp" > "$tmp/out.json"
mv "$tmp/out.json" engine/model/testdata/llamacpp_lora_logits.json
echo "wrote engine/model/testdata/llamacpp_lora_logits.json" >&2
