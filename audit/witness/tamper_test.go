package witness

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/internal/pgtest"
)

// The tamper tests run the real ledger (audit/postgres on the real
// PostgreSQL), the real witness over HTTP, and the real submitter: each
// tampering a witness must catch is refused by the witness with its reason.

const ledgerOrigin = "witness-test-ledger"

var ledgerKey = ed25519.NewKeyFromSeed([]byte("cloison-witness-test-ledger-key!"))

func ledgerVKey(t testing.TB) string {
	t.Helper()
	v, err := audit.TreeVerifierKey(ledgerOrigin, ledgerKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ledger is one Store on one database, with its pool.
type ledger struct {
	db    *pgtest.DB
	pool  *pgxpool.Pool
	store *auditpg.Store
}

func openLedger(t *testing.T, db *pgtest.DB) *ledger {
	t.Helper()
	cfg, err := db.RuntimeConfig()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := auditpg.Open(context.Background(), pool, auditpg.Config{Origin: ledgerOrigin, SigningKey: ledgerKey,
		CheckpointInterval: time.Hour, TreeCheckpointInterval: time.Hour})
	if err != nil {
		pool.Close()
		t.Fatal(err)
	}
	l := &ledger{db: db, pool: pool, store: s}
	t.Cleanup(l.close)
	return l
}

func (l *ledger) close() {
	if l.store != nil {
		_ = l.store.Close()
		l.pool.Close()
		l.store = nil
	}
}

// append adds n events by actor and signs the tree; it returns the size.
func (l *ledger) append(t *testing.T, actor string, n int) uint64 {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		if _, err := l.store.Append(ctx, audit.Event{OccurredAt: time.Now(), Tenant: "tenant-a", Actor: audit.Name(actor),
			Payload: audit.RequestCompleted{Request: cloison.RequestID(fmt.Sprintf("%s-%d", actor, i)), Model: "m",
				PromptTokens: int64(i + 1), CompletionTokens: 1, Pages: 1, Tier: "cross-tenant"}}); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := l.store.SignTree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := audit.OpenTreeHead(cp, ledgerVKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return h.Size
}

// submitter returns a submitter of l to the witness at url (a fresh
// client: what it believes of the witness comes from l's database).
func (l *ledger) submitter(t *testing.T, urls ...string) *Submitter {
	t.Helper()
	var cs []*Client
	for _, u := range urls {
		c, err := NewClient(u, witnesses[u], 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	s, err := NewSubmitter(context.Background(), l.store, ledgerVKey(t), cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// witnesses maps a test witness's URL to its vkey.
var witnesses = map[string]string{}

func startWitness(t *testing.T, name string) (*Witness, string) {
	t.Helper()
	key := ed25519.NewKeyFromSeed([]byte(fmt.Sprintf("%-32s", "seed-"+name)))
	w, err := New(Config{Name: name, Key: key, Logs: []string{ledgerVKey(t)}, StatePath: filepath.Join(t.TempDir(), "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)
	witnesses[srv.URL] = w.VerifierKey()
	return w, srv.URL
}

// snapshot copies db, as a dump would be, with CREATE DATABASE … TEMPLATE
// (no session may be connected to db meanwhile).
func snapshot(t *testing.T, db *pgtest.DB) *pgtest.DB {
	t.Helper()
	ctx := context.Background()
	server, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := fmt.Sprintf("cloison_t_dump_%d_%s", os.Getpid(), hex.EncodeToString(rnd[:]))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{db.Name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), server)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	admin := pgtest.WithDatabase(server, name)
	return &pgtest.DB{Name: name, AdminURL: admin, RuntimeURL: pgtest.AsRole(admin, db.Roles.Runtime), Roles: db.Roles}
}

// submitOne submits the latest checkpoint to the one witness and returns
// its error.
func submitOne(t *testing.T, s *Submitter) error {
	t.Helper()
	return s.SubmitLatest(context.Background())[0]
}

func wantRefused(t *testing.T, err error, reason Reason, sentinel error, witnessSize, size uint64) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want a witness refusal (%s)", err, reason)
	}
	if re.Reason != reason || !errors.Is(err, sentinel) || re.WitnessSize != witnessSize || re.Size != size {
		t.Fatalf("got %s (witness %d, size %d): %v; want %s (witness %d, size %d), errors.Is %v",
			re.Reason, re.WitnessSize, re.Size, err, reason, witnessSize, size, sentinel)
	}
}

// The database is restored from an older dump (the witness had cosigned
// a larger tree since), then the restored log grows again: to exactly the
// witnessed size with other entries, then beyond it. Each is refused.
func TestWitnessDetectsRollbackAndForkAfterRollback(t *testing.T) {
	w, url := startWitness(t, "witness.test/rollback")
	db := pgtest.New(t)
	l := openLedger(t, db)
	if size := l.append(t, "before-dump", 20); size != 20 {
		t.Fatalf("got size %d", size)
	}
	if err := submitOne(t, l.submitter(t, url)); err != nil {
		t.Fatal(err)
	}
	l.close()
	dump := snapshot(t, db) // size 20, cosigned at 20

	l = openLedger(t, db)
	l.append(t, "after-dump", 30) // size 50
	s := l.submitter(t, url)
	if err := submitOne(t, s); err != nil {
		t.Fatal(err)
	}
	if got := w.Size(ledgerOrigin); got != 50 {
		t.Fatalf("witness at %d, want 50", got)
	}
	cosigned, err := l.store.CosignedCheckpoint(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if h, _, err := audit.VerifyCosigned(cosigned, ledgerVKey(t), []string{witnesses[url]}, 1); err != nil || h.Size != 50 {
		t.Fatalf("published cosigned checkpoint: size %d, %v", h.Size, err)
	}
	l.close()

	// Rollback: the operator serves the dump. Its database says the
	// witness was at 20; the witness answers 409 with 50.
	r := openLedger(t, dump)
	rs := r.submitter(t, url)
	wantRefused(t, submitOne(t, rs), ReasonSmaller, audit.ErrSmallerTree, 50, 20)
	if st := rs.Stats()[0]; st.Refused != 1 || st.Cosigned != 0 {
		t.Fatalf("stats %+v, want one refusal", st)
	}

	// Fork after the rollback, at the witnessed size: other entries 21..50.
	r.append(t, "forked", 30)
	wantRefused(t, submitOne(t, rs), ReasonFork, audit.ErrFork, 50, 50)

	// And beyond it: the proof from 50 is one of the forked tree, which
	// the witness checks against its own root at 50.
	r.append(t, "forked-more", 10)
	wantRefused(t, submitOne(t, rs), ReasonFork, audit.ErrFork, 50, 60)
	if got := w.Size(ledgerOrigin); got != 50 {
		t.Fatalf("witness moved to %d, want 50", got)
	}
	// The rolled-back database has no cosignature beyond the dump's.
	if _, err := r.store.CosignedCheckpoint(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.store.WitnessedSize(context.Background(), "witness.test/rollback"); n != 20 {
		t.Fatalf("rolled-back database cosigned up to %d, want 20", n)
	}
}

// A superuser deletes the tail (events, tree hashes, checkpoints and
// cosignatures, triggers disabled) and the log carries on from there.
func TestWitnessDetectsTruncatedTail(t *testing.T) {
	w, url := startWitness(t, "witness.test/truncate")
	db := pgtest.New(t)
	l := openLedger(t, db)
	l.append(t, "kept", 20)
	if err := submitOne(t, l.submitter(t, url)); err != nil {
		t.Fatal(err)
	}
	l.append(t, "tail", 15) // 35
	if err := submitOne(t, l.submitter(t, url)); err != nil {
		t.Fatal(err)
	}
	l.close()

	admin := db.AdminPool(t)
	ctx := context.Background()
	tables := []string{"audit_events", "tlog_tiles", "tlog_checkpoints", "tlog_cosignatures", "audit_checkpoints"}
	var stmts []string
	for _, tb := range tables {
		stmts = append(stmts, "ALTER TABLE "+tb+" DISABLE TRIGGER USER")
	}
	stmts = append(stmts,
		"DELETE FROM tlog_cosignatures WHERE size > 20",
		"DELETE FROM tlog_checkpoints WHERE size > 20",
		"DELETE FROM audit_checkpoints WHERE size > 20",
		"DELETE FROM audit_events WHERE seq > 20")
	stmts = append(stmts, pgtest.TruncateTreeSQL(20)...)
	for _, tb := range tables {
		rows, err := admin.Query(ctx, "SELECT tgname FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal", tb)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			stmts = append(stmts, "ALTER TABLE "+tb+" ENABLE ALWAYS TRIGGER "+n)
		}
	}
	for _, q := range stmts {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	l = openLedger(t, db)
	if _, err := l.store.VerifyTree(ctx); err != nil {
		t.Fatalf("the truncated ledger is self-consistent, as intended: %v", err)
	}
	s := l.submitter(t, url)
	wantRefused(t, submitOne(t, s), ReasonSmaller, audit.ErrSmallerTree, 35, 20)
	// The refused checkpoint is not offered again (one log line per
	// refusal); the next one is.
	if err := submitOne(t, s); err != nil || s.Stats()[0].Refused != 1 {
		t.Fatalf("resubmitted a refused checkpoint: %v %+v", err, s.Stats()[0])
	}
	l.append(t, "after-truncation", 5) // 25: still smaller
	wantRefused(t, submitOne(t, s), ReasonSmaller, audit.ErrSmallerTree, 35, 25)
	l.append(t, "after-truncation-2", 20) // 45: a fork
	wantRefused(t, submitOne(t, s), ReasonFork, audit.ErrFork, 35, 45)
	if got := w.Size(ledgerOrigin); got != 35 {
		t.Fatalf("witness moved to %d, want 35", got)
	}
}

// A verifier requiring k cosignatures refuses a checkpoint with fewer: one
// witness is down (counted, appends go on), a third witness's signature
// is not one the verifier trusts, an altered cosignature does not count.
func TestVerifierRequiresKCosignatures(t *testing.T) {
	_, urlA := startWitness(t, "witness.test/a")
	_, urlC := startWitness(t, "witness.test/c")
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	keyB := ed25519.NewKeyFromSeed([]byte(fmt.Sprintf("%-32s", "seed-witness.test/b")))
	vkeyB, _ := audit.CosignerVerifierKey("witness.test/b", keyB.Public().(ed25519.PublicKey))
	witnesses[downURL] = vkeyB
	down.Close() // B is unreachable

	db := pgtest.New(t)
	l := openLedger(t, db)
	l.append(t, "k", 12)
	s := l.submitter(t, urlA, downURL, urlC)
	errs := s.SubmitLatest(context.Background())
	if errs[0] != nil || !errors.Is(errs[1], ErrUnreachable) || errs[2] != nil {
		t.Fatalf("got %v, want A and C to cosign and B unreachable", errs)
	}
	if st := s.Stats()[1]; st.Failures != 1 || st.Cosigned != 0 {
		t.Fatalf("B stats %+v, want one failure", st)
	}
	// Appends go on while B is down.
	l.append(t, "k2", 3)

	ctx := context.Background()
	cp, err := l.store.CosignedCheckpoint(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	trusted := []string{witnesses[urlA], vkeyB} // C is not trusted
	tests := []struct {
		name string
		msg  []byte
		k    int
		want error
		n    int
	}{
		{"k=1 of A,B: A signed", cp, 1, nil, 1},
		{"k=2 of A,B: only A signed (C's line is ignored)", cp, 2, audit.ErrTooFewCosignatures, 1},
		{"k=0: only the log's signature", cp, 0, nil, 1},
		{"k above the witnesses given", cp, 3, audit.ErrInvalidEvent, 0},
		{"A's cosignature altered", alterLine(t, cp, "witness.test/a"), 1, audit.ErrTooFewCosignatures, 0},
		{"no cosignature at all", mustTreeCheckpoint(t, l.store), 1, audit.ErrTooFewCosignatures, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := audit.VerifyCosigned(tt.msg, ledgerVKey(t), trusted, tt.k)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if len(got) != tt.n {
				t.Fatalf("got %d valid cosignatures %v, want %d", len(got), got, tt.n)
			}
		})
	}
	// With C trusted as well, k=2 holds.
	if _, got, err := audit.VerifyCosigned(cp, ledgerVKey(t), append(trusted, witnesses[urlC]), 2); err != nil || len(got) != 2 {
		t.Fatalf("k=2 of A,B,C: %v %v", got, err)
	}
	// A checkpoint no longer signed by the log's key is refused before any
	// cosignature is counted.
	if _, _, err := audit.VerifyCosigned(cp, ledgerVKeyOther(t), trusted, 1); !errors.Is(err, audit.ErrBadSignature) {
		t.Fatalf("got %v, want audit.ErrBadSignature", err)
	}
}

func mustTreeCheckpoint(t *testing.T, s *auditpg.Store) []byte {
	t.Helper()
	cp, err := s.TreeCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func ledgerVKeyOther(t *testing.T) string {
	t.Helper()
	v, err := audit.TreeVerifierKey(ledgerOrigin, otherKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// alterLine flips a bit of the signature of witness's cosignature line
// (keeping its name and key hash, so that it is checked and fails).
func alterLine(t *testing.T, msg []byte, witness string) []byte {
	t.Helper()
	prefix := []byte("— " + witness + " ")
	i := indexOf(msg, prefix)
	if i < 0 {
		t.Fatalf("no line of %s in %q", witness, msg)
	}
	out := append([]byte(nil), msg...)
	j := i + len(prefix) + 20 // inside the base64 of the signature
	if out[j] == 'A' {
		out[j] = 'B'
	} else {
		out[j] = 'A'
	}
	return out
}

func indexOf(b, sub []byte) int {
	for i := 0; i+len(sub) <= len(b); i++ {
		if string(b[i:i+len(sub)]) == string(sub) {
			return i
		}
	}
	return -1
}
