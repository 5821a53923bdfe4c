package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
func launch(t *testing.T, dbURL, stateDir string, extra ...string) *daemon {
	t.Helper()
	n := &daemon{t: t, stateDir: stateDir, dbURL: dbURL, logs: &syncBuffer{}, done: make(chan error, 1)}
	args := append([]string{"--database-url", pgtest.AsRole(dbURL, pgtest.Roles.Runtime), "--migrate-database-url", dbURL, "--addr", "127.0.0.1:0",
		"--state-dir", stateDir, "--ready-file", filepath.Join(stateDir, "ready"), "--grpc-addr", "127.0.0.1:0",
		"--grpc-ready-file", filepath.Join(stateDir, "grpc-ready"), "--kv-pages", "256", "--refusal-flush", "200ms", "--metrics-addr", "127.0.0.1:0"}, pgtestRoles()...)
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
func (n *daemon) wait(d time.Duration) {
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

// startReplicas starts n nodes at once on dbURL in production mode,
// sharing one key-encryption key and one log key (the deployment's shared
// secrets, mounted Secrets in Kubernetes), and returns them once all are
// serving.
func startReplicas(t *testing.T, dbURL string, n int, extra ...string) []*daemon {
	t.Helper()
	logKey, kek := clusterSecrets(t)
	// adminStore signs its tenant changes with the replicas' log key:
	// nodes refuse a tenant whose last event the key did not sign.
	nodeLogKeys.Store(dbURL, nodeLogKey{file: logKey})
	var nodes []*daemon
	kekBytes, err := os.ReadFile(kek)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		dir := t.TempDir()
		// node.token signs with the KEK in the node's state dir: the same one.
		if err := os.WriteFile(filepath.Join(dir, "signing.kek"), kekBytes, 0o600); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, launch(t, dbURL, dir, append([]string{"--node", fmt.Sprintf("replica-%d", i),
			"--log-key-file", logKey, "--kek-file", kek}, extra...)...))
	}
	for _, n := range nodes {
		n.wait(90 * time.Second)
	}
	return nodes
}

// Three nodes started at once on a database that does not
// exist yet all become ready — the CREATE DATABASE race, role setup and the
// migrations are serialized by advisory locks, the signing keys are made
// once (the first node under the issuer's lock) and the others read them,
// and the development tenant is created once. A token one node's keys
// signed is accepted by every node. Before the locks, two of the three
// died on concurrent migration (duplicate goose_db_version or a half-made
// table) or on the CREATE DATABASE race.
func TestE2EColdStartThreeNodes(t *testing.T) {
	nodes := startReplicas(t, emptyDatabase(t), 3, "--create-database", "--dev-tenant", "dev")
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
	// A fourth node with its own (dev) keys refuses to start:
	// it could neither sign nor verify this deployment's tokens.
	out := startNodeExpectExit(t, nodes[0].dbURL, t.TempDir())
	if !strings.Contains(out, "key-encryption key") && !strings.Contains(out, "signing keys") && !strings.Contains(out, "records another key") {
		t.Errorf("a node with another KEK: want a key error, got\n%s", out)
	}
}

// A tenant of 100 tokens per minute served by two processes
// gets its quota once across both (plus the burst tenancy.WithBudget
// states: one chunk of 5 tokens per node), not once per node. Without the
// shared budget both nodes admitted ~100 (184 in the report).
func TestE2EClusterQuotaTwoNodes(t *testing.T) {
	tdb := pgtest.New(t)
	const perMinute = 100
	nodes := startReplicas(t, tdb.AdminURL, 2)
	createTenant(t, tdb.AdminURL, "metered", func(tn *tenancy.Tenant) { tn.Quotas.TokensPerMinute = perMinute })
	tok := nodes[0].token("metered", time.Minute, tenancy.ScopeInfer)
	start := time.Now()
	var used, admitted [2]int
	for i := 0; i < 40; i++ {
		n := i % 2
		r := nodes[n].do("POST", "/v1/completions", tok, completion("count me", 6, false))
		switch r.status {
		case 200:
			var resp struct {
				Usage struct {
					Total int `json:"total_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(r.body, &resp); err != nil || resp.Usage.Total == 0 {
				t.Fatalf("node %d: usage of %s: %v", n, r.body, err)
			}
			used[n] += resp.Usage.Total
			admitted[n]++
		case 429:
			if c := r.code(); c != "rate_limit_exceeded" {
				t.Fatalf("node %d: 429 with code %q, want rate_limit_exceeded", n, c)
			}
		default:
			t.Fatalf("node %d: got %d %s, want 200 or 429", n, r.status, r.body)
		}
	}
	elapsed := time.Since(start).Seconds()
	bound := perMinute*(1+elapsed/60) + 2*perMinute/tenancy.LeaseChunkDivisor
	total := used[0] + used[1]
	t.Logf("admitted %v requests using %v tokens in %.1fs; bound %.0f", admitted, used, elapsed, bound)
	if float64(total) > bound {
		t.Errorf("two nodes used %d tokens of a %d/min quota in %.1fs, want at most %.0f", total, perMinute, elapsed, bound)
	}
	if admitted[0] == 0 || admitted[1] == 0 || total < perMinute/2 {
		t.Errorf("admitted %v requests using %d tokens: want both nodes serving and at least half the quota used", admitted, total)
	}
}
