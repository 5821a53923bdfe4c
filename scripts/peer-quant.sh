#!/usr/bin/env bash
# Cross-check of the weight types against llama.cpp (node-llama-cpp, pinned
# as in peer-bench.sh): for each type, a synthetic 4-layer model (d 256,
# ffn 512, vocab 512) from cloisonctl model synth; Cloison's logits over 16
# prompt tokens and 24 greedy steps (scripts/peer-quant) against llama.cpp's
# on the same tokens. Fails when a relative logit difference exceeds
# PEER_MAX_REL (0.1: llama.cpp quantizes activations to 8 bits for the
# block types and keeps an F16 KV cache; a wrong block layout gives ≥ 1).
#
# An entry ARCH:TYPE synthesizes that architecture instead: qwen3moe or
# mixtral with 8 experts, of which 2 are routed per token for f32/f16 and
# all 8 for the block types. With top-2 routing, llama.cpp's 8-bit
# activations move some router logits across a near tie and a token takes
# another expert (O(1) logit changes: 0.28 relative measured for MXFP4 and
# Q3_K, 0.017/0.025 with all experts routed), which says nothing about the
# expert weights; routing itself is checked on the float files here and in
# make arch-check.
#
# Environment: PEER_TYPES (f32,q8_0,q4_1,q5_0,q5_1,q2_k,q3_k,q5_k,q5_k_m,mxfp4,
# qwen3moe:f32,qwen3moe:mxfp4,mixtral:q3_k), PEER_DIR (.cache/peer-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_LLAMA_CPP_VERSION=3.22.1
dir=${PEER_DIR:-.cache/peer-bench}
mkdir -p "$dir/bin" "$dir/quant" "$dir/node"
command -v node >/dev/null || { echo "peer-quant: node (≥ 20) is needed" >&2; exit 1; }
go build -o "$dir/bin/cloisonctl" ./cmd/cloisonctl
go build -o "$dir/bin/peer-quant" ./scripts/peer-quant
if [ "$(node -p "try{require('$PWD/$dir/node/node_modules/node-llama-cpp/package.json').version}catch{''}")" != "$NODE_LLAMA_CPP_VERSION" ]; then
	(cd "$dir/node" && { [ -f package.json ] || echo '{"private":true,"type":"module"}' > package.json; } &&
		npm install --no-audit --no-fund --save-exact "node-llama-cpp@$NODE_LLAMA_CPP_VERSION")
fi
cp scripts/peer-quant.mjs "$dir/node/peer-quant.mjs"
IFS=, read -ra types <<< "${PEER_TYPES:-f32,q8_0,q4_1,q5_0,q5_1,q2_k,q3_k,q5_k,q5_k_m,mxfp4,qwen3moe:f32,qwen3moe:mxfp4,mixtral:q3_k}"
rc=0
for entry in "${types[@]}"; do
	arch=llama t=$entry moe=()
	if [[ $entry == *:* ]]; then
		arch=${entry%%:*} t=${entry#*:} moe=(--experts 8 --experts-used 2)
		case $t in f32 | f16) ;; *) moe=(--experts 8 --experts-used 8) ;; esac
	fi
	f="$PWD/$dir/quant/4L-d256-$arch-$t.gguf"
	"$dir/bin/cloisonctl" model synth --arch "$arch" "${moe[@]}" --layers 4 --d-model 256 --heads 4 --kv-heads 2 --ffn 512 \
		--vocab 512 --context 256 --seed 3 --dtype "$t" "$f" >/dev/null
	t=$arch-$t
	"$dir/bin/peer-quant" "$f" 24 > "$dir/quant/$t.json"
	(cd "$dir/node" && node peer-quant.mjs "$f" "$PWD/../quant/$t.json" "${PEER_MAX_REL:-0.1}") || rc=1
done
exit $rc
