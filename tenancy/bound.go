package tenancy

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// Live rows bound to their events. Tenants, API clients and signing keys
// change only through the database's row_apply (migration 00027): the
// Store hands it the change's ledger event (signed by the ledger when it
// holds the log key) and the row's state document (audit.RowState), and
// the database appends the event and writes the row from the document in
// one statement. Reading a row, the Store checks it against its last event
// (audit.CheckRow; with WithEventKeys also the event's signature): a row
// that disagrees is refused (ErrRowUnproven) and reported (WithRowAlarm).

// ErrRowUnproven: a tenant, client or key row is not what its last ledger
// event states (a row changed off the record), has no event, or its event
// is not signed by a trusted log key. Its requests are refused until an
// administrator states the row again (any change through the Store).
var ErrRowUnproven = cloison.NewError(cloison.CodeUnavailable, "tenancy: the record cannot be proven against the ledger; refused")

// RowMismatch is what a row alarm reports.
type RowMismatch struct {
	Table  string           // audit.RowTenants, RowClients, RowSigningKeys
	ID     string           // tenant id, client id, kid
	Tenant cloison.TenantID // the row's tenant ("" for a key)
	Seq    uint64           // the row's last event (0: none)
	Err    error            // what disagrees (audit.ErrRowState)
}

// rowGuard holds the Store's row checks; shared by a Store and its
// WithLedger copies.
type rowGuard struct {
	keys  map[string]ed25519.PublicKey // trusted log keys; nil: no signature check
	alarm func(RowMismatch)
	mu    sync.Mutex
	seen  map[string]bool       // guarded by mu: mismatches already alarmed, by table/id/seq
	good  map[audit.Digest]bool // guarded by mu: rows (with their event) that passed, so a row read again costs one SHA-256
}

// WithEventKeys returns a Store that also requires the last event of every
// row it reads to carry a valid event signature by one of keys (the
// deployment's log keys, by audit.KeyID): a row stated through row_apply
// by whoever holds only the database's credentials is refused. The node
// passes its log key. The copy shares the pool.
func (s *Store) WithEventKeys(keys map[string]ed25519.PublicKey) *Store {
	c := *s
	g := &rowGuard{keys: keys, seen: map[string]bool{}, good: map[audit.Digest]bool{}}
	if s.guard != nil {
		g.alarm = s.guard.alarm
	}
	c.guard = g
	return &c
}

// WithRowAlarm returns a Store that calls fn, once per row and event, when
// a row it reads disagrees with its last event; fn must not block (the
// node opens an incident from its own goroutine). The copy shares the pool.
func (s *Store) WithRowAlarm(fn func(RowMismatch)) *Store {
	c := *s
	g := &rowGuard{alarm: fn, seen: map[string]bool{}, good: map[audit.Digest]bool{}}
	if s.guard != nil {
		g.keys = s.guard.keys
	}
	c.guard = g
	return &c
}

// maxGoodPayloads bounds the cache of rows that passed (cleared when full).
const maxGoodPayloads = 1 << 16

// rowBinding is what a read selects besides the row's own columns: its
// state-document row, the previous and last event seqs, and the last
// event's payload.
type rowBinding struct {
	row     json.RawMessage
	prev    int64
	seq     int64
	eseq    *int64
	payload []byte
}

// bindingColumns, appended to a SELECT of alias x joined to the row's
// event as e, read a rowBinding; $N is audit.RowStateExcluded.
func bindingColumns(x string, n int) string {
	return fmt.Sprintf(`, to_jsonb(%[1]s) - $%[2]d::text[], coalesce(%[1]s.ledger_prev, 0), coalesce(%[1]s.ledger_seq, 0), e.seq, e.payload`, x, n)
}

func (b *rowBinding) dest() []any { return []any{&b.row, &b.prev, &b.seq, &b.eseq, &b.payload} }

