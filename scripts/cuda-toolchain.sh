#!/usr/bin/env bash
# cuda-toolchain.sh — fetch the CUDA 11.8 compiler, headers and the libcuda
# stub from Debian bookworm's non-free archive into a private cache, so that
# the CUDA backend (kernels/cuda, build tag `cuda`) compiles on a machine
# without a GPU, a driver or a CUDA install. Nothing is installed system-wide:
# apt runs with a private sources list, package lists and archive directory
# (/etc/apt and dpkg's database are only read), and the .deb files are
# unpacked with dpkg-deb into the cache. Nothing here is ever committed.
#
#   scripts/cuda-toolchain.sh fetch         download + unpack (a no-op when cached)
#   scripts/cuda-toolchain.sh root          print the unpacked tree (after fetch)
#   scripts/cuda-toolchain.sh env           print CGO_CFLAGS/CGO_LDFLAGS exports for `go build -tags cuda`
#   scripts/cuda-toolchain.sh nvcc ARGS…    run nvcc from the tree (host compiler: /usr/bin/gcc)
#   scripts/cuda-toolchain.sh ptxas ARGS…   run ptxas from the tree
#
# Cache: $CLOISON_CUDA_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/cloison-cuda
# (archives/ holds the .deb files, root/ the unpacked tree; delete the
# directory to start over).
#
# Packages (amd64): nvidia-cuda-toolkit (nvcc, cicc, ptxas, libdevice) and,
# from nvidia-cuda-dev, only usr/include and the stubs directory (cuda.h,
# the CUDA runtime headers nvcc includes, and stubs/libcuda.so to link
# against; the rest of that package is ~2.7 GB of static libraries).
set -euo pipefail

cache="${CLOISON_CUDA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cloison-cuda}"
root="$cache/root"
stamp="$root/.cloison-complete"
packages=(nvidia-cuda-toolkit nvidia-cuda-dev)
want_release="11.8" # nvcc release; the committed PTX records it
log() { echo "cuda-toolchain.sh: $*" >&2; }

apt_opts() {
	printf '%s\n' \
		-o "Dir::Etc::SourceList=$cache/sources.list" \
		-o "Dir::Etc::SourceParts=/dev/null" \
		-o "Dir::State::Lists=$cache/lists" \
		-o "Dir::Cache=$cache/apt-cache" \
		-o "Dir::Cache::Archives=$cache/archives" \
		-o "APT::Sandbox::User=$(id -un)" \
		-o "Debug::NoLocking=1"
}

fetch() {
	if [ -f "$stamp" ]; then
		return 0
	fi
	command -v apt-get >/dev/null || { log "apt-get not found (a Debian or Ubuntu host is needed to fetch the toolchain)"; exit 1; }
	command -v dpkg-deb >/dev/null || { log "dpkg-deb not found"; exit 1; }
	[ "$(dpkg --print-architecture 2>/dev/null || echo unknown)" = amd64 ] || { log "only amd64 hosts are supported"; exit 1; }
	mkdir -p "$cache/lists/partial" "$cache/apt-cache" "$cache/archives/partial"
	local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
	[ -f "$keyring" ] || { log "$keyring missing (package debian-archive-keyring)"; exit 1; }
	echo "deb [signed-by=$keyring] http://deb.debian.org/debian bookworm main contrib non-free" >"$cache/sources.list"
	local opts
	mapfile -t opts < <(apt_opts)
	log "apt-get update (private lists under $cache)"
	apt-get "${opts[@]}" -qq update >&2
	local pkg debs=()
	for pkg in "${packages[@]}"; do
		local ver
		ver=$(apt-cache "${opts[@]}" policy "$pkg" | awk '/Candidate:/ {print $2}')
		case "$ver" in
		*"~$want_release".*) ;;
		*) log "$pkg: candidate version '$ver' is not CUDA $want_release"; exit 1 ;;
		esac
		local deb
		deb="$cache/archives/${pkg}_$(echo "$ver" | sed 's/:/%3a/')_amd64.deb"
		if [ ! -s "$deb" ]; then
			log "downloading $pkg $ver"
			(cd "$cache/archives" && apt-get "${opts[@]}" -qq download "$pkg=$ver" >&2)
		fi
		[ -s "$deb" ] || { log "expected $deb after download"; exit 1; }
		debs+=("$deb")
	done
	log "unpacking into $root"
	rm -rf "$root.tmp"
	mkdir -p "$root.tmp"
	dpkg-deb -x "${debs[0]}" "$root.tmp"
	dpkg-deb --fsys-tarfile "${debs[1]}" | tar -x -C "$root.tmp" --wildcards './usr/include/*' './usr/lib/x86_64-linux-gnu/stubs/*'
	[ -x "$root.tmp/usr/lib/nvidia-cuda-toolkit/bin/nvcc" ] && [ -f "$root.tmp/usr/include/cuda.h" ] &&
		[ -f "$root.tmp/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" ] || { log "unpacked tree lacks nvcc, cuda.h or the libcuda stub"; exit 1; }
	rm -rf "$root"
	mv "$root.tmp" "$root"
	du -sh "$cache/archives" "$root" >&2
	date -u +%FT%TZ >"$stamp"
}

need() { [ -f "$stamp" ] || { log "toolchain not fetched: run '$0 fetch' (or make cuda-toolchain)"; exit 1; }; }

# nvcc is Debian's build: it expects its profile under /etc and its tools
# under /usr; --dont-use-profile plus explicit paths make it relocatable.
nvcc_run() {
	need
	PATH="$root/usr/lib/nvidia-cuda-toolkit/bin:$root/usr/bin:$PATH" \
		"$root/usr/lib/nvidia-cuda-toolkit/bin/nvcc" \
		--dont-use-profile --libdevice-directory="$root/usr/lib/nvidia-cuda-toolkit/libdevice" \
		-I"$root/usr/include" -ccbin /usr/bin/gcc -allow-unsupported-compiler "$@"
}

case "${1:-}" in
fetch) fetch ;;
root) need; echo "$root" ;;
env)
	need
	echo "export CGO_CFLAGS='-I$root/usr/include'"
	echo "export CGO_LDFLAGS='-L$root/usr/lib/x86_64-linux-gnu/stubs'"
	;;
nvcc) shift; nvcc_run "$@" ;;
ptxas) shift; need; exec "$root/usr/bin/ptxas" "$@" ;;
*) echo "usage: $0 fetch|root|env|nvcc ARGS…|ptxas ARGS…" >&2; exit 2 ;;
esac
