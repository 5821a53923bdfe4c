package postgres

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

var pkgDB *pgtest.DB

func TestMain(m *testing.M) {
	if os.Getenv("CLOISON_AUDIT_HELPER") != "" {
		os.Exit(helperProcess())
	}
	os.Exit(pgtest.Main(m, &pkgDB))
}

// testKey is deterministic so that a helper process signs with the same key.
var testKey = ed25519.NewKeyFromSeed([]byte("cloison-audit-postgres-test-key!"))

func testKeys() map[string]ed25519.PublicKey {
	return audit.KeySet(testKey.Public().(ed25519.PublicKey))
}

func event(actor string, i int) audit.Event {
	return audit.Event{
		OccurredAt: time.Now(),
		Tenant:     cloison.TenantID(fmt.Sprintf("tenant-%d", i%7)),
		Actor:      audit.Name(actor),
		Payload: audit.RequestCompleted{
			Request: cloison.RequestID(fmt.Sprintf("%s-req-%d", actor, i)), Model: "llama-3.1-8b",
			PromptTokens: int64(100 + i), CompletionTokens: 17, Pages: 3, Tier: "cross-tenant",
		},
	}
}

func openStore(t testing.TB, pool *pgxpool.Pool, dir string, every int) *Store {
	t.Helper()
	s, err := Open(context.Background(), pool, Config{
		Origin: "test-ledger", SigningKey: testKey, CheckpointEvery: every,
		CheckpointInterval: time.Hour, CheckpointDir: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// 10,000 appends: 16 goroutines here and a second writer process, one valid chain.
func TestConcurrentAppendsFromGoroutinesAndAnotherProcess(t *testing.T) {
	const goroutines, perGoroutine, childEvents = 16, 500, 2000
	dir := t.TempDir()
	pool := pkgDB.RuntimePool(t)
	s := openStore(t, pool, dir, 500)
	ctx := context.Background()

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "CLOISON_AUDIT_HELPER=writer", "CLOISON_HELPER_URL="+pkgDB.AdminURL,
		"CLOISON_HELPER_ROLE="+pkgDB.Roles.Runtime, "CLOISON_HELPER_N="+strconv.Itoa(childEvents), "CLOISON_HELPER_DIR="+dir)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	seqs := make([][]uint64, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < perGoroutine; i++ {
				r, err := s.Append(ctx, event(fmt.Sprintf("g%d", g), i))
				if err != nil {
					errs <- err
					return
				}
				seqs[g] = append(seqs[g], r.Seq)
			}
		}(g)
	}
	wg.Wait()
	if err := child.Wait(); err != nil {
		t.Fatalf("writer process: %v", err)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Each goroutine's own appends are in order.
	for g, ss := range seqs {
		for i := 1; i < len(ss); i++ {
			if ss[i] <= ss[i-1] {
				t.Fatalf("goroutine %d: seq %d after %d", g, ss[i], ss[i-1])
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys(), ExternalDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(goroutines*perGoroutine + childEvents); res.Events != want || res.Head.Seq != want {
		t.Errorf("got %d events (head %d), want %d", res.Events, res.Head.Seq, want)
	}
	if res.Checkpoints < 4 {
		t.Errorf("got %d checkpoints matched, want at least 4 (two writers, every 500)", res.Checkpoints)
	}
	// Two processes' writers advanced one tree: it is the tree of the
	// entries, and the latest signed note names its root.
	th, err := s.VerifyTree(ctx)
	if err != nil || th.Size != res.Head.Seq {
		t.Fatalf("tree: got size %d, %v, want %d", th.Size, err, res.Head.Seq)
	}
	var kinds, tenants int
	if err := pool.QueryRow(ctx, "SELECT count(DISTINCT kind), count(DISTINCT tenant) FROM audit_events").Scan(&kinds, &tenants); err != nil || kinds != 1 || tenants != 7 {
		t.Errorf("got %d kinds, %d tenants (%v)", kinds, tenants, err)
	}
	t.Logf("%v", res)
}

// helperProcess is the second writer process (and the one killed mid-batch).
func helperProcess() int {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv("CLOISON_HELPER_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	role := os.Getenv("CLOISON_HELPER_ROLE")
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET ROLE "+pgx.Identifier{role}.Sanitize())
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	s, err := Open(ctx, pool, Config{Origin: "test-ledger", SigningKey: testKey, CheckpointEvery: 500, CheckpointDir: os.Getenv("CLOISON_HELPER_DIR")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	switch os.Getenv("CLOISON_AUDIT_HELPER") {
	case "bench":
		_ = s.Close()
		return benchWriterProcess(ctx, pool)
	case "writer":
		n, _ := strconv.Atoi(os.Getenv("CLOISON_HELPER_N"))
		var wg sync.WaitGroup
		var failed sync.Once
		code := 0
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < n/4; i++ {
					if _, err := s.Append(ctx, event(fmt.Sprintf("proc2-g%d", g), i)); err != nil {
						failed.Do(func() { fmt.Fprintln(os.Stderr, err); code = 1 })
						return
					}
				}
			}(g)
		}
		wg.Wait()
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return code
	case "stageloop":
		// Stage forever from 4 goroutines; print each durable event.
		me := os.Getenv("CLOISON_HELPER_NAME")
		out := bufio.NewWriter(os.Stdout)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; ; i++ {
					e := event(fmt.Sprintf("%s-g%d", me, g), i)
					if _, err := s.Stage(ctx, e); err != nil {
						fmt.Fprintln(os.Stderr, err)
						return
					}
					mu.Lock()
					fmt.Fprintf(out, "staged %s\n", e.Payload.(audit.RequestCompleted).Request)
					out.Flush()
					mu.Unlock()
				}
			}(g)
		}
		wg.Wait()
		return 1
	case "ackloop":
		// Append forever from 8 goroutines; print each acknowledged event.
		out := bufio.NewWriter(os.Stdout)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; ; i++ {
					e := event(fmt.Sprintf("victim-g%d", g), i)
					r, err := s.Append(ctx, e)
					if err != nil {
						fmt.Fprintln(os.Stderr, err)
						return
					}
					mu.Lock()
					fmt.Fprintf(out, "ack %d %s\n", r.Seq, e.Payload.(audit.RequestCompleted).Request)
					out.Flush()
					mu.Unlock()
				}
			}(g)
		}
		wg.Wait()
		return 1
	}
	return 2
}

// A writer killed mid-batch loses no acknowledged event and leaves a chain
// that verifies.
func TestKilledWriterLosesNoAcknowledgedEvent(t *testing.T) {
	db := pgtest.New(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CLOISON_AUDIT_HELPER=ackloop", "CLOISON_HELPER_URL="+db.AdminURL,
		"CLOISON_HELPER_ROLE="+db.Roles.Runtime, "CLOISON_HELPER_DIR="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[uint64]string{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "ack" {
			t.Fatalf("helper said %q", sc.Text())
		}
		seq, _ := strconv.ParseUint(f[1], 10, 64)
		acked[seq] = f[2]
		if len(acked) == 1500 {
			// Kill while the writer is committing further batches.
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	_ = cmd.Wait()
	pool := db.RuntimePool(t)
	ctx := context.Background()
	s := openStore(t, pool, dir, 1000)
	res, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys(), ExternalDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Events < uint64(len(acked)) {
		t.Fatalf("got %d events, want at least the %d acknowledged", res.Events, len(acked))
	}
	found := 0
	err = s.Scan(ctx, 1, 0, func(r audit.Record) error {
		if want, ok := acked[r.Seq]; ok {
			env, err := audit.DecodeEnvelope(r.Payload)
			if err != nil {
				return err
			}
			p, err := env.DecodePayload()
			if err != nil {
				return err
			}
			if got := string(p.(*audit.RequestCompleted).Request); got != want {
				return fmt.Errorf("seq %d holds %s, acknowledged %s", r.Seq, got, want)
			}
			found++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found != len(acked) {
		t.Errorf("got %d of %d acknowledged events", found, len(acked))
	}
	// The ledger keeps going after the crash.
	if _, err := s.Append(ctx, event("after-crash", 1)); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed after %d acks; %d events durable", len(acked), res.Events)
}

// The runtime role may INSERT and SELECT, never UPDATE, DELETE or TRUNCATE.
func TestRuntimeRoleCannotEdit(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	rt := db.RuntimePool(t)
	s := openStore(t, rt, t.TempDir(), 2)
	for i := 0; i < 3; i++ {
		if _, err := s.Append(ctx, event("rt", i)); err != nil {
			t.Fatal(err)
		}
	}
	id, err := s.OpenFromDetection(ctx, "engine:n1", audit.Detection{Source: audit.SourceTransferFailure, Invariant: "page-digest", DetectedAt: time.Now(), AffectedResponses: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddNotice(ctx, "admin:a", audit.Notice{Incident: id, Recipient: audit.RecipientCAI, RecipientName: "Commission d'accès à l'information", SentAt: time.Now(), Method: "portail"}); err != nil {
		t.Fatal(err)
	}
	stmts := []string{
		"UPDATE audit_events SET actor = 'x' WHERE seq = 1",
		"DELETE FROM audit_events WHERE seq = 3",
		"TRUNCATE audit_events",
		"UPDATE audit_checkpoints SET note = ''",
		"DELETE FROM audit_checkpoints",
		"TRUNCATE audit_checkpoints",
		"UPDATE incidents SET opened_by = 'x'",
		"DELETE FROM incidents",
		"TRUNCATE incidents CASCADE",
		"UPDATE incident_versions SET recorded_by = 'x'",
		"DELETE FROM incident_versions",
		"TRUNCATE incident_versions",
		"UPDATE incident_notices SET method = 'x'",
		"DELETE FROM incident_notices",
		"TRUNCATE incident_notices",
		"INSERT INTO audit_events (seq, occurred_at, recorded_at, kind, actor, payload, prev_hash, hash) SELECT 99, now(), now(), 'k', 'a', '\\x', hash, hash FROM audit_events WHERE seq = 1",
		"SELECT cloison_incident_purge('x', 1)",
	}
	for _, q := range stmts {
		_, err := rt.Exec(ctx, q)
		if sqlstate(err) != "42501" || !errors.Is(translate(err), ErrAppendOnly) {
			t.Errorf("%s: got %v, want insufficient_privilege (ErrAppendOnly)", q, err)
		}
	}
	// A row that does not extend the chain: the runtime role may not
	// insert it at all (migration 00025), every role that may is refused
	// by the chain trigger.
	const forged = `INSERT INTO audit_events (seq, occurred_at, kind, actor, payload, prev_hash, hash)
		SELECT seq + 1, now(), 'request.completed', 'a', '{}', hash, sha256('forged'::bytea) FROM audit_events ORDER BY seq DESC LIMIT 1`
	if _, err = rt.Exec(ctx, forged); sqlstate(err) != "42501" {
		t.Errorf("runtime forged insert: got %v, want insufficient_privilege", err)
	}
	// Owner and superuser are refused by the ALWAYS triggers.
	admin := db.AdminPool(t)
	for _, session := range inserterSessions(db.Roles.Owner) {
		if err := execAs(ctx, admin, session, forged); !errors.Is(translate(err), ErrChainRejected) {
			t.Errorf("%s; forged insert: got %v, want ErrChainRejected", session, err)
		}
	}
	for _, q := range []string{"UPDATE audit_events SET actor = 'x'", "DELETE FROM audit_events", "TRUNCATE audit_events CASCADE", "UPDATE incident_versions SET recorded_by = 'x'"} {
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
	if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyRegister(ctx); err != nil {
		t.Fatal(err)
	}
}

// tamperFixture is a fresh ledger of 100 events checkpointed every 25 (one
// event per batch, so checkpoints land at 25, 50, 75, 100).
func tamperFixture(t *testing.T) (*pgtest.DB, *Store, *pgxpool.Pool, string) {
	db := pgtest.New(t)
	dir := t.TempDir()
	s := openStore(t, db.RuntimePool(t), dir, 25)
	ctx := context.Background()
	for i := 1; i <= 100; i++ {
		if _, err := s.Append(ctx, event("fixture", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cps, err := s.Checkpoints(ctx)
	if err != nil || len(cps) != 4 || cps[3].Size != 100 {
		t.Fatalf("got %d checkpoints (%v), want 4 ending at 100", len(cps), err)
	}
	if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys(), ExternalDir: dir}); err != nil {
		t.Fatal(err)
	}
	return db, s, db.AdminPool(t), dir
}

// superuser runs statements as the cluster superuser with the append-only
// triggers disabled: the strongest attacker short of holding the key.
func superuser(t *testing.T, admin *pgxpool.Pool, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	all := append([]string{
		"ALTER TABLE audit_events DISABLE TRIGGER USER",
		"ALTER TABLE audit_checkpoints DISABLE TRIGGER USER",
	}, stmts...)
	all = append(all, "ALTER TABLE audit_events ENABLE ALWAYS TRIGGER audit_events_append_only",
		"ALTER TABLE audit_events ENABLE ALWAYS TRIGGER audit_events_chain",
		"ALTER TABLE audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_append_only")
	for _, q := range all {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func TestSuperuserTamperingDetectedAtExactSeq(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, admin *pgxpool.Pool)
		seq    uint64
		reason audit.Reason
	}{
		{"payload edited", func(t *testing.T, admin *pgxpool.Pool) {
			superuser(t, admin, `UPDATE audit_events SET payload = convert_to(replace(convert_from(payload, 'UTF8'), '"completion_tokens":17', '"completion_tokens":18'), 'UTF8') WHERE seq = 37`)
		}, 37, audit.ReasonHash},
		{"middle row deleted", func(t *testing.T, admin *pgxpool.Pool) {
			superuser(t, admin, `DELETE FROM audit_events WHERE seq = 50`)
		}, 50, audit.ReasonGap},
		{"tail deleted and stored checkpoints removed", func(t *testing.T, admin *pgxpool.Pool) {
			superuser(t, admin, `DELETE FROM audit_events WHERE seq > 80`, `DELETE FROM audit_checkpoints WHERE size > 80`)
		}, 81, audit.ReasonTruncated},
		{"rows reordered", func(t *testing.T, admin *pgxpool.Pool) {
			superuser(t, admin, `ALTER TABLE audit_events DROP CONSTRAINT audit_events_seq_check`,
				`UPDATE audit_events SET seq = -30 WHERE seq = 30`, `UPDATE audit_events SET seq = 30 WHERE seq = 31`, `UPDATE audit_events SET seq = 31 WHERE seq = -30`)
		}, 30, audit.ReasonPrevHash},
		{"kind column edited", func(t *testing.T, admin *pgxpool.Pool) {
			superuser(t, admin, `UPDATE audit_events SET tenant = 'tenant-x' WHERE seq = 12`)
		}, 12, audit.ReasonColumns},
		{"triggers disabled and hashes recomputed", func(t *testing.T, admin *pgxpool.Pool) {
			rewriteFrom(t, admin, 60)
			superuser(t, admin, `DELETE FROM audit_checkpoints WHERE size >= 60`)
		}, 75, audit.ReasonCheckpoint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, s, admin, dir := tamperFixture(t)
			tt.tamper(t, admin)
			_, err := s.Verify(context.Background(), audit.VerifyOptions{Keys: testKeys(), ExternalDir: dir})
			var be *audit.BreakError
			if !errors.As(err, &be) {
				t.Fatalf("got %v, want *audit.BreakError", err)
			}
			if be.Seq != tt.seq || be.Reason != tt.reason {
				t.Errorf("got seq %d %s (%s), want seq %d %s", be.Seq, be.Reason, be.Detail, tt.seq, tt.reason)
			}
		})
	}
}

// rewriteFrom changes the event at seq from and recomputes every later hash,
// as a superuser who knows the formula (but not the checkpoint key) would.
func rewriteFrom(t *testing.T, admin *pgxpool.Pool, from uint64) {
	t.Helper()
	ctx := context.Background()
	var seq int64
	var hash []byte
	if err := admin.QueryRow(ctx, "SELECT seq, hash FROM audit_events WHERE seq = $1", int64(from-1)).Scan(&seq, &hash); err != nil {
		t.Fatal(err)
	}
	var head audit.Head
	head.Seq = uint64(seq)
	copy(head.Hash[:], hash)
	rows, err := admin.Query(ctx, "SELECT seq, payload FROM audit_events WHERE seq >= $1 ORDER BY seq", int64(from))
	if err != nil {
		t.Fatal(err)
	}
	type upd struct {
		seq           int64
		payload, prev []byte
		hash          []byte
	}
	var ups []upd
	for rows.Next() {
		var s int64
		var p []byte
		if err := rows.Scan(&s, &p); err != nil {
			t.Fatal(err)
		}
		if uint64(s) == from {
			p = []byte(strings.Replace(string(p), `"completion_tokens":17`, `"completion_tokens":0`, 1))
		}
		h := audit.HashEvent(uint64(s), head.Hash, p)
		ups = append(ups, upd{s, p, append([]byte(nil), head.Hash[:]...), append([]byte(nil), h[:]...)})
		head = audit.Head{Seq: uint64(s), Hash: h}
	}
	rows.Close()
	var stmts []string
	for _, u := range ups {
		stmts = append(stmts, fmt.Sprintf(`UPDATE audit_events SET payload = '\x%s', prev_hash = '\x%s', hash = '\x%s' WHERE seq = %d`,
			hex.EncodeToString(u.payload), hex.EncodeToString(u.prev), hex.EncodeToString(u.hash), u.seq))
	}
	superuser(t, admin, stmts...)
}
