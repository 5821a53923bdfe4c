package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/migrations"
)

// inserterSessions are the sessions that may still insert into the chain
// and tree tables directly after migration 00025 (the runtime role may
// not): an administrator acting as the owner (SET ROLE), the superuser
// itself, and the superuser in replica mode (the ALWAYS triggers still
// fire). The owner with cloison.sequencing set by hand is audit_sequence's
// marker forged: it must not be trusted outside audit_sequence.
func inserterSessions(owner string) []string {
	return []string{
		"SET ROLE " + owner,
		"SET ROLE " + owner + "; SELECT set_config('cloison.sequencing', 'on', true)",
		"RESET ROLE",
		"SET session_replication_role = replica",
		"SELECT set_config('cloison.sequencing', 'on', true)",
	}
}

// execAs runs q with args on admin in one transaction after session (a
// SET ROLE or a setting), returning q's error.
func execAs(ctx context.Context, admin *pgxpool.Pool, session, q string, args ...any) error {
	return pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, session); err != nil {
			return fmt.Errorf("session %q: %w", session, err)
		}
		_, err := tx.Exec(ctx, q, args...)
		return err
	})
}

// runtimeWriteFailures lists what the runtime role could do to the chain
// and tree tables beyond audit_sequence: an empty list is migration
// 00025's guarantee. Each statement would be refused by the triggers as
// well; the point is that it is refused by privilege (42501), so the chain
// trigger may trust audit_sequence's rows.
func runtimeWriteFailures(ctx context.Context, t *testing.T, db *pgtest.DB) []string {
	rt := db.RuntimePool(t)
	var fails []string
	for _, q := range []string{
		`INSERT INTO audit_events (seq, occurred_at, kind, actor, payload, prev_hash, hash)
			SELECT seq + 1, now(), 'k', 'a', '{}', hash, hash FROM audit_events ORDER BY seq DESC LIMIT 1`,
		`INSERT INTO tlog_tiles (level, n, width, hashes) VALUES (0, 100, 1, decode(repeat('ab', 32), 'hex'))`,
		`INSERT INTO tlog_frontier (size, head_hash, stack) VALUES (1000, decode(repeat('ab', 32), 'hex'), '{}')`,
		`INSERT INTO tlog_hashes (index, hash) VALUES (100000, decode(repeat('ab', 32), 'hex'))`,
		`SELECT audit_append('{1000}', '{2026-01-01}', '{k}', '{t}', '{a}', '{"\\x"}', '{"\\x"}', '{"\\x"}')`,
		"SET ROLE " + db.Roles.Owner,
		"CREATE FUNCTION public.cloison_probe() RETURNS int LANGUAGE sql AS 'SELECT 1'",
	} {
		_, err := rt.Exec(ctx, q)
		if sqlstate(err) != "42501" {
			fails = append(fails, fmt.Sprintf("%s: got %v, want insufficient_privilege", strings.Fields(q)[0:3], err))
		}
	}
	return fails
}

// The runtime role cannot insert into audit_events, tlog_tiles,
// tlog_frontier or tlog_hashes, call audit_append, become the owner or
// create a function the owner's definer functions could reach; on schema
// 00024 it could insert into the three live tables (this test's check
// fails there, shown first).
func TestRuntimeCannotWriteChainOrTree(t *testing.T) {
	ctx := context.Background()
	old := pgtest.NewAt(t, 24)
	appendAll(t, openStore(t, old.RuntimePool(t), t.TempDir(), 1000), requestEvents(0, 3))
	fails := runtimeWriteFailures(ctx, t, old)
	if len(fails) == 0 {
		t.Fatal("on schema 00024 the runtime role wrote nothing: the check cannot fail")
	}
	t.Logf("schema 00024: %s", strings.Join(fails, "; "))
	db := pgtest.New(t)
	appendAll(t, openStore(t, db.RuntimePool(t), t.TempDir(), 1000), requestEvents(0, 3))
	for _, f := range runtimeWriteFailures(ctx, t, db) {
		t.Error(f)
	}
}

