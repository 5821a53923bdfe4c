package postgres

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// runtimeSequence is what the holder of the runtime role's credentials
// can do without the log key: call audit_sequence with bytes of its own
// choosing, in tx.
func runtimeSequence(ctx context.Context, tx pgx.Tx, occurred time.Time, kind, actor string, tenant *string, payload []byte) (int64, error) {
	var seq int64
	err := tx.QueryRow(ctx, "SELECT first_seq FROM audit_sequence($1, $2, $3, $4, $5)",
		[]time.Time{occurred}, []string{kind}, []*string{tenant}, []string{actor}, [][]byte{payload}).Scan(&seq)
	return seq, err
}

// breaksAt returns the reasons of the breaks err names, by seq.
func breaksAt(t *testing.T, err error) map[uint64][]audit.Reason {
	t.Helper()
	var bs *audit.Breaks
	if !errors.As(err, &bs) {
		t.Fatalf("got %v, want *audit.Breaks", err)
	}
	got := map[uint64][]audit.Reason{}
	for _, b := range bs.All {
		got[b.Seq] = append(got[b.Seq], b.Reason)
	}
	return got
}

// The review's forgery: with only cloisond's database credentials (the
// runtime role), a notice.sent to the Commission "by admin:officer-x",
// backdated, is appended through audit_sequence and incident_notices; the
// node integrates more events and signs a checkpoint and a tree note over
// it. Before event signatures Verify passed; now the entry is named
// (ReasonSignature), and it is the only break: the node's own signed
// events verify.
func TestRuntimeRoleForgedNoticeIsNamed(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, db.RuntimePool(t), dir, 5)
	if _, err := s.BeginSigning(ctx, "engine:node-1"); err != nil {
		t.Fatal(err)
	}
	v, err := s.OpenIncident(ctx, "admin:elise", adminVersion(NewIncidentID(time.Now()), audit.DayOf(time.Now().Add(-24*time.Hour))))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Append(ctx, event("engine:node-1", i)); err != nil {
			t.Fatal(err)
		}
	}

	// The attacker: the runtime role, its own connections, no key.
	attacker := db.RuntimePool(t)
	sent := time.Now().Add(-20 * 24 * time.Hour).UTC().Truncate(time.Microsecond) // "sent on time", twenty days ago
	n := audit.Notice{Incident: v.Incident, Number: 1, Recipient: audit.RecipientCAI, RecipientName: "Commission d'accès à l'information",
		SentAt: sent, Method: "portal", ContentDigest: audit.Sum([]byte("avis"))}
	record, recordDigest, err := n.Record("admin:officer-x", time.Now()).Canonical()
	if err != nil {
		t.Fatal(err)
	}
	payload, err := audit.Event{OccurredAt: sent, Actor: "admin:officer-x", Payload: audit.NoticeSent{Incident: v.Incident, Notice: 1,
		Recipient: audit.RecipientCAI, ContentDigest: n.ContentDigest, RecordDigest: &recordDigest}}.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	var forged int64
	if err := pgx.BeginTxFunc(ctx, attacker, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if forged, err = runtimeSequence(ctx, tx, sent, string(audit.KindNoticeSent), "admin:officer-x", nil, payload); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO incident_notices (incident_id, notice_no, recipient_kind, recipient, tenant, sent_at, method, content_sha256, recorded_by, ledger_seq, record, record_sha256)
			VALUES ($1, 1, $2, $3, NULL, $4, $5, $6, $7, $8, $9, $10)`,
			string(v.Incident), string(audit.RecipientCAI), n.RecipientName, sent, n.Method, n.ContentDigest[:], "admin:officer-x", forged, record, recordDigest[:])
		return err
	}); err != nil {
		t.Fatalf("the runtime role's forgery: %v", err)
	}

	// The node goes on: the forgery is integrated, checkpointed and
	// under a tree note.
	for i := 3; i < 9; i++ {
		if _, err := s.Append(ctx, event("engine:node-1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	verifier := openStore(t, db.RuntimePool(t), "", 1000)
	_, err = verifier.Verify(ctx, audit.VerifyOptions{Keys: testKeys(), ExternalDir: dir})
	got := breaksAt(t, err)
	if len(got) != 1 || len(got[uint64(forged)]) != 1 || got[uint64(forged)][0] != audit.ReasonSignature {
		t.Fatalf("got breaks %v, want only seq %d (%s)", got, forged, audit.ReasonSignature)
	}
	if f, ferr := verifier.Incident(ctx, v.Incident); ferr != nil || len(f.Notices) != 1 {
		t.Fatalf("the forged notice is in the register: %v, %d notices", ferr, len(f.Notices))
	}
}

// A signing_began cannot be placed by anyone without the key: the runtime
// role's unsigned one, and a signed one copied to another seq, are named.
func TestSigningBeganIsSignedAndPlaced(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	if _, err := s.Append(ctx, event("engine:node-1", 0)); err != nil {
		t.Fatal(err)
	}
	at, err := s.BeginSigning(ctx, "engine:node-1")
	if err != nil || at != 2 {
		t.Fatalf("BeginSigning: %d, %v, want seq 2", at, err)
	}
	if again, err := s.BeginSigning(ctx, "engine:node-1"); err != nil || again != at {
		t.Fatalf("BeginSigning again: %d, %v, want the same seq %d", again, err, at)
	}
	var genuine []byte
	if err := s.pool.QueryRow(ctx, "SELECT payload FROM audit_events WHERE seq = $1", int64(at)).Scan(&genuine); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	unsigned, err := audit.Event{OccurredAt: now, Actor: "engine:node-1", Payload: audit.SigningBegan{Seq: 3, Key: "0123456789abcdef"}}.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	env, err := audit.DecodeEnvelope(genuine)
	if err != nil {
		t.Fatal(err)
	}
	attacker := db.RuntimePool(t)
	var copied int64
	for _, p := range [][]byte{unsigned, genuine} {
		occurred := now
		if string(p) == string(genuine) {
			occurred = env.OccurredAt
		}
		if err := pgx.BeginTxFunc(ctx, attacker, pgx.TxOptions{}, func(tx pgx.Tx) error {
			copied, err = runtimeSequence(ctx, tx, occurred, string(audit.KindSigningBegan), "engine:node-1", nil, p)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()})
	got := breaksAt(t, err)
	if len(got) != 2 || len(got[3]) != 1 || got[3][0] != audit.ReasonSignature || len(got[uint64(copied)]) != 1 || got[uint64(copied)][0] != audit.ReasonSignature {
		t.Fatalf("got breaks %v, want seq 3 (unsigned) and %d (moved), %s", got, copied, audit.ReasonSignature)
	}
}

// audit_sequence and the staging table refuse, for the runtime role, a
// payload that is not the envelope its columns copy; nothing is stored.
func TestSequenceRefusesNonEnvelopePayloads(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	rt := db.RuntimePool(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	good, err := audit.Event{OccurredAt: now, Actor: "engine:node-1", Payload: audit.PolicyReloaded{Revision: audit.Sum([]byte("r1")), Files: 1, Actor: "admin:a"}}.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	tenant := "acme"
	cases := []struct {
		name     string
		payload  []byte
		kind     string
		actor    string
		tenant   *string
		occurred time.Time
	}{
		{"not JSON", []byte("\x00poison"), string(audit.KindPolicyReloaded), "engine:node-1", nil, now},
		{"not UTF-8", []byte{0xff, 0xfe}, string(audit.KindPolicyReloaded), "engine:node-1", nil, now},
		{"not an object", []byte(`[1]`), string(audit.KindPolicyReloaded), "engine:node-1", nil, now},
		{"another member", []byte(`{"v":1,"x":1}`), string(audit.KindPolicyReloaded), "engine:node-1", nil, now},
		{"whitespace", append([]byte(" "), good...), string(audit.KindPolicyReloaded), "engine:node-1", nil, now},
		{"kind column", good, string(audit.KindNoticeSent), "engine:node-1", nil, now},
		{"actor column", good, string(audit.KindPolicyReloaded), "admin:officer-x", nil, now},
		{"tenant column", good, string(audit.KindPolicyReloaded), "engine:node-1", &tenant, now},
		{"occurred_at column", good, string(audit.KindPolicyReloaded), "engine:node-1", nil, now.Add(-time.Hour)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := pgx.BeginTxFunc(ctx, rt, pgx.TxOptions{}, func(tx pgx.Tx) error {
				_, err := runtimeSequence(ctx, tx, c.occurred, c.kind, c.actor, c.tenant, c.payload)
				return err
			})
			if err := translate(err); !errors.Is(err, ErrPayloadRejected) {
				t.Errorf("audit_sequence: got %v, want ErrPayloadRejected", err)
			}
			_, err = rt.Exec(ctx, "INSERT INTO audit_staging (occurred_at, kind, tenant, actor, payload) VALUES ($1, $2, $3, $4, $5)",
				c.occurred, c.kind, c.tenant, c.actor, c.payload)
			if err := translate(err); !errors.Is(err, ErrPayloadRejected) {
				t.Errorf("audit_staging: got %v, want ErrPayloadRejected", err)
			}
		})
	}
	// Nor can it go round the check: audit_place, which audit_sequence and
	// audit_integrate call, is not the runtime role's to call.
	_, err = rt.Exec(ctx, "SELECT audit_place($1, $2, $3, $4, $5)", []time.Time{now}, []string{string(audit.KindPolicyReloaded)},
		[]*string{nil}, []string{"engine:node-1"}, [][]byte{[]byte("\x00poison")})
	if got := sqlstate(err); got != "42501" {
		t.Errorf("audit_place as the runtime role: got %q (%v), want 42501", got, err)
	}
	var n int
	if err := rt.QueryRow(ctx, "SELECT (SELECT count(*) FROM audit_events) + (SELECT count(*) FROM audit_staging)").Scan(&n); err != nil || n != 0 {
		t.Fatalf("stored %d rows (%v), want none", n, err)
	}
	// The envelope itself passes.
	if err := pgx.BeginTxFunc(ctx, rt, pgx.TxOptions{}, func(tx pgx.Tx) error {
		_, err := runtimeSequence(ctx, tx, now, string(audit.KindPolicyReloaded), "engine:node-1", nil, good)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// poison sequences payload at the next seq as the ledger's owner with the
// payload check switched off (a DBA can; a ledger written before 00026
// may hold such a row): chain and tree are computed by audit_sequence as
// for any entry.
func poison(t *testing.T, admin *pgxpool.Pool, payload []byte) uint64 {
	t.Helper()
	ctx := context.Background()
	var seq int64
	err := pgx.BeginTxFunc(ctx, admin, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `ALTER FUNCTION audit_payloads_refused(timestamptz[], text[], text[], text[], bytea[]) RENAME TO audit_payloads_refused_off`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE FUNCTION audit_payloads_refused(p_occurred_at timestamptz[], p_kind text[], p_tenant text[], p_actor text[], p_payload bytea[],
			OUT i bigint, OUT why text) LANGUAGE sql AS 'SELECT NULL::bigint, NULL::text'`); err != nil {
			return err
		}
		var err error
		if seq, err = runtimeSequence(ctx, tx, time.Now(), string(audit.KindPolicyReloaded), "engine:node-1", nil, payload); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DROP FUNCTION audit_payloads_refused(timestamptz[], text[], text[], text[], bytea[])`); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `ALTER FUNCTION audit_payloads_refused_off(timestamptz[], text[], text[], text[], bytea[]) RENAME TO audit_payloads_refused`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return uint64(seq)
}

// Verification goes on past a poisoned entry: a non-JSON payload at seq k
// and a real tamper further down the log (an event's payload edited behind
// the triggers at k+m) are both named, and no entry in between is.
func TestVerifyReportsEveryBreak(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, db.RuntimePool(t), dir, 4)
	for i := range 5 {
		if _, err := s.Append(ctx, event("engine:node-1", i)); err != nil {
			t.Fatal(err)
		}
	}
	admin := db.AdminPool(t)
	k := poison(t, admin, []byte("\x00not json"))
	var tampered audit.Record
	for i := 5; i < 15; i++ {
		r, err := s.Append(ctx, event("engine:node-1", i))
		if err != nil {
			t.Fatal(err)
		}
		if i == 10 {
			tampered = r
		}
	}
	if _, err := s.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The tamper: seq k+m's prompt count raised, the stored hash left.
	edited := bytes.Replace(tampered.Payload, []byte(`"prompt_tokens":110`), []byte(`"prompt_tokens":999`), 1)
	if string(edited) == string(tampered.Payload) {
		t.Fatalf("nothing to edit in %s", tampered.Payload)
	}
	treeSuperuser(t, admin, "UPDATE audit_events SET payload = decode('"+hex.EncodeToString(edited)+"', 'hex') WHERE seq = "+strconv.FormatUint(tampered.Seq, 10))

	verifier := openStore(t, db.RuntimePool(t), "", 1000)
	_, err := verifier.Verify(ctx, audit.VerifyOptions{Keys: testKeys(), ExternalDir: dir})
	got := breaksAt(t, err)
	if len(got[k]) == 0 || got[k][0] != audit.ReasonPayload {
		t.Errorf("seq %d (poisoned): got %v, want %s", k, got[k], audit.ReasonPayload)
	}
	if len(got[tampered.Seq]) == 0 || got[tampered.Seq][0] != audit.ReasonHash {
		t.Errorf("seq %d (tampered): got %v, want %s first", tampered.Seq, got[tampered.Seq], audit.ReasonHash)
	}
	for seq := range got {
		if seq != k && seq != tampered.Seq {
			t.Errorf("seq %d named too: %v (all: %v)", seq, got[seq], err)
		}
	}
}

// A record whose own time disagrees with the database's clock: the
// runtime role appends an unsigned request.completed (a kind it may
// write) dated an hour back; recorded_at, set by audit_sequence, says
// when it really entered the log, and Verify names it (backdated).
func TestRuntimeRoleBackdatedEntryIsNamed(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	if _, err := s.BeginSigning(ctx, "engine:node-1"); err != nil {
		t.Fatal(err)
	}
	e := event("engine:node-1", 1)
	e.OccurredAt = time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	payload, err := e.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	tenant := string(e.Tenant)
	var seq int64
	if err := pgx.BeginTxFunc(ctx, db.RuntimePool(t), pgx.TxOptions{}, func(tx pgx.Tx) error {
		seq, err = runtimeSequence(ctx, tx, e.OccurredAt, string(audit.KindRequestCompleted), "engine:node-1", &tenant, payload)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, event("engine:node-1", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()})
	got := breaksAt(t, err)
	if len(got) != 1 || len(got[uint64(seq)]) != 1 || got[uint64(seq)][0] != audit.ReasonBackdated {
		t.Fatalf("got breaks %v, want only seq %d (%s)", got, seq, audit.ReasonBackdated)
	}
}
