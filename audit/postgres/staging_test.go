package postgres

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/internal/testwait"
)

// stagingProc is a "stageloop" helper process: a node staging events from
// four goroutines, its Store contending for the integrator lock.
type stagingProc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	acked map[string]bool // request ids acknowledged durable
}

func startStaging(t *testing.T, db *pgtest.DB, name string) *stagingProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CLOISON_AUDIT_HELPER=stageloop", "CLOISON_HELPER_URL="+db.AdminURL,
		"CLOISON_HELPER_ROLE="+db.Roles.Runtime, "CLOISON_HELPER_NAME="+name)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &stagingProc{cmd: cmd, acked: map[string]bool{}}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && f[0] == "staged" {
				p.mu.Lock()
				p.acked[f[1]] = true
				p.mu.Unlock()
			}
		}
	}()
	return p
}

func (p *stagingProc) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// lockHeld reports whether another session holds the integrator lock.
func lockHeld(t *testing.T, admin *pgxpool.Pool) bool {
	t.Helper()
	var held bool
	err := admin.QueryRow(context.Background(), `SELECT NOT pg_try_advisory_lock($1) OR NOT pg_advisory_unlock($1)`, integratorLock).Scan(&held)
	if err != nil {
		t.Fatal(err)
	}
	return held
}

var requestRe = regexp.MustCompile(`"request":"([^"]+)"`)

