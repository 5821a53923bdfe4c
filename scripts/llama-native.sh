#!/usr/bin/env bash
# llama-native.sh (make llama-native): build llama.cpp's own llama-bench,
# llama-batched-bench and llama-server natively for this CPU, from the source tree that the pinned
# node-llama-cpp ships (scripts/llama-src.sh puts it into .cache/llama.cpp),
# and print the directory that holds the binaries (messages go to stderr).
#
# The peer of make peer-bench (PEER=native) and make peer-serve. A native
# build (-DGGML_NATIVE=ON: -march=native) runs only on the CPU kind it was
# built on, so the build lives in .cache/llama-native/<cpu-key>/, the key
# naming the vendor, family, model and the instruction-set flags ggml's CPU
# backend chooses kernels by (AVX2, FMA, F16C, AVX-512 F/BW/VL/VNNI/BF16,
# AVX-VNNI, AMX; on arm64 the ASIMD dot product, i8mm, SVE): another CPU kind
# gets its own build, the same kind reuses it. CPU only, Release,
# -DLLAMA_CURL=OFF and -DLLAMA_OPENSSL=OFF (no downloads), only the three
# targets. cmake, g++ and make come from apt-get when missing (root on
# Debian). Idempotent: a no-op once built for this CPU kind and commit.
#
# Environment: LLAMA_NATIVE_JOBS (make's -j; default the CPU count),
# LLAMA_NATIVE_DIR (default .cache/llama-native).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
log() { echo "llama-native: $*" >&2; }

# cpu_key: vendor-family-model plus the flags that change ggml's kernels.
cpu_key() {
	local vendor family model flags f want key
	vendor=$(grep -m1 -E '^(vendor_id|CPU implementer)' /proc/cpuinfo | cut -d: -f2 | xargs || true)
	family=$(grep -m1 -E '^(cpu family|CPU architecture)' /proc/cpuinfo | cut -d: -f2 | xargs || true)
	model=$(grep -m1 -E '^(model|CPU part)[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | xargs || true)
	flags=" $(grep -m1 -E '^(flags|Features)' /proc/cpuinfo | cut -d: -f2) "
	want="avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 avx_vnni amx_tile amx_int8 amx_bf16 asimddp i8mm sve sve2"
	key="$(uname -m)-${vendor:-unknown}-${family:-x}-${model:-x}"
	for f in $want; do
		case "$flags" in *" $f "*) key="$key-${f//_/}" ;; esac
	done
	echo "$key" | tr -c 'A-Za-z0-9_.\n-' '_'
}

key=$(cpu_key)
out="${LLAMA_NATIVE_DIR:-$root/.cache/llama-native}/$key"
bin="$out/build/bin"
src=$("$root/scripts/llama-src.sh")
rev=$(git -C "$src" rev-parse HEAD)
stamp="$out/.built-$rev"
if [ -f "$stamp" ] && [ -x "$bin/llama-bench" ] && [ -x "$bin/llama-server" ] && [ -x "$bin/llama-batched-bench" ]; then
	echo "$bin"; exit 0
fi

need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v make >/dev/null 2>&1 || need+=(make)
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		log "${need[*]} missing and cannot apt-get install them (need root on Debian)"; exit 1
	fi
	log "installing ${need[*]} with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y "${need[@]}" >&2 || { apt-get update >&2 && apt-get install -y "${need[@]}" >&2; }
fi

log "building llama-bench, llama-batched-bench and llama-server at $rev for $key (many minutes on a small machine)"
mkdir -p "$out"
cmake -S "$src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
	-DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DBUILD_SHARED_LIBS=OFF \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON >&2
cmake --build "$out/build" --config Release -j "${LLAMA_NATIVE_JOBS:-$(nproc)}" --target llama-bench llama-server llama-batched-bench >&2
{ echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)"; echo "llama.cpp: $rev"; } > "$stamp"
echo "$bin"
