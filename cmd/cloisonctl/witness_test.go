package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/audit/witness"
	"github.com/cloison/cloison/internal/keyfile"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// `cloisonctl witness` serving, a ledger's submitter getting its
// cosignature over HTTP, and `cloisonctl audit verify --witnesses K`
// accepting k=1 and refusing k=2 (the second witness never cosigned).
func TestWitnessCommandAndVerifyWitnesses(t *testing.T) {
	db := pgtest.New(t)
	dir := t.TempDir()
	cpKey, wKey, ready := filepath.Join(dir, "cp.key"), filepath.Join(dir, "w.key"), filepath.Join(dir, "ready")
	mustRun(t, "audit", "keygen", "--out", cpKey)
	wvkey := strings.TrimSpace(mustRun(t, "witness", "vkey", "--create", "--key", wKey, "--name", "witness.test/cli"))
	other := strings.TrimSpace(mustRun(t, "witness", "vkey", "--create", "--key", filepath.Join(dir, "other.key"), "--name", "witness.test/other"))
	key, err := keyfile.Private(cpKey)
	if err != nil {
		t.Fatal(err)
	}
	logVKey, err := audit.TreeVerifierKey("cli-witness", key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}

	// The witness, as its own command.
	ctx, cancel := context.WithCancel(context.Background())
	addr, served := startWitness(ctx, t, wKey, filepath.Join(dir, "state.json"), "witness.test/cli", logVKey, ready)

	// The ledger and its submitter (what cloisond runs).
	pool, err := pgxpool.New(ctx, db.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := postgres.Open(ctx, pool, postgres.Config{Origin: "cli-witness", SigningKey: key, TreeCheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 9; i++ {
		if _, err := s.Append(ctx, audit.Event{OccurredAt: time.Now(), Actor: "cli", Payload: audit.RequestCompleted{
			Request: cloison.RequestID(fmt.Sprintf("r-%d", i)), Model: "m", PromptTokens: 1, CompletionTokens: 1, Pages: 1, Tier: "never"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := witness.NewClient("http://"+addr, wvkey, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := witness.NewSubmitter(ctx, s, logVKey, []*witness.Client{c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if errs := sub.SubmitLatest(ctx); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	verify := []string{"audit", "verify", "--database-url", db.AdminURL, "--origin", "cli-witness", "--public-key", cpKey + ".pub", "--no-register"}
	out := mustRun(t, append(verify, "--witness-key", wvkey, "--witnesses", "1")...)
	if !strings.Contains(out, "checkpoint of size 9 cosigned by 1 witness(es) witness.test/cli@") {
		t.Errorf("verify --witnesses 1: %s", out)
	}
	out, err = run(t, append(verify, "--witness-key", wvkey, "--witness-key", other, "--witnesses", "2")...)
	if !errors.Is(err, audit.ErrNoCheckpoint) {
		t.Errorf("verify --witnesses 2: got %v (%s), want no checkpoint with 2 cosignatures", err, out)
	}
	// With the other key in place of the witness's, the one stored
	// cosignature is not a trusted one.
	out, err = run(t, append(verify, "--witness-key", other, "--witnesses", "1")...)
	if !errors.Is(err, audit.ErrTooFewCosignatures) || cloison.ErrorCode(err) != cloison.CodeConflict {
		t.Errorf("verify with an untrusted witness: got %v (%s), want audit.ErrTooFewCosignatures", err, out)
	}

	cancel()
	if err := <-served; err != nil {
		t.Fatalf("witness: %v", err)
	}
}

// audit verify --server --witnesses K: the server serves the latest
// checkpoint K witnesses cosigned (checkpoint?witnesses=K) and the verifier
// checks the cosignatures and that the latest checkpoint extends it; an
// untrusted witness key or too many required witnesses fails with exit 3.
func TestVerifyServerWitnesses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha"}})
	dir := t.TempDir()
	logVKey, err := p.Ledger.TreeVerifierKey()
	if err != nil {
		t.Fatal(err)
	}
	wKey, ready := filepath.Join(dir, "w.key"), filepath.Join(dir, "ready")
	wvkey := strings.TrimSpace(mustRun(t, "witness", "vkey", "--create", "--key", wKey, "--name", "witness.test/srv"))
	other := strings.TrimSpace(mustRun(t, "witness", "vkey", "--create", "--key", filepath.Join(dir, "other.key"), "--name", "witness.test/other"))
	addr, served := startWitness(ctx, t, wKey, filepath.Join(dir, "state.json"), "witness.test/srv", logVKey, ready)
	appendEvents(t, p.Ledger, "honest", 1, 12)
	if _, err := p.Ledger.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := witness.NewClient("http://"+addr, wvkey, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := witness.NewSubmitter(ctx, p.Ledger, logVKey, []*witness.Client{c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if errs := sub.SubmitLatest(ctx); errs[0] != nil {
		t.Fatal(errs[0])
	}
	// The log grows past the cosigned size: the verifier needs the
	// consistency proof from the cosigned checkpoint to the latest.
	appendEvents(t, p.Ledger, "honest", 13, 20)
	if _, err := p.Ledger.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "log.vkey")
	if err := os.WriteFile(keyFile, []byte(logVKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	token := p.Token(t, "alpha", tenancy.ScopeComplianceRead, tenancy.ScopeAdmin)
	args := []string{"audit", "verify", "--server", p.URL, "--token", token, "--verifier-key", keyFile}
	mustRun(t, append(args, "--witness-key", wvkey, "--witnesses", "1")...)
	if _, err := run(t, append(args, "--witness-key", other, "--witnesses", "1")...); !errors.Is(err, audit.ErrTooFewCosignatures) || exitCode(err) != 3 {
		t.Errorf("an untrusted witness key: got %v (exit %d), want ErrTooFewCosignatures, exit 3", err, exitCode(err))
	}
	if _, err := run(t, append(args, "--witness-key", wvkey, "--witness-key", other, "--witnesses", "2")...); err == nil || exitCode(err) == 0 {
		t.Errorf("two witnesses required, one cosigned: got %v, want a failure", err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("witness: %v", err)
	}
}

// startWitness runs `cloisonctl witness` until ctx ends and returns its
// address once it is ready, and the channel its exit error arrives on.
func startWitness(ctx context.Context, t *testing.T, key, state, name, logVKey, ready string) (string, <-chan error) {
	t.Helper()
	served := make(chan error, 1)
	go func() {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"witness", "--key", key, "--state", state, "--addr", "127.0.0.1:0",
			"--name", name, "--log", logVKey, "--ready-file", ready})
		served <- root.ExecuteContext(ctx)
	}()
	var addr []byte
	for i := 0; i < 500 && len(addr) == 0; i++ {
		addr, _ = os.ReadFile(ready)
		time.Sleep(10 * time.Millisecond)
	}
	if len(addr) == 0 {
		t.Fatal("the witness never became ready")
	}
	return string(addr), served
}
