package tenancy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// Store keeps tenants, API clients and signing keys in PostgreSQL. It needs
// only the runtime role's privileges (migrations/00003_tenancy.sql). Safe
// for concurrent use. Every method returns errors of this package:
// ErrNotFound, ErrConflict, ErrInvalidTenant, ErrInvalidClient,
// ErrInvalidKey, ErrUnavailable or ErrStore.
//
// Every change (tenant, client, token revocation, signing key) appends its
// ledger event through the Store's Ledger in the change's own transaction,
// as its last statement: the change commits only with its event. A Store
// without a ledger reads only; its changes fail with ErrNoLedger, and a
// ledger that cannot append fails them with ErrLedger. The event's actor
// comes from the context (WithActor).
type Store struct {
	pool   *pgxpool.Pool
	ledger Ledger // nil: read-only
	cache  *lookupCache
}

// NewStore returns a Store over pool; the pool stays the caller's to close.
// Use WithLedger for a Store that may change anything.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool, cache: newLookupCache()} }

// inTx runs fn in a transaction, committing when fn returns nil. A
// serialization failure or deadlock reruns fn (up to three times), so fn
// must have no effect outside tx.
func (s *Store) inTx(ctx context.Context, what string, fn func(pgx.Tx) error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, fn)
		if !retryable(err) {
			break
		}
	}
	return translate(err, what)
}

// tokenID is what a jti on the revocation list may be: Issue's are 22
// base64url characters.
var tokenID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

const tenantColumns = `id, name, status, tier, zeroing, classification, max_concurrent, kv_pages,
	tokens_per_minute, max_context, allowed_models, incident_contact, notice_deadline_hours, allowed_regions, required_node_tier, created_at, updated_at`

func scanTenant(row pgx.Row) (Tenant, error) {
	var (
		t                            Tenant
		id, status, tier, zero, clas string
	)
	err := row.Scan(&id, &t.Name, &status, &tier, &zero, &clas, &t.Quotas.MaxConcurrent, &t.Quotas.KVPages,
		&t.Quotas.TokensPerMinute, &t.Quotas.MaxContext, &t.AllowedModels, &t.IncidentContact, &t.NoticeDeadlineHours, &t.Residency.Regions, &t.Residency.Tier, &t.CreatedAt, &t.UpdatedAt)
	if err != nil {
		return Tenant{}, err
	}
	t.ID = cloison.TenantID(id)
	if t.Status, err = ParseStatus(status); err != nil {
		return Tenant{}, err
	}
	if t.Tier, err = cloison.ParseTier(tier); err != nil {
		return Tenant{}, err
	}
	if t.Zeroing, err = cloison.ParseZeroing(zero); err != nil {
		return Tenant{}, err
	}
	if t.Classification, err = ParseClassification(clas); err != nil {
		return Tenant{}, err
	}
	if t.AllowedModels == nil {
		t.AllowedModels = []string{}
	}
	return t, nil
}

// CreateTenant stores a new tenant and ledgers tenant.created; an empty
// Status means active. It returns the stored record (with the database's
// timestamps). Errors: ErrInvalidTenant, ErrConflict (the id is taken),
// ErrNoLedger, ErrLedger.
func (s *Store) CreateTenant(ctx context.Context, t Tenant) (Tenant, error) {
	if t.Status == "" {
		t.Status = StatusActive
	}
	if t.AllowedModels == nil {
		t.AllowedModels = []string{}
	}
	if err := t.Validate(); err != nil {
		return Tenant{}, err
	}
	if s.ledger == nil {
		return Tenant{}, ErrNoLedger
	}
	var out Tenant
	err := s.inTx(ctx, "tenant "+string(t.ID), func(tx pgx.Tx) error {
		var err error
		out, err = scanTenant(tx.QueryRow(ctx, `INSERT INTO tenants (id, name, status, tier, zeroing, classification,
			max_concurrent, kv_pages, tokens_per_minute, max_context, allowed_models, incident_contact, notice_deadline_hours,
			allowed_regions, required_node_tier)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING `+tenantColumns,
			string(t.ID), t.Name, string(t.Status), t.Tier.String(), t.Zeroing.String(), string(t.Classification),
			t.Quotas.MaxConcurrent, t.Quotas.KVPages, t.Quotas.TokensPerMinute, t.Quotas.MaxContext,
			t.AllowedModels, t.IncidentContact, t.NoticeDeadlineHours, regionsArg(t.Residency.Regions), t.Residency.Tier))
		if err != nil {
			return err
		}
		return s.record(ctx, tx, out.ID, tenantEvent(audit.TenantCreated, out))
	})
	if err != nil {
		return Tenant{}, err
	}
	return out, nil
}

