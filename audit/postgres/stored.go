package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// StoreResponse records r in one transaction: the response.stored ledger
// event (id, request, SHA-256 of the sealed blob, size) and the row.
//
// Errors: audit.ErrInvalidEvent (a bad id, an empty blob); ErrConflict for
// an id already stored; the translated database errors.
func (s *Store) StoreResponse(ctx context.Context, actor audit.Name, r audit.StoredResponse) (audit.StoredResponse, error) {
	now := time.Now()
	err := s.readWrite(ctx, func(tx pgx.Tx) error {
		recs, err := s.AppendTx(ctx, tx, audit.Event{OccurredAt: now, Tenant: r.Tenant, Actor: actor, Payload: audit.ResponseStored{
			Response: r.ID, Request: r.Request, Sealed: audit.Sum(r.Sealed), Bytes: int64(len(r.Sealed))}})
		if err != nil {
			return err
		}
		r.CreatedAt, r.Seq = now, recs[0].Seq
		_, err = tx.Exec(ctx, `INSERT INTO stored_responses (id, tenant, request, sealed, created_at, ledger_seq) VALUES ($1, $2, $3, $4, $5, $6)`,
			string(r.ID), string(r.Tenant), string(r.Request), r.Sealed, now, int64(r.Seq))
		return err
	})
	if err != nil {
		return audit.StoredResponse{}, err
	}
	return r, nil
}

// StoredResponseOf returns tenant t's stored response id. Another tenant's
// response is audit.ErrNotFound, as an unknown or deleted id is.
//
// Errors: audit.ErrNotFound; the translated database errors.
func (s *Store) StoredResponseOf(ctx context.Context, t cloison.TenantID, id audit.Name) (audit.StoredResponse, error) {
	var r audit.StoredResponse
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT id, tenant, request, sealed, created_at, ledger_seq FROM stored_responses WHERE tenant = $1 AND id = $2`,
		string(t), string(id)).Scan((*string)(&r.ID), (*string)(&r.Tenant), (*string)(&r.Request), &r.Sealed, &r.CreatedAt, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return audit.StoredResponse{}, audit.ErrNotFound
	}
	if err != nil {
		return audit.StoredResponse{}, translate(err)
	}
	r.Seq = uint64(seq)
	return r, nil
}

// DeleteResponse deletes tenant t's stored response id and records
// response.deleted in the same transaction. Another tenant's response is
// audit.ErrNotFound and stays.
//
// Errors: audit.ErrNotFound; the translated database errors.
func (s *Store) DeleteResponse(ctx context.Context, actor audit.Name, t cloison.TenantID, id audit.Name) (audit.Record, error) {
	var rec audit.Record
	err := s.readWrite(ctx, func(tx pgx.Tx) error {
		var sealed []byte
		err := tx.QueryRow(ctx, `DELETE FROM stored_responses WHERE tenant = $1 AND id = $2 RETURNING sealed`, string(t), string(id)).Scan(&sealed)
		if errors.Is(err, pgx.ErrNoRows) {
			return audit.ErrNotFound
		}
		if err != nil {
			return err
		}
		recs, err := s.AppendTx(ctx, tx, audit.Event{OccurredAt: time.Now(), Tenant: t, Actor: actor, Payload: audit.ResponseDeleted{Response: id, Sealed: audit.Sum(sealed)}})
		if err != nil {
			return err
		}
		rec = recs[0]
		return nil
	})
	return rec, err
}
