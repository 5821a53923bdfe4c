package tenancy

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/internal/pgtest"
)

// The runtime role (cloisond's database credentials) may not write a
// tenant, client or key row itself: raising a tenant's quotas and setting
// zeroing never, retiring every signing key and revoking a client by a
// column UPDATE (or planting a row by INSERT) are refused by privilege.
func TestRuntimeRoleCannotWriteRows(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	c, err := f.store.CreateClient(ctx, Client{ID: "cl-" + string(uniqueID("rw")), Tenant: f.tenant.ID, Name: "c", Scopes: []Scope{ScopeInfer}})
	if err != nil {
		t.Fatal(err)
	}
	rt := db.RuntimePool(t)
	for _, q := range []struct {
		name, sql string
		arg       any
	}{
		{"tenant quotas and zeroing", `UPDATE tenants SET max_concurrent = 24, zeroing = 'never' WHERE id = $1`, string(f.tenant.ID)},
		{"tenant insert", `INSERT INTO tenants (id, name, tier, zeroing, classification, max_concurrent, kv_pages, tokens_per_minute)
			VALUES ($1, 'x', 'shared', 'never', 'public', 1, 1, 1)`, string(uniqueID("planted"))},
		{"retire every key", `UPDATE signing_keys SET state = 'retired', retired_at = clock_timestamp() WHERE issuer = $1 AND state <> 'retired'`, f.ring.Issuer()},
		{"revoke a client", `UPDATE api_clients SET status = 'revoked', revoked_at = clock_timestamp() WHERE id = $1`, c.ID},
	} {
		_, err := rt.Exec(ctx, q.sql, q.arg)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s as the runtime role: got %v, want permission denied (42501)", q.name, err)
		}
	}
	got, err := f.store.Tenant(ctx, f.tenant.ID)
	if err != nil || got.Quotas.MaxConcurrent != f.tenant.Quotas.MaxConcurrent || got.Zeroing != f.tenant.Zeroing {
		t.Fatalf("tenant after the attempts: %+v, %v; want it unchanged", got.Quotas, err)
	}
	if _, err := f.issuer.Issue(f.request()); err != nil {
		t.Fatalf("issue after the attempts: %v", err)
	}
}

// forgeRow is the attack left to the runtime role: row_apply with an
// event it wrote itself (unsigned: it has no log key) stating row.
func forgeRow(t *testing.T, pool *pgxpool.Pool, table, key string, tenant cloison.TenantID, row any, mk func(*audit.Digest) audit.Payload) error {
	t.Helper()
	ctx := context.Background()
	col := map[string]string{audit.RowTenants: "id", audit.RowClients: "id", audit.RowSigningKeys: "kid"}[table]
	var prev int64
	err := pool.QueryRow(ctx, `SELECT coalesce(ledger_seq, 0) FROM `+table+` WHERE `+col+` = $1`, key).Scan(&prev)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	st, err := audit.RowState(table, uint64(prev), row)
	if err != nil {
		t.Fatal(err)
	}
	d := audit.Sum(st)
	payload, err := audit.Event{OccurredAt: time.Now(), Tenant: tenant, Actor: "admin:mallory", Payload: mk(&d)}.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(ctx, `SELECT * FROM row_apply($1, $2)`, payload, st)
	return err
}

// signedFixture is a node's view: a ledger that signs events with the log
// key, a Store that requires the key's signature on every row's last event
// and alarms on a mismatch, in a database of its own (the signing mark
// applies to the whole ledger).
type signedFixture struct {
	tdb    *pgtest.DB
	ledger *auditpg.Store
	keys   map[string]ed25519.PublicKey
	store  *Store
	ring   *KeyRing
	kek    []byte
	mu     sync.Mutex
	alarms []RowMismatch
}

func newSignedFixture(t *testing.T) *signedFixture {
	t.Helper()
	ctx := context.Background()
	f := &signedFixture{tdb: pgtest.New(t)}
	pool := f.tdb.RuntimePool(t)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f.keys = map[string]ed25519.PublicKey{audit.KeyID(pub): pub}
	if f.ledger, err = auditpg.Open(ctx, pool, auditpg.Config{Origin: "rows-test", SigningKey: priv}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.ledger.Close() })
	if _, err := f.ledger.BeginSigning(ctx, "engine:node-1"); err != nil {
		t.Fatal(err)
	}
	f.store = NewStore(pool).WithLedger(f.ledger).WithEventKeys(f.keys).WithRowAlarm(func(m RowMismatch) {
		f.mu.Lock()
		f.alarms = append(f.alarms, m)
		f.mu.Unlock()
	})
	if f.kek, err = LoadKEK(filepath.Join(t.TempDir(), "signing.kek"), true); err != nil {
		t.Fatal(err)
	}
	if f.ring, err = OpenKeyRing(ctx, f.store, "https://cloison.test/rows", f.kek, WithMinRotateInterval(0)); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *signedFixture) alarmed(table, id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.alarms, func(m RowMismatch) bool { return m.Table == table && m.ID == id })
}