// A forged chain (wrong prev_hash, wrong hash, a hash repeated, a seq
// skipped) is refused (CL003) for every session that may still insert,
// including the owner and audit_sequence's marker set by hand; the
// ledger is unchanged and still verifies.
func TestForgedChainRefusedForEveryInserter(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	appendAll(t, s, requestEvents(0, 20))
	head, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	good := make([]audit.Record, 3)
	for i := range good {
		r, err := event("forged", i).Prepare()
		if err != nil {
			t.Fatal(err)
		}
		good[i] = r
	}
	appendArgs(good, head) // chained after head, correctly
	forge := map[string]func(recs []audit.Record){
		"wrong prev_hash": func(recs []audit.Record) { recs[1].PrevHash[0] ^= 1 },
		"wrong hash":      func(recs []audit.Record) { recs[2].Hash[5] ^= 1 },
		"repeated hash": func(recs []audit.Record) {
			recs[1].Hash = recs[0].Hash
			recs[2].PrevHash = recs[1].Hash
		},
		"gap in seq": func(recs []audit.Record) { recs[2].Seq++ },
	}
	admin := db.AdminPool(t)
	for name, f := range forge {
		recs := append([]audit.Record(nil), good...)
		f(recs)
		args := rawArgs(recs)
		for _, session := range inserterSessions(db.Roles.Owner) {
			err := execAs(ctx, admin, session, `INSERT INTO audit_events (seq, occurred_at, kind, tenant, actor, payload, prev_hash, hash)
				SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::bytea[], $8::bytea[])`, args...)
			if sqlstate(err) != "CL003" || !errors.Is(translate(err), ErrChainRejected) {
				t.Errorf("%s; %s: got %v, want CL003 (ErrChainRejected)", name, session, err)
			}
		}
	}
	// A definer function the owner did not mark (audit_integrate's kind)
	// is checked too: the marker, not the owner alone, is trusted.
	recs := append([]audit.Record(nil), good...)
	recs[2].Hash[0] ^= 1
	if err := pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
		for _, q := range []string{"SET ROLE " + db.Roles.Owner,
			`CREATE FUNCTION forge_events(s bigint[], t timestamptz[], k text[], tn text[], a text[], p bytea[], pv bytea[], h bytea[]) RETURNS void
			 LANGUAGE sql SECURITY DEFINER AS 'INSERT INTO audit_events (seq, occurred_at, kind, tenant, actor, payload, prev_hash, hash) SELECT * FROM unnest(s, t, k, tn, a, p, pv, h)'`,
			"RESET ROLE"} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, "SELECT forge_events($1, $2, $3, $4, $5, $6, $7, $8)", rawArgs(recs)...)
		return err
	}); sqlstate(err) != "CL003" {
		t.Errorf("unmarked owner's definer function: got %v, want CL003", err)
	}
	if h, err := s.Head(ctx); err != nil || h != head {
		t.Fatalf("head %+v %v, want %+v", h, err, head)
	}
	appendAll(t, s, requestEvents(20, 5))
	if _, err := s.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
		t.Fatal(err)
	}
}

// rawArgs are recs' columns as they are (no rechaining), for an INSERT
// of unnest($1 .. $8).
func rawArgs(recs []audit.Record) []any {
	n := len(recs)
	seqs, occurred, kinds, tenants, actors := make([]int64, n), make([]any, n), make([]string, n), make([]*string, n), make([]string, n)
	payloads, prevs, hashes := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i, r := range recs {
		seqs[i], occurred[i], kinds[i], actors[i], payloads[i] = int64(r.Seq), r.OccurredAt, string(r.Kind), string(r.Actor), r.Payload
		if r.Tenant != "" {
			tn := string(r.Tenant)
			tenants[i] = &tn
		}
		prevs[i], hashes[i] = append([]byte(nil), r.PrevHash[:]...), append([]byte(nil), r.Hash[:]...)
	}
	return []any{seqs, occurred, kinds, tenants, actors, payloads, prevs, hashes}
}

// tlog_backfill writes tiles only for a ledger with no signed tree, only
// within the ledger, and only with the events' leaf hashes at level 0.
func TestBackfillRefusesForgedTiles(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	appendAll(t, s, requestEvents(0, 10))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	admin := db.AdminPool(t)
	treeSuperuser(t, admin, "DELETE FROM tlog_tiles", "DELETE FROM tlog_frontier", "DELETE FROM tlog_checkpoints")
	rt := db.RuntimePool(t)
	var leaf []byte
	if err := admin.QueryRow(ctx, "SELECT sha256(decode('00', 'hex') || payload) FROM audit_events WHERE seq = 1").Scan(&leaf); err != nil {
		t.Fatal(err)
	}
	ab := make([]byte, 32)
	for i := range ab {
		ab[i] = 0xab
	}
	for _, tc := range []struct {
		name  string
		width int32
		data  []byte
	}{
		{"wrong leaf hash", 1, ab},
		{"past the ledger", 11, make([]byte, 32*11)},
	} {
		_, err := rt.Exec(ctx, backfillSQL, []int32{0}, []int64{0}, []int32{tc.width}, [][]byte{tc.data})
		if sqlstate(err) != "CL006" {
			t.Errorf("%s: got %v, want CL006", tc.name, err)
		}
	}
	if _, err := rt.Exec(ctx, backfillSQL, []int32{0}, []int64{0}, []int32{1}, [][]byte{leaf}); err != nil {
		t.Fatalf("the true first leaf: %v", err)
	}
	treeSuperuser(t, admin, "DELETE FROM tlog_tiles")
	s = openStore(t, rt, t.TempDir(), 1000) // Open backfills the tree
	if _, err := s.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := rt.Exec(ctx, backfillSQL, []int32{0}, []int64{1}, []int32{1}, [][]byte{ab})
	if sqlstate(err) != "CL006" {
		t.Errorf("after a signed note: got %v, want CL006", err)
	}
	if _, err := s.VerifyTree(ctx); err != nil {
		t.Fatal(err)
	}
}

