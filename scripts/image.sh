#!/usr/bin/env bash
# image.sh — build the Cloison OCI image offline with buildah, FROM scratch:
# the static bin/cloisond and bin/cloisonctl (make binaries), a passwd/group
# naming the non-root user 65532 (cloison), /models as a volume, /var/lib/cloison
# (state) owned by that user, no shell and no other file. Then, where podman
# can run containers here, `podman run --rm IMAGE --version` must print the
# version the image's label carries.
#
# Usage: scripts/image.sh IMAGE VERSION       (make image does this)
set -euo pipefail
image="${1:?image name}"; version="${2:?version}"
root="$(cd "$(dirname "$0")/.." && pwd)"; cd "$root"
log() { echo "image.sh: $*" >&2; }
for b in cloisond cloisonctl; do
	[ -x "bin/$b" ] || { log "bin/$b missing: run make binaries"; exit 1; }
	file "bin/$b" 2>/dev/null | grep -q 'statically linked' || { log "bin/$b is not static (CGO_ENABLED=0)"; exit 1; }
done
stage="$(mktemp -d)"; trap 'rm -rf "$stage"; [ -n "${ctr:-}" ] && buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
mkdir -p "$stage/etc" "$stage/models" "$stage/var/lib/cloison" "$stage/tmp"
echo 'cloison:x:65532:65532:cloison:/var/lib/cloison:/nonexistent' > "$stage/etc/passwd"
echo 'cloison:x:65532:' > "$stage/etc/group"
chmod 1777 "$stage/tmp"; chmod 0700 "$stage/var/lib/cloison"
cp bin/cloisond bin/cloisonctl "$stage/"

ctr="$(buildah from scratch)"
buildah copy --quiet "$ctr" "$stage/etc" /etc >/dev/null
buildah copy --quiet "$ctr" "$stage/tmp" /tmp >/dev/null
buildah copy --quiet --chown 65532:65532 "$ctr" "$stage/models" /models >/dev/null
buildah copy --quiet --chown 65532:65532 "$ctr" "$stage/var/lib/cloison" /var/lib/cloison >/dev/null
buildah copy --quiet "$ctr" "$stage/cloisond" /cloisond >/dev/null
buildah copy --quiet "$ctr" "$stage/cloisonctl" /cloisonctl >/dev/null
buildah config \
	--user 65532:65532 \
	--workingdir /var/lib/cloison \
	--volume /models --volume /var/lib/cloison \
	--entrypoint '["/cloisond"]' --cmd '' \
	--env CLOISON_STATE_DIR=/var/lib/cloison \
	--env CLOISON_ADDR=0.0.0.0:8080 --env CLOISON_GRPC_ADDR=0.0.0.0:9090 \
	--port 8080 --port 9090 \
	--label org.opencontainers.image.title=cloison \
	--label org.opencontainers.image.version="$version" \
	--label org.opencontainers.image.revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
	--label org.opencontainers.image.source=https://github.com/cloison/cloison \
	"$ctr"
buildah commit --quiet --rm "$ctr" "$image" >/dev/null; ctr=""
log "built $image (version $version)"

# Checks on the built image: what it holds, its user, its label.

user="$(buildah inspect --format '{{.OCIv1.Config.User}}' "$image")"
label="$(buildah inspect --format '{{index .OCIv1.Config.Labels "org.opencontainers.image.version"}}' "$image")"
[ "$user" = "65532:65532" ] || { log "user is $user, want 65532:65532"; exit 1; }
[ "$label" = "$version" ] || { log "version label is $label, want $version"; exit 1; }
log "user $user, label org.opencontainers.image.version=$label"

if command -v podman >/dev/null 2>&1; then
	if out="$(podman run --rm --network none "$image" --version 2>&1)"; then
		echo "$out"
		case "$out" in "cloisond $version "*) ;; *) log "podman run --version printed: $out"; exit 1;; esac
		out="$(podman run --rm --network none --entrypoint /cloisonctl "$image" --version 2>&1)"; echo "$out"
		case "$out" in "cloisonctl $version "*) ;; *) log "cloisonctl --version printed: $out"; exit 1;; esac
		if podman run --rm --network none --entrypoint /bin/sh "$image" -c true >/dev/null 2>&1; then log "the image has a shell"; exit 1; fi
		log "podman run: ok; no /bin/sh in the image"; PODMAN_OK=1
	else
		log "podman cannot run containers on this machine (not a failure of the image): $out"
		podman_failed=1
	fi
fi
# Without podman (or where it cannot run containers): the image's own files,
# mounted, and its cloisond run from there.
if [ -z "${PODMAN_OK:-}" ] && { [ -n "${podman_failed:-}" ] || ! command -v podman >/dev/null 2>&1; }; then
	c="$(buildah from "$image")"
	m="$(buildah mount "$c")"
	listing="$(cd "$m" && find . -mindepth 1 | sort | tr '\n' ' ')"
	out="$("$m/cloisond" --version 2>&1)" || true
	buildah umount "$c" >/dev/null; buildah rm "$c" >/dev/null
	log "image files: $listing"
	echo "$out"
	case "$out" in "cloisond $version "*) ;; *) log "the image's cloisond --version printed: $out"; exit 1;; esac
	case " $listing " in *" ./bin"*|*" ./bin/sh "*) log "the image has a /bin"; exit 1;; esac
	log "ran the image's /cloisond from its mounted root instead: ok"
fi
