package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// scanRequestEntry is RequestEntry as it was before migration 00021, kept
// as the oracle: scan the whole ledger, rebuild tenant t's tree of the
// entries it may read verbatim (audit.TenantVisible) in memory, take the
// first request.completed of req. On a ledger where every entry naming t
// names t alone (no incident, violation or notice naming it) that tree is
// t's stored log, and the answers must be equal byte for byte.
func scanRequestEntry(ctx context.Context, s *Store, t cloison.TenantID, req cloison.RequestID) (audit.TenantEntry, error) {
	origin, err := audit.TenantOrigin(s.cfg.Origin, t)
	if err != nil {
		return audit.TenantEntry{}, err
	}
	needle := []byte(`"request":"` + string(req) + `"`)
	tree := &audit.MemTree{}
	var e audit.TenantEntry
	err = s.Scan(ctx, 1, 0, func(r audit.Record) error {
		if !audit.TenantVisible(r, t) {
			return nil
		}
		pos, err := tree.Append(r.Payload)
		if err != nil || e.Position != 0 || !bytes.Contains(r.Payload, needle) {
			return err
		}
		env, err := audit.DecodeEnvelope(r.Payload)
		if err != nil || env.Kind != audit.KindRequestCompleted {
			return nil
		}
		p, err := env.DecodePayload()
		if err != nil {
			return nil
		}
		if rc := p.(*audit.RequestCompleted); rc.Request == req {
			e = audit.TenantEntry{Seq: r.Seq, Position: pos, Payload: r.Payload, OccurredAt: env.OccurredAt, Completed: *rc}
		}
		return nil
	})
	if err != nil {
		return audit.TenantEntry{}, err
	}
	if e.Position == 0 {
		return audit.TenantEntry{}, audit.ErrNotFound
	}
	e.Size = tree.Size()
	h, err := tree.Head(origin, e.Size)
	if err != nil {
		return audit.TenantEntry{}, err
	}
	if e.Checkpoint, err = s.signTenantHead(t, h); err != nil {
		return audit.TenantEntry{}, err
	}
	if e.Proof, err = tree.ProveRecord(e.Position, e.Size); err != nil {
		return audit.TenantEntry{}, err
	}
	return e, nil
}

// requestEvents returns n events of 7 tenants: mostly request.completed,
// with admission rejections and policy decisions between them (the
// rejections name request ids too, some the id of a later completion),
// and every 50th completion repeating an earlier id of its tenant (the
// first must win).
func requestEvents(from, n int) []audit.Event {
	var evs []audit.Event
	for i := from; i < from+n; i++ {
		tn := cloison.TenantID(fmt.Sprintf("tenant-%d", i%7))
		var p audit.Payload
		switch {
		case i%11 == 3:
			p = audit.AdmissionRejected{Request: cloison.RequestID(fmt.Sprintf("req-%d", i+7)), Model: "m", Code: cloison.CodeRateLimited,
				PromptTokens: 9, MaxTokens: 4, PagesNeeded: 3, PagesAvailable: 1}
		case i%13 == 5:
			p = audit.PolicyDecision{Decision: audit.Name(fmt.Sprintf("dec-%d", i)), Policy: "cloison.authz", Revision: "r1",
				InputDigest: audit.Sum([]byte{byte(i)}), Allowed: true}
		default:
			id := i
			if i%50 == 49 && i >= 70 {
				id = i - 70 // the same tenant (70 = 7·10)
			}
			p = audit.RequestCompleted{Request: cloison.RequestID(fmt.Sprintf("req-%d", id)), Model: "m", PromptTokens: int64(i),
				CompletionTokens: 2, Pages: 1, Tier: "cross-tenant"}
		}
		evs = append(evs, audit.Event{OccurredAt: time.Now(), Tenant: tn, Actor: "engine:n1", Payload: p})
	}
	return evs
}

