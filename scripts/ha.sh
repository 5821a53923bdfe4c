#!/usr/bin/env bash
# ha.sh — the HA PostgreSQL cluster of `make ha-test` (Patroni, a synchronous
# standby, PgBouncer: no acknowledged event may be lost on failover), then
# the failover test (internal/hatest, build tag hatest) against it.
#
# Debian's patroni, etcd-server and pgbouncer (make ha-tools installs them
# with apt-get at the versions Debian ships) run a local etcd, two PostgreSQL 15 nodes
# under Patroni in synchronous mode (a primary and a synchronous standby)
# and a PgBouncer in transaction mode, all on private ports with their data
# under $HA_DIR (default a fresh temporary directory, removed at the end), as user postgres. The system server
# on 5432 is not touched. Patroni's on_role_change callback points PgBouncer
# at the new primary (rewrites its database line and reloads it).
#
# Usage: scripts/ha.sh direct|pgbouncer [go test flags]
#   sets up a fresh cluster, runs TestFailover with cloisond on the
#   multi-host URL (direct) or behind PgBouncer, and tears it all down.
set -euo pipefail
via="${1:?usage: ha.sh direct|pgbouncer}"; shift
case "$via" in direct|pgbouncer) ;; *) echo "ha.sh: via direct or pgbouncer" >&2; exit 2;; esac

root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${HA_DIR:-}" ]; then dir="$HA_DIR" keep=1; else dir="$(mktemp -d /tmp/cloison-ha.XXXXXX)" keep=; fi
bin=/usr/lib/postgresql/15/bin
etcd_port=52379 etcd_peer=52380
pg_ports=(55501 55502) api_ports=(58001 58002)
bouncer_port=56432
log() { echo "ha.sh: $*" >&2; }
as_pg() { runuser -u postgres -- "$@"; }

[ "$(id -u)" = 0 ] || { log "needs root (the servers run as user postgres through runuser)"; exit 1; }
for c in patroni etcd pgbouncer "$bin/postgres"; do
	command -v "$c" >/dev/null || { log "$c missing: make ha-tools installs Debian's patroni, etcd-server and pgbouncer"; exit 1; }
done
for p in patroni etcd-server pgbouncer postgresql-15; do log "$(dpkg-query -W -f='${Package} ${Version}' "$p")"; done

# spawn PIDFILE CMD...: CMD as user postgres in the background, its own
# pid (not runuser's) in PIDFILE.
pidfiles=()
spawn() {
	local pf="$1"; shift
	runuser -u postgres -- sh -c 'echo $$ >"$0"; exec "$@"' "$pf" "$@" &
	pids+=($!) pidfiles+=("$pf")
}
pids=()
cleanup() {
	# Patroni first (each stops its PostgreSQL, talking to etcd), then etcd.
	local pf
	for pf in "${pidfiles[@]}"; do
		case "$pf" in */patroni.pid) [ -f "$pf" ] && kill "$(cat "$pf")" 2>/dev/null || true ;; esac
	done
	for _ in $(seq 1 20); do
		alive=0
		for pf in "${pidfiles[@]}"; do
			case "$pf" in */patroni.pid) [ -f "$pf" ] && kill -0 "$(cat "$pf")" 2>/dev/null && alive=1 ;; esac
		done
		[ $alive = 0 ] && break
		sleep 1
	done
	for pf in "${pidfiles[@]}"; do [ -f "$pf" ] && kill -KILL "$(cat "$pf")" 2>/dev/null || true; done
	[ -f "$dir/pgbouncer.pid" ] && kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
	for i in 0 1; do
		[ -f "$dir/pg$i/data/postmaster.pid" ] && as_pg "$bin/pg_ctl" -D "$dir/pg$i/data" -m immediate stop >/dev/null 2>&1 || true
	done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	if [ -z "$keep" ]; then rm -rf "$dir"; else log "cluster files kept in $dir"; fi
}
trap cleanup EXIT

[ -z "$keep" ] || rm -rf "$dir"
mkdir -p "$dir"
chown postgres: "$dir"

