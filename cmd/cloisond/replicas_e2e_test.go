package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/tenancy"
)

// emptyDatabase names a database that does not exist yet on the test
// server, dropped (if some node made it) when the test ends.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	server, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := fmt.Sprintf("cloison_t_cold_%d_%s", os.Getpid(), hex.EncodeToString(rnd[:]))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
	return pgtest.WithDatabase(server, name)
}

// launch starts cloisond without waiting for it; wait collects it.
func launch(t *testing.T, dbURL, stateDir string, extra ...string) *node {
	t.Helper()
	n := &node{t: t, stateDir: stateDir, dbURL: dbURL, logs: &syncBuffer{}, done: make(chan error, 1)}
	args := append([]string{"--database-url", pgtest.AsRole(dbURL, pgtest.Roles.Runtime), "--migrate-database-url", dbURL, "--addr", "127.0.0.1:0",
		"--state-dir", stateDir, "--ready-file", filepath.Join(stateDir, "ready"), "--grpc-addr", "127.0.0.1:0",
		"--grpc-ready-file", filepath.Join(stateDir, "grpc-ready"), "--kv-pages", "256", "--refusal-flush", "200ms"}, pgtestRoles()...)
	n.cmd = exec.Command(binary, append(args, extra...)...)
	n.cmd.Stdout, n.cmd.Stderr = n.logs, n.logs
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.done <- n.cmd.Wait() }()
	t.Cleanup(n.stop)
	return n
}

// wait returns once n is serving; it fails the test if n exits first.
func (n *node) wait(d time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(filepath.Join(n.stateDir, "ready")); err == nil && len(b) > 0 {
			n.base = "http://" + string(b)
			g, _ := os.ReadFile(filepath.Join(n.stateDir, "grpc-ready"))
			n.grpcAddr = string(g)
			return
		}
		select {
		case err := <-n.done:
			n.t.Fatalf("cloisond exited: %v\n%s", err, n.logs)
		case <-time.After(50 * time.Millisecond):
		}
	}
	n.t.Fatalf("cloisond not ready\n%s", n.logs)
}

// Issue 14 §2: three nodes started at once on a database that does not
// exist yet all become ready — the CREATE DATABASE race, role setup and the
// migrations are serialized by advisory locks, the signing keys are made
// once (the first node under the issuer's lock) and the others read them,
// and the development tenant is created once. A token one node's keys
// signed is accepted by every node. Before the locks, two of the three
// died on concurrent migration (duplicate goose_db_version or a half-made
// table) or on the CREATE DATABASE race.
func TestE2EColdStartThreeNodes(t *testing.T) {
	dbURL := emptyDatabase(t)
	// The key-encryption key is the deployment's shared secret (a mounted
	// Secret in Kubernetes): every node holds the same one.
	kek := make([]byte, tenancy.KEKSize)
	_, _ = rand.Read(kek)
	var nodes []*node
	for i := range 3 {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "signing.kek"), []byte(hex.EncodeToString(kek)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, launch(t, dbURL, dir, "--create-database", "--node", fmt.Sprintf("cold-%d", i), "--dev-tenant", "dev"))
	}
	for _, n := range nodes {
		n.wait(90 * time.Second)
	}
	tok := nodes[0].token("dev", time.Minute, tenancy.ScopeInfer)
	for i, n := range nodes {
		r := n.do("POST", "/v1/completions", tok, completion("hello there", 4, false))
		if r.status != 200 {
			t.Errorf("node %d: got %d %s, want 200", i, r.status, r.body)
		}
		if r := n.do("GET", "/readyz", "", nil); r.status != 200 {
			t.Errorf("node %d /readyz: got %d, want 200", i, r.status)
		}
	}
	// A fourth node with another key-encryption key refuses to start:
	// it could neither sign nor verify this deployment's tokens.
	out := startNodeExpectExit(t, dbURL, t.TempDir())
	if !strings.Contains(out, "key-encryption key") && !strings.Contains(out, "signing keys") {
		t.Errorf("a node with another KEK: want a key error, got\n%s", out)
	}
}