// Tenant returns the tenant id. Errors: ErrNotFound.
func (s *Store) Tenant(ctx context.Context, id cloison.TenantID) (Tenant, error) {
	t, err := scanTenant(s.pool.QueryRow(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE id = $1`, string(id)))
	return t, translate(err, "tenant "+string(id))
}

// Tenants lists every tenant by id.
func (s *Store) Tenants(ctx context.Context) ([]Tenant, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tenantColumns+` FROM tenants ORDER BY id`)
	if err != nil {
		return nil, translate(err, "tenants")
	}
	defer rows.Close()
	var out []Tenant
	for rows.Next() {
		t, err := scanTenant(rows)
		if err != nil {
			return nil, translate(err, "tenants")
		}
		out = append(out, t)
	}
	return out, translate(rows.Err(), "tenants")
}

// UpdateTenant reads tenant id under a row lock, lets fn change it, checks
// the result and writes it back, all in one transaction: concurrent updates
// serialize and none is lost. fn must not change ID or timestamps (they are
// restored) and should have no other effect: it may run more than once. An
// error from fn aborts the update and is returned as is. Errors:
// ErrNotFound, ErrInvalidTenant, ErrNoLedger, ErrLedger.
//
// It ledgers tenant.disabled when the tenant goes from active to
// suspended, tenant.updated for any other change, nothing when fn changed
// nothing.
func (s *Store) UpdateTenant(ctx context.Context, id cloison.TenantID, fn func(*Tenant) error) (Tenant, error) {
	if s.ledger == nil {
		return Tenant{}, ErrNoLedger
	}
	var out Tenant
	var fnErr error
	err := s.inTx(ctx, "tenant "+string(id), func(tx pgx.Tx) error {
		fnErr = nil
		t, err := scanTenant(tx.QueryRow(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE id = $1 FOR UPDATE`, string(id)))
		if err != nil {
			return err
		}
		orig := t
		if err := fn(&t); err != nil {
			fnErr = err
			return err
		}
		t.ID, t.CreatedAt, t.UpdatedAt = orig.ID, orig.CreatedAt, orig.UpdatedAt
		if t.AllowedModels == nil {
			t.AllowedModels = []string{}
		}
		if err := t.Validate(); err != nil {
			fnErr = err
			return err
		}
		if reflect.DeepEqual(t, orig) { // nothing to write, nothing to ledger
			out = orig
			return nil
		}
		out, err = scanTenant(tx.QueryRow(ctx, `UPDATE tenants SET name = $2, status = $3, tier = $4, zeroing = $5,
			classification = $6, max_concurrent = $7, kv_pages = $8, tokens_per_minute = $9, max_context = $10,
			allowed_models = $11, incident_contact = $12, notice_deadline_hours = $13,
			allowed_regions = $14, required_node_tier = $15, updated_at = clock_timestamp()
			WHERE id = $1 RETURNING `+tenantColumns,
			string(t.ID), t.Name, string(t.Status), t.Tier.String(), t.Zeroing.String(), string(t.Classification),
			t.Quotas.MaxConcurrent, t.Quotas.KVPages, t.Quotas.TokensPerMinute, t.Quotas.MaxContext,
			t.AllowedModels, t.IncidentContact, t.NoticeDeadlineHours, regionsArg(t.Residency.Regions), t.Residency.Tier))
		if err != nil {
			return err
		}
		op := audit.TenantUpdated
		if orig.Status == StatusActive && out.Status == StatusSuspended {
			op = audit.TenantDisabled
		}
		return s.record(ctx, tx, out.ID, tenantEvent(op, out))
	})
	if fnErr != nil {
		return Tenant{}, fnErr
	}
	if err != nil {
		return Tenant{}, err
	}
	return out, nil
}

// SetStatus suspends or reactivates a tenant. A suspended tenant's tokens
// stop verifying at once (Verify reads the status on every call). Errors:
// ErrNotFound, ErrInvalidTenant.
func (s *Store) SetStatus(ctx context.Context, id cloison.TenantID, st Status) (Tenant, error) {
	if _, err := ParseStatus(string(st)); err != nil {
		return Tenant{}, err
	}
	return s.UpdateTenant(ctx, id, func(t *Tenant) error { t.Status = st; return nil })
}

