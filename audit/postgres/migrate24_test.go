package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/migrations"
)

// legacyLedger writes n events on a database migrated to before 00024 the
// way the Stores of that schema did, through its own functions: half
// sequenced directly (audit_sequence: AppendTx, the register), half staged
// and integrated (audit_integrate), whose 00012 tree is tlog_hashes. It
// signs a tree note over the tree read from tlog_hashes, then stages
// staged more rows left unintegrated. It returns the first record and the
// note.
func legacyLedger(t *testing.T, db *pgtest.DB, n, staged int) (audit.Record, []byte) {
	t.Helper()
	ctx := context.Background()
	pool := db.RuntimePool(t)
	var first audit.Record
	stage := func(from, k int) {
		var at []time.Time
		var kinds, actors []string
		var tenants []*string
		var payloads [][]byte
		for i := from; i < from+k; i++ {
			r, err := event("legacy", i).Prepare()
			if err != nil {
				t.Fatal(err)
			}
			tn := string(r.Tenant)
			at, kinds, tenants, actors, payloads = append(at, r.OccurredAt), append(kinds, string(r.Kind)),
				append(tenants, &tn), append(actors, string(r.Actor)), append(payloads, r.Payload)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO audit_staging (occurred_at, kind, tenant, actor, payload)
			SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::bytea[])`, at, kinds, tenants, actors, payloads); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n/2; i += 100 {
		recs := make([]audit.Record, min(100, n/2-i))
		for j := range recs {
			r, err := event("legacy", i+j).Prepare()
			if err != nil {
				t.Fatal(err)
			}
			recs[j] = r
		}
		if err := sequence(ctx, pool, recs); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = recs[0]
		}
	}
	for i := n / 2; i < n; i += 97 {
		stage(i, min(97, n-i))
		if _, err := pool.Exec(ctx, "SELECT * FROM audit_integrate(1000)"); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := pool.Query(ctx, "SELECT index, hash FROM tlog_hashes")
	if err != nil {
		t.Fatal(err)
	}
	mem := memHashes{}
	for rows.Next() {
		var x int64
		var h []byte
		if err := rows.Scan(&x, &h); err != nil {
			t.Fatal(err)
		}
		mem[x] = tlog.Hash(h)
	}
	rows.Close()
	if int64(len(mem)) != tlog.StoredHashCount(int64(n)) {
		t.Fatalf("legacy ledger: %d stored hashes, want %d", len(mem), tlog.StoredHashCount(int64(n)))
	}
	root, err := tlog.TreeHash(int64(n), mem)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := audit.TreeSigner("test-ledger", testKey)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := audit.SignTreeHead(signer, audit.TreeHead{Origin: "test-ledger", Size: uint64(n), Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO tlog_checkpoints (size, root, signed_at, note) VALUES ($1, $2, $3, $4)",
		int64(n), root[:], time.Now(), string(msg)); err != nil {
		t.Fatal(err)
	}
	stage(n, staged)
	return first, msg
}

// checkMigratedLedger opens a Store on a ledger legacyLedger wrote (n
// events, staged more) and migrated through 00024: the staged rows and 300
// new events are sequenced into tiles, the whole ledger verifies against
// the legacy note (the tree it signed is a prefix of the tiles' tree), the
// tiles hold exactly the entries' hashes, the first entry is proven in
// the new tree, the legacy note's tree is proven consistent with it, and
// tlog_hashes is frozen.
func checkMigratedLedger(t *testing.T, db *pgtest.DB, first audit.Record, legacyNote []byte, n, staged int) {
	t.Helper()
	ctx := context.Background()
	var frozen int64
	if err := db.AdminPool(t).QueryRow(ctx, "SELECT count(*) FROM tlog_hashes").Scan(&frozen); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 100)
	for i := 0; i < 300; i++ {
		if _, err := s.Stage(ctx, event("new", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	cp, err := s.SignTree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := n + staged + 300
	res, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys(), Trusted: legacyNote})
	if err != nil || res.Events != uint64(total) {
		t.Fatalf("verify after 00024: %+v %v, want %d events", res, err, total)
	}
	th, err := s.VerifyTree(ctx)
	if err != nil || th.Size != uint64(total) {
		t.Fatalf("tree after 00024: %+v %v", th, err)
	}
	vkey, _ := s.TreeVerifierKey()
	proof, err := s.InclusionProof(ctx, first.Seq, th.Size)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := audit.VerifyInclusion(cp, vkey, first, proof); err != nil || got.Root != th.Root {
		t.Fatalf("inclusion of seq %d written before 00024: %+v %v", first.Seq, got, err)
	}
	tp, err := s.ConsistencyProof(ctx, uint64(n), th.Size)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.VerifyConsistency(vkey, legacyNote, cp, tp); err != nil {
		t.Fatalf("the legacy note's tree is not a prefix of the tiles' tree: %v", err)
	}
	var after int64
	if err := db.AdminPool(t).QueryRow(ctx, "SELECT count(*) FROM tlog_hashes").Scan(&after); err != nil || after != frozen {
		t.Fatalf("tlog_hashes: %d rows after, %d before (%v)", after, frozen, err)
	}
	_, err = db.RuntimePool(t).Exec(ctx, "INSERT INTO tlog_hashes (index, hash) VALUES ($1, $2)", after, make([]byte, 32))
	if err == nil || sqlstate(err) != "42501" {
		t.Fatalf("runtime insert into tlog_hashes: %v, want permission denied", err)
	}
}

// A ledger written under 00022 (direct and staged appends, a tree note
// over tlog_hashes, rows still staged) migrates through 00024: the
// migration converts tlog_hashes to exactly the tiles of its tree, and
// the Store built on tiles extends, verifies and proves it. 700 events:
// two full level-0 tiles and a partial one, a level-1 tile of width 2.
func TestMigration24TilesKeepLedger(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewAt(t, 22)
	first, note := legacyLedger(t, db, 700, 40)
	applied, err := migrations.UpTo(ctx, db.AdminURL, db.Roles, 24)
	if err != nil || len(applied) == 0 || applied[len(applied)-1] != 24 {
		t.Fatalf("migrate forward: applied %v, %v; want up to 24", applied, err)
	}
	var rows []string
	r, err := db.AdminPool(t).Query(ctx, "SELECT format('%s/%s.w%s', level, n, width) FROM tlog_tiles ORDER BY level, n, width")
	if err != nil {
		t.Fatal(err)
	}
	if rows, err = pgx.CollectRows(r, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(rows), "[0/0.w256 0/1.w256 0/2.w188 1/0.w2]"; got != want {
		t.Fatalf("tiles after 00024: %s, want %s", got, want)
	}
	checkMigratedLedger(t, db, first, note, 700, 40)
}

// A tlog_hashes that holds no tree (a hash removed behind the triggers)
// stops the migration (CL006) rather than converting a damaged tree.
func TestMigration24RefusesDamagedTree(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewAt(t, 22)
	legacyLedger(t, db, 300, 0)
	for _, q := range []string{"ALTER TABLE tlog_hashes DISABLE TRIGGER USER", "DELETE FROM tlog_hashes WHERE index = 256",
		"ALTER TABLE tlog_hashes ENABLE ALWAYS TRIGGER tlog_hashes_append_only", "ALTER TABLE tlog_hashes ENABLE ALWAYS TRIGGER tlog_hashes_dense"} {
		if _, err := db.AdminPool(t).Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	_, err := migrations.UpTo(ctx, db.AdminURL, db.Roles, 24)
	if err == nil || (sqlstate(err) != "CL006" && !strings.Contains(err.Error(), "CL006")) {
		t.Fatalf("migrate a damaged tree: %v, want CL006", err)
	}
}