// check reports whether the row is what its last event states; a
// mismatch is alarmed and returned as ErrRowUnproven.
func (s *Store) check(table, id string, tenant cloison.TenantID, b rowBinding) error {
	g := s.guard
	// A row read as it was last checked passes again without the work: the
	// key covers everything the checks read.
	var key audit.Digest
	if g != nil && b.eseq != nil {
		key = audit.Sum(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%d\x00%d\x00%s\x00%s", table, id, tenant, b.prev, b.seq, b.row, b.payload))
		g.mu.Lock()
		ok := g.good[key]
		g.mu.Unlock()
		if ok {
			return nil
		}
	}
	err := func() error {
		if b.seq == 0 {
			return fmt.Errorf("%w: %s %s is bound to no event", audit.ErrRowState, table, id)
		}
		if b.eseq == nil || *b.eseq != b.seq {
			return fmt.Errorf("%w: %s %s: its event %d is not in the ledger", audit.ErrRowState, table, id, b.seq)
		}
		state, err := audit.RowState(table, uint64(b.prev), b.row)
		if err != nil {
			return err
		}
		rec := audit.Record{Seq: uint64(b.seq), Payload: b.payload}
		if err := audit.CheckRow(table, id, string(tenant), state, rec); err != nil {
			return err
		}
		if g != nil && len(g.keys) > 0 {
			kid, err := audit.VerifyEventSignature(b.payload, g.keys)
			if err == nil && kid == "" {
				err = audit.ErrUnsigned
			}
			if err != nil {
				return fmt.Errorf("%w: %s %s: event %d: %v", audit.ErrRowState, table, id, b.seq, err)
			}
		}
		return nil
	}()
	if err == nil && g != nil {
		g.mu.Lock()
		if len(g.good) >= maxGoodPayloads {
			clear(g.good)
		}
		g.good[key] = true
		g.mu.Unlock()
	}
	if err == nil {
		return nil
	}
	if g := s.guard; g != nil && g.alarm != nil {
		key := fmt.Sprintf("%s/%s/%d", table, id, b.seq)
		g.mu.Lock()
		first := !g.seen[key]
		g.seen[key] = true
		g.mu.Unlock()
		if first {
			g.alarm(RowMismatch{Table: table, ID: id, Tenant: tenant, Seq: uint64(b.seq), Err: err})
		}
	}
	return ErrRowUnproven.Wrap(err)
}

// tenantRow is a tenants row in its state document (the column names).
type tenantRow struct {
	ID                  string   `json:"id"`
	Name                string   `json:"name"`
	Status              string   `json:"status"`
	Tier                string   `json:"tier"`
	Zeroing             string   `json:"zeroing"`
	Classification      string   `json:"classification"`
	MaxConcurrent       int      `json:"max_concurrent"`
	KVPages             int      `json:"kv_pages"`
	TokensPerMinute     int      `json:"tokens_per_minute"`
	MaxContext          int      `json:"max_context"`
	AllowedModels       []string `json:"allowed_models"`
	IncidentContact     string   `json:"incident_contact"`
	NoticeDeadlineHours int      `json:"notice_deadline_hours"`
	AllowedRegions      []string `json:"allowed_regions"`
	RequiredNodeTier    string   `json:"required_node_tier"`
}

func tenantRowOf(t Tenant) tenantRow {
	models := t.AllowedModels
	if models == nil {
		models = []string{}
	}
	return tenantRow{ID: string(t.ID), Name: t.Name, Status: string(t.Status), Tier: t.Tier.String(), Zeroing: t.Zeroing.String(),
		Classification: string(t.Classification), MaxConcurrent: t.Quotas.MaxConcurrent, KVPages: t.Quotas.KVPages,
		TokensPerMinute: t.Quotas.TokensPerMinute, MaxContext: t.Quotas.MaxContext, AllowedModels: models,
		IncidentContact: t.IncidentContact, NoticeDeadlineHours: t.NoticeDeadlineHours,
		AllowedRegions: regionsArg(t.Residency.Regions), RequiredNodeTier: t.Residency.Tier}
}

func tenantState(t Tenant, prev int64) ([]byte, error) {
	return audit.RowState(audit.RowTenants, uint64(prev), tenantRowOf(t))
}

type clientRow struct {
	ID       string   `json:"id"`
	TenantID string   `json:"tenant_id"`
	Name     string   `json:"name"`
	Scopes   []string `json:"scopes"`
	Status   string   `json:"status"`
}

func clientState(c Client, prev int64) ([]byte, error) {
	scopes := make([]string, len(c.Scopes))
	for i, sc := range c.Scopes {
		scopes[i] = string(sc)
	}
	return audit.RowState(audit.RowClients, uint64(prev), clientRow{ID: c.ID, TenantID: string(c.Tenant), Name: c.Name, Scopes: scopes, Status: string(c.Status)})
}

type keyRow struct {
	Kid           string `json:"kid"`
	Issuer        string `json:"issuer"`
	Algorithm     string `json:"algorithm"`
	PublicKey     string `json:"public_key"`
	SealedPrivate string `json:"sealed_private"`
	State         string `json:"state"`
}

// keyState is the state document of key row k; bytea as to_jsonb writes it.
func keyState(k storedKey, prev int64) ([]byte, error) {
	return audit.RowState(audit.RowSigningKeys, uint64(prev), keyRow{Kid: k.kid, Issuer: k.issuer, Algorithm: "EdDSA",
		PublicKey: `\x` + hex.EncodeToString(k.public), SealedPrivate: `\x` + hex.EncodeToString(k.sealed), State: string(k.state)})
}

// apply appends p (of tenant) and writes the row state describes, in tx,
// in one statement (Ledger.ApplyTx). Call it last in tx: it takes the
// ledger's lock. A refusal that concerns the row (it exists, it does not,
// a CHECK, a concurrent change, a key going backwards) is returned as the
// database said, for translate; anything else is ErrLedger.
func (s *Store) apply(ctx context.Context, tx pgx.Tx, tenant cloison.TenantID, p audit.Payload, state []byte) error {
	if s.ledger == nil {
		return ErrNoLedger
	}
	e := audit.Event{OccurredAt: time.Now(), Tenant: tenant, Actor: actorOf(ctx), Payload: p}
	if _, err := s.ledger.ApplyTx(ctx, tx, e, state); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			switch pe.Code {
			case sqlUniqueViolation, sqlForeignKeyViolation, sqlCheckViolation, sqlNotNullViolation,
				sqlSerialization, sqlDeadlock, sqlKeyImmutable, sqlKeyBackwards, sqlNoData:
				return err
			}
		}
		return fmt.Errorf("%w: %w", ErrLedger, err)
	}
	return nil
}

