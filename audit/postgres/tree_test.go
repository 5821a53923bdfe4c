package postgres

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// recordAt reads the stored record of seq.
func recordAt(t *testing.T, s *Store, seq uint64) audit.Record {
	t.Helper()
	var got audit.Record
	if err := s.Scan(context.Background(), seq, seq, func(r audit.Record) error { got = r; return nil }); err != nil || got.Seq != seq {
		t.Fatalf("scan seq %d: got %d, %v", seq, got.Seq, err)
	}
	return got
}

// A verifier that trusts nothing of Cloison's code: only the published
// verifier key string, note.Open, and tlog.CheckRecord / tlog.CheckTree.
func TestThirdPartyVerifiesCheckpointAndInclusion(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	for i := 1; i <= 37; i++ {
		if _, err := s.Append(ctx, event("outsider", i)); err != nil {
			t.Fatal(err)
		}
	}
	oldMsg, err := s.SignTree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 38; i <= 50; i++ {
		if _, err := s.Append(ctx, event("outsider", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	msg, err := s.TreeCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	published, err := s.TreeVerifierKey()
	if err != nil {
		t.Fatal(err)
	}

	// The outsider's side.
	open := func(msg []byte) (int64, tlog.Hash) {
		v, err := note.NewVerifier(published)
		if err != nil {
			t.Fatal(err)
		}
		n, err := note.Open(msg, note.VerifierList(v))
		if err != nil {
			t.Fatalf("note.Open: %v", err)
		}
		lines := strings.Split(n.Text, "\n")
		if len(lines) < 4 || lines[0] != v.Name() {
			t.Fatalf("got checkpoint %q, want origin %q first", n.Text, v.Name())
		}
		size, err := strconv.ParseInt(lines[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.StdEncoding.DecodeString(lines[2])
		if err != nil || len(raw) != tlog.HashSize {
			t.Fatalf("root %q: %v", lines[2], err)
		}
		var root tlog.Hash
		copy(root[:], raw)
		return size, root
	}
	size, root := open(msg)
	if size != 50 {
		t.Fatalf("got size %d, want 50", size)
	}
	oldSize, oldRoot := open(oldMsg)
	for _, seq := range []uint64{1, 17, 37, 50} {
		rec := recordAt(t, s, seq)
		proof, err := s.InclusionProof(ctx, seq, uint64(size))
		if err != nil {
			t.Fatal(err)
		}
		if err := tlog.CheckRecord(proof, size, root, int64(seq)-1, tlog.RecordHash(rec.Payload)); err != nil {
			t.Errorf("seq %d: got %v, want inclusion", seq, err)
		}
		other := recordAt(t, s, seq%50+1)
		if err := tlog.CheckRecord(proof, size, root, int64(seq)-1, tlog.RecordHash(other.Payload)); err == nil {
			t.Errorf("seq %d: the proof also proves another entry", seq)
		}
	}
	cproof, err := s.ConsistencyProof(ctx, uint64(oldSize), uint64(size))
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckTree(cproof, size, root, oldSize, oldRoot); err != nil {
		t.Errorf("got %v, want size %d consistent with %d", err, size, oldSize)
	}
	// A checkpoint signed by another key is refused by note.Open.
	_, otherKey, _ := ed25519.GenerateKey(nil)
	signer, err := audit.TreeSigner("test-ledger", otherKey)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := audit.SignTreeHead(signer, audit.TreeHead{Origin: "test-ledger", Size: 50, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := note.NewVerifier(published)
	if _, err := note.Open(forged, note.VerifierList(v)); err == nil {
		t.Error("a checkpoint signed by another key opened with the published key")
	}
}

// Every writer advances the tree in its own transaction: group commit,
// AppendTx, and each register write (incident opened and updated, notice,
// purge).
func TestInclusionProofsForEveryWriterKind(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	pool := db.RuntimePool(t)
	s := openStore(t, pool, t.TempDir(), 1000)
	admin := openStore(t, db.AdminPool(t), t.TempDir(), 1000)
	seqs := map[string]uint64{}

	rec, err := s.Append(ctx, event("group", 1))
	if err != nil {
		t.Fatal(err)
	}
	seqs["group commit"] = rec.Seq
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		recs, err := s.AppendTx(ctx, tx, event("admin:tx", 2), event("admin:tx", 3))
		if err == nil {
			seqs["AppendTx"] = recs[1].Seq
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sv, err := s.OpenIncident(ctx, "admin:a", adminVersion("inc-tree", audit.DayOf(time.Now().AddDate(0, 0, -1))))
	if err != nil {
		t.Fatal(err)
	}
	seqs["incident opened"] = sv.LedgerSeq
	sv, err = s.UpdateIncident(ctx, "admin:a", "inc-tree", func(v *audit.IncidentVersion) error { v.PersonsConcerned = 3; return nil })
	if err != nil {
		t.Fatal(err)
	}
	seqs["incident updated"] = sv.LedgerSeq
	sn, err := s.AddNotice(ctx, "admin:a", audit.Notice{Incident: "inc-tree", Recipient: audit.RecipientCAI, RecipientName: "CAI",
		SentAt: time.Now(), Method: "portal", ContentDigest: audit.Sum([]byte("avis"))})
	if err != nil {
		t.Fatal(err)
	}
	seqs["notice"] = sn.LedgerSeq
	if _, err := admin.OpenIncident(ctx, "admin:a", adminVersion("inc-old", "2019-03-01")); err != nil {
		t.Fatal(err)
	}
	purged, err := admin.PurgeIncident(ctx, "admin:dpo", "inc-old")
	if err != nil {
		t.Fatal(err)
	}
	seqs["purge"] = purged.Seq
	// One more group-commit batch after the others moved the head: the
	// writer's fast path must notice and extend the tree they left.
	if _, err := s.Append(ctx, event("group", 4)); err != nil {
		t.Fatal(err)
	}

	msg, err := s.SignTree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vkey, _ := s.TreeVerifierKey()
	head, _ := s.Head(ctx)
	for name, seq := range seqs {
		r := recordAt(t, s, seq)
		proof, err := s.InclusionProof(ctx, seq, head.Seq)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := audit.VerifyInclusion(msg, vkey, r, proof); err != nil {
			t.Errorf("%s (seq %d): got %v, want included", name, seq, err)
		}
	}
	if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
		t.Fatal(err)
	}
	th, err := s.VerifyTree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := audit.OpenTreeHead(msg, vkey); th != want {
		t.Errorf("recomputed tree %+v, want the signed %+v", th, want)
	}

	// A writer that inserts a correctly chained event but skips the tree
	// is refused by the database.
	h, _ := s.Head(ctx)
	next, err := h.Next(event("rogue", 9))
	if err != nil {
		t.Fatal(err)
	}
	// The runtime role may not insert it (migration 00025); every role
	// that may is refused by the tree trigger.
	const ins = `INSERT INTO audit_events (seq, occurred_at, kind, tenant, actor, payload, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
	args := []any{int64(next.Seq), next.OccurredAt, string(next.Kind), string(next.Tenant), string(next.Actor), next.Payload, next.PrevHash[:], next.Hash[:]}
	if _, err = pool.Exec(ctx, ins, args...); sqlstate(err) != "42501" {
		t.Errorf("runtime event without tree hashes: got %v, want insufficient_privilege", err)
	}
	for _, session := range inserterSessions(db.Roles.Owner) {
		err := execAs(ctx, db.AdminPool(t), session, ins, args...)
		if sqlstate(err) != "CL006" || !errors.Is(translate(err), ErrChainRejected) {
			t.Errorf("%s; event without tree hashes: got %v, want CL006 (ErrChainRejected)", session, err)
		}
	}
}

func TestConsistencyAcrossGrowth(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	vkey, _ := s.TreeVerifierKey()
	var notes [][]byte
	var sizes []uint64
	n := 0
	for _, grow := range []int{1, 1, 2, 5, 8, 13, 34} {
		for i := 0; i < grow; i++ {
			n++
			if _, err := s.Append(ctx, event("grow", n)); err != nil {
				t.Fatal(err)
			}
		}
		msg, err := s.SignTree(ctx)
		if err != nil {
			t.Fatal(err)
		}
		notes, sizes = append(notes, msg), append(sizes, uint64(n))
	}
	for i := range notes {
		for j := i; j < len(notes); j++ {
			proof, err := s.ConsistencyProof(ctx, sizes[i], sizes[j])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := audit.VerifyConsistency(vkey, notes[i], notes[j], proof); err != nil {
				t.Errorf("size %d -> %d: got %v, want consistent", sizes[i], sizes[j], err)
			}
		}
	}
	// Requests outside the committed tree are refused, not answered.
	for _, c := range []struct{ a, b uint64 }{{0, 5}, {6, 5}, {5, uint64(n) + 1}} {
		if _, err := s.ConsistencyProof(ctx, c.a, c.b); !errors.Is(err, audit.ErrOutOfRange) {
			t.Errorf("ConsistencyProof(%d, %d): got %v, want audit.ErrOutOfRange", c.a, c.b, err)
		}
	}
	for _, c := range []struct{ seq, size uint64 }{{0, 5}, {6, 5}, {1, uint64(n) + 1}} {
		if _, err := s.InclusionProof(ctx, c.seq, c.size); !errors.Is(err, audit.ErrOutOfRange) {
			t.Errorf("InclusionProof(%d, %d): got %v, want audit.ErrOutOfRange", c.seq, c.size, err)
		}
	}
}

func TestEmptyLedgerHasNoCheckpoint(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	if _, err := s.SignTree(ctx); !errors.Is(err, audit.ErrEmptyLedger) {
		t.Errorf("SignTree: got %v, want ErrEmptyLedger", err)
	}
	if _, err := s.TreeCheckpoint(ctx); !errors.Is(err, audit.ErrNoCheckpoint) {
		t.Errorf("TreeCheckpoint: got %v, want ErrNoCheckpoint", err)
	}
	if _, err := s.InclusionProof(ctx, 1, 1); !errors.Is(err, audit.ErrEmptyLedger) {
		t.Errorf("InclusionProof: got %v, want ErrEmptyLedger", err)
	}
}

// treeSuperuser runs statements as the cluster superuser with every user
// trigger of the ledger and tree tables disabled, then re-enables them.
func treeSuperuser(t *testing.T, admin *pgxpool.Pool, stmts ...string) {
	t.Helper()
	tables := []string{"audit_events", "audit_checkpoints", "tlog_hashes", "tlog_tiles", "tlog_frontier", "tlog_checkpoints"}
	var all []string
	for _, tb := range tables {
		all = append(all, "ALTER TABLE "+tb+" DISABLE TRIGGER USER")
	}
	all = append(all, stmts...)
	for _, tr := range [][2]string{{"audit_events", "audit_events_append_only"}, {"audit_events", "audit_events_chain"},
		{"audit_events", "audit_events_tlog"}, {"audit_checkpoints", "audit_checkpoints_append_only"},
		{"tlog_hashes", "tlog_hashes_append_only"}, {"tlog_hashes", "tlog_hashes_dense"},
		{"tlog_tiles", "tlog_tiles_append_only"}, {"tlog_tiles", "tlog_tiles_extend"}, {"tlog_frontier", "tlog_frontier_append_only"},
		{"tlog_checkpoints", "tlog_checkpoints_append_only"}} {
		all = append(all, fmt.Sprintf("ALTER TABLE %s ENABLE ALWAYS TRIGGER %s", tr[0], tr[1]))
	}
	for _, q := range all {
		if _, err := admin.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// rewriteLedger replaces the whole ledger and tree with recs (rechained and
// rehashed from scratch, as an attacker without the key would), as the
// superuser.
func rewriteLedger(t *testing.T, admin *pgxpool.Pool, recs []audit.Record) {
	t.Helper()
	ctx := context.Background()
	treeSuperuser(t, admin, "DELETE FROM audit_events", "DELETE FROM tlog_tiles", "DELETE FROM tlog_checkpoints")
	var head audit.Head
	for i := range recs {
		recs[i] = audit.Rechain(recs[i], head)
		head = recs[i].Head()
	}
	st, err := extendTree(ctx, admin, nil, recs)
	if err != nil {
		t.Fatal(err)
	}
	if err := insertTiles(ctx, admin, 0, int64(len(recs)), &treeReader{ctx: ctx, q: noQuerier{}, overlay: st.All(nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, appendSQL, appendArgs(recs, audit.Head{})...); err != nil {
		t.Fatal(err)
	}
}

// Tampering the superuser can do below a checkpoint a verifier already
// holds is detected against it, with the reason named.
func TestTreeTamperingDetectedAgainstTrustedCheckpoint(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, admin *pgxpool.Pool, recs []audit.Record)
		stored bool // the operator serves the latest stored note instead of signing anew
		want   error
	}{
		{"tail truncation", func(t *testing.T, admin *pgxpool.Pool, _ []audit.Record) {
			treeSuperuser(t, admin, append([]string{"DELETE FROM audit_events WHERE seq > 30",
				"DELETE FROM tlog_checkpoints WHERE size > 30"}, pgtest.TruncateTreeSQL(30)...)...)
		}, false, audit.ErrSmallerTree},
		{"rollback to an older dump, its own genuine note served", func(t *testing.T, admin *pgxpool.Pool, _ []audit.Record) {
			treeSuperuser(t, admin, append([]string{"DELETE FROM audit_events WHERE seq > 30",
				"DELETE FROM tlog_checkpoints WHERE size > 30"}, pgtest.TruncateTreeSQL(30)...)...)
		}, true, audit.ErrSmallerTree},
		{"rollback then new entries", func(t *testing.T, admin *pgxpool.Pool, recs []audit.Record) {
			kept := recs[:30]
			for i := 1; i <= 15; i++ {
				r, err := event("after-rollback", i).Prepare()
				if err != nil {
					t.Fatal(err)
				}
				kept = append(kept, r)
			}
			rewriteLedger(t, admin, kept)
		}, false, audit.ErrFork},
		{"rewritten entry", func(t *testing.T, admin *pgxpool.Pool, recs []audit.Record) {
			r, err := event("rewritten", 10).Prepare()
			if err != nil {
				t.Fatal(err)
			}
			recs[9] = r
			rewriteLedger(t, admin, recs)
		}, false, audit.ErrFork},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := pgtest.New(t)
			ctx := context.Background()
			s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
			for i := 1; i <= 40; i++ {
				if _, err := s.Append(ctx, event("honest", i)); err != nil {
					t.Fatal(err)
				}
				if i == 30 {
					if _, err := s.SignTree(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			trusted, err := s.SignTree(ctx)
			if err != nil {
				t.Fatal(err)
			}
			vkey, _ := s.TreeVerifierKey()
			var recs []audit.Record
			if err := s.Scan(ctx, 1, 0, func(r audit.Record) error { recs = append(recs, r); return nil }); err != nil {
				t.Fatal(err)
			}
			victim := recs[9]
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			tc.tamper(t, db.AdminPool(t), append([]audit.Record(nil), recs...))

			// The operator restarts on the tampered database and serves
			// what it now has.
			s2 := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
			serve := s2.SignTree
			if tc.stored {
				serve = s2.TreeCheckpoint
			}
			latest, err := serve(ctx)
			if err != nil {
				t.Fatal(err)
			}
			newer, _ := audit.OpenTreeHead(latest, vkey)
			old, _ := audit.OpenTreeHead(trusted, vkey)
			var proof tlog.TreeProof
			if newer.Size >= old.Size {
				if proof, err = s2.ConsistencyProof(ctx, old.Size, newer.Size); err != nil {
					t.Fatal(err)
				}
			}
			_, err = audit.VerifyConsistency(vkey, trusted, latest, proof)
			if !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
			// The entry the database now holds at seq 10 is not in the
			// trusted tree (the original, whose siblings did not change,
			// still is: a verifier holding it can show the rewrite).
			if tc.name == "rewritten entry" {
				ip, err := s2.InclusionProof(ctx, victim.Seq, old.Size)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := audit.VerifyInclusion(trusted, vkey, victim, ip); err != nil {
					t.Errorf("inclusion of the original entry: got %v, want included", err)
				}
				if _, err := audit.VerifyInclusion(trusted, vkey, recordAt(t, s2, victim.Seq), ip); !errors.Is(err, audit.ErrNotIncluded) {
					t.Errorf("inclusion of the rewritten entry: got %v, want ErrNotIncluded", err)
				}
			}
		})
	}
}

// A ledger written before migration 00005 (no stored tree hashes) gets its
// tree at the next Open, with the root the writers would have computed; a
// tree larger than the ledger is refused.
func TestOpenBuildsTreeOfOlderLedger(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	pool := db.RuntimePool(t)
	for b := 0; b < 41; b++ { // 4100 events: more than one backfill page
		evs := make([]audit.Event, 100)
		for i := range evs {
			evs[i] = event("old", b*100+i)
		}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { _, err := s.AppendTx(ctx, tx, evs...); return err }); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ {
		if _, err := s.Append(ctx, event("old-tail", i)); err != nil {
			t.Fatal(err)
		}
	}
	want, err := s.SignTree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	admin := db.AdminPool(t)
	treeSuperuser(t, admin, "DELETE FROM tlog_tiles", "DELETE FROM tlog_checkpoints")
	s2 := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	got, err := s2.SignTree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("got checkpoint %q, want %q", got, want)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, q string }{
		{"tree lags the ledger", "DELETE FROM tlog_tiles WHERE n * 256 + width > (4000 >> (8 * level))"},
		{"tree larger than the ledger", "DELETE FROM audit_events WHERE seq > 3000"},
	} {
		treeSuperuser(t, admin, tc.q)
		if _, err := Open(ctx, db.RuntimePool(t), Config{Origin: "test-ledger", SigningKey: testKey}); !errors.Is(err, ErrSchema) {
			t.Errorf("%s: got %v, want ErrSchema", tc.name, err)
		}
	}
}

// An entry rewritten with its hash chain recomputed but its stored tree
// hashes left as they were: VerifyTree names the entry.
func TestVerifyTreeFindsRewrittenEntry(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	for i := 1; i <= 40; i++ {
		if _, err := s.Append(ctx, event("honest", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.VerifyTree(ctx); err != nil {
		t.Fatal(err)
	}
	var recs []audit.Record
	if err := s.Scan(ctx, 1, 0, func(r audit.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	r, err := event("rewritten", 10).Prepare()
	if err != nil {
		t.Fatal(err)
	}
	recs[9] = r
	var head audit.Head
	for i := range recs {
		recs[i] = audit.Rechain(recs[i], head)
		head = recs[i].Head()
	}
	admin := db.AdminPool(t)
	treeSuperuser(t, admin, "DELETE FROM audit_events")
	if _, err := admin.Exec(ctx, appendSQL, appendArgs(recs, audit.Head{})...); err != nil {
		t.Fatal(err)
	}
	_, err = s.VerifyTree(ctx)
	var be *audit.BreakError
	if !errors.As(err, &be) || be.Reason != audit.ReasonTree || be.Seq != 10 {
		t.Errorf("got %v, want a tree break at seq 10", err)
	}
}

// appendSQL and appendArgs insert already chained events through
// audit_append, as a writer that computes its own hashes would (the
// tamper tests: the superuser rewrites the ledger).
const appendSQL = "SELECT audit_append($1, $2, $3, $4, $5, $6, $7, $8)"

// appendArgs places recs after head (setting their seq and hashes) and
// returns audit_append's parallel arrays.
func appendArgs(recs []audit.Record, head audit.Head) []any {
	n := len(recs)
	seqs := make([]int64, n)
	occurred := make([]time.Time, n)
	kinds := make([]string, n)
	tenants := make([]*string, n)
	actors := make([]string, n)
	payloads := make([][]byte, n)
	prevs := make([][]byte, n)
	hashes := make([][]byte, n)
	for i := range recs {
		recs[i] = audit.Rechain(recs[i], head)
		head = recs[i].Head()
		r := &recs[i]
		seqs[i] = int64(r.Seq)
		occurred[i] = r.OccurredAt
		kinds[i] = string(r.Kind)
		if r.Tenant != "" {
			t := string(r.Tenant)
			tenants[i] = &t
		}
		actors[i] = string(r.Actor)
		payloads[i] = r.Payload
		prevs[i] = r.PrevHash[:]
		hashes[i] = r.Hash[:]
	}
	return []any{seqs, occurred, kinds, tenants, actors, payloads, prevs, hashes}
}

// Tiles edited, removed or added behind the triggers are found by
// VerifyTree at the first entry they cover, whichever level: a level-0
// hash, a level-1 hash (tree level 8), a full tile deleted (its narrower
// rows left), a row reaching past the ledger.
func TestVerifyTreeFindsEditedTiles(t *testing.T) {
	forged := "decode(repeat('ab', 32), 'hex')"
	tests := []struct {
		name string
		stmt string
		seq  uint64
	}{
		{"level-0 hash edited", "UPDATE tlog_tiles SET hashes = overlay(hashes PLACING " + forged + " FROM 32 * 44 + 1 FOR 32) WHERE level = 0 AND n = 1", 301},
		{"level-1 hash edited", "UPDATE tlog_tiles SET hashes = overlay(hashes PLACING " + forged + " FROM 33 FOR 32) WHERE level = 1 AND width = 2", 512},
		{"full tile deleted", "DELETE FROM tlog_tiles WHERE level = 0 AND n = 0 AND width = 256", 0},
		{"row past the ledger", "INSERT INTO tlog_tiles SELECT level, n, width + 1, hashes || " + forged + " FROM tlog_tiles WHERE level = 0 AND n = 2 ORDER BY width DESC LIMIT 1", 600},
		// The stored frontier of size 600 (the next batch's start) forged:
		// the 300 events appended after it get wrong level-1 hashes.
		{"frontier edited", "UPDATE tlog_frontier SET stack = array_fill(" + forged + ", ARRAY[10]) WHERE size = 600", 768},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := pgtest.New(t)
			ctx := context.Background()
			pool := db.RuntimePool(t)
			for b, n := 0, 0; n < 600; b++ {
				k := min(1+b*37%150, 600-n)
				recs := make([]audit.Record, k)
				for i := range recs {
					r, err := event("tiles", n+i).Prepare()
					if err != nil {
						t.Fatal(err)
					}
					recs[i] = r
				}
				if err := sequence(ctx, pool, recs); err != nil {
					t.Fatal(err)
				}
				n += k
			}
			s := openStore(t, pool, t.TempDir(), 1000)
			if _, err := s.VerifyTree(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.name == "frontier edited" {
				treeSuperuser(t, db.AdminPool(t), tc.stmt)
				recs := make([]audit.Record, 300)
				for i := range recs {
					r, err := event("after", i).Prepare()
					if err != nil {
						t.Fatal(err)
					}
					recs[i] = r
				}
				if err := sequence(ctx, pool, recs); err != nil {
					t.Fatal(err)
				}
			} else {
				treeSuperuser(t, db.AdminPool(t), tc.stmt)
			}
			_, err := s.VerifyTree(ctx)
			var be *audit.BreakError
			if !errors.As(err, &be) || be.Reason != audit.ReasonTree || (tc.seq != 0 && be.Seq != tc.seq) {
				t.Fatalf("got %v, want a tree break at seq %d", err, tc.seq)
			}
		})
	}
}

// tlog_tiles is append-only for every role (by privilege for the runtime
// role, by the ALWAYS trigger for the owner, the superuser and replica
// mode), and a row any role that may insert (since 00025 not the runtime
// role) inserts must extend its tile (the hashes of the narrower rows
// kept) after its level's full tile (CL003).
func TestTilesAppendOnly(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	appendAll(t, s, requestEvents(0, 300))
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	rt := db.RuntimePool(t)
	for _, q := range []string{"UPDATE tlog_tiles SET width = width", "DELETE FROM tlog_tiles", "TRUNCATE tlog_tiles"} {
		if _, err := rt.Exec(ctx, q); sqlstate(err) != "42501" {
			t.Errorf("runtime %s: got %v, want insufficient_privilege", q, err)
		}
	}
	admin := db.AdminPool(t)
	for _, q := range []string{"UPDATE tlog_tiles SET width = width", "DELETE FROM tlog_tiles", "TRUNCATE tlog_tiles"} {
		for _, role := range []string{"SET ROLE " + db.Roles.Owner, "RESET ROLE", "SET session_replication_role = replica"} {
			err := pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, role); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, q)
				return err
			})
			if sqlstate(err) != "CL001" || !errors.Is(translate(err), ErrAppendOnly) {
				t.Errorf("%s; %s: got %v, want CL001", role, q, err)
			}
		}
	}
	// The runtime role may not insert tiles (migration 00025); a row any
	// role that may inserts must extend its tile.
	for name, q := range map[string]string{
		"prefix rewritten": `INSERT INTO tlog_tiles SELECT 0, 1, 256, decode(repeat('ab', 32 * 256), 'hex')`,
		"hole":             `INSERT INTO tlog_tiles SELECT 0, 3, 1, decode(repeat('ab', 32), 'hex')`,
	} {
		if _, err := rt.Exec(ctx, q); sqlstate(err) != "42501" {
			t.Errorf("runtime %s: got %v, want insufficient_privilege", name, err)
		}
		for _, session := range inserterSessions(db.Roles.Owner) {
			if err := execAs(ctx, admin, session, q); sqlstate(err) != "CL003" {
				t.Errorf("%s; %s: got %v, want CL003", session, name, err)
			}
		}
	}
	if _, err := s.VerifyTree(ctx); err != nil {
		t.Fatal(err)
	}
}
