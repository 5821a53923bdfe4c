package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/audit/witness"
	"github.com/cloison/cloison/internal/keyfile"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/tenancy"
)

// A real cloisond with --witness submits its tree checkpoints to the
// witness (the real witness code behind an HTTP server) and stores the
// cosignatures: while the witness is not up yet it serves all the same
// (failures are logged, appends go on), then the cosigned checkpoint in
// the database verifies with the log's and the witness's keys.
func TestE2EWitnessCosignsCheckpoints(t *testing.T) {
	wkey := ed25519.NewKeyFromSeed([]byte("cloisond-e2e-witness-key-32bytes"))
	wvkey, err := audit.CosignerVerifierKey("witness.test/e2e", wkey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	// The witness needs the log's key, which cloisond creates at start:
	// until it is known the server answers 503 (a failure to reach it).
	var w atomic.Pointer[witness.Witness]
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if x := w.Load(); x != nil {
			x.ServeHTTP(rw, r)
			return
		}
		http.Error(rw, "starting", http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	db := pgtest.New(t)
	n := startNode(t, db.AdminURL, pgtestRoles(), "--witness", srv.URL+"="+wvkey, "--witness-interval", "100ms")
	var logVKey string
	for _, line := range strings.Split(n.logs.String(), "\n") {
		var rec struct {
			Msg  string `json:"msg"`
			VKey string `json:"tree_vkey"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.VKey != "" {
			logVKey = rec.VKey
		}
	}
	if logVKey == "" {
		t.Fatalf("cloisond did not log its tree_vkey:\n%s", n.logs)
	}
	// The witness starts only once a refused submission was logged, so the
	// check below does not depend on when the first submission happens.
	for wait := time.Now().Add(60 * time.Second); !strings.Contains(n.logs.String(), "witness submission failed"); {
		if time.Now().After(wait) {
			t.Fatalf("the 503s before the witness started were not logged:\n%s", n.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wt, err := witness.New(witness.Config{Name: "witness.test/e2e", Key: wkey, Logs: []string{logVKey}, StatePath: filepath.Join(t.TempDir(), "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	w.Store(wt)

	pool, err := pgxpool.New(context.Background(), db.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	deadline := time.Now().Add(60 * time.Second)
	for wt.Size(strings.SplitN(logVKey, "+", 2)[0]) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the witness never cosigned:\n%s", n.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var note string
	var sig string
	for {
		err := pool.QueryRow(context.Background(), `SELECT c.note, w.signature FROM tlog_cosignatures w JOIN tlog_checkpoints c USING (size)
			WHERE w.witness = 'witness.test/e2e' ORDER BY size DESC LIMIT 1`).Scan(&note, &sig)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cosignature stored: %v\n%s", err, n.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	full, err := audit.AddCosignatures([]byte(note), []byte(sig))
	if err != nil {
		t.Fatal(err)
	}
	h, cs, err := audit.VerifyCosigned(full, logVKey, []string{wvkey}, 1)
	if err != nil || len(cs) != 1 || h.Size == 0 {
		t.Fatalf("stored cosigned checkpoint: %v %v %+v", err, cs, h)
	}
	if r := n.do("GET", "/healthz", "", nil); r.status != 200 {
		t.Fatalf("healthz: %d", r.status)
	}
}

// The DBA without the log key rewrites the record: the node is stopped,
// every event, tree hash, checkpoint and cosignature is deleted (triggers
// off), forged events are appended through the ledger's own path, and the
// node restarts with its state directory. It must not sign the forged
// tree: it serves (appends go on) but logs the refusal, exposes it as a
// metric, writes the incident file, signs nothing, and the witness (asked
// by a verifier) still holds the tree the forged one contradicts.
func TestE2ENodeRefusesToSignRewrittenLedger(t *testing.T) {
	wkey := ed25519.NewKeyFromSeed([]byte("cloisond-e2e-witness-rewrite-32b"))
	wvkey, err := audit.CosignerVerifierKey("witness.test/rewrite", wkey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	// The log's key, made before the node starts, so the witness is
	// configured with it from the start.
	stateDir := t.TempDir()
	logKey, err := keyfile.Write(filepath.Join(stateDir, "checkpoint.key"))
	if err != nil {
		t.Fatal(err)
	}
	logVKey, err := audit.TreeVerifierKey("cloison", logKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	wt, err := witness.New(witness.Config{Name: "witness.test/rewrite", Key: wkey, Logs: []string{logVKey}, StatePath: filepath.Join(t.TempDir(), "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(wt)
	defer srv.Close()
	witnessFlags := []string{"--witness", srv.URL + "=" + wvkey, "--witness-interval", "100ms", "--origin", "cloison"}

	db := pgtest.New(t)
	n := startNodeIn(t, stateDir, db.AdminURL, pgtestRoles(), witnessFlags...)
	deadline := time.Now().Add(60 * time.Second)
	for wt.Size("cloison") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the witness never cosigned:\n%s", n.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The route asks the witness: its answer carries a cosignature made
	// now, not one the database remembers.
	createTenant(t, db.AdminURL, "acme", nil)
	admin := n.token("acme", time.Hour, tenancy.ScopeAdmin, tenancy.ScopeComplianceRead)
	asked := time.Now().Add(-time.Second)
	rep := n.do("GET", "/compliance/v1/tlog/checkpoint?witnesses=1", admin, nil)
	if rep.status != 200 {
		t.Fatalf("checkpoint?witnesses=1: %d %s", rep.status, rep.body)
	}
	if _, cs, err := audit.VerifyCosigned(rep.body, logVKey, []string{wvkey}, 1); err != nil || cs[0].Time.Before(asked.Truncate(time.Second)) {
		t.Fatalf("checkpoint?witnesses=1: %v %+v, want a cosignature made when asked", err, cs)
	}
	n.stop()
	cosigned := wt.Size("cloison")
	if _, err := os.Stat(filepath.Join(stateDir, "checkpoints", auditpg.TreeCheckpointFileName("cloison"))); err != nil {
		t.Fatalf("the node kept no tree note in its state directory: %v", err)
	}

	// The rewrite.
	ctx := context.Background()
	pool := adminPool(t, db.AdminURL)
	tables := []string{"audit_events", "audit_checkpoints", "tlog_tiles", "tlog_checkpoints", "tlog_cosignatures"}
	var stmts []string
	for _, tb := range tables {
		stmts = append(stmts, "ALTER TABLE "+tb+" DISABLE TRIGGER USER")
	}
	for _, tb := range []string{"tlog_cosignatures", "tlog_checkpoints", "audit_checkpoints", "tlog_tiles", "audit_events"} {
		stmts = append(stmts, "DELETE FROM "+tb)
	}
	for _, tb := range tables {
		stmts = append(stmts, "ALTER TABLE "+tb+" ENABLE TRIGGER USER")
	}
	for _, q := range stmts {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	runtime, err := pgxpool.New(ctx, pgtest.AsRole(db.AdminURL, pgtest.Roles.Runtime))
	if err != nil {
		t.Fatal(err)
	}
	forger, err := auditpg.Open(ctx, runtime, auditpg.Config{Origin: "cloison"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < int(cosigned)+5; i++ {
		if _, err := forger.Append(ctx, audit.Event{OccurredAt: time.Now(), Actor: "admin:forger", Payload: audit.RequestCompleted{
			Request: cloison.RequestID(fmt.Sprintf("forged-%d", i)), Model: "m", PromptTokens: 1, CompletionTokens: 1, Pages: 1, Tier: "never"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := forger.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.Close()

	// The restart.
	r := startNodeMayStop(t, stateDir, db.AdminURL, pgtestRoles(), witnessFlags...)
	for wait := time.Now().Add(30 * time.Second); !strings.Contains(r.logs.String(), "REFUSING TO SIGN"); {
		if time.Now().After(wait) {
			t.Fatalf("the restarted node did not refuse to sign:\n%s", r.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	files, _ := filepath.Glob(filepath.Join(stateDir, "checkpoints", auditpg.RefusalFilePrefix+"*.json"))
	if len(files) == 0 {
		t.Errorf("no incident file in the state directory")
	}
	// And a register entry (invariant ledger_signing), appended while
	// signing is refused.
	for wait := time.Now().Add(30 * time.Second); !strings.Contains(r.logs.String(), "ledger signing refused: incident opened"); {
		if time.Now().After(wait) {
			t.Fatalf("no register entry for the refusal:\n%s", r.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var entries int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM incident_versions WHERE convert_from(content, 'UTF8') LIKE '%ledger_signing%'").Scan(&entries); err != nil || entries != 1 {
		t.Errorf("register entries naming ledger_signing: %d (%v), want 1", entries, err)
	}
	// The key rows' events went with the rewrite, so the node may also
	// refuse to start on them (fail closed: tenancy's row check). When it
	// still serves, what needs a checkpoint fails and the rest is served.
	if r.exited {
		if !strings.Contains(r.logs.String(), "cannot be proven against the ledger") {
			t.Fatalf("the restarted node stopped for another reason:\n%s", r.logs)
		}
	} else {
		if _, body := r.scrape(t, ""); !strings.Contains(body, "cloison_ledger_signing_refused{") || !metricAbove(body, "cloison_ledger_signing_refused{", 0) {
			t.Errorf("no cloison_ledger_signing_refused 1 in the metrics")
		}
		if rep := r.do("GET", "/healthz", "", nil); rep.status != 200 {
			t.Errorf("healthz: %d (the node serves; what needs a checkpoint fails)", rep.status)
		}
		admin = r.token("acme", time.Hour, tenancy.ScopeAdmin, tenancy.ScopeComplianceRead)
		for _, path := range []string{"/compliance/v1/tlog/checkpoint", "/compliance/v1/tlog/checkpoint?witnesses=1"} {
			if rep := r.do("GET", path, admin, nil); rep.status != http.StatusServiceUnavailable {
				t.Errorf("%s after the refusal: %d %s, want 503", path, rep.status, rep.body)
			}
		}
	}
	time.Sleep(1500 * time.Millisecond) // past the tree checkpoint interval
	var signed int
	if err := pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM tlog_checkpoints) + (SELECT count(*) FROM audit_checkpoints)").Scan(&signed); err != nil {
		t.Fatal(err)
	}
	if signed != 0 {
		t.Errorf("the node signed %d checkpoints over the forged ledger", signed)
	}
	if got := wt.Size("cloison"); got != cosigned {
		t.Errorf("the witness moved from %d to %d", cosigned, got)
	}
}

// metricAbove reports whether a sample line starting with prefix has a
// value above v.
func metricAbove(body, prefix string, v float64) bool {
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			f := strings.Fields(l)
			var x float64
			if _, err := fmt.Sscan(f[len(f)-1], &x); err == nil && x > v {
				return true
			}
		}
	}
	return false
}
