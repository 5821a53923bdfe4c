#!/usr/bin/env bash
# make encoder-check: records llama.cpp's embeddings and rank scores
# (node-llama-cpp, pinned as in scripts/arch-check.sh) on the synthetic
# GGUF files of engine/model/testdata/encodercheck (BERT-family encoders,
# qwen3 decoder rerankers, a last-token-pooling qwen3 with add_eos_token) into
# engine/model/testdata/llamacpp_encoders.json, the oracle of
# TestLlamaCppEncoders. Rerun it when the cases change.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_LLAMA_CPP_VERSION=3.22.1
dir=${PEER_DIR:-.cache/peer-bench}
mkdir -p "$dir/node"
command -v node >/dev/null || { echo "encoder-check: node (≥ 20) is needed" >&2; exit 1; }
if [ "$(node -p "try{require('$PWD/$dir/node/node_modules/node-llama-cpp/package.json').version}catch{''}")" != "$NODE_LLAMA_CPP_VERSION" ]; then
	echo "== npm install node-llama-cpp@$NODE_LLAMA_CPP_VERSION into $dir/node" >&2
	(cd "$dir/node" && { [ -f package.json ] || echo '{"private":true,"type":"module"}' > package.json; } &&
		npm install --no-audit --no-fund --save-exact "node-llama-cpp@$NODE_LLAMA_CPP_VERSION") >&2
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
go run ./engine/model/testdata/encodercheck "$tmp"
cp scripts/encoder-check.mjs "$dir/node/encoder-check.mjs"
node "$dir/node/encoder-check.mjs" "$tmp" > "$tmp/out.json"
mv "$tmp/out.json" engine/model/testdata/llamacpp_encoders.json
echo "wrote engine/model/testdata/llamacpp_encoders.json" >&2
