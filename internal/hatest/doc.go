// Package hatest holds the HA PostgreSQL failover test of `make ha-test`,
// built only with the build tag hatest and run by
// scripts/ha.sh, which sets up the cluster it needs: a local etcd, a
// primary and a synchronous standby under Patroni, and PgBouncer in
// transaction mode (see deploy/README.md, "HA PostgreSQL").
//
// TestFailover starts cloisond (built from the tree) on the cluster — the
// multi-host URL with target_session_attrs=read-write (HA_VIA=direct) or
// PgBouncer (HA_VIA=pgbouncer) — drives completions from several clients,
// SIGKILLs the primary (its Patroni and every PostgreSQL process of it, as
// a lost machine) and keeps driving until service resumes. It then asserts:
//
//   - every request answered 200 has its request.completed entry in the
//     new primary's ledger (request ids collected client-side): no
//     acknowledged event was lost;
//   - every other answer was a 503 (unavailable), never a 200 without a
//     record and never another status;
//   - service resumed (the first 200 after the kill) within
//     resumeBudget, and the ledger verifies (cloisonctl audit verify).
//
// The figures (failover time, 503 count, lost events) are logged.
package hatest
