//go:build hatest

package hatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/internal/keyfile"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/internal/testwait"
	"github.com/cloison/cloison/tenancy"
)

// resumeBudget: the longest a failover may take, kill to the first 200
// (Patroni's ttl 10 s, loop_wait 1 s; the pools' reconnect on top).
const resumeBudget = 45 * time.Second

const (
	database = "cloison_ha"
	tenant   = "ha"
	model    = "cloison-context-bag"
	clients  = 4
)

func env(t *testing.T, k string) string {
	t.Helper()
	v := os.Getenv(k)
	if v == "" {
		t.Fatalf("%s unset: run `make ha-test` (scripts/ha.sh sets up the cluster)", k)
	}
	return v
}

func build(t *testing.T, dir, pkg string) string {
	t.Helper()
	root, err := pgtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, "./"+pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// result is one request as the client saw it.
type result struct {
	id         string
	status     int
	err        error // transport error: no answer
	start, end time.Time
}

func TestFailover(t *testing.T) {
	hosts, via, patroni, haDir := env(t, "HA_PG_HOSTS"), env(t, "HA_VIA"), env(t, "HA_PATRONI"), env(t, "HA_DIR")
	multi := func(user, db string) string {
		return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&target_session_attrs=read-write", user, hosts, db)
	}
	adminURL := multi("postgres", database)
	runtimeURL := multi("cloison_runtime", database)
	if via == "pgbouncer" {
		runtimeURL = fmt.Sprintf("postgres://cloison_runtime@%s/%s?sslmode=disable", env(t, "HA_BOUNCER"), database)
	}
	var pooling []string
	if via == "pgbouncer" {
		pooling = []string{"--db-transaction-pooling"}
	}
	tmp := t.TempDir()
	cloisond, cloisonctl := build(t, tmp, "cmd/cloisond"), build(t, tmp, "cmd/cloisonctl")

	// Shared secrets, as a deployment mounts them.
	state := filepath.Join(tmp, "state")
	logKey := filepath.Join(tmp, "log.key")
	if _, err := keyfile.Write(logKey); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cmd := exec.Command(cloisond, "--database-url", runtimeURL, "--migrate-database-url", adminURL, "--create-database",
		"--dev", "--dev-tenant", tenant, "--state-dir", state, "--log-key-file", logKey, "--node", "ha-"+via,
		"--addr", "127.0.0.1:0", "--ready-file", filepath.Join(state, "ready"), "--grpc-addr", "127.0.0.1:0",
		"--kv-pages", "1024", "--refusal-flush", "200ms")
	cmd.Args = append(cmd.Args, pooling...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("cloisond output:\n%s", logs)
		}
	})
	base := ""
	for deadline := time.Now().Add(90 * time.Second); base == ""; {
		if b, err := os.ReadFile(filepath.Join(state, "ready")); err == nil && len(b) > 0 {
			base = "http://" + string(b)
			break
		}
		select {
		case err := <-done:
			t.Fatalf("cloisond exited: %v\n%s", err, logs)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("cloisond not ready\n%s", logs)
		}
	}
	token := issue(t, adminURL, filepath.Join(state, "signing.kek"))

	// Traffic: clients loop until told to stop.
	var mu sync.Mutex
	var results []result
	quit := make(chan struct{})
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: 60 * time.Second}
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-quit:
					return
				default:
				}
				body, _ := json.Marshal(map[string]any{"model": model, "prompt": fmt.Sprintf("client %d request %d abc", c, i), "max_tokens": 4, "temperature": 0})
				req, _ := http.NewRequest("POST", base+"/v1/completions", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				r := result{start: time.Now()}
				resp, err := hc.Do(req)
				if err == nil {
					_, err = io.ReadAll(resp.Body) // complete: the 200 counts only once its body is read
					resp.Body.Close()
					r.status, r.id = resp.StatusCode, resp.Header.Get("X-Request-Id")
				}
				r.err, r.end = err, time.Now()
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
				if r.status != 200 {
					time.Sleep(50 * time.Millisecond) // a client's back-off
				}
			}
		}()
	}
	count := func(since time.Time) (ok int) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range results {
			if r.status == 200 && r.start.After(since) {
				ok++
			}
		}
		return ok
	}
	t0 := time.Now()
	testwait.Eventually(t, 30*time.Second, func() bool { return count(t0) >= 50 }, "200s before the kill")

	old := primary(t, patroni)
	killed := kill(t, haDir, old)
	t.Logf("killed the primary %s (SIGKILL) at %s", old, killed.Format(time.RFC3339Nano))
	testwait.Eventually(t, resumeBudget+10*time.Second, func() bool { return count(killed) >= 50 }, "200s after the kill")
	close(quit)
	wg.Wait()
	stop() // a clean stop signs the final checkpoint

	// The figures.
	var ok, unavailable int
	var firstAfter time.Time
	var bad []string
	for _, r := range results {
		switch {
		case r.err != nil:
			bad = append(bad, fmt.Sprintf("no answer: %v", r.err))
		case r.status == 200:
			ok++
			if r.start.After(killed) && (firstAfter.IsZero() || r.end.Before(firstAfter)) {
				firstAfter = r.end
			}
		case r.status == 503:
			unavailable++
		default:
			bad = append(bad, fmt.Sprintf("%s: status %d", r.id, r.status))
		}
	}
	resumed := firstAfter.Sub(killed)
	if len(bad) > 0 {
		t.Errorf("%d answers neither 200 nor 503 (want none): %v", len(bad), bad[:min(len(bad), 10)])
	}
	if resumed > resumeBudget {
		t.Errorf("service resumed %v after the kill, want within %v", resumed, resumeBudget)
	}

	// Every 200 has its request.completed in the new primary's ledger.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var inRecovery bool
	var port int
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery(), current_setting('port')::int").Scan(&inRecovery, &port); err != nil {
		t.Fatal(err)
	}
	if inRecovery || strings.HasSuffix(old, ":"+strconv.Itoa(port)) {
		t.Fatalf("the ledger's server (port %d, in recovery %v) is not a new primary (old %s)", port, inRecovery, old)
	}
	rows, err := conn.Query(ctx, `SELECT convert_from(payload, 'UTF8')::jsonb #>> '{data,request}', coalesce(convert_from(payload, 'UTF8')::jsonb #>> '{data,status}', '')
		FROM audit_events WHERE kind = 'request.completed'`)
	if err != nil {
		t.Fatal(err)
	}
	ledgered := map[string]string{}
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		ledgered[id] = status
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Ledgered as succeeded but answered otherwise: behind PgBouncer, an
	// append that timed out in cloisond (LedgerTimeout) while PgBouncer
	// held it queued, run once the new primary answered (deploy/README.md).
	// Allowed here (the client got no content; the event exists); counted.
	lost, unacknowledged := 0, 0
	for _, r := range results {
		if r.status != 200 {
			if st, found := ledgered[r.id]; found && st == "" {
				unacknowledged++
				t.Logf("request %s answered %d at %s is ledgered as succeeded", r.id, r.status, r.end.Format(time.RFC3339Nano))
			}
			continue
		}
		if st, found := ledgered[r.id]; !found || st != "" {
			lost++
			if lost <= 10 {
				t.Errorf("request %s answered 200 at %s: ledger has %q (found %v), want a successful request.completed", r.id, r.end.Format(time.RFC3339Nano), st, found)
			}
		}
	}
	t.Logf("FIGURES via=%s requests=%d ok=%d unavailable(503)=%d other=%d lost=%d resumed_after=%v (kill to first 200) ledgered_completed=%d ledgered_not_200=%d",
		via, len(results), ok, unavailable, len(bad), lost, resumed.Round(time.Millisecond), len(ledgered), unacknowledged)
	if lost > 0 {
		t.Errorf("%d acknowledged requests lost their request.completed entry (want 0)", lost)
	}

	// The log verifies on the new primary.
	out, err := exec.Command(cloisonctl, "audit", "verify", "--database-url", adminURL, "--public-key", logKey+".pub",
		"--checkpoint-dir", filepath.Join(state, "checkpoints")).CombinedOutput()
	if err != nil {
		t.Errorf("cloisonctl audit verify: %v\n%s", err, out)
	} else {
		t.Logf("cloisonctl audit verify: %s", bytes.TrimSpace(out))
	}
}