const clientColumns = `id, tenant_id, name, scopes, status, created_at, revoked_at`

func scanClient(row pgx.Row) (Client, error) {
	var (
		c       Client
		tenant  string
		status  string
		scopes  []string
		revoked *time.Time
	)
	if err := row.Scan(&c.ID, &tenant, &c.Name, &scopes, &status, &c.CreatedAt, &revoked); err != nil {
		return Client{}, err
	}
	c.Tenant, c.Status = cloison.TenantID(tenant), ClientStatus(status)
	c.Scopes = make([]Scope, len(scopes))
	for i, sc := range scopes {
		c.Scopes[i] = Scope(sc)
	}
	if revoked != nil {
		c.RevokedAt = *revoked
	}
	return c, nil
}

// CreateClient registers an API client of an existing tenant and ledgers
// client.created. Errors: ErrInvalidClient, ErrConflict (id taken),
// ErrNotFound (no such tenant), ErrNoLedger, ErrLedger.
func (s *Store) CreateClient(ctx context.Context, c Client) (Client, error) {
	if err := c.Validate(); err != nil {
		return Client{}, err
	}
	if s.ledger == nil {
		return Client{}, ErrNoLedger
	}
	scopes := make([]string, len(c.Scopes))
	for i, sc := range c.Scopes {
		scopes[i] = string(sc)
	}
	var out Client
	err := s.inTx(ctx, "api client "+c.ID, func(tx pgx.Tx) error {
		var err error
		out, err = scanClient(tx.QueryRow(ctx, `INSERT INTO api_clients (id, tenant_id, name, scopes)
			VALUES ($1, $2, $3, $4) RETURNING `+clientColumns, c.ID, string(c.Tenant), c.Name, scopes))
		if err != nil {
			return err
		}
		return s.record(ctx, tx, out.Tenant, clientEvent(audit.ClientCreated, out))
	})
	if err != nil {
		return Client{}, err
	}
	s.cache.forgetClient(out.ID) // a cached "not found"
	return out, nil
}

// Client returns API client id, as read at most ClientCacheTTL ago (a
// revocation made through this Store shows at once). Verify calls it on
// every request. Errors: ErrNotFound.
func (s *Store) Client(ctx context.Context, id string) (Client, error) {
	now := time.Now()
	if e, ok := s.cache.client(id, now); ok {
		return e.c, e.err
	}
	c, err := scanClient(s.pool.QueryRow(ctx, `SELECT `+clientColumns+` FROM api_clients WHERE id = $1`, id))
	err = translate(err, "api client "+id)
	if err == nil || errors.Is(err, ErrNotFound) {
		s.cache.putClient(id, cachedClient{c: c, err: err, at: now})
	}
	return c, err
}

