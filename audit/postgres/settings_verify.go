package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/audit"
)

// verifySettingsTx checks every register settings version, not only the
// one in use: each row's content is its digest's, decodes to its own
// version, and is the one its register.settings_set event (at its
// ledger_seq) names; every such event in the ledger has its row, and
// versions are 1..n without a gap. An older version edited or removed
// behind the triggers would otherwise go unseen, though the entries opened
// under it copied its organisation and officer.
func verifySettingsTx(ctx context.Context, tx pgx.Tx) error {
	events := map[int64]audit.RegisterSettingsSet{} // by version
	seqs := map[int64]uint64{}
	rows, err := tx.Query(ctx, `SELECT seq, payload FROM audit_events WHERE kind = $1 ORDER BY seq`, string(audit.KindRegisterSettings))
	if err != nil {
		return err
	}
	for rows.Next() {
		var seq int64
		var payload []byte
		if err := rows.Scan(&seq, &payload); err != nil {
			rows.Close()
			return err
		}
		env, err := audit.DecodeEnvelope(payload)
		var p audit.Payload
		if err == nil {
			p, err = env.DecodePayload()
		}
		e, ok := p.(*audit.RegisterSettingsSet)
		if err != nil || !ok {
			rows.Close()
			return fmt.Errorf("%w: seq %d: register.settings_set does not decode", audit.ErrChainBroken, seq)
		}
		if _, dup := events[e.Version]; dup {
			rows.Close()
			return fmt.Errorf("%w: register settings version %d is set twice in the ledger", audit.ErrChainBroken, e.Version)
		}
		events[e.Version], seqs[e.Version] = *e, uint64(seq)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = tx.Query(ctx, `SELECT version, content, content_sha256, ledger_seq FROM register_settings ORDER BY version`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var n int64
	for rows.Next() {
		var version, seq int64
		var content, digest []byte
		if err := rows.Scan(&version, &content, &digest, &seq); err != nil {
			return err
		}
		n++
		e, ok := events[version]
		if version != n || !ok || seqs[version] != uint64(seq) || e.ContentDigest != audit.Digest(digest) || audit.Sum(content) != audit.Digest(digest) {
			return fmt.Errorf("%w: register settings version %d do not match ledger seq %d", audit.ErrChainBroken, version, seq)
		}
		var r audit.RegisterSettings
		if err := decodeStrict(content, &r); err != nil || r.Version != version {
			return fmt.Errorf("%w: register settings version %d do not decode to that version", audit.ErrChainBroken, version)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if int64(len(events)) != n {
		return fmt.Errorf("%w: the ledger sets %d register settings versions, the register holds %d", audit.ErrChainBroken, len(events), n)
	}
	return nil
}