// requests counts, per request id, the sequenced and the staged rows
// holding it, read in one statement (one snapshot: an integration between
// two reads would hide a row from both).
func requests(t *testing.T, admin *pgxpool.Pool) (sequenced, staged map[string]int) {
	t.Helper()
	rows, err := admin.Query(context.Background(), "SELECT true, payload FROM audit_events UNION ALL SELECT false, payload FROM audit_staging")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	sequenced, staged = map[string]int{}, map[string]int{}
	for rows.Next() {
		var seq bool
		var p []byte
		if err := rows.Scan(&seq, &p); err != nil {
			t.Fatal(err)
		}
		if m := requestRe.FindSubmatch(p); m != nil {
			if seq {
				sequenced[string(m[1])]++
			} else {
				staged[string(m[1])]++
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sequenced, staged
}

// The integrator is a role, not a process: two node processes stage
// concurrently, the first holds the integrator lock; killed mid-load, every
// event it acknowledged is durable (sequenced or staged), and the second
// process takes over within the bound; killed in turn, the events staged
// and not yet integrated survive it, and a third node (this process)
// integrates them: each acknowledged event ends in the ledger exactly
// once, and the chain and tree verify.
func TestIntegratorTakeoverLosesNoStagedEvent(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	admin := db.AdminPool(t)
	a := startStaging(t, db, "nodeA")
	testwait.Eventually(t, 20*time.Second, func() bool { return a.count() >= 300 && lockHeld(t, admin) }, "node A stages and integrates")
	b := startStaging(t, db, "nodeB")
	testwait.Eventually(t, 20*time.Second, func() bool { return b.count() >= 300 }, "node B stages")
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	durable := func(p *stagingProc, who string) {
		t.Helper()
		seq, staged := requests(t, admin)
		p.mu.Lock()
		defer p.mu.Unlock()
		for id := range p.acked {
			if seq[id]+staged[id] != 1 {
				t.Fatalf("%s acknowledged %s: %d sequenced, %d staged, want 1 in all", who, id, seq[id], staged[id])
			}
		}
	}
	durable(a, "killed node A")
	// B takes over: the lock is held again and B's events are sequenced.
	before := b.count()
	testwait.Eventually(t, 5*time.Second, func() bool {
		return lockHeld(t, admin) && b.count() >= before+300
	}, "node B takes the integrator over")
	var staged int
	testwait.Eventually(t, 5*time.Second, func() bool {
		_ = admin.QueryRow(ctx, "SELECT count(*) FROM audit_staging WHERE id <= (SELECT max(id) FROM audit_staging) AND staged_at < clock_timestamp() - interval '500 ms'").Scan(&staged)
		return staged == 0
	}, "node B integrates")
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = b.cmd.Wait()
	durable(a, "node A")
	durable(b, "killed node B")
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM audit_staging").Scan(&staged); err != nil {
		t.Fatal(err)
	}
	// A third node integrates what the dead ones left staged.
	s := openStore(t, db.RuntimePool(t), "", 1000)
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	seq, left := requests(t, admin)
	if len(left) != 0 {
		t.Fatalf("%d events still staged after Sync", len(left))
	}
	for _, p := range []*stagingProc{a, b} {
		for id := range p.acked {
			if seq[id] != 1 {
				t.Fatalf("acknowledged %s is in the ledger %d times, want 1", id, seq[id])
			}
		}
	}
	res, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.VerifyTree(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("A acked %d, B acked %d, %d staged at B's death, %d events verify", a.count(), b.count(), staged, res.Events)
}

// An event staged and never integrated is under no hash: Sync gives up
// with ErrPending, and once it is older than the bound Verify reports it
// (ReasonStaged), before anything integrates it. Once an integrator runs,
// the ledger verifies again.
func TestVerifyReportsStaleStagedEvent(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	admin := db.AdminPool(t)
	cfg := Config{Origin: "test-ledger", SigningKey: testKey, IntegrationBound: 400 * time.Millisecond}
	first, err := Open(ctx, db.RuntimePool(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Append(ctx, event("before", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := first.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
		t.Fatalf("verify before: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// No integrator: this session holds the lock, before the store opens.
	lock, err := admin.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	var got bool
	if err := lock.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", integratorLock).Scan(&got); err != nil || !got {
		t.Fatalf("the test takes the integrator lock: %v %v", got, err)
	}
	s, err := Open(ctx, db.RuntimePool(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Stage(ctx, event("held-back", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx); !errors.Is(err, ErrPending) {
		t.Fatalf("sync without an integrator: got %v, want ErrPending", err)
	}
	// Append waits for a position no integrator gives: ErrPending after
	// ten bounds, not a hang (the event stays durable, staged).
	start := time.Now()
	if _, err := s.Append(ctx, event("held-back", 2)); !errors.Is(err, ErrPending) {
		t.Fatalf("append without an integrator: got %v, want ErrPending", err)
	}
	if waited := time.Since(start); waited < pendingLimit*cfg.IntegrationBound {
		t.Fatalf("append gave up after %v, before %v", waited, pendingLimit*cfg.IntegrationBound)
	}
	_, err = s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()})
	var be *audit.BreakError
	if !errors.As(err, &be) || be.Reason != audit.ReasonStaged || be.Seq != 2 {
		t.Fatalf("verify with a stale staged event: got %v, want a %s break at seq 2", err, audit.ReasonStaged)
	}
	// The bound is the verifier's too: a larger one passes the check (and
	// then waits for the integrator in vain).
	if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys(), StagedBound: time.Hour}); !errors.Is(err, ErrPending) {
		t.Fatalf("verify with a 1 h bound: got %v, want ErrPending", err)
	}
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_unlock($1)", integratorLock); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatalf("sync once the store integrates again: %v", err)
	}
	if _, err := s.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()})
	if err != nil || res.Events != 3 {
		t.Fatalf("verify after integration: %+v %v, want 3 events", res, err)
	}
}

// Staged rows leave only through audit_integrate: the runtime role cannot
// delete, update or backdate them, and the owner's delete is refused by
// the trigger.
func TestStagingIsAppendOnly(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	rt := db.RuntimePool(t)
	admin := db.AdminPool(t)
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", integratorLock); err != nil { // keep rows staged
		t.Fatal(err)
	}
	stmts := []struct {
		pool *pgxpool.Pool
		sql  string
		want string
	}{
		{rt, "INSERT INTO audit_staging (staged_at, occurred_at, kind, actor, payload) VALUES (now() - interval '1 hour', now(), 'k', 'a', '\\x00')", "42501"},
		{rt, "UPDATE audit_staging SET actor = 'x'", "42501"},
		{rt, "DELETE FROM audit_staging", "42501"},
		{rt, "TRUNCATE audit_staging", "42501"},
		{rt, "DELETE FROM audit_integrations", "42501"},
		{admin, "DELETE FROM audit_staging", "CL001"},
		{admin, "UPDATE audit_staging SET actor = 'x'", "CL001"},
		{admin, "TRUNCATE audit_staging", "CL001"},
		{admin, "DELETE FROM audit_integrations", "CL001"},
	}
	if _, err := rt.Exec(ctx, `INSERT INTO audit_staging (occurred_at, kind, actor, payload) VALUES ('2026-01-01T00:00:00Z', 'k', 'a',
		convert_to('{"actor":"a","data":{},"kind":"k","occurred_at":"2026-01-01T00:00:00.000000Z","v":1}', 'UTF8'))`); err != nil {
		t.Fatal(err)
	}
	for _, c := range stmts {
		_, err := c.pool.Exec(ctx, c.sql)
		if got := sqlstate(err); got != c.want {
			t.Errorf("%s: got %q (%v), want %s", c.sql, got, err, c.want)
		}
	}
	if err := translate(func() error { _, err := rt.Exec(ctx, "DELETE FROM audit_staging"); return err }()); !errors.Is(err, ErrAppendOnly) {
		t.Errorf("got %v, want ErrAppendOnly", err)
	}
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM audit_staging").Scan(&n); err != nil || n != 1 {
		t.Fatalf("got %d staged rows (%v), want 1", n, err)
	}
}

// Many goroutines of two stores stage and append at once: every event is
// sequenced once, Append's records are the stored ones, and the ledger
// verifies.
func TestStageAndAppendConcurrently(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	stores := []*Store{openStore(t, db.RuntimePool(t), "", 1000), openStore(t, db.RuntimePool(t), "", 1000)}
	const goroutines, each = 6, 100
	var wg sync.WaitGroup
	var mu sync.Mutex
	seqs := map[uint64]audit.Record{}
	for w, s := range stores {
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					e := event(fmt.Sprintf("w%d-g%d", w, g), i)
					if g%2 == 0 {
						if _, err := s.Stage(ctx, e); err != nil {
							t.Error(err)
							return
						}
						continue
					}
					r, err := s.Append(ctx, e)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if _, dup := seqs[r.Seq]; dup {
						t.Errorf("seq %d returned twice", r.Seq)
					}
					seqs[r.Seq] = r
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	v := stores[0]
	n := 0
	err := v.Scan(ctx, 1, 0, func(r audit.Record) error {
		n++
		if a, ok := seqs[r.Seq]; ok && (a.Hash != r.Hash || a.PrevHash != r.PrevHash || string(a.Payload) != string(r.Payload)) {
			return fmt.Errorf("seq %d: Append returned another record than the stored one", r.Seq)
		}
		return nil
	})
	if err != nil || n != 2*goroutines*each {
		t.Fatalf("scan: %d events, %v; want %d", n, err, 2*goroutines*each)
	}
	if _, err := v.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
		t.Fatal(err)
	}
}