func stateDigest(state []byte) *audit.Digest {
	d := audit.Sum(state)
	return &d
}

// BindUnbound binds every tenant, client and key row that has no event yet
// (rows older than migration 00027) to a created event stating the row as
// it is, and returns how many it bound. The node calls it at start, before
// it serves: from then on every row is what its last event states. The
// rows are taken as found: a row changed off the record before the upgrade
// is stated as it is, with the node's signature and the actor of ctx.
// Errors: the Store's, ErrNoLedger, ErrLedger.
func (s *Store) BindUnbound(ctx context.Context) (int, error) {
	n := 0
	tenants, err := s.pool.Query(ctx, `SELECT id FROM tenants WHERE ledger_seq IS NULL ORDER BY id`)
	if err != nil {
		return 0, translate(err, "tenants")
	}
	ids, err := pgx.CollectRows(tenants, pgx.RowTo[string])
	if err != nil {
		return 0, translate(err, "tenants")
	}
	for _, id := range ids {
		err := s.inTx(ctx, "tenant "+id, func(tx pgx.Tx) error {
			t, err := scanTenant(tx.QueryRow(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE id = $1 AND ledger_seq IS NULL`, id))
			if err != nil {
				return err
			}
			st, err := tenantState(t, 0)
			if err != nil {
				return err
			}
			ev := tenantEvent(audit.TenantCreated, t)
			ev.State = stateDigest(st)
			return s.apply(ctx, tx, t.ID, ev, st)
		})
		switch {
		case err == nil:
			n++
		case !errors.Is(err, ErrNotFound): // bound meanwhile: not found unbound
			return n, err
		}
	}
	clients, err := s.pool.Query(ctx, `SELECT id FROM api_clients WHERE ledger_seq IS NULL ORDER BY id`)
	if err != nil {
		return n, translate(err, "api clients")
	}
	if ids, err = pgx.CollectRows(clients, pgx.RowTo[string]); err != nil {
		return n, translate(err, "api clients")
	}
	for _, id := range ids {
		err := s.inTx(ctx, "api client "+id, func(tx pgx.Tx) error {
			c, err := scanClient(tx.QueryRow(ctx, `SELECT `+clientColumns+` FROM api_clients WHERE id = $1 AND ledger_seq IS NULL`, id))
			if err != nil {
				return err
			}
			st, err := clientState(c, 0)
			if err != nil {
				return err
			}
			ev := clientEvent(audit.ClientCreated, c)
			ev.State = stateDigest(st)
			return s.apply(ctx, tx, c.Tenant, ev, st)
		})
		switch {
		case err == nil:
			n++
		case !errors.Is(err, ErrNotFound): // bound meanwhile: not found unbound
			return n, err
		}
	}
	keys, err := s.pool.Query(ctx, `SELECT DISTINCT issuer FROM signing_keys WHERE ledger_seq IS NULL ORDER BY issuer`)
	if err != nil {
		return n, translate(err, "signing keys")
	}
	issuers, err := pgx.CollectRows(keys, pgx.RowTo[string])
	if err != nil {
		return n, translate(err, "signing keys")
	}
	for _, issuer := range issuers {
		err := s.inTx(ctx, "signing keys of "+issuer, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cloison.signing_keys:' || $1, 0))`, issuer); err != nil {
				return err
			}
			rows, err := s.signingKeys(ctx, tx, issuer)
			if err != nil {
				return err
			}
			for _, k := range rows {
				if k.seq != 0 {
					continue
				}
				st, err := keyState(k, 0)
				if err != nil {
					return err
				}
				ev := keyEvent(audit.KeyCreated, k.kid, k.public)
				ev.State = stateDigest(st)
				if err := s.apply(ctx, tx, "", ev, st); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
