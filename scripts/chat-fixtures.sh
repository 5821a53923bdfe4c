#!/usr/bin/env bash
# chat-fixtures.sh: regenerate engine/chat/testdata/hf (llama.cpp's chat
# templates rendered by @huggingface/jinja, the reference renderer) for
# engine/chat's TestHFTemplates. Needs node and npm; run by make chat-fixtures,
# not by make test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$("$root/scripts/llama-src.sh")
cd "$root/scripts/chat-fixtures"
npm ci --silent --no-audit --no-fund >/dev/null
out="$root/engine/chat/testdata/hf"
rm -rf "$out"
TZ=UTC LANG=en_US.UTF-8 node render.mjs "$src/models/templates" "$out"
