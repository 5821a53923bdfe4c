#!/usr/bin/env bash
# llama-native.sh (make llama-native): build llama.cpp's own llama-bench,
# llama-batched-bench, llama-server and llama-embedding natively for this
# CPU, from the source tree that the pinned node-llama-cpp ships
# (scripts/llama-src.sh puts it into .cache/llama.cpp), and print the
# directory that holds the binaries (messages go to stderr).
#
# The peer of make peer-bench (PEER=native), make peer-serve and make
# peer-embed. A native build (-DGGML_NATIVE=ON: -march=native) runs only on
# the CPU kind it was built on, so the build lives in
# .cache/llama-native/<cpu-key>/, the key naming the vendor, family, model
# and the instruction-set flags ggml's CPU backend chooses kernels by (AVX2,
# FMA, F16C, AVX-512 F/BW/VL/VNNI/BF16, AVX-VNNI, AMX; on arm64 the ASIMD dot
# product, i8mm, SVE): another CPU kind gets its own build, the same kind
# reuses it. CPU only, Release, -DLLAMA_CURL=OFF and -DLLAMA_OPENSSL=OFF (no
# downloads), only the four targets (llama-embedding is one of llama.cpp's
# examples: the examples are configured, only that one is built; a tree
# built before it was added gets it by a reconfigure and that one tool's
# build). cmake, g++ and make come from apt-get when missing (root on
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
base="${LLAMA_NATIVE_DIR:-$root/.cache/llama-native}"
src=$("$root/scripts/llama-src.sh")
rev=$(git -C "$src" rev-parse HEAD)

# ggml's AMX path (Q4/Q8/k-quant weights repacked into AMX tiles) crashes on
# some AMX machines (SIGSEGV in ggml_backend_amx_mul_mat, llama.cpp issue
# 20824, seen here on a virtualized Xeon whose own AMX works): in auto mode
# a build for an AMX CPU runs llama-bench on a small Q8_0 model once, and
# when that crashes the peer is built again without AMX (-mno-amx-*, every
# other native kernel kept) into <cpu-key>-noamx, and says so.
# LLAMA_NATIVE_AMX=off builds that variant directly, on forces AMX.
amx=${LLAMA_NATIVE_AMX:-auto}
case "$key" in *amxint8*) ;; *) amx=none ;; esac
[ "$amx" != auto ] || [ ! -f "$base/$key/.amx-crashes-$rev" ] || amx=off
cflags=
if [ "$amx" = off ]; then key="$key-noamx"; cflags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"; fi
out="$base/$key"
bin="$out/build/bin"
stamp="$out/.built-$rev"
if [ -f "$stamp" ] && [ -x "$bin/llama-bench" ] && [ -x "$bin/llama-server" ] && [ -x "$bin/llama-batched-bench" ] && [ -x "$bin/llama-embedding" ]; then
	[ "$amx" != off ] || log "using the build without AMX ($key): ggml's AMX path crashed here"
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

log "building llama-bench, llama-batched-bench, llama-server and llama-embedding at $rev for $key (many minutes on a small machine)"
mkdir -p "$out"
cmake -S "$src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
	-DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DBUILD_SHARED_LIBS=OFF \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
	-DCMAKE_C_FLAGS="$cflags" -DCMAKE_CXX_FLAGS="$cflags" >&2
cmake --build "$out/build" --config Release -j "${LLAMA_NATIVE_JOBS:-$(nproc)}" --target llama-bench llama-server llama-batched-bench llama-embedding >&2
if [ "$amx" = auto ]; then
	smoke="$out/smoke-q8_0.gguf"
	(cd "$root" && go run ./cmd/cloisonctl model synth --layers 1 --d-model 256 --heads 4 --kv-heads 2 --ffn 256 \
		--vocab 300 --dtype q8_0 "$smoke" >/dev/null)
	if ! "$bin/llama-bench" -m "$smoke" -t 1 -p 32 -n 4 -r 1 >/dev/null 2>&1; then
		log "llama-bench crashed on a Q8_0 model in ggml's AMX path: building again without AMX"
		touch "$out/.amx-crashes-$rev"
		exec "$0"
	fi
fi
{ echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)"; echo "llama.cpp: $rev"; echo "amx: $amx"; } > "$stamp"
echo "$bin"