# etcd (v3 API; Patroni's etcd3 client speaks its gRPC gateway).
spawn "$dir/etcd.pid" etcd --name ha --data-dir "$dir/etcd" \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
	--initial-cluster "ha=http://127.0.0.1:$etcd_peer" >"$dir/etcd.log" 2>&1

# PgBouncer: transaction pooling, trust (the user must be in auth_file).
cat >"$dir/bouncer-db.ini" <<INI
* = host=127.0.0.1 port=${pg_ports[0]}
INI
cat >"$dir/pgbouncer.ini" <<INI
[databases]
%include $dir/bouncer-db.ini
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bouncer_port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
max_client_conn = 200
default_pool_size = 20
server_login_retry = 1
pidfile = $dir/pgbouncer.pid
logfile = $dir/pgbouncer.log
INI
printf '"cloison_runtime" ""\n"postgres" ""\n' >"$dir/userlist.txt"

# on_role_change ACTION ROLE SCOPE (one per node, its port baked in): the
# new primary takes PgBouncer's traffic.
for i in 0 1; do
	mkdir -p "$dir/pg$i"
	cat >"$dir/pg$i/on_role_change.sh" <<SH
#!/bin/sh
[ "\$2" = primary ] || [ "\$2" = master ] || exit 0
echo "* = host=127.0.0.1 port=${pg_ports[$i]}" >"$dir/bouncer-db.ini"
kill -HUP "\$(cat $dir/pgbouncer.pid)" 2>/dev/null || true
SH
	chmod 755 "$dir/pg$i/on_role_change.sh"
done

for i in 0 1; do
	mkdir -p "$dir/pg$i"
	cat >"$dir/pg$i/patroni.yml" <<YML
scope: cloison-ha
name: pg$i
restapi:
  listen: 127.0.0.1:${api_ports[$i]}
  connect_address: 127.0.0.1:${api_ports[$i]}
etcd3:
  hosts: 127.0.0.1:$etcd_port
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 3
    maximum_lag_on_failover: 0
    synchronous_mode: true
    postgresql:
      use_pg_rewind: false
      parameters:
        synchronous_commit: "on"
        max_connections: 200
        wal_level: replica
        hot_standby: "on"
  initdb:
    - encoding: UTF8
    - auth: trust
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:${pg_ports[$i]}
  connect_address: 127.0.0.1:${pg_ports[$i]}
  data_dir: $dir/pg$i/data
  bin_dir: $bin
  pgpass: $dir/pg$i/pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: $dir/pg$i
  callbacks:
    on_role_change: $dir/pg$i/on_role_change.sh
tags:
  nofailover: false
  noloadbalance: false
YML
done
chown -R postgres: "$dir"

for i in 0 1; do
	spawn "$dir/pg$i/patroni.pid" patroni "$dir/pg$i/patroni.yml" >"$dir/pg$i/patroni.log" 2>&1
	[ $i = 0 ] && sleep 3 # pg0 bootstraps first: the first primary
done
as_pg pgbouncer -d "$dir/pgbouncer.ini" >&2

log "waiting for a primary and a synchronous standby"
for _ in $(seq 1 120); do
	if psql "postgres://postgres@127.0.0.1:${pg_ports[0]},127.0.0.1:${pg_ports[1]}/postgres?sslmode=disable&target_session_attrs=read-write" \
		-XtAqc "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'" 2>/dev/null | grep -qx 1; then
		ready=1; break
	fi
	sleep 1
done
[ -n "${ready:-}" ] || { log "no synchronous standby after 120 s"; tail -n 30 "$dir"/pg*/patroni.log >&2; exit 1; }
log "cluster up: $(curl -s "http://127.0.0.1:${api_ports[0]}/cluster" || true)"

export HA_PG_HOSTS="127.0.0.1:${pg_ports[0]},127.0.0.1:${pg_ports[1]}"
export HA_PATRONI="http://127.0.0.1:${api_ports[0]},http://127.0.0.1:${api_ports[1]}"
export HA_VIA="$via" HA_DIR="$dir" HA_BOUNCER="127.0.0.1:$bouncer_port"
cd "$root"
"${GO:-go}" test -tags hatest -count=1 -v -timeout 15m ./internal/hatest/ "$@"