// RevokeToken puts the token (issuer, jti) on the revocation list until
// expires and ledgers token.revoked (of tenant, when not empty); revoking
// twice changes and ledgers nothing. The token stops verifying at once in
// this process and within ClientCacheTTL elsewhere. Errors: ErrInvalidToken
// (an empty or malformed jti or issuer, an expiry in the past), ErrNotFound
// (no such tenant), ErrNoLedger, ErrLedger.
func (s *Store) RevokeToken(ctx context.Context, issuer, jti string, tenant cloison.TenantID, expires time.Time) error {
	switch {
	case audit.CheckName("issuer", issuer) != nil:
		return fmt.Errorf("%w: issuer %q", ErrInvalidToken, issuer)
	case !tokenID.MatchString(jti):
		return fmt.Errorf("%w: jti %q", ErrInvalidToken, jti)
	case !expires.After(time.Now()):
		return fmt.Errorf("%w: token %s has already expired", ErrInvalidToken, jti)
	}
	if s.ledger == nil {
		return ErrNoLedger
	}
	var ten *string
	if tenant != "" {
		t := string(tenant)
		ten = &t
	}
	err := s.inTx(ctx, "token "+jti, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO revoked_tokens (issuer, jti, tenant_id, expires_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (issuer, jti) DO NOTHING`, issuer, jti, ten, expires)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return s.record(ctx, tx, tenant, audit.TokenRevoked{Token: audit.Name(jti), Issuer: audit.Name(issuer), Expires: audit.DayOf(expires)})
	})
	if err != nil {
		return err
	}
	s.cache.putToken(issuer+"\x00"+jti, true, time.Now())
	return nil
}

// TokenRevoked reports whether the token (issuer, jti) is on the
// revocation list, as read at most ClientCacheTTL ago. Verify calls it on
// every request. Errors: the Store's.
func (s *Store) TokenRevoked(ctx context.Context, issuer, jti string) (bool, error) {
	key, now := issuer+"\x00"+jti, time.Now()
	if r, ok := s.cache.token(key, now); ok {
		return r, nil
	}
	var revoked bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM revoked_tokens WHERE issuer = $1 AND jti = $2)`, issuer, jti).Scan(&revoked)
	if err != nil {
		return false, translate(err, "revoked tokens")
	}
	s.cache.putToken(key, revoked, now)
	return revoked, nil
}

// Clients lists a tenant's API clients by id.
func (s *Store) Clients(ctx context.Context, tenant cloison.TenantID) ([]Client, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+clientColumns+` FROM api_clients WHERE tenant_id = $1 ORDER BY id`, string(tenant))
	if err != nil {
		return nil, translate(err, "api clients")
	}
	defer rows.Close()
	var out []Client
	for rows.Next() {
		c, err := scanClient(rows)
		if err != nil {
			return nil, translate(err, "api clients")
		}
		out = append(out, c)
	}
	return out, translate(rows.Err(), "api clients")
}

// RevokeClient revokes API client id for good and ledgers client.revoked;
// revoking twice changes and ledgers nothing. Its tokens stop verifying at
// once in this process and within ClientCacheTTL elsewhere. Errors:
// ErrNotFound, ErrNoLedger, ErrLedger.
func (s *Store) RevokeClient(ctx context.Context, id string) (Client, error) {
	if s.ledger == nil {
		return Client{}, ErrNoLedger
	}
	var c Client
	err := s.inTx(ctx, "api client "+id, func(tx pgx.Tx) error {
		before, err := scanClient(tx.QueryRow(ctx, `SELECT `+clientColumns+` FROM api_clients WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return err
		}
		if before.Status == ClientRevoked {
			c = before
			return nil
		}
		if c, err = scanClient(tx.QueryRow(ctx, `UPDATE api_clients SET status = 'revoked', revoked_at = clock_timestamp()
			WHERE id = $1 RETURNING `+clientColumns, id)); err != nil {
			return err
		}
		return s.record(ctx, tx, c.Tenant, clientEvent(audit.ClientRevoked, c))
	})
	if err != nil {
		return Client{}, err
	}
	s.cache.forgetClient(c.ID)
	return c, nil
}

// storedKey is one signing_keys row.
type storedKey struct {
	kid, issuer   string
	public        []byte
	sealed        []byte
	state         KeyState
	createdAt     time.Time
	activatedAt   time.Time
	retiredAt     time.Time
	hasActivation bool
}

func (s *Store) signingKeys(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, issuer string) ([]storedKey, error) {
	rows, err := q.Query(ctx, `SELECT kid, issuer, public_key, sealed_private, state, created_at, activated_at, retired_at
		FROM signing_keys WHERE issuer = $1 ORDER BY created_at, kid`, issuer)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storedKey
	for rows.Next() {
		var k storedKey
		var state string
		var act, ret *time.Time
		if err := rows.Scan(&k.kid, &k.issuer, &k.public, &k.sealed, &state, &k.createdAt, &act, &ret); err != nil {
			return nil, err
		}
		k.state = KeyState(state)
		if act != nil {
			k.activatedAt, k.hasActivation = *act, true
		}
		if ret != nil {
			k.retiredAt = *ret
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

func insertKey(ctx context.Context, tx pgx.Tx, k storedKey) error {
	_, err := tx.Exec(ctx, `INSERT INTO signing_keys (kid, issuer, public_key, sealed_private, state, activated_at)
		VALUES ($1, $2, $3, $4, $5, CASE WHEN $5 = 'current' THEN clock_timestamp() END)`,
		k.kid, k.issuer, k.public, k.sealed, string(k.state))
	return err
}

// regionsArg is never nil: the column is NOT NULL, and a nil slice is SQL NULL.
func regionsArg(r []string) []string {
	if r == nil {
		return []string{}
	}
	return r
}
