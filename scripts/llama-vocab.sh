#!/usr/bin/env bash
# llama-vocab.sh: copy llama.cpp's tokenizer test vocabularies
# (models/ggml-vocab-*.gguf with their .inp/.out vectors) into
# .cache/llama-vocab, where engine/tokenizer's TestLlamaCppVectors reads them.
# The files are 1–16 MB each, too large to commit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$("$root/scripts/llama-src.sh")
dst="$root/.cache/llama-vocab"
mkdir -p "$dst"
for inp in "$src"/models/ggml-vocab-*.gguf.inp; do
  g=${inp%.inp}
  cp -u "$g" "$g.inp" "$g.out" "$dst/"
done
# The Unigram (t5) vocabulary, whose vectors llama.cpp does not ship:
# engine/tokenizer/testdata/llamacpp-ugm-nomic-bert-moe.json holds them.
cp -u "$src/models/ggml-vocab-nomic-bert-moe.gguf" "$dst/"
echo "$dst"