// verifyRows is what cloisonctl audit verify runs over the live rows.
func (f *signedFixture) verifyRows(t *testing.T) error {
	t.Helper()
	err := f.ledger.VerifyRows(context.Background(), f.keys)
	var be *audit.BreakError
	if err != nil && !errors.As(err, &be) {
		t.Fatalf("verify rows: %v", err)
	}
	if be != nil && be.Reason != audit.ReasonRowState {
		t.Fatalf("verify rows: reason %s, want %s", be.Reason, audit.ReasonRowState)
	}
	return err
}

// The runtime role raises a tenant's quotas and sets zeroing never through
// row_apply with its own unsigned tenant.updated: the row changes, but
// verification names it, the node refuses the tenant (fail closed) and
// alarms once; an administrator's change states it again.
func TestForgedTenantRefused(t *testing.T) {
	ctx := context.Background()
	f := newSignedFixture(t)
	tn, err := f.store.CreateTenant(WithActor(ctx, "admin:alice"), sampleTenant("forged"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Tenant(ctx, tn.ID); err != nil {
		t.Fatalf("tenant as created: %v", err)
	}
	if err := f.verifyRows(t); err != nil {
		t.Fatalf("verify before the attack: %v", err)
	}
	forged := tn
	forged.Quotas.MaxConcurrent, forged.Zeroing = 24, cloison.ZeroNever
	st := tenantRowOf(forged)
	err = forgeRow(t, f.tdb.RuntimePool(t), audit.RowTenants, string(tn.ID), tn.ID, st, func(d *audit.Digest) audit.Payload {
		return audit.TenantChange{Op: audit.TenantUpdated, Tier: "shared", ConfigDigest: tenantDigest(forged), State: d}
	})
	if err != nil {
		t.Fatalf("row_apply with a forged event: %v (the attack this test needs)", err)
	}
	var maxc int
	if err := f.tdb.AdminPool(t).QueryRow(ctx, `SELECT max_concurrent FROM tenants WHERE id = $1`, string(tn.ID)).Scan(&maxc); err != nil || maxc != 24 {
		t.Fatalf("row after the forgery: max_concurrent %d, %v; want 24 (the function applied it)", maxc, err)
	}
	_, err = f.store.Tenant(ctx, tn.ID)
	if !errors.Is(err, ErrRowUnproven) || cloison.ErrorCode(err) != cloison.CodeUnavailable {
		t.Fatalf("tenant after the forgery: got %v, want ErrRowUnproven (%s)", err, cloison.CodeUnavailable)
	}
	if !f.alarmed(audit.RowTenants, string(tn.ID)) {
		t.Fatal("no alarm for the forged tenant")
	}
	if err := f.verifyRows(t); err == nil {
		t.Fatal("verify after the forgery: got nil, want a row_state break")
	}
	// An administrator restates the tenant (any change, even none).
	back, err := f.store.UpdateTenant(WithActor(ctx, "admin:alice"), tn.ID, func(x *Tenant) error {
		x.Quotas.MaxConcurrent, x.Zeroing = tn.Quotas.MaxConcurrent, tn.Zeroing
		return nil
	})
	if err != nil || back.Quotas.MaxConcurrent != tn.Quotas.MaxConcurrent {
		t.Fatalf("restate: %+v, %v", back.Quotas, err)
	}
	if _, err := f.store.Tenant(ctx, tn.ID); err != nil {
		t.Fatalf("tenant after restating: %v", err)
	}
	if err := f.verifyRows(t); err != nil {
		t.Fatalf("verify after restating: %v", err)
	}
	// A row changed behind row_apply (the owner's UPDATE, triggers and
	// all) disagrees with its event, signed or not.
	if _, err := f.tdb.AdminPool(t).Exec(ctx, `UPDATE tenants SET kv_pages = kv_pages + 1 WHERE id = $1`, string(tn.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Tenant(ctx, tn.ID); !errors.Is(err, ErrRowUnproven) {
		t.Fatalf("tenant after an owner's UPDATE: got %v, want ErrRowUnproven", err)
	}
	if err := f.verifyRows(t); err == nil {
		t.Fatal("verify after an owner's UPDATE: got nil, want a row_state break")
	}
}

// The runtime role retires every signing key through row_apply with its
// own key.revoked events: the ring refuses the load and keeps its keys
// (tokens still issue and verify), alarms, and verification names it.
func TestForgedKeyRetirementRefused(t *testing.T) {
	ctx := context.Background()
	f := newSignedFixture(t)
	before := f.ring.Keys()
	rt := f.tdb.RuntimePool(t)
	for _, k := range before {
		if k.State == KeyRetired {
			continue
		}
		var sealed []byte
		if err := rt.QueryRow(ctx, `SELECT sealed_private FROM signing_keys WHERE kid = $1`, k.ID).Scan(&sealed); err != nil {
			t.Fatal(err)
		}
		row := keyRow{Kid: k.ID, Issuer: k.Issuer, Algorithm: "EdDSA", PublicKey: `\x` + hex.EncodeToString(k.Public), SealedPrivate: `\x` + hex.EncodeToString(sealed), State: string(KeyRetired)}
		err := forgeRow(t, rt, audit.RowSigningKeys, k.ID, "", row, func(d *audit.Digest) audit.Payload {
			p := keyEvent(audit.KeyRevoked, k.ID, k.Public)
			p.State = d
			return p
		})
		if err != nil {
			t.Fatalf("row_apply retiring %s: %v (the attack this test needs)", k.ID, err)
		}
	}
	if err := f.ring.Reload(ctx); !errors.Is(err, ErrRowUnproven) {
		t.Fatalf("reload after the forgery: got %v, want ErrRowUnproven", err)
	}
	if got := f.ring.Keys(); !slices.EqualFunc(got, before, func(a, b KeyInfo) bool { return a.ID == b.ID && a.State == b.State }) {
		t.Fatalf("keys after the forgery: got %v, want %v (kept)", got, before)
	}
	store := f.store
	tn, err := store.CreateTenant(ctx, sampleTenant("keys"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := NewIssuer(f.ring).Issue(TokenRequest{Subject: "svc", Tenant: tn.ID, Scopes: []Scope{ScopeInfer}, Audience: testAudience, TTL: time.Minute})
	if err != nil {
		t.Fatalf("issue after the forgery: %v", err)
	}
	v, err := NewVerifier(VerifierConfig{Audience: testAudience, Sources: []KeySource{f.ring}, Tenants: store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("verify a token after the forgery: %v", err)
	}
	if !f.alarmed(audit.RowSigningKeys, before[0].ID) {
		t.Fatalf("no alarm for the forged key retirement: %v", f.alarms)
	}
	if err := f.verifyRows(t); err == nil {
		t.Fatal("verify after the forgery: got nil, want a row_state break")
	}
	// The operator's way out: a rotation (signed) restates the retired
	// rows and makes new keys; the ring loads again.
	if err := f.ring.Rotate(ctx); err != nil {
		t.Fatalf("rotate after the forgery: %v", err)
	}
	if err := f.ring.Reload(ctx); err != nil {
		t.Fatalf("reload after the rotation: %v", err)
	}
	if err := f.verifyRows(t); err != nil {
		t.Fatalf("verify after the rotation: %v", err)
	}
}

// The runtime role revokes a client through row_apply with its own
// client.revoked: the client is refused either way, but the forgery is
// alarmed and named by verification, never taken for an administrator's.
func TestForgedClientRevocationSeen(t *testing.T) {
	ctx := context.Background()
	f := newSignedFixture(t)
	tn, err := f.store.CreateTenant(ctx, sampleTenant("cl"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.store.CreateClient(ctx, Client{ID: "cl-forged", Tenant: tn.ID, Name: "c", Scopes: []Scope{ScopeInfer}})
	if err != nil {
		t.Fatal(err)
	}
	revoked := clientRow{ID: c.ID, TenantID: string(tn.ID), Name: c.Name, Scopes: []string{string(ScopeInfer)}, Status: string(ClientRevoked)}
	err = forgeRow(t, f.tdb.RuntimePool(t), audit.RowClients, c.ID, tn.ID, revoked, func(d *audit.Digest) audit.Payload {
		p := clientEvent(audit.ClientRevoked, c)
		p.State = d
		return p
	})
	if err != nil {
		t.Fatalf("row_apply revoking: %v (the attack this test needs)", err)
	}
	fresh := NewStore(f.tdb.RuntimePool(t)).WithEventKeys(f.keys).WithRowAlarm(func(m RowMismatch) {
		f.mu.Lock()
		f.alarms = append(f.alarms, m)
		f.mu.Unlock()
	})
	if _, err := fresh.Client(ctx, c.ID); !errors.Is(err, ErrRowUnproven) {
		t.Fatalf("client after the forgery: got %v, want ErrRowUnproven", err)
	}
	if !f.alarmed(audit.RowClients, c.ID) {
		t.Fatal("no alarm for the forged revocation")
	}
	if err := f.verifyRows(t); err == nil {
		t.Fatal("verify after the forgery: got nil, want a row_state break")
	}
}

// row_apply refuses an event that does not state the row it writes, and
// an old event replayed (its prev is no longer the row's last event).
func TestRowApplyRefusesMismatch(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tn, err := s.CreateTenant(ctx, sampleTenant("mis"))
	if err != nil {
		t.Fatal(err)
	}
	rt := db.RuntimePool(t)
	row := tenantRowOf(tn)
	st, err := audit.RowState(audit.RowTenants, 0, row)
	if err != nil {
		t.Fatal(err)
	}
	other := audit.Sum([]byte("another row"))
	cases := map[string]struct {
		p      audit.Payload
		tenant cloison.TenantID
		state  []byte
		code   string
	}{
		"digest of another row":  {audit.TenantChange{Op: audit.TenantUpdated, State: &other}, tn.ID, st, "CL012"},
		"another tenant's event": {audit.TenantChange{Op: audit.TenantUpdated, State: ptr(audit.Sum(st))}, uniqueID("x"), st, "CL012"},
		"a client event":         {audit.ClientChange{Op: audit.ClientRevoked, Client: "x", State: ptr(audit.Sum(st))}, tn.ID, st, "CL012"},
		"a stale prev (replay)":  {audit.TenantChange{Op: audit.TenantUpdated, State: ptr(audit.Sum(st))}, tn.ID, st, "40001"},
	}
	for name, c := range cases {
		payload, err := audit.Event{OccurredAt: time.Now(), Tenant: c.tenant, Actor: "admin:mallory", Payload: c.p}.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		_, err = rt.Exec(ctx, `SELECT * FROM row_apply($1, $2)`, payload, c.state)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != c.code {
			t.Errorf("%s: got %v, want SQLSTATE %s", name, err, c.code)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkTenantChecked: the request path's tenant read on a node: the
// row, its last event and the checks (state document digest, and the
// event's signature, verified once per payload).
func BenchmarkTenantChecked(b *testing.B) {
	ctx := context.Background()
	tdb := pgtest.New(b)
	pool := tdb.RuntimePool(b)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	ledger, err := auditpg.Open(ctx, pool, auditpg.Config{Origin: "rows-bench", SigningKey: priv})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ledger.Close() })
	if _, err := ledger.BeginSigning(ctx, "engine:node-1"); err != nil {
		b.Fatal(err)
	}
	for _, keys := range []map[string]ed25519.PublicKey{nil, {audit.KeyID(pub): pub}} {
		s := NewStore(pool).WithLedger(ledger).WithEventKeys(keys)
		tn, err := s.CreateTenant(ctx, sampleTenant("bench"))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("signature=%v", keys != nil), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Tenant(ctx, tn.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A row older than migration 00027 (no event binds it) is refused until
// BindUnbound states it as found, which the node does at start.
func TestBindUnbound(t *testing.T) {
	ctx := context.Background()
	f := newSignedFixture(t)
	id := string(uniqueID("old"))
	if _, err := f.tdb.AdminPool(t).Exec(ctx, `INSERT INTO tenants (id, name, tier, zeroing, classification, max_concurrent, kv_pages, tokens_per_minute)
		VALUES ($1, 'old', 'shared', 'cross-tenant', 'internal', 2, 8, 100)`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Tenant(ctx, cloison.TenantID(id)); !errors.Is(err, ErrRowUnproven) {
		t.Fatalf("an unbound tenant: got %v, want ErrRowUnproven", err)
	}
	n, err := f.store.BindUnbound(WithActor(ctx, "engine:node-1"))
	if err != nil || n != 1 {
		t.Fatalf("BindUnbound: %d, %v; want 1 row", n, err)
	}
	if got, err := f.store.Tenant(ctx, cloison.TenantID(id)); err != nil || got.Quotas.MaxConcurrent != 2 {
		t.Fatalf("after binding: %+v, %v", got.Quotas, err)
	}
	if err := f.verifyRows(t); err != nil {
		t.Fatalf("verify after binding: %v", err)
	}
	if n, err := f.store.BindUnbound(ctx); err != nil || n != 0 {
		t.Fatalf("BindUnbound again: %d, %v; want 0", n, err)
	}
}
