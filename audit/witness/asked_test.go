package witness

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net/http"
	"testing"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// A stateless verifier asks the witnesses: after a restore from a dump
// and new entries, the restored database's own cosignature still verifies
// and the fork extends it, but the witnesses, asked, answer the tree they
// cosigned after the dump, which the fork contradicts.
func TestVerifierAsksWitnessesAfterRollback(t *testing.T) {
	ctx := context.Background()
	wa, urlA := startWitness(t, "witness.test/asked-a")
	_, urlB := startWitness(t, "witness.test/asked-b")
	db := pgtest.New(t)
	l := openLedger(t, db)
	l.append(t, "before-dump", 20)
	h20, err := audit.OpenTreeHead(mustTreeCheckpoint(t, l.store), ledgerVKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if errs := l.submitter(t, urlA, urlB).SubmitLatest(ctx); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	l.close()
	dump := pgtest.Snapshot(t, db)

	l = openLedger(t, db)
	l.append(t, "after-dump", 10) // 30
	if errs := l.submitter(t, urlA, urlB).SubmitLatest(ctx); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	clients := func() []*Client {
		var cs []*Client
		for _, u := range []string{urlA, urlB} {
			c, err := NewClient(u, witnesses[u], 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
		}
		return cs
	}
	// The honest log: both answer 30, combined into one note with two
	// fresh cosignatures.
	h, err := audit.OpenTreeHead(mustTreeCheckpoint(t, l.store), ledgerVKey(t))
	if err != nil {
		t.Fatal(err)
	}
	obs, err := VerifyWitnessed(ctx, clients(), ledgerVKey(t), h, l.store.ConsistencyProof, 2)
	if err != nil || len(obs) != 2 {
		t.Fatalf("honest log: %v %+v", err, obs)
	}
	note, err := Combine(obs, 2)
	if err != nil {
		t.Fatal(err)
	}
	if ch, cs, err := audit.VerifyCosigned(note, ledgerVKey(t), []string{witnesses[urlA], witnesses[urlB]}, 2); err != nil || ch.Size != 30 || len(cs) != 2 {
		t.Fatalf("combined note: size %d, %d cosignatures, %v", ch.Size, len(cs), err)
	}
	// A verifier that read the head before it grew: the witnesses are
	// ahead, and the log proves its head extends to their tree.
	if _, err := VerifyWitnessed(ctx, clients(), ledgerVKey(t), h20, l.store.ConsistencyProof, 2); err != nil {
		t.Fatalf("witnesses ahead of the head read: %v", err)
	}
	l.close()

	// The rollback alone: the witnesses are ahead of a log that cannot
	// prove its tree extends to theirs.
	r := openLedger(t, dump)
	_, err = VerifyWitnessed(ctx, clients(), ledgerVKey(t), h20, r.store.ConsistencyProof, 1)
	if !errors.As(err, new(*ContradictedError)) || !errors.Is(err, audit.ErrSmallerTree) {
		t.Fatalf("asked after a rollback: got %v, want ErrSmallerTree", err)
	}
	// Then new entries.
	r.append(t, "forked", 15) // 35
	if _, err := r.store.CosignedCheckpoint(ctx, 2); err != nil {
		t.Fatalf("the dump's cosignatures are still there: %v", err)
	}
	rh, err := audit.OpenTreeHead(mustTreeCheckpoint(t, r.store), ledgerVKey(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = VerifyWitnessed(ctx, clients(), ledgerVKey(t), rh, r.store.ConsistencyProof, 1)
	var ce *ContradictedError
	if !errors.As(err, &ce) || !errors.Is(err, audit.ErrFork) || ce.WitnessSize != 30 || ce.Size != 35 {
		t.Fatalf("asked after the rollback: got %v, want the witness's 30 contradicted by 35 (ErrFork)", err)
	}
	if got := wa.Size(ledgerOrigin); got != 30 {
		t.Fatalf("witness at %d, want 30", got)
	}
}

// The witness answers GET /cosigned-checkpoint with 404 for an unknown
// log and for a log it never cosigned, and only GET.
func TestLatestEndpointErrors(t *testing.T) {
	_, u := startWitness(t, "witness.test/latest")
	c, err := NewClient(u, witnesses[u], 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Latest(context.Background(), ledgerVKey(t)); !errors.Is(err, ErrNothingCosigned) {
		t.Errorf("nothing cosigned: got %v", err)
	}
	other, err := audit.TreeVerifierKey("another-log", ledgerKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Latest(context.Background(), other); !errors.Is(err, ErrUnknownLog) {
		t.Errorf("unknown log: got %v", err)
	}
	resp, err := http.Post(u+CosignedCheckpointPath+"?origin="+ledgerOrigin, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: got %d, want 405", resp.StatusCode)
	}
}
