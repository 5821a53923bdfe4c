package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/witness"
	"github.com/cloison/cloison/internal/pgtest"
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
