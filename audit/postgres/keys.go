package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison/audit"
)

// ensureKeysLock serialises EnsureKey across nodes (two nodes started at
// once with a new key record one creation). It is taken before the ledger
// lock (AppendTx last), as AppendTx requires.
const ensureKeysLock = 0x636c6f69736f6e6b // "cloisonk"

// EnsureKey records k as the deployment's current key of its purpose, in
// one transaction with its ledger events, and returns the operation done
// ("" when k already was the current key):
//
//   - no key recorded: key.created;
//   - k current: nothing;
//   - another key current: with p.Rotate and p.MayReplace, key.rotated for
//     k and key.revoked for the old key; otherwise audit.ErrKeyMismatch (naming
//     both ids in its cause, for the operator's log);
//   - k revoked earlier: audit.ErrKeyRetired.
//
// actor is the node (engine:<node>). Errors: audit.ErrKeyMismatch, audit.ErrKeyRetired,
// audit.ErrInvalidEvent for a malformed id, and the translated database
// errors.
func (s *Store) EnsureKey(ctx context.Context, actor audit.Name, k audit.DeploymentKey, p audit.KeyPolicy) (audit.KeyOp, error) {
	var done audit.KeyOp
	err := s.readWrite(ctx, func(tx pgx.Tx) error {
		done = ""
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(ensureKeysLock)); err != nil {
			return err
		}
		op, cur, err := decideKey(ctx, tx, k, p)
		if err != nil || op == "" {
			return err
		}
		change := func(op audit.KeyOp, id string, d audit.Digest) audit.Event {
			return audit.Event{OccurredAt: time.Now(), Actor: actor,
				Payload: audit.KeyChange{Op: op, Key: audit.Name(id), Purpose: k.Purpose, PublicKeyDigest: d}}
		}
		insert := func(op audit.KeyOp, id string, d audit.Digest) error {
			_, err := tx.Exec(ctx, `INSERT INTO deployment_keys (purpose, key_id, digest, op, node) VALUES ($1, $2, $3, $4, $5)`,
				string(k.Purpose), id, d[:], string(op), string(actor))
			return err
		}
		if err := insert(op, k.ID, k.Digest); err != nil {
			return err
		}
		events := []audit.Event{change(op, k.ID, k.Digest)}
		if op == audit.KeyRotated {
			if err := insert(audit.KeyRevoked, cur.ID, cur.Digest); err != nil {
				return err
			}
			events = append(events, change(audit.KeyRevoked, cur.ID, cur.Digest))
		}
		if _, err := s.AppendTx(ctx, tx, events...); err != nil {
			return err
		}
		done = op
		return nil
	})
	if err != nil {
		return "", err
	}
	return done, nil
}

// CheckKey is EnsureKey's decision, read only and without a Store: a node
// calls it before Open, so that a node holding another cluster's log key
// signs nothing (Open's writer signs tree notes on its own). It returns
// the operation EnsureKey would do now.
//
// Errors: those of EnsureKey.
func CheckKey(ctx context.Context, pool *pgxpool.Pool, k audit.DeploymentKey, p audit.KeyPolicy) (audit.KeyOp, error) {
	op, _, err := decideKey(ctx, pool, k, p)
	return op, translate(err)
}

// decideKey reads the purpose's records and says what recording k takes:
// "" (k is current), created, or rotated (from cur).
func decideKey(ctx context.Context, q querier, k audit.DeploymentKey, p audit.KeyPolicy) (audit.KeyOp, audit.DeploymentKey, error) {
	cur := audit.DeploymentKey{Purpose: k.Purpose}
	if err := audit.CheckName("key", k.ID); err != nil {
		return "", cur, err
	}
	var retired bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM deployment_keys WHERE purpose = $1 AND key_id = $2 AND op = 'revoked')`,
		string(k.Purpose), k.ID).Scan(&retired); err != nil {
		return "", cur, err
	}
	if retired {
		return "", cur, fmt.Errorf("%w: %s key %s was rotated out", audit.ErrKeyRetired, k.Purpose, k.ID)
	}
	var digest []byte
	err := q.QueryRow(ctx, `SELECT key_id, digest FROM deployment_keys WHERE purpose = $1 AND op IN ('created', 'rotated')
		ORDER BY id DESC LIMIT 1`, string(k.Purpose)).Scan(&cur.ID, &digest)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", cur, err
	}
	copy(cur.Digest[:], digest)
	switch {
	case cur.ID == k.ID:
		return "", cur, nil
	case cur.ID == "":
		return audit.KeyCreated, cur, nil
	case p.Rotate && (p.MayReplace == nil || p.MayReplace(cur.ID)):
		return audit.KeyRotated, cur, nil
	}
	return "", cur, fmt.Errorf("%w: the %s key in use is %s, this node's is %s", audit.ErrKeyMismatch, k.Purpose, cur.ID, k.ID)
}

// CurrentKey returns the id of the recorded current key of purpose ("" when
// none).
func (s *Store) CurrentKey(ctx context.Context, purpose audit.Name) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `SELECT key_id FROM deployment_keys WHERE purpose = $1 AND op IN ('created', 'rotated')
		ORDER BY id DESC LIMIT 1`, string(purpose)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, translate(err)
}
