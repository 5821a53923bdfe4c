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
	guard  *rowGuard // row checks and their cache (WithEventKeys, WithRowAlarm); never nil
}

// NewStore returns a Store over pool; the pool stays the caller's to close.
// Use WithLedger for a Store that may change anything.
func NewStore(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, cache: newLookupCache(), guard: &rowGuard{seen: map[string]bool{}, good: map[audit.Digest]bool{}}}
}

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

func scanTenant(row pgx.Row, extra ...any) (Tenant, error) {
	var (
		t                            Tenant
		id, status, tier, zero, clas string
	)
	err := row.Scan(append([]any{&id, &t.Name, &status, &tier, &zero, &clas, &t.Quotas.MaxConcurrent, &t.Quotas.KVPages,
		&t.Quotas.TokensPerMinute, &t.Quotas.MaxContext, &t.AllowedModels, &t.IncidentContact, &t.NoticeDeadlineHours, &t.Residency.Regions, &t.Residency.Tier, &t.CreatedAt, &t.UpdatedAt}, extra...)...)
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
		st, err := tenantState(t, 0)
		if err != nil {
			return err
		}
		ev := tenantEvent(audit.TenantCreated, t)
		ev.State = stateDigest(st)
		if err := s.apply(ctx, tx, t.ID, ev, st); err != nil {
			return err
		}
		out, err = scanTenant(tx.QueryRow(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE id = $1`, string(t.ID)))
		return err
	})
	if err != nil {
		return Tenant{}, err
	}
	return out, nil
}

// Tenant returns the tenant id, checked against its last ledger event (the
// request path reads it through Verifier.Verify): a row that is not what
// its last event states is refused and alarmed (WithRowAlarm). Errors:
// ErrNotFound, ErrRowUnproven.
func (s *Store) Tenant(ctx context.Context, id cloison.TenantID) (Tenant, error) {
	var b rowBinding
	t, err := scanTenant(s.pool.QueryRow(ctx, `SELECT `+tenantColumns+bindingColumns("t", 2)+`
		FROM tenants t LEFT JOIN audit_events e ON e.seq = t.ledger_seq WHERE t.id = $1`, string(id), audit.RowStateExcluded), b.dest()...)
	if err != nil {
		return Tenant{}, translate(err, "tenant "+string(id))
	}
	if err := s.check(audit.RowTenants, string(t.ID), t.ID, b); err != nil {
		return Tenant{}, err
	}
	return t, nil
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

// UpdateTenant reads tenant id under a lock, lets fn change it, checks
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
		// Concurrent updates of one tenant serialize here (the runtime
		// role may not lock the row: it has no UPDATE on tenants).
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cloison.tenants:' || $1, 0))`, string(id)); err != nil {
			return err
		}
		var b rowBinding
		t, err := scanTenant(tx.QueryRow(ctx, `SELECT `+tenantColumns+bindingColumns("t", 2)+`
			FROM tenants t LEFT JOIN audit_events e ON e.seq = t.ledger_seq WHERE t.id = $1`, string(id), audit.RowStateExcluded), b.dest()...)
		if err != nil {
			return err
		}
		// A row that is not what its last event states is stated again
		// even when fn changes nothing: that is how an administrator
		// restores a refused tenant.
		unproven := s.check(audit.RowTenants, string(t.ID), t.ID, b) != nil
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
		if reflect.DeepEqual(t, orig) && !unproven { // nothing to write, nothing to ledger
			out = orig
			return nil
		}
		op := audit.TenantUpdated
		if orig.Status == StatusActive && t.Status == StatusSuspended {
			op = audit.TenantDisabled
		}
		st, err := tenantState(t, b.seq)
		if err != nil {
			return err
		}
		ev := tenantEvent(op, t)
		ev.State = stateDigest(st)
		if err := s.apply(ctx, tx, t.ID, ev, st); err != nil {
			return err
		}
		out, err = scanTenant(tx.QueryRow(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE id = $1`, string(id)))
		return err
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

func scanClient(row pgx.Row, extra ...any) (Client, error) {
	var (
		c       Client
		tenant  string
		status  string
		scopes  []string
		revoked *time.Time
	)
	if err := row.Scan(append([]any{&c.ID, &tenant, &c.Name, &scopes, &status, &c.CreatedAt, &revoked}, extra...)...); err != nil {
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
		c.Status = ClientActive
		st, err := clientState(c, 0)
		if err != nil {
			return err
		}
		ev := clientEvent(audit.ClientCreated, c)
		ev.State = stateDigest(st)
		if err := s.apply(ctx, tx, c.Tenant, ev, st); err != nil {
			return err
		}
		out, err = scanClient(tx.QueryRow(ctx, `SELECT `+clientColumns+` FROM api_clients WHERE id = $1`, c.ID))
		return err
	})
	if err != nil {
		return Client{}, err
	}
	s.cache.forgetClient(out.ID) // a cached "not found"
	return out, nil
}

// Client returns API client id, as read at most ClientCacheTTL ago (a
// revocation made through this Store shows at once), checked against its
// last ledger event as Tenant is. Verify calls it on every request.
// Errors: ErrNotFound, ErrRowUnproven.
func (s *Store) Client(ctx context.Context, id string) (Client, error) {
	now := time.Now()
	if e, ok := s.cache.client(id, now); ok {
		return e.c, e.err
	}
	var b rowBinding
	c, err := scanClient(s.pool.QueryRow(ctx, `SELECT `+clientColumns+bindingColumns("c", 2)+`
		FROM api_clients c LEFT JOIN audit_events e ON e.seq = c.ledger_seq WHERE c.id = $1`, id, audit.RowStateExcluded), b.dest()...)
	err = translate(err, "api client "+id)
	if err == nil {
		if err = s.check(audit.RowClients, c.ID, c.Tenant, b); err != nil {
			c = Client{}
		}
	}
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
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cloison.api_clients:' || $1, 0))`, id); err != nil {
			return err
		}
		var b rowBinding
		before, err := scanClient(tx.QueryRow(ctx, `SELECT `+clientColumns+bindingColumns("c", 2)+`
			FROM api_clients c LEFT JOIN audit_events e ON e.seq = c.ledger_seq WHERE c.id = $1`, id, audit.RowStateExcluded), b.dest()...)
		if err != nil {
			return err
		}
		if before.Status == ClientRevoked && s.check(audit.RowClients, before.ID, before.Tenant, b) == nil {
			c = before
			return nil
		}
		after := before
		after.Status = ClientRevoked
		st, err := clientState(after, b.seq)
		if err != nil {
			return err
		}
		ev := clientEvent(audit.ClientRevoked, after)
		ev.State = stateDigest(st)
		if err := s.apply(ctx, tx, after.Tenant, ev, st); err != nil {
			return err
		}
		c, err = scanClient(tx.QueryRow(ctx, `SELECT `+clientColumns+` FROM api_clients WHERE id = $1`, id))
		return err
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
	seq, prev     int64      // ledger_seq, ledger_prev (0: none)
	binding       rowBinding // the row's state-document row and last event
}

func (s *Store) signingKeys(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, issuer string) ([]storedKey, error) {
	rows, err := q.Query(ctx, `SELECT kid, issuer, public_key, sealed_private, state, created_at, activated_at, retired_at`+bindingColumns("k", 2)+`
		FROM signing_keys k LEFT JOIN audit_events e ON e.seq = k.ledger_seq WHERE issuer = $1 ORDER BY created_at, kid`, issuer, audit.RowStateExcluded)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storedKey
	for rows.Next() {
		var k storedKey
		var state string
		var act, ret *time.Time
		if err := rows.Scan(append([]any{&k.kid, &k.issuer, &k.public, &k.sealed, &state, &k.createdAt, &act, &ret}, k.binding.dest()...)...); err != nil {
			return nil, err
		}
		k.seq, k.prev = k.binding.seq, k.binding.prev
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

// applyKey moves key row k to state (a new row: prev 0) with its event op,
// in tx (Store.apply).
func (s *Store) applyKey(ctx context.Context, tx pgx.Tx, k storedKey, op audit.KeyOp, state KeyState) error {
	k.state = state
	st, err := keyState(k, k.seq)
	if err != nil {
		return err
	}
	ev := keyEvent(op, k.kid, k.public)
	ev.State = stateDigest(st)
	return s.apply(ctx, tx, "", ev, st)
}

// regionsArg is never nil: the column is NOT NULL, and a nil slice is SQL NULL.
func regionsArg(r []string) []string {
	if r == nil {
		return []string{}
	}
	return r
}
