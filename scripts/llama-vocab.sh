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
echo "$dst"