func appendAll(t testing.TB, s *Store, evs []audit.Event) {
	t.Helper()
	ctx := context.Background()
	for len(evs) > 0 {
		n := min(len(evs), 1000)
		if err := s.readWrite(ctx, func(tx pgx.Tx) error { _, err := s.AppendTx(ctx, tx, evs[:n]...); return err }); err != nil {
			t.Fatal(err)
		}
		evs = evs[n:]
	}
}

// RequestEntry read from request_entries and the stored tenant log gives
// the answer the ledger scan gave, byte for byte, for every request of
// several tenants, on a ledger that grows between calls (so the index
// catches up in several steps) and ends with staged entries (so Sync runs
// first); an unknown id and another tenant's id are audit.ErrNotFound for both.
func TestRequestEntryMatchesScan(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	check := func(tn cloison.TenantID, req cloison.RequestID) {
		t.Helper()
		want, werr := scanRequestEntry(ctx, s, tn, req)
		got, gerr := s.RequestEntry(ctx, tn, req)
		if (gerr == nil) != (werr == nil) || (werr != nil && !(errors.Is(gerr, audit.ErrNotFound) && errors.Is(werr, audit.ErrNotFound))) {
			t.Fatalf("RequestEntry(%s, %s): got error %v, the scan %v", tn, req, gerr, werr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("RequestEntry(%s, %s):\n got %+v\nwant %+v", tn, req, got, want)
		}
	}
	const rounds, per = 4, 300
	for r := 0; r < rounds; r++ {
		appendAll(t, s, requestEvents(r*per, per))
		for i := r * per; i < (r+1)*per; i += 5 + r {
			tn := cloison.TenantID(fmt.Sprintf("tenant-%d", i%7))
			check(tn, cloison.RequestID(fmt.Sprintf("req-%d", i)))
			check("tenant-"+cloison.TenantID(fmt.Sprint((i+1)%7)), cloison.RequestID(fmt.Sprintf("req-%d", i))) // another tenant's
		}
	}
	// Staged, not yet sequenced when RequestEntry is called.
	for _, e := range requestEvents(rounds*per, 20) {
		if _, err := s.Stage(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	last := rounds*per + 19
	check(cloison.TenantID(fmt.Sprintf("tenant-%d", last%7)), cloison.RequestID(fmt.Sprintf("req-%d", last)))
	for _, c := range []struct {
		tn  cloison.TenantID
		req cloison.RequestID
	}{{"tenant-0", "req-none"}, {"tenant-9", "req-0"}, {"tenant-1", "req-7"}, {"tenant-3", "req-3"}, {"tenant-1", "req-29"}, {"tenant-3", "req-10"}} {
		check(c.tn, c.req)
	}
	// A repeated id: the first completion wins.
	e, err := s.RequestEntry(ctx, "tenant-1", "req-29")
	if err != nil || e.Completed.PromptTokens != 29 {
		t.Fatalf("repeated id: got %+v, %v, want the first completion (prompt_tokens 29)", e.Completed, err)
	}
	// An admission rejection naming an id (seq 4, before it) is not its
	// completion; an id only a rejection names has none.
	if e, err := s.RequestEntry(ctx, "tenant-3", "req-10"); err != nil || e.Completed.PromptTokens != 10 {
		t.Fatalf("req-10: got %+v, %v, want its completion (prompt_tokens 10)", e.Completed, err)
	}
	if _, err := s.RequestEntry(ctx, "tenant-3", "req-3"); !errors.Is(err, audit.ErrNotFound) {
		t.Fatalf("req-3 (a rejection, no completion): got %v, want audit.ErrNotFound", err)
	}
	if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

// The entry is proven in the tenant's published log: with incidents that
// name the tenant in its log, the checkpoint RequestEntry returns is the
// one TenantCheckpoint signs (one tree per origin, no fork), and the proof
// verifies against it. The scan's tree left those entries out, so it
// signed another tree under the same origin: the old answer was not
// consistent with the tenant's checkpoints.
func TestRequestEntryInPublishedTenantLog(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	const a, b = cloison.TenantID("tenant-alpha"), cloison.TenantID("tenant-bravo")
	completed(t, s, a, "req-a1")
	completed(t, s, b, "req-b1")
	now := time.Now()
	viol, err := s.Append(ctx, audit.Event{OccurredAt: now, Tenant: a, Actor: "engine:n1", Payload: audit.IsolationViolation{
		Request: "req-a1", Invariant: "ownership-tag", Page: 7, Epoch: 2,
		AffectedTenants: []cloison.TenantID{a, b}, AffectedRequests: []cloison.RequestID{"req-a1"}, WithheldResponses: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenFromDetection(ctx, "engine:n1", audit.Detection{Source: audit.SourceIsolationViolation, Invariant: "ownership-tag",
		DetectedAt: now, AffectedTenants: []cloison.TenantID{a, b}, AffectedRequests: []cloison.RequestID{"req-a1"},
		AffectedResponses: 1, LedgerEvents: []int64{int64(viol.Seq)}}); err != nil {
		t.Fatal(err)
	}
	completed(t, s, a, "req-a2")
	vkey := mustVerifierKey(t)
	for _, c := range []struct {
		tn       cloison.TenantID
		req      cloison.RequestID
		pos      uint64
		scanPos  uint64
		scanSize uint64
	}{
		{a, "req-a1", 1, 1, 2},
		{a, "req-a2", 4, 2, 2}, // after the violation and the incident (redacted views in a's log)
		{b, "req-b1", 1, 1, 1},
	} {
		e, err := s.RequestEntry(ctx, c.tn, c.req)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := s.TenantCheckpoint(ctx, c.tn)
		if err != nil {
			t.Fatal(err)
		}
		if e.Position != c.pos || !bytes.Equal(e.Checkpoint, cp) {
			t.Errorf("%s %s: got position %d and checkpoint %q, want %d and the tenant's checkpoint %q", c.tn, c.req, e.Position, e.Checkpoint, c.pos, cp)
		}
		if _, err := audit.VerifyTenantInclusion(e.Checkpoint, vkey, c.tn, e.Position, e.Payload, e.Proof); err != nil {
			t.Errorf("%s %s: %v", c.tn, c.req, err)
		}
		old, err := scanRequestEntry(ctx, s, c.tn, c.req)
		if err != nil {
			t.Fatal(err)
		}
		if old.Position != c.scanPos || old.Size != c.scanSize || bytes.Equal(old.Checkpoint, cp) {
			t.Errorf("%s %s: the scan gave position %d of %d (checkpoint the tenant's: %v), want %d of %d", c.tn, c.req,
				old.Position, old.Size, bytes.Equal(old.Checkpoint, cp), c.scanPos, c.scanSize)
		}
	}
}

// A tampered request_entries row is caught: RequestEntry refuses an entry
// that is not the request's (ErrChainBroken), Verify reports the rows that
// differ from the ledger, and a removed row is found missing.
func TestRequestEntriesTamperDetected(t *testing.T) {
	for _, tamper := range []struct {
		name, sql string
		entry     bool // RequestEntry of req-10 then fails closed
	}{
		{"row moved", `UPDATE request_entries SET pos = pos + 1, seq = (SELECT l.seq FROM tenant_log_entries l WHERE l.tenant = 'tenant-3' AND l.pos = request_entries.pos + 1)
			WHERE tenant = 'tenant-3' AND request = 'req-10'`, true},
		{"seq changed", `UPDATE request_entries SET seq = seq + 7 WHERE tenant = 'tenant-3' AND request = 'req-10'`, true},
		{"row removed", `DELETE FROM request_entries WHERE tenant = 'tenant-3' AND request = 'req-17'`, false},
		{"row added", `INSERT INTO request_entries (tenant, request, pos, seq) VALUES ('tenant-3', 'req-forged', 1, 1)`, false},
	} {
		t.Run(tamper.name, func(t *testing.T) {
			ctx := context.Background()
			db := pgtest.New(t)
			s := openStore(t, db.RuntimePool(t), t.TempDir(), 10)
			for _, e := range requestEvents(0, 40) {
				if _, err := s.Append(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.RequestEntry(ctx, "tenant-3", "req-10"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
				t.Fatalf("untouched: %v", err)
			}
			owner := db.AdminPool(t)
			if _, err := owner.Exec(ctx, `ALTER TABLE request_entries DISABLE TRIGGER request_entries_append_only`); err != nil {
				t.Fatal(err)
			}
			if _, err := owner.Exec(ctx, tamper.sql); err != nil {
				t.Fatal(err)
			}
			_, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()})
			var be *audit.BreakError
			if !errors.As(err, &be) || be.Reason != audit.ReasonTenantLog {
				t.Errorf("Verify: got %v, want a tenant_log break", err)
			}
			if tamper.entry {
				if _, err := s.RequestEntry(ctx, "tenant-3", "req-10"); !errors.Is(err, audit.ErrChainBroken) {
					t.Errorf("RequestEntry: got %v, want ErrChainBroken", err)
				}
			}
		})
	}
}

// The rows migration 00021 writes for a ledger indexed before it are the
// rows the indexer writes: its backfill query, run on an indexed ledger,
// returns exactly request_entries.
func TestRequestEntriesBackfillMatchesIndexer(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	appendAll(t, s, requestEvents(0, 400))
	if _, err := s.IndexTenantLogs(ctx); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../migrations/00021_request_entries.sql")
	if err != nil {
		t.Fatal(err)
	}
	const ins = "INSERT INTO request_entries (tenant, request, pos, seq)\n"
	i := strings.Index(string(src), ins)
	if i < 0 {
		t.Fatal("the migration has no backfill")
	}
	q := string(src[i+len(ins):])
	q = strings.TrimSpace(q[:strings.Index(q, ";")])
	var n, diff int
	if err := db.AdminPool(t).QueryRow(ctx, `SELECT (SELECT count(*) FROM request_entries),
		(SELECT count(*) FROM ((`+q+`) EXCEPT ALL (SELECT tenant, request, pos, seq FROM request_entries)) x) +
		(SELECT count(*) FROM ((SELECT tenant, request, pos, seq FROM request_entries) EXCEPT ALL (`+q+`)) y)`).Scan(&n, &diff); err != nil {
		t.Fatal(err)
	}
	if n < 300 || diff != 0 {
		t.Fatalf("got %d rows differing of %d, want none of more than 300", diff, n)
	}
}

// request_entries is append-only like the tenant logs: the runtime role
// may not UPDATE, DELETE or TRUNCATE it (no privilege), and the owner,
// a superuser and replica mode are refused by the ALWAYS trigger.
func TestRequestEntriesAppendOnly(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	rt := db.RuntimePool(t)
	s := openStore(t, rt, t.TempDir(), 1000)
	appendAll(t, s, requestEvents(0, 10))
	if _, err := s.RequestEntry(ctx, "tenant-0", "req-0"); err != nil {
		t.Fatal(err)
	}
	stmts := []string{"UPDATE request_entries SET pos = pos + 1", "DELETE FROM request_entries", "TRUNCATE request_entries"}
	for _, q := range stmts {
		if _, err := rt.Exec(ctx, q); sqlstate(err) != "42501" || !errors.Is(translate(err), ErrAppendOnly) {
			t.Errorf("runtime role: %s: got %v, want insufficient_privilege (ErrAppendOnly)", q, err)
		}
	}
	admin := db.AdminPool(t)
	for _, q := range stmts {
		for _, role := range []string{"SET ROLE " + db.Roles.Owner, "RESET ROLE", "SET session_replication_role = replica"} {
			err := pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, role); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, q)
				return err
			})
			if sqlstate(err) != "CL001" || !errors.Is(translate(err), ErrAppendOnly) {
				t.Errorf("%s; %s: got %v, want CL001", role, q, err)
			}
		}
	}
}