// issue signs an infer token for the dev tenant with the node's dev keys.
func issue(t *testing.T, adminURL, kekPath string) string {
	t.Helper()
	ctx := context.Background()
	p, err := pgxpool.New(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	l, err := auditpg.Open(ctx, p, auditpg.Config{Origin: "ha-admin"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	kek, err := tenancy.LoadKEK(kekPath, false)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := tenancy.OpenKeyRing(ctx, tenancy.NewStore(p).WithLedger(l), "cloison-dev", kek)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tenancy.NewIssuer(ring).Issue(tenancy.TokenRequest{Subject: "ha-client", Tenant: cloison.TenantID(tenant),
		Scopes: []tenancy.Scope{tenancy.ScopeInfer}, Audience: "cloison", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// primary returns the name of Patroni's leader (pg0 or pg1), asking each
// node's REST API (GET /primary answers 200 on the leader only).
func primary(t *testing.T, apis string) string {
	t.Helper()
	for i, api := range strings.Split(apis, ",") {
		resp, err := http.Get(api + "/primary")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			return fmt.Sprintf("pg%d", i)
		}
	}
	t.Fatal("no Patroni node is primary")
	return ""
}

// kill SIGKILLs node's Patroni, then its postmaster and every child of it
// (the machine is lost: nothing of it shuts down cleanly or restarts it).
func kill(t *testing.T, dir, node string) time.Time {
	t.Helper()
	pid := func(file string) int {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	patroni, postmaster := pid(filepath.Join(dir, node, "patroni.pid")), pid(filepath.Join(dir, node, "data", "postmaster.pid"))
	children := childrenOf(postmaster)
	at := time.Now()
	for _, p := range append([]int{patroni, postmaster}, children...) {
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			t.Fatalf("kill %d: %v", p, err)
		}
	}
	return at
}

// childrenOf lists the processes whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces; cut after the last ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// syncBuffer collects a subprocess's output while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
