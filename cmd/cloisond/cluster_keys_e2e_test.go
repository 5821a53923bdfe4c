package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/internal/keyfile"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/tenancy"
)

// clusterSecrets writes the files every node of one cluster is given: the
// log signing key and the key-encryption key (mode 0600, as mounted
// secrets).
func clusterSecrets(t *testing.T) (logKey, kek string) {
	t.Helper()
	dir := t.TempDir()
	logKey, kek = filepath.Join(dir, "log.key"), filepath.Join(dir, "kek")
	if _, err := keyfile.Write(logKey); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, tenancy.KEKSize)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kek, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return logKey, kek
}

// tokenWithKEK issues a dev-issuer token with the cluster's KEK file.
func tokenWithKEK(t *testing.T, dbURL, kekPath string, tenant cloison.TenantID, scopes ...tenancy.Scope) string {
	t.Helper()
	kek, err := tenancy.LoadKEK(kekPath, false)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := tenancy.OpenKeyRing(context.Background(), adminStore(t, dbURL), "cloison-dev", kek)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tenancy.NewIssuer(ring).Issue(tenancy.TokenRequest{Subject: "e2e-" + string(tenant), Tenant: tenant, Scopes: scopes, Audience: "cloison", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Two cloisond processes on one database share one log: both sign its
// checkpoints with the cluster's log key (--log-key-file), so each node's
// verify endpoint reports the chain its peer wrote, checkpoints included,
// as healthy (before, each node signed with its own state-dir
// key and reported the other's checkpoints as a broken chain). A node
// holding another log key is refused at start, before it signs anything,
// and a production start without key files is refused with the flags named.
func TestE2ETwoNodesShareLog(t *testing.T) {
	db := pgtest.New(t)
	logKey, kek := clusterSecrets(t)
	files := []string{"--log-key-file", logKey, "--kek-file", kek, "--dev=false"}
	a := startNode(t, db.AdminURL, pgtestRoles(), append([]string{"--node", "node-a"}, files...)...)
	b := startNode(t, db.AdminURL, pgtestRoles(), append([]string{"--node", "node-b"}, files...)...)
	createTenant(t, db.AdminURL, "acme", nil)
	tok := tokenWithKEK(t, db.AdminURL, kek, "acme", tenancy.ScopeInfer, tenancy.ScopeAdmin, tenancy.ScopeComplianceRead, tenancy.ScopeComplianceWrite)
	for i := 0; i < 3; i++ {
		for _, n := range []*daemon{a, b} {
			if r := n.do("POST", "/v1/completions", tok, completion("aaab", 3, false)); r.status != 200 {
				t.Fatalf("completion: %d %s", r.status, r.body)
			}
		}
	}
	// b's final checkpoint is written at its shutdown; a's at its own.
	b.stop()
	pool := adminPool(t, db.AdminURL)
	ctx := context.Background()
	var checkpoints, keys int
	if err := pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT key_id) FROM audit_checkpoints").Scan(&checkpoints, &keys); err != nil {
		t.Fatal(err)
	}
	if checkpoints == 0 || keys != 1 {
		t.Fatalf("got %d checkpoints under %d keys, want some under one", checkpoints, keys)
	}
	verify := func(n *daemon, who string) {
		t.Helper()
		r := n.do("POST", "/compliance/v1/ledger/verify", tok, nil)
		if r.status != 200 || !bytes.HasPrefix(r.body, []byte(`{"ok":true,`)) {
			t.Fatalf("%s verify: %d %s", who, r.status, r.body)
		}
	}
	verify(a, "node a, after node b's checkpoint")
	// Restarted, b verifies what a wrote meanwhile.
	if r := a.do("POST", "/v1/completions", tok, completion("aaab", 3, false)); r.status != 200 {
		t.Fatalf("completion: %d %s", r.status, r.body)
	}
	b = startNode(t, db.AdminURL, pgtestRoles(), append([]string{"--node", "node-b"}, files...)...)
	a.stop()
	verify(b, "node b, after node a's checkpoint")

	// One creation of each key in the ledger, however many starts.
	var created int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM deployment_keys WHERE op = 'created'").Scan(&created); err != nil || created != 2 {
		t.Fatalf("deployment_keys: %d created rows, %v; want 2 (log key, KEK)", created, err)
	}

	// A node with its own dev keys is refused: it would sign checkpoints
	// its peers cannot verify.
	out := startNodeExpectExit(t, db.AdminURL, t.TempDir(), "--node", "stray")
	if !strings.Contains(out, "another key") || !strings.Contains(out, "--log-key-file") {
		t.Fatalf("stray node: want a key mismatch naming --log-key-file, got:\n%s", out)
	}
	// Production mode without key files does not start.
	out = startNodeExpectExit(t, db.AdminURL, t.TempDir(), "--dev=false")
	if !strings.Contains(out, "--kek-file") || !strings.Contains(out, "--log-key-file") {
		t.Fatalf("production start without keys: got:\n%s", out)
	}
}
