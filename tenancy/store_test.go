package tenancy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/internal/pgtest"
)

// db is this package's fresh, migrated database (runtime role for stores).
var db *pgtest.DB

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &db)) }

func newStore(t testing.TB) *Store {
	t.Helper()
	pool := db.RuntimePool(t)
	return NewStore(pool).WithLedger(newLedger(t, pool))
}

// newLedger opens the real ledger on pool, closed at the end of the test.
func newLedger(t testing.TB, pool *pgxpool.Pool) *auditpg.Store {
	t.Helper()
	l, err := auditpg.Open(context.Background(), pool, auditpg.Config{Origin: "tenancy-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// uniqueID returns a fresh tenant id, so tests sharing the database never
// collide.
func uniqueID(prefix string) cloison.TenantID {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return cloison.TenantID(prefix + "-" + hex.EncodeToString(b[:]))
}

func sampleTenant(prefix string) Tenant {
	return Tenant{
		ID:             uniqueID(prefix),
		Name:           "Acme Inc.",
		Tier:           cloison.TierShared,
		Zeroing:        cloison.ZeroCrossTenant,
		Classification: ClassInternal,
		Quotas:         Quotas{MaxConcurrent: 4, KVPages: 256, TokensPerMinute: 60000, MaxContext: 4096},
		AllowedModels:  []string{"context-bag"},
		// Loi 25: where incident notices go.
		IncidentContact: "privacy@acme.example",
		Residency:       Residency{Regions: []string{}},
	}
}

func TestTenantRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	in := sampleTenant("acme")
	got, err := s.CreateTenant(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusActive || got.CreatedAt.IsZero() || got.UpdatedAt.IsZero() {
		t.Fatalf("got %+v, want active with timestamps", got)
	}
	read, err := s.Tenant(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(read, got) {
		t.Fatalf("got %+v, want %+v", read, got)
	}
	in.CreatedAt, in.UpdatedAt, in.Status = got.CreatedAt, got.UpdatedAt, StatusActive
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("got %+v, want %+v", got, in)
	}
	all, err := s.Tenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range all {
		found = found || x.ID == in.ID
	}
	if !found {
		t.Fatalf("Tenants() lacks %s", in.ID)
	}
	// JSON carries tier and zeroing by name and round-trips.
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m["tier"] != "shared" || m["zeroing"] != "cross-tenant" {
		t.Fatalf("json %s: want tier shared, zeroing cross-tenant", b)
	}
	var back Tenant
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Quotas, got.Quotas) || back.Tier != got.Tier || back.Zeroing != got.Zeroing {
		t.Fatalf("json round trip: got %+v, want %+v", back, got)
	}
}

func TestTenantErrors(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	a := sampleTenant("dup")
	if _, err := s.CreateTenant(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTenant(ctx, a); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate: got %v, want ErrConflict", err)
	}
	if _, err := s.Tenant(ctx, "no-such-tenant"); !errors.Is(err, ErrNotFound) || cloison.ErrorCode(err) != cloison.CodeNotFound {
		t.Fatalf("missing: got %v, want ErrNotFound", err)
	}
	if _, err := s.SetStatus(ctx, "no-such-tenant", StatusSuspended); !errors.Is(err, ErrNotFound) {
		t.Fatalf("suspend missing: got %v, want ErrNotFound", err)
	}
}

func TestTenantValidate(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	cases := []struct {
		name string
		edit func(*Tenant)
	}{
		{"bad id", func(x *Tenant) { x.ID = "Not An Id" }},
		{"empty name", func(x *Tenant) { x.Name = "" }},
		{"bad status", func(x *Tenant) { x.Status = "deleted" }},
		{"bad tier", func(x *Tenant) { x.Tier = 7 }},
		{"unset zeroing", func(x *Tenant) { x.Zeroing = cloison.ZeroUnset }},
		{"bad classification", func(x *Tenant) { x.Classification = "secret" }},
		{"personal on shared", func(x *Tenant) { x.Classification = ClassPersonal; x.Zeroing = cloison.ZeroAlways }},
		{"confidential without always", func(x *Tenant) { x.Classification = ClassConfidential; x.Tier = cloison.TierDedicated }},
		{"zero concurrency", func(x *Tenant) { x.Quotas.MaxConcurrent = 0 }},
		{"zero pages", func(x *Tenant) { x.Quotas.KVPages = 0 }},
		{"zero tpm", func(x *Tenant) { x.Quotas.TokensPerMinute = 0 }},
		{"negative context", func(x *Tenant) { x.Quotas.MaxContext = -1 }},
		{"blank model", func(x *Tenant) { x.AllowedModels = []string{" m"} }},
		{"negative notice deadline", func(x *Tenant) { x.NoticeDeadlineHours = -1 }},
		{"notice deadline over a year", func(x *Tenant) { x.NoticeDeadlineHours = MaxNoticeDeadlineHours + 1 }},
		{"incident contact too long", func(x *Tenant) { x.IncidentContact = strings.Repeat("x", 513) }},
		{"region not a label", func(x *Tenant) { x.Residency.Regions = []string{"CA QC"} }},
		{"empty region", func(x *Tenant) { x.Residency.Regions = []string{""} }},
		{"region twice", func(x *Tenant) { x.Residency.Regions = []string{"ca-qc", "ca-qc"} }},
		{"too many regions", func(x *Tenant) {
			for i := range MaxRegions + 1 {
				x.Residency.Regions = append(x.Residency.Regions, fmt.Sprintf("r%d", i))
			}
		}},
		{"tier not a label", func(x *Tenant) { x.Residency.Tier = "dedicated!" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := sampleTenant("v")
			c.edit(&x)
			_, err := s.CreateTenant(ctx, x)
			if !errors.Is(err, ErrInvalidTenant) || cloison.ErrorCode(err) != cloison.CodeInvalid {
				t.Fatalf("got %v, want ErrInvalidTenant", err)
			}
		})
	}
	ok := sampleTenant("personal")
	ok.Classification, ok.Tier, ok.Zeroing = ClassPersonal, cloison.TierDedicated, cloison.ZeroAlways
	if _, err := s.CreateTenant(ctx, ok); err != nil {
		t.Fatalf("personal, dedicated, always: %v", err)
	}
}

// The database holds the same rules when Validate is bypassed, and the one
// SQLSTATE translation turns its refusals into domain errors.
func TestDatabaseRefusesWhatValidateRefuses(t *testing.T) {
	ctx := context.Background()
	// The owner's writes: the runtime role writes only through row_apply,
	// and the CHECKs hold for every writer.
	pool := db.AdminPool(t)
	id := string(uniqueID("raw"))
	_, err := pool.Exec(ctx, `INSERT INTO tenants (id, name, tier, zeroing, classification, max_concurrent, kv_pages, tokens_per_minute)
		VALUES ($1, 'x', 'shared', 'never', 'personal', 1, 1, 1)`, id)
	if err := translate(err, "tenant"); !errors.Is(err, ErrInvalidTenant) {
		t.Fatalf("personal on shared pages: got %v, want ErrInvalidTenant", err)
	}
	_, err = pool.Exec(ctx, `INSERT INTO tenants (id, name, tier, zeroing, classification, max_concurrent, kv_pages, tokens_per_minute, notice_deadline_hours)
		VALUES ($1, 'x', 'shared', 'never', 'public', 1, 1, 1, 8761)`, id)
	if err := translate(err, "tenant"); !errors.Is(err, ErrInvalidTenant) {
		t.Fatalf("notice deadline over a year: got %v, want ErrInvalidTenant", err)
	}
	for _, c := range []struct{ name, regions, tier string }{
		{"malformed region", `{"CA QC"}`, ""}, {"empty region", `{ca-qc,""}`, ""}, {"malformed tier", `{}`, "-x"}} {
		_, err = pool.Exec(ctx, `INSERT INTO tenants (id, name, tier, zeroing, classification, max_concurrent, kv_pages, tokens_per_minute, allowed_regions, required_node_tier)
			VALUES ($1, 'x', 'shared', 'never', 'public', 1, 1, 1, $2, $3)`, id, c.regions, c.tier)
		if err := translate(err, "tenant"); !errors.Is(err, ErrInvalidTenant) {
			t.Fatalf("%s: got %v, want ErrInvalidTenant", c.name, err)
		}
	}
	// The runtime role may not delete: tenants are suspended, not erased.
	s := newStore(t)
	x, err := s.CreateTenant(ctx, sampleTenant("nodelete"))
	if err != nil {
		t.Fatal(err)
	}
	pool = db.RuntimePool(t)
	_, err = pool.Exec(ctx, `DELETE FROM tenants WHERE id = $1`, string(x.ID))
	if err := translate(err, "tenant"); !errors.Is(err, ErrStore) {
		t.Fatalf("runtime DELETE: got %v, want ErrStore (insufficient privilege)", err)
	}
	// Nor set timestamps itself.
	_, err = pool.Exec(ctx, `UPDATE tenants SET created_at = now() WHERE id = $1`, string(x.ID))
	if err == nil {
		t.Fatal("runtime UPDATE of created_at: got nil, want permission denied")
	}
}

func TestUpdateTenant(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	x, err := s.CreateTenant(ctx, sampleTenant("upd"))
	if err != nil {
		t.Fatal(err)
	}
	// Concurrent read-modify-write closures lose no update.
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := s.UpdateTenant(ctx, x.ID, func(t *Tenant) error { t.Quotas.MaxConcurrent++; return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := s.Tenant(ctx, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := x.Quotas.MaxConcurrent + n; got.Quotas.MaxConcurrent != want {
		t.Fatalf("max concurrent: got %d, want %d", got.Quotas.MaxConcurrent, want)
	}
	if !got.UpdatedAt.After(x.UpdatedAt) {
		t.Fatalf("updated_at: got %v, want after %v", got.UpdatedAt, x.UpdatedAt)
	}
	// The closure's error aborts and is returned as is; nothing changes.
	boom := errors.New("boom")
	if _, err := s.UpdateTenant(ctx, x.ID, func(t *Tenant) error { t.Name = "changed"; return boom }); err != boom {
		t.Fatalf("got %v, want boom", err)
	}
	// An invalid result is refused; ID changes are ignored.
	if _, err := s.UpdateTenant(ctx, x.ID, func(t *Tenant) error { t.Classification = ClassPersonal; return nil }); !errors.Is(err, ErrInvalidTenant) {
		t.Fatalf("got %v, want ErrInvalidTenant", err)
	}
	up, err := s.UpdateTenant(ctx, x.ID, func(t *Tenant) error {
		t.ID = "someone-else"
		t.Classification, t.Tier, t.Zeroing = ClassConfidential, cloison.TierDedicated, cloison.ZeroAlways
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if up.ID != x.ID || up.Name != x.Name || up.Classification != ClassConfidential {
		t.Fatalf("got %+v, want id %s, name %q, confidential", up, x.ID, x.Name)
	}
	sus, err := s.SetStatus(ctx, x.ID, StatusSuspended)
	if err != nil || sus.Status != StatusSuspended {
		t.Fatalf("suspend: got %v, %v", sus.Status, err)
	}
	if _, err := s.SetStatus(ctx, x.ID, "gone"); !errors.Is(err, ErrInvalidTenant) {
		t.Fatalf("bad status: got %v, want ErrInvalidTenant", err)
	}
}

func TestClients(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	x, err := s.CreateTenant(ctx, sampleTenant("cl"))
	if err != nil {
		t.Fatal(err)
	}
	c := Client{ID: "svc-" + string(x.ID), Tenant: x.ID, Name: "batch", Scopes: []Scope{ScopeInfer, ScopeComplianceRead}}
	got, err := s.CreateClient(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ClientActive || !reflect.DeepEqual(got.Scopes, c.Scopes) || !got.RevokedAt.IsZero() {
		t.Fatalf("got %+v", got)
	}
	if _, err := s.CreateClient(ctx, c); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate: got %v, want ErrConflict", err)
	}
	orphan := Client{ID: "orphan-" + string(x.ID), Tenant: "no-such-tenant", Name: "o", Scopes: []Scope{ScopeInfer}}
	if _, err := s.CreateClient(ctx, orphan); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown tenant: got %v, want ErrNotFound", err)
	}
	bad := c
	bad.ID, bad.Scopes = "bad-"+string(x.ID), []Scope{"root"}
	if _, err := s.CreateClient(ctx, bad); !errors.Is(err, ErrInvalidClient) {
		t.Fatalf("unknown scope: got %v, want ErrInvalidClient", err)
	}
	list, err := s.Clients(ctx, x.ID)
	if err != nil || len(list) != 1 || list[0].ID != c.ID {
		t.Fatalf("Clients: got %+v, %v", list, err)
	}
	rev, err := s.RevokeClient(ctx, c.ID)
	if err != nil || rev.Status != ClientRevoked || rev.RevokedAt.IsZero() {
		t.Fatalf("revoke: got %+v, %v", rev, err)
	}
	again, err := s.RevokeClient(ctx, c.ID)
	if err != nil || !again.RevokedAt.Equal(rev.RevokedAt) {
		t.Fatalf("revoke twice: got %+v, %v; want the first revocation time kept", again, err)
	}
	if _, err := s.RevokeClient(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke missing: got %v, want ErrNotFound", err)
	}
}

func TestStoreUnavailable(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Tenant(ctx, "acme")
	if !errors.Is(err, ErrUnavailable) || cloison.ErrorCode(err) != cloison.CodeUnavailable {
		t.Fatalf("canceled context: got %v, want ErrUnavailable", err)
	}
	// A server that does not answer: unavailable, never "not found" (which
	// Verify would turn into an authentication answer).
	down := downStore(t)
	if _, err := down.Tenant(context.Background(), "acme"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("server down: got %v, want ErrUnavailable", err)
	}
}

// downStore is a Store over a server that does not answer.
func downStore(t testing.TB) *Store {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return NewStore(pool).WithLedger(noLedger{})
}

// noLedger is a ledger that is never reached (the store is down first).
type noLedger struct{}

func (noLedger) AppendTx(context.Context, pgx.Tx, ...audit.Event) ([]audit.Record, error) {
	return nil, errors.New("noLedger: not reachable")
}

func TestNewTenant(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for _, c := range []struct {
		class   Classification
		tier    cloison.Tier
		zeroing cloison.Zeroing
	}{
		{ClassPublic, cloison.TierShared, cloison.ZeroCrossTenant},
		{ClassInternal, cloison.TierShared, cloison.ZeroCrossTenant},
		{ClassConfidential, cloison.TierDedicated, cloison.ZeroAlways},
		{ClassPersonal, cloison.TierDedicated, cloison.ZeroAlways},
	} {
		x := NewTenant(uniqueID("new"), "New", c.class)
		if x.Tier != c.tier || x.Zeroing != c.zeroing {
			t.Fatalf("%s: got %v/%v, want %v/%v", c.class, x.Tier, x.Zeroing, c.tier, c.zeroing)
		}
		if _, err := s.CreateTenant(ctx, x); err != nil {
			t.Fatalf("%s: %v", c.class, err)
		}
	}
}

func TestTenantJSONDefaults(t *testing.T) {
	cases := []struct {
		doc     string
		tier    cloison.Tier
		zeroing cloison.Zeroing
		err     bool
	}{
		{`{"id":"a","classification":"personal"}`, cloison.TierDedicated, cloison.ZeroAlways, false},
		{`{"id":"a","classification":"public"}`, cloison.TierShared, cloison.ZeroCrossTenant, false},
		{`{"id":"a","classification":"public","tier":"dedicated","zeroing":"never"}`, cloison.TierDedicated, cloison.ZeroNever, false},
		{`{"id":"a","tier":"gold"}`, 0, 0, true},
		{`{"id":"a","zeroing":"sometimes"}`, 0, 0, true},
		{`{"id":1}`, 0, 0, true},
	}
	for _, c := range cases {
		var x Tenant
		err := json.Unmarshal([]byte(c.doc), &x)
		if c.err {
			if !errors.Is(err, ErrInvalidTenant) {
				t.Errorf("%s: got %v, want ErrInvalidTenant", c.doc, err)
			}
			continue
		}
		if err != nil || x.Tier != c.tier || x.Zeroing != c.zeroing || x.Status != StatusActive {
			t.Errorf("%s: got %v/%v %q, %v; want %v/%v active", c.doc, x.Tier, x.Zeroing, x.Status, err, c.tier, c.zeroing)
		}
	}
}

// The notice clause (contact and deadline of incident notices) is stored, read back and updated like
// every tenant field; the config digest tenant.updated carries changes
// with it.
func TestNoticeClauseRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	x := sampleTenant("notice")
	x.NoticeDeadlineHours, x.IncidentContact = 24, "dpo@notice.example"
	made, err := s.CreateTenant(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Tenant(ctx, made.ID); err != nil || got.NoticeDeadlineHours != 24 || got.IncidentContact != "dpo@notice.example" {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	up, err := s.UpdateTenant(ctx, made.ID, func(t *Tenant) error { t.NoticeDeadlineHours = 72; return nil })
	if err != nil || up.NoticeDeadlineHours != 72 {
		t.Fatalf("update: %+v, %v", up, err)
	}
	same := made
	same.NoticeDeadlineHours = 72
	if tenantDigest(same) == tenantDigest(made) {
		t.Fatal("the config digest does not cover the notice deadline")
	}
}

// Residency (allowed node regions and tier) is stored, read back and updated like every
// tenant field, and the config digest of tenant.updated covers it.
func TestResidencyRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	x := sampleTenant("residency")
	x.Residency = Residency{Regions: []string{"ca-qc", "ca-on"}, Tier: "dedicated"}
	made, err := s.CreateTenant(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Tenant(ctx, made.ID); err != nil || !reflect.DeepEqual(got.Residency, x.Residency) {
		t.Fatalf("read back: %+v, %v", got.Residency, err)
	}
	up, err := s.UpdateTenant(ctx, made.ID, func(t *Tenant) error { t.Residency = Residency{Regions: nil}; return nil })
	if err != nil || len(up.Residency.Regions) != 0 || up.Residency.Regions == nil || up.Residency.Tier != "" || up.Residency.Required() {
		t.Fatalf("update to none: %+v, %v", up.Residency, err)
	}
	if tenantDigest(up) == tenantDigest(made) {
		t.Fatal("the config digest does not cover the residency")
	}
	if _, err := s.UpdateTenant(ctx, made.ID, func(t *Tenant) error { t.Residency.Regions = []string{"Québec"}; return nil }); !errors.Is(err, ErrInvalidTenant) {
		t.Fatalf("a malformed region: got %v, want ErrInvalidTenant", err)
	}
}

func (noLedger) ApplyTx(context.Context, pgx.Tx, audit.Event, []byte) (audit.Record, error) {
	return audit.Record{}, errors.New("noLedger")
}
