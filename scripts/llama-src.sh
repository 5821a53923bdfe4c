#!/usr/bin/env bash
# llama-src.sh: put llama.cpp's source tree (the test oracle for chat
# templates and tokenizer vectors) into .cache/llama.cpp and print its path.
# llama.cpp ships inside the npm package node-llama-cpp as a git bundle
# (llama/gitRelease.bundle); the version is pinned so the vectors and
# templates do not move under the tests. Idempotent: a no-op once cached.
set -euo pipefail
NODE_LLAMA_CPP_VERSION=${NODE_LLAMA_CPP_VERSION:-3.22.1}
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/.cache/llama.cpp"
if [ -f "$dir/.cloison-$NODE_LLAMA_CPP_VERSION" ]; then echo "$dir"; exit 0; fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" >/dev/null \
  && tar xzf "node-llama-cpp-$NODE_LLAMA_CPP_VERSION.tgz" package/llama/gitRelease.bundle) >&2
rm -rf "$dir"; mkdir -p "$root/.cache"
git clone -q "$tmp/package/llama/gitRelease.bundle" "$dir" 2>/dev/null
touch "$dir/.cloison-$NODE_LLAMA_CPP_VERSION"
echo "$dir"
