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

	verify := []string{"audit", "verify", "--database-url", db.AdminURL, "--origin", "cli-witness", "--public-key", cpKey + ".pub", "--no-register",
		"--max-cosignature-age", "1h"}
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

// The operator restores the database from a dump and the log grows again
// (a fork): the database holds its own old cosignatures, which the new
// tree extends, so verification reading them (--witness-key) without a
// freshness bound passed. Asked, the witness answers the tree it cosigned
// after the dump, which the forked tree contradicts: audit verify
// --witness URL=VKEY --witnesses 1 fails with audit.ErrFork (exit 3);
// reading the database's cosignatures with --max-cosignature-age fails as
// stale once they are older than the bound; --witnesses K with neither is
// refused.
func TestVerifyAsksWitnessesAfterRollback(t *testing.T) {
	db := pgtest.New(t)
	dir := t.TempDir()
	cpKey, wKey, ready := filepath.Join(dir, "cp.key"), filepath.Join(dir, "w.key"), filepath.Join(dir, "ready")
	mustRun(t, "audit", "keygen", "--out", cpKey)
	wvkey := strings.TrimSpace(mustRun(t, "witness", "vkey", "--create", "--key", wKey, "--name", "witness.test/rollback"))
	key, err := keyfile.Private(cpKey)
	if err != nil {
		t.Fatal(err)
	}
	logVKey, err := audit.TreeVerifierKey("cli-rollback", key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr, served := startWitness(ctx, t, wKey, filepath.Join(dir, "state.json"), "witness.test/rollback", logVKey, ready)
	c, err := witness.NewClient("http://"+addr, wvkey, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// grow appends n events by actor to the ledger in url's database, signs
	// its tree and has the witness cosign it.
	grow := func(u, actor string, n int) error {
		pool, err := pgxpool.New(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		s, err := postgres.Open(ctx, pool, postgres.Config{Origin: "cli-rollback", SigningKey: key, TreeCheckpointInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := 0; i < n; i++ {
			if _, err := s.Append(ctx, audit.Event{OccurredAt: time.Now(), Actor: audit.Name(actor), Payload: audit.RequestCompleted{
				Request: cloison.RequestID(fmt.Sprintf("%s-%d", actor, i)), Model: "m", PromptTokens: 1, CompletionTokens: 1, Pages: 1, Tier: "never"}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.SignTree(ctx); err != nil {
			t.Fatal(err)
		}
		sub, err := witness.NewSubmitter(ctx, s, logVKey, []*witness.Client{c}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return sub.SubmitLatest(ctx)[0]
	}
	if err := grow(db.AdminURL, "before-dump", 9); err != nil {
		t.Fatal(err)
	}
	dump := pgtest.Snapshot(t, db) // size 9, cosigned at 9
	if err := grow(db.AdminURL, "after-dump", 6); err != nil {
		t.Fatal(err)
	}
	// The rollback, then new entries: the witness refuses them.
	if err := grow(dump.AdminURL, "forged", 6); !errors.Is(err, audit.ErrFork) {
		t.Fatalf("the witness cosigned the fork: %v", err)
	}

	verify := []string{"audit", "verify", "--database-url", dump.AdminURL, "--origin", "cli-rollback", "--public-key", cpKey + ".pub", "--no-register"}
	// What the database remembers still checks out: its cosignature at 9,
	// which the forked tree of 15 extends.
	if out, err := run(t, append(verify, "--witness-key", wvkey, "--witnesses", "1", "--max-cosignature-age", "1h")...); err != nil {
		t.Fatalf("the rolled-back database's own cosignatures: %v (%s)", err, out)
	}
	out, err := run(t, append(verify, "--witness", "http://"+addr+"="+wvkey, "--witnesses", "1")...)
	var ce *witness.ContradictedError
	if !errors.As(err, &ce) || !errors.Is(err, audit.ErrFork) || ce.WitnessSize != 15 || exitCode(err) != 3 {
		t.Errorf("verify asking the witness after a rollback: got %v (exit %d) %s, want the witness's size 15 contradicted (ErrFork, exit 3)", err, exitCode(err), out)
	}
	time.Sleep(1100 * time.Millisecond) // cosignatures carry whole seconds
	if _, err := run(t, append(verify, "--witness-key", wvkey, "--witnesses", "1", "--max-cosignature-age", "1s")...); !errors.Is(err, audit.ErrStaleCosignature) {
		t.Errorf("stored cosignatures older than the bound: got %v, want audit.ErrStaleCosignature", err)
	}
	if _, err := run(t, append(verify, "--witness-key", wvkey, "--witnesses", "1")...); cloison.ErrorCode(err) != cloison.CodeInvalid {
		t.Errorf("--witnesses with remembered cosignatures and no bound: got %v, want refused", err)
	}
	// The honest database passes when the witness is asked.
	honest := []string{"audit", "verify", "--database-url", db.AdminURL, "--origin", "cli-rollback", "--public-key", cpKey + ".pub", "--no-register"}
	if out, err := run(t, append(honest, "--witness", "http://"+addr+"="+wvkey, "--witnesses", "1")...); err != nil || !strings.Contains(out, "witness.test/rollback cosigned size 15") {
		t.Errorf("the honest ledger, witness asked: %v %s", err, out)
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
	args := []string{"audit", "verify", "--server", p.URL, "--token", token, "--verifier-key", keyFile, "--max-cosignature-age", "1h"}
	mustRun(t, append(args, "--witness-key", wvkey, "--witnesses", "1")...)
	// Asked directly, the witness answers size 12; the served tree of
	// size 20 extends it.
	if out := mustRun(t, append(args, "--witness", "http://"+addr+"="+wvkey, "--witnesses", "1")...); !strings.Contains(out, "checkpoint") {
		t.Errorf("verify --witness: %s", out)
	}
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
