#!/usr/bin/env bash
# pg.sh — find or start a PostgreSQL server for development, tests and CI,
# and print its admin URL on stdout (messages go to stderr).
#
#   1. $DATABASE_URL, if set and it answers;
#   2. else 127.0.0.1:5432 as user postgres (trust), if it answers;
#   3. else a private cluster under ./.cache/pg from /usr/lib/postgresql/*/bin
#      (port $CLOISON_PG_PORT, default 55432), started (and initialised) here;
#      initdb refuses root, so as root it runs as user postgres;
#   4. else, with no server binaries, `apt-get install -y postgresql` first.
#
# It fails (exit 1) when none of this works: a missing database is never a
# silent skip.
#
# CLOISON_PG_PRIVATE=1 skips steps 1 and 2 (to exercise the private cluster);
# CLOISON_PG_DIR moves the private cluster elsewhere than ./.cache/pg.
#
# Usage: export DATABASE_URL=$(scripts/pg.sh)      scripts/pg.sh stop
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
pgdir="${CLOISON_PG_DIR:-$root/.cache/pg}"
port="${CLOISON_PG_PORT:-55432}"
log() { echo "pg.sh: $*" >&2; }

# answers URL: true when a server accepts a query at URL. Uses psql when
# installed, else the server package's pg_isready, else bash's /dev/tcp.
answers() {
	local url="$1"
	if command -v psql >/dev/null 2>&1; then
		psql "$url" -XtAqc 'SELECT 1' >/dev/null 2>&1
		return
	fi
	local isready
	isready="$(ls -d /usr/lib/postgresql/*/bin/pg_isready 2>/dev/null | sort -V | tail -n1 || true)"
	if [ -n "$isready" ]; then
		"$isready" -q -d "$url" >/dev/null 2>&1
		return
	fi
	local hp="${url#*@}"; hp="${hp%%/*}"
	timeout 2 bash -c "exec 3<>/dev/tcp/${hp%%:*}/${hp##*:}" 2>/dev/null
}

as_owner() { # run a server binary as the cluster's owner
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true; }

if [ "${1:-}" = stop ]; then
	bin="$(bindir)"
	if [ -n "$bin" ] && [ -f "$pgdir/data/PG_VERSION" ]; then as_owner "$bin/pg_ctl" -D "$pgdir/data" -m fast stop >&2 || true; fi
	exit 0
fi

if [ -n "${CLOISON_PG_PRIVATE:-}" ]; then
	:
elif [ -n "${DATABASE_URL:-}" ]; then
	if answers "$DATABASE_URL"; then echo "$DATABASE_URL"; exit 0; fi
	log "DATABASE_URL is set but does not answer"; exit 1
fi

local_url="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
if [ -z "${CLOISON_PG_PRIVATE:-}" ] && answers "$local_url"; then echo "$local_url"; exit 0; fi

private_url="postgres://postgres@127.0.0.1:${port}/postgres?sslmode=disable"
if answers "$private_url"; then echo "$private_url"; exit 0; fi

bin="$(bindir)"
if [ -z "$bin" ]; then
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		log "no PostgreSQL server found and cannot apt-get install it (need root on Debian)"; exit 1
	fi
	log "installing postgresql with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y postgresql >&2 || { apt-get update >&2 && apt-get install -y postgresql >&2; }
	bin="$(bindir)"
	[ -n "$bin" ] || { log "apt-get installed no server binaries"; exit 1; }
fi

mkdir -p "$pgdir"
if [ "$(id -u)" = 0 ]; then
	id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
	chown postgres "$pgdir"
	# The cluster's owner must be able to reach the directory.
	d="$pgdir"; while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d="$(dirname "$d")"; done
fi
if [ ! -f "$pgdir/data/PG_VERSION" ]; then
	log "initialising a private cluster in $pgdir/data"
	as_owner "$bin/initdb" -D "$pgdir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >&2 ||
		as_owner "$bin/initdb" -D "$pgdir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C >&2
fi
log "starting the private cluster on 127.0.0.1:$port"
as_owner "$bin/pg_ctl" -D "$pgdir/data" -l "$pgdir/server.log" -w -t 60 \
	-o "-c listen_addresses=127.0.0.1 -p $port -k $pgdir -c max_connections=200 -c fsync=on -c synchronous_commit=on" start >&2 ||
	{ log "server did not start; see $pgdir/server.log"; tail -n 20 "$pgdir/server.log" >&2 || true; exit 1; }
for _ in $(seq 1 30); do
	if answers "$private_url"; then echo "$private_url"; exit 0; fi
	sleep 1
done
log "private cluster started but does not answer on $port"; exit 1