// The owner's definer functions run with a fixed search_path that
// searches pg_temp last, so a temporary table cannot stand in for a
// ledger table.
func TestDefinerFunctionsFixSearchPath(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	rows, err := db.AdminPool(t).Query(ctx, `SELECT p.proname, coalesce(array_to_string(p.proconfig, ','), '')
		FROM pg_proc p WHERE p.prosecdef AND pg_get_userbyid(p.proowner) = $1 ORDER BY 1`, db.Roles.Owner)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	var name, config string
	if _, err := pgx.ForEachRow(rows, []any{&name, &config}, func() error {
		names[name] = true
		if !strings.HasPrefix(config, "search_path=pg_catalog, ") || !strings.HasSuffix(config, ", pg_temp") {
			t.Errorf("%s: config %q, want search_path=pg_catalog, …, pg_temp", name, config)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"audit_sequence", "audit_integrate", "tlog_backfill"} {
		if !names[want] {
			t.Errorf("%s is not SECURITY DEFINER (have %v)", want, names)
		}
	}
	// A temporary audit_staging does not shadow the real one.
	rt := db.RuntimePool(t)
	conn, err := rt.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE audit_staging (id bigint, occurred_at timestamptz, kind text, tenant text, actor text, payload bytea)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO pg_temp.audit_staging VALUES (1, now(), 'k', NULL, 'a', '{}')"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT n FROM audit_integrate(10)").Scan(&n); err != nil || n != 0 {
		t.Errorf("audit_integrate with a temporary audit_staging: n %d, %v; want 0 (the real, empty one)", n, err)
	}
	if _, err := conn.Exec(ctx, "DISCARD TEMP"); err != nil {
		t.Fatal(err)
	}
}

// A ledger written under 00024 (direct, in-transaction and staged appends,
// a signed tree note, rows left staged) migrates through 00025: it
// verifies before and after, appends of every kind continue, and entries
// written before the migration are proven in the new tree, consistent
// with the old note.
func TestMigration25KeepsLedger(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewAt(t, 24)
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	appendAll(t, s, requestEvents(0, 300))
	pool := db.RuntimePool(t)
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { _, err := s.AppendTx(ctx, tx, requestEvents(300, 20)...); return err }); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	oldNote, err := s.SignTree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
		t.Fatalf("verify on 00024: %v", err)
	}
	first := recordAt(t, s, 1)
	for _, e := range requestEvents(320, 30) {
		if _, err := s.Stage(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if applied, err := migrations.UpTo(ctx, db.AdminURL, db.Roles, 25); err != nil || len(applied) == 0 || applied[len(applied)-1] != 25 {
		t.Fatalf("migrate forward: applied %v, %v; want up to 25", applied, err)
	}
	s = openStore(t, pool, t.TempDir(), 1000)
	appendAll(t, s, requestEvents(350, 40))
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { _, err := s.AppendTx(ctx, tx, requestEvents(390, 10)...); return err }); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	cp, err := s.SignTree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys(), Trusted: oldNote})
	if err != nil || res.Events != 400 {
		t.Fatalf("verify after 00025: %+v %v, want 400 events", res, err)
	}
	th, err := s.VerifyTree(ctx)
	if err != nil || th.Size != 400 {
		t.Fatalf("tree after 00025: %+v %v", th, err)
	}
	vkey, _ := s.TreeVerifierKey()
	proof, err := s.InclusionProof(ctx, 1, th.Size)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := audit.VerifyInclusion(cp, vkey, first, proof); err != nil || got.Root != th.Root {
		t.Fatalf("inclusion of seq 1: %+v %v", got, err)
	}
	tp, err := s.ConsistencyProof(ctx, 320, th.Size)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.VerifyConsistency(vkey, oldNote, cp, tp); err != nil {
		t.Fatalf("the 00024 note's tree is not a prefix: %v", err)
	}
	for _, f := range runtimeWriteFailures(ctx, t, db) {
		t.Error(f)
	}
}
