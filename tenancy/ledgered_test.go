package tenancy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/internal/pgtest"
)

// TestChangesLedgeredInTx: an operator cannot change tenancy off the
// record. Every admin change appends
// its ledger event in the change's own transaction. With the ledger unable
// to append (the runtime role loses INSERT on audit_events, or the ledger
// is closed) no change happens; once it can, every change is there with its
// event.
func TestChangesLedgeredInTx(t *testing.T) {
	ctx := context.Background()
	tdb := pgtest.New(t) // its own database: the test revokes the runtime role's ledger privilege
	pool := tdb.RuntimePool(t)
	ledger, err := auditpg.Open(ctx, pool, auditpg.Config{Origin: "ledgered-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	s := NewStore(pool).WithLedger(ledger)
	fresh := func() *Store { return NewStore(pool) } // reads past the cache
	kek := make([]byte, KEKSize)
	ring, err := OpenKeyRing(ctx, s, "https://cloison.test/ledgered", kek, WithMinRotateInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	base, err := s.CreateTenant(ctx, sampleTenant("base"))
	if err != nil {
		t.Fatal(err)
	}
	sus := sampleTenant("sus")
	sus.Status = StatusSuspended
	if sus, err = s.CreateTenant(ctx, sus); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateClient(ctx, Client{ID: "cl-base", Tenant: base.ID, Name: "base", Scopes: []Scope{ScopeInfer}}); err != nil {
		t.Fatal(err)
	}
	nextKid := func() string {
		for _, k := range ring.Keys() {
			if k.State == KeyNext {
				return k.ID
			}
		}
		return ""
	}
	keyStates := func() string {
		r, err := OpenKeyRing(ctx, fresh(), ring.Issuer(), kek)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(r.Keys())
	}
	type action struct {
		name  string
		kind  audit.Kind
		do    func(ctx context.Context, n int) error // n: a fresh suffix per run
		state func(n int) string                     // what the change would alter
	}
	actions := []action{
		{"tenant create", audit.KindTenantCreated,
			func(ctx context.Context, n int) error {
				_, err := s.CreateTenant(ctx, sampleTenant(fmt.Sprintf("new%d", n)))
				return err
			},
			func(int) string { ts, _ := fresh().Tenants(ctx); return fmt.Sprint(len(ts)) }},
		{"tenant suspend", audit.KindTenantDisabled,
			func(ctx context.Context, _ int) error {
				_, err := s.SetStatus(ctx, base.ID, StatusSuspended)
				return err
			},
			func(int) string { t, _ := fresh().Tenant(ctx, base.ID); return string(t.Status) }},
		{"tenant activate", audit.KindTenantUpdated,
			func(ctx context.Context, _ int) error { _, err := s.SetStatus(ctx, sus.ID, StatusActive); return err },
			func(int) string { t, _ := fresh().Tenant(ctx, sus.ID); return string(t.Status) }},
		{"client create", audit.KindClientCreated,
			func(ctx context.Context, n int) error {
				_, err := s.CreateClient(ctx, Client{ID: fmt.Sprintf("cl-%d", n), Tenant: base.ID, Name: "c", Scopes: []Scope{ScopeInfer}})
				return err
			},
			func(n int) string {
				_, err := fresh().Client(ctx, fmt.Sprintf("cl-%d", n))
				return fmt.Sprint(err == nil)
			}},
		{"client revoke", audit.KindClientRevoked,
			func(ctx context.Context, _ int) error { _, err := s.RevokeClient(ctx, "cl-base"); return err },
			func(int) string { c, _ := fresh().Client(ctx, "cl-base"); return string(c.Status) }},
		{"token revoke", audit.KindTokenRevoked,
			func(ctx context.Context, n int) error {
				return s.RevokeToken(ctx, ring.Issuer(), fmt.Sprintf("jti%d", n), base.ID, time.Now().Add(time.Hour))
			},
			func(n int) string {
				r, _ := fresh().TokenRevoked(ctx, ring.Issuer(), fmt.Sprintf("jti%d", n))
				return fmt.Sprint(r)
			}},
		{"key rotate", audit.KindKeyRotated,
			func(ctx context.Context, _ int) error { return ring.Rotate(ctx) },
			func(int) string { return keyStates() }},
		{"key retire", audit.KindKeyRevoked,
			func(ctx context.Context, _ int) error { return ring.Retire(ctx, nextKid()) },
			func(int) string { return keyStates() }},
	}

	admin := tdb.AdminPool(t)
	// Every append goes through audit_sequence (the runtime role has no
	// INSERT on audit_events since migration 00025): without EXECUTE on
	// it the ledger cannot append.
	// Tenants, clients and keys change through row_apply (00027), which
	// appends as the ledger's owner: without EXECUTE on it neither.
	grant := func(on bool) {
		for _, fn := range []string{"audit_sequence(timestamptz[], text[], text[], text[], bytea[])", "row_apply(bytea, bytea)"} {
			q := fmt.Sprintf("REVOKE EXECUTE ON FUNCTION %s FROM %s", fn, pgx.Identifier{tdb.Roles.Runtime}.Sanitize())
			if on {
				q = fmt.Sprintf("GRANT EXECUTE ON FUNCTION %s TO %s", fn, pgx.Identifier{tdb.Roles.Runtime}.Sanitize())
			}
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The ledger cannot append: nothing changes.
	grant(false)
	for i, a := range actions {
		t.Run("refused/"+a.name, func(t *testing.T) {
			before := a.state(i)
			err := a.do(ctx, i)
			if !errors.Is(err, ErrLedger) {
				t.Fatalf("got %v, want ErrLedger", err)
			}
			if cloison.ErrorCode(err) != cloison.CodeUnavailable {
				t.Fatalf("code: got %v, want %v", cloison.ErrorCode(err), cloison.CodeUnavailable)
			}
			if after := a.state(i); after != before {
				t.Fatalf("state: got %v, want %v (unchanged)", after, before)
			}
		})
	}
	grant(true)

	// A closed ledger refuses too.
	closed, err := auditpg.Open(ctx, pool, auditpg.Config{Origin: "ledgered-test"})
	if err != nil {
		t.Fatal(err)
	}
	_ = closed.Close()
	if _, err := s.WithLedger(closed).CreateTenant(ctx, sampleTenant("closed")); !errors.Is(err, ErrLedger) || !errors.Is(err, auditpg.ErrClosed) {
		t.Fatalf("closed ledger: got %v, want ErrLedger wrapping ErrClosed", err)
	}
	// A Store without a ledger changes nothing.
	if _, err := fresh().CreateTenant(ctx, sampleTenant("none")); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("no ledger: got %v, want ErrNoLedger", err)
	}

	// The ledger works: each change happens with its event, and its actor.
	head, err := ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	actx := WithActor(ctx, "admin:alice")
	for i, a := range actions {
		t.Run("recorded/"+a.name, func(t *testing.T) {
			before := a.state(100 + i)
			if err := a.do(actx, 100+i); err != nil {
				t.Fatal(err)
			}
			if after := a.state(100 + i); after == before {
				t.Fatalf("state: got %v, want a change", after)
			}
			found := false
			err := ledger.Scan(ctx, head.Seq+1, 0, func(r audit.Record) error {
				if r.Kind == a.kind && r.Actor == "admin:alice" {
					found = true
				}
				return nil
			})
			if err != nil || !found {
				t.Fatalf("ledger since seq %d: got found=%v (%v), want a %s event by admin:alice", head.Seq, found, err, a.kind)
			}
		})
	}
	if _, err := ledger.Verify(ctx, audit.VerifyOptions{ChainOnly: true}); err != nil {
		t.Fatalf("chain after in-transaction appends: %v", err)
	}
}

// An update that changes nothing writes nothing and ledgers nothing.
func TestUpdateTenantNoChangeNoEvent(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tn, err := s.CreateTenant(ctx, sampleTenant("same"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.WithLedger(failingLedger{}).SetStatus(ctx, tn.ID, StatusActive)
	if err != nil || !got.UpdatedAt.Equal(tn.UpdatedAt) {
		t.Fatalf("no-op update: got %v, %v; want the record unchanged and no ledger call", got.UpdatedAt, err)
	}
}

type failingLedger struct{}

func (failingLedger) AppendTx(context.Context, pgx.Tx, ...audit.Event) ([]audit.Record, error) {
	return nil, errors.New("failingLedger")
}

func (failingLedger) ApplyTx(context.Context, pgx.Tx, audit.Event, []byte) (audit.Record, error) {
	return audit.Record{}, errors.New("failingLedger")
}
