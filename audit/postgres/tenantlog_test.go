package postgres

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// tenantLeaves returns every leaf of t's log with its inclusion proof in
// the tree cp names.
func tenantLeaves(t *testing.T, s *Store, tn cloison.TenantID, cp []byte) ([][]byte, []tlog.RecordProof) {
	t.Helper()
	h, err := audit.OpenTenantHead(cp, mustVerifierKey(t), tn)
	if err != nil {
		t.Fatal(err)
	}
	var leaves [][]byte
	var proofs []tlog.RecordProof
	for pos := uint64(1); pos <= h.Size; pos++ {
		leaf, proof, err := s.TenantInclusionProof(context.Background(), tn, pos, h.Size)
		if err != nil {
			t.Fatalf("position %d: %v", pos, err)
		}
		leaves, proofs = append(leaves, leaf), append(proofs, proof)
	}
	return leaves, proofs
}

// verifyOffline is what a tenant does with nothing but the published
// verifier key and golang.org/x/mod/sumdb/note and tlog: open the
// checkpoint note, parse its three lines, check the record proof.
func verifyOffline(t *testing.T, vkey string, cp []byte, wantOrigin string, pos int64, leaf []byte, proof tlog.RecordProof) {
	t.Helper()
	// The tenant log's key is the published one under the tenant origin's
	// name: the same Ed25519 public key, renamed.
	parts := strings.SplitN(vkey, "+", 3)
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize {
		t.Fatalf("verifier key %q", vkey)
	}
	tkey, err := note.NewEd25519VerifierKey(wantOrigin, ed25519.PublicKey(raw[1:]))
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(tkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(cp, note.VerifierList(v))
	if err != nil {
		t.Fatalf("note: %v", err)
	}
	var origin string
	var size int64
	var root string
	if _, err := fmt.Sscanf(n.Text, "%s\n%d\n%s\n", &origin, &size, &root); err != nil || origin != wantOrigin {
		t.Fatalf("checkpoint text %q: origin %q, %v", n.Text, origin, err)
	}
	var th tlog.Tree
	th.N = size
	h, err := tlog.ParseHash(root)
	if err != nil {
		t.Fatal(err)
	}
	th.Hash = h
	if err := tlog.CheckRecord(proof, th.N, th.Hash, pos, tlog.RecordHash(leaf)); err != nil {
		t.Fatalf("position %d: %v", pos+1, err)
	}
}

// A tenant's log holds its incidents and notices. An
// isolation violation between tenants A and B opens an incident affecting
// both; A is notified. Each tenant's log holds the violation and the
// incident as a redacted view (the other tenant counted, not named) bound
// to the global entry by its chain hash, A's also its notice verbatim; B
// gets an inclusion proof for the incident that verifies offline, and
// nothing it is given — checkpoint, leaves, proofs — names A. An auditor
// holding the ledger finds the global entry by the view's hash and
// recomputes the view. A later version naming a third tenant C enters all
// three logs.
func TestTenantLogHoldsIncidentsRedacted(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	const a, b, c = cloison.TenantID("tenant-alpha"), cloison.TenantID("tenant-bravo"), cloison.TenantID("tenant-charlie")
	for i := 0; i < 5; i++ { // each tenant's own traffic
		for _, tn := range []cloison.TenantID{a, b} {
			if _, err := s.Append(ctx, audit.Event{OccurredAt: time.Now(), Tenant: tn, Actor: "engine:n1", Payload: audit.RequestCompleted{
				Request: cloison.RequestID(fmt.Sprintf("%s-req-%d", tn, i)), Model: "m", PromptTokens: 3, CompletionTokens: 1, Pages: 1, Tier: "cross-tenant"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	now := time.Now()
	viol, err := s.Append(ctx, audit.Event{OccurredAt: now, Tenant: a, Actor: "engine:n1", Payload: audit.IsolationViolation{
		Request: "tenant-alpha-req-9", Invariant: "ownership-tag", Page: 7, Epoch: 2,
		AffectedTenants: []cloison.TenantID{a, b}, AffectedRequests: []cloison.RequestID{"tenant-alpha-req-9"}, WithheldResponses: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.OpenFromDetection(ctx, "engine:n1", audit.Detection{Source: audit.SourceIsolationViolation, Invariant: "ownership-tag",
		DetectedAt: now, AffectedTenants: []cloison.TenantID{a, b}, AffectedRequests: []cloison.RequestID{"tenant-alpha-req-9"},
		AffectedResponses: 1, LedgerEvents: []int64{int64(viol.Seq)}})
	if err != nil {
		t.Fatal(err)
	}
	text := "Avis au client / notice to the client"
	if _, err := s.AddNotice(ctx, "admin:elise", audit.Notice{Incident: id, Recipient: audit.RecipientTenant, Tenant: a, RecipientName: "alpha ops",
		SentAt: time.Now(), Method: "courriel", Text: text, ContentDigest: audit.Sum([]byte(text))}); err != nil {
		t.Fatal(err)
	}
	vkey := mustVerifierKey(t)

	kinds := func(tn cloison.TenantID) ([]byte, [][]byte, []tlog.RecordProof) {
		t.Helper()
		global := map[audit.Digest]audit.Record{}
		if err := s.Scan(ctx, 1, 0, func(r audit.Record) error { global[r.Hash] = r; return nil }); err != nil {
			t.Fatal(err)
		}
		cp, err := s.TenantCheckpoint(ctx, tn)
		if err != nil {
			t.Fatal(err)
		}
		leaves, proofs := tenantLeaves(t, s, tn, cp)
		for i, leaf := range leaves {
			if v, ok := audit.DecodeTenantView(leaf); ok {
				g, found := global[v.Entry]
				if !found {
					t.Fatalf("%s position %d: the view names no global entry", tn, i+1)
				}
				if again, _ := audit.TenantLeaf(g, tn); !bytes.Equal(again, leaf) {
					t.Errorf("%s position %d: the auditor's recomputed view differs", tn, i+1)
				}
				if named, _ := audit.TenantsNamed(g); v.OtherTenants != int64(len(named)-1) || v.OtherTenants < 1 {
					t.Errorf("%s position %d: other_tenants %d, the entry names %v", tn, i+1, v.OtherTenants, named)
				}
			}
		}
		return cp, leaves, proofs
	}
	find := func(leaves [][]byte, kind audit.Kind) (int, audit.TenantView) {
		for i, l := range leaves {
			if v, ok := audit.DecodeTenantView(l); ok && v.Kind == kind {
				return i, v
			}
		}
		return -1, audit.TenantView{}
	}

	cpB, leavesB, proofsB := kinds(b)
	i, v := find(leavesB, audit.KindIncidentOpened)
	if i < 0 || !strings.Contains(string(v.Data), string(id)) {
		t.Fatalf("B's log lacks the incident: %q", leavesB)
	}
	origin, _ := audit.TenantOrigin("test-ledger", b)
	verifyOffline(t, vkey, cpB, string(origin), int64(i), leavesB[i], proofsB[i])
	if j, _ := find(leavesB, audit.KindIsolationViolation); j < 0 {
		t.Errorf("B's log lacks the violation")
	}
	everything := append([][]byte{cpB}, leavesB...)
	for _, p := range proofsB {
		for _, h := range p {
			everything = append(everything, []byte(h.String()), h[:])
		}
	}
	for _, x := range everything {
		if bytes.Contains(x, []byte("alpha")) {
			t.Errorf("B is shown A: %s", x)
		}
	}
	if len(leavesB) != 5+2 {
		t.Errorf("B's log has %d leaves, want its 5 requests, the violation and the incident", len(leavesB))
	}

	_, leavesA, _ := kinds(a)
	var notices int
	for _, l := range leavesA {
		if bytes.Contains(l, []byte("tenant-bravo")) {
			t.Errorf("A is shown B: %s", l)
		}
		if _, redacted := audit.DecodeTenantView(l); !redacted && bytes.Contains(l, []byte(`"kind":"notice.sent"`)) {
			notices++
		}
	}
	if i, v := find(leavesA, audit.KindIsolationViolation); i < 0 || !strings.Contains(string(v.Data), "tenant-alpha-req-9") {
		t.Errorf("A's view of the violation lacks its own request: %q", leavesA)
	}
	if j, v := find(leavesB, audit.KindIsolationViolation); j >= 0 && strings.Contains(string(v.Data), "req-9") {
		t.Errorf("B's view of the violation names A's request: %s", v.Data)
	}
	if notices != 1 || len(leavesA) != 5+3 {
		t.Errorf("A's log: %d notices, %d leaves; want 1 and 8", notices, len(leavesA))
	}

	// A later version naming C: every tenant named so far sees it.
	if _, err := s.UpdateIncident(ctx, "admin:elise", id, func(v *audit.IncidentVersion) error {
		v.AffectedTenants = append(v.AffectedTenants, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []cloison.TenantID{a, b, c} {
		_, leaves, _ := kinds(tn)
		if i, _ := find(leaves, audit.KindIncidentUpdated); i < 0 {
			t.Errorf("%s's log lacks the update", tn)
		}
	}
	if err := s.VerifyRegister(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
		t.Fatal(err)
	}
}

// recomputed is the tenant log an auditor recomputes from a ledger scan.
func recomputed(t *testing.T, s *Store, tn cloison.TenantID) audit.TreeHead {
	t.Helper()
	m := &audit.MemTree{}
	if err := s.Scan(context.Background(), 1, 0, func(r audit.Record) error {
		if leaf, ok := audit.TenantLeaf(r, tn); ok {
			_, err := m.Append(leaf)
			return err
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	origin, _ := audit.TenantOrigin("test-ledger", tn)
	h, err := m.Head(origin, m.Size())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Tenant logs are stored and indexed incrementally (a call costs the new
// entries, not a ledger scan).
// Two Stores append concurrently while tenants fetch checkpoints; every
// tenant checkpoint is a prefix of the log an auditor recomputes from the
// ledger afterwards (consistency proofs between successive ones hold), the
// final one is that log, and Verify recomputes every stored row. Each
// indexing transaction starts at the watermark: a checkpoint after k new
// entries adds one watermark row covering exactly them.
func TestTenantLogsStoredUnderConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	s1 := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	s2 := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	vkey := mustVerifierKey(t)
	tenants := []cloison.TenantID{"tenant-0", "tenant-1", "tenant-2"}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w, s := range []*Store{s1, s2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 150; i++ {
				e := event(fmt.Sprintf("w%d", w), i)
				e.Tenant = tenants[i%3]
				if i%25 == 0 {
					e.Payload = audit.IsolationViolation{Request: cloison.RequestID(fmt.Sprintf("w%d-%d", w, i)), Invariant: "epoch",
						AffectedTenants: []cloison.TenantID{tenants[i%3], tenants[(i+1)%3]}}
				}
				if _, err := s.Append(ctx, e); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	held := make([][][]byte, len(tenants)) // checkpoints each tenant fetched, in order
	for k, tn := range tenants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 15; i++ {
				cp, err := []*Store{s1, s2}[i%2].TenantCheckpoint(ctx, tn)
				if errors.Is(err, audit.ErrEmptyLedger) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				held[k] = append(held[k], cp)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k, tn := range tenants {
		final, err := s1.TenantCheckpoint(ctx, tn)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := audit.OpenTenantHead(final, vkey, tn)
		if want := recomputed(t, s1, tn); h != want {
			t.Fatalf("%s: stored log head %+v, recomputed %+v", tn, h, want)
		}
		for _, cp := range held[k] {
			old, _ := audit.OpenTenantHead(cp, vkey, tn)
			proof, err := s2.TenantConsistencyProof(ctx, tn, old.Size, h.Size)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := audit.VerifyTenantConsistency(vkey, tn, cp, final, proof); err != nil {
				t.Fatalf("%s: checkpoint of size %d is not a prefix: %v", tn, old.Size, err)
			}
		}
	}
	if _, err := s1.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
		t.Fatal(err)
	}

	// Incremental: k new entries, one watermark row, covering them.
	count := func() (rows, wm int64) {
		if err := db.AdminPool(t).QueryRow(ctx, `SELECT count(*), coalesce(max(seq), 0) FROM tenant_log_indexed`).Scan(&rows, &wm); err != nil {
			t.Fatal(err)
		}
		return rows, wm
	}
	rows0, _ := count()
	for i := 0; i < 7; i++ {
		if _, err := s1.Append(ctx, event("late", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s1.TenantCheckpoint(ctx, "tenant-0"); err != nil {
		t.Fatal(err)
	}
	head, _ := s1.Head(ctx)
	if rows, wm := count(); rows != rows0+1 || uint64(wm) != head.Seq {
		t.Errorf("after 7 entries: %d watermark rows (was %d), watermark %d; want one more, at the head %d", rows, rows0, wm, head.Seq)
	}
}

// Verify and the proofs catch stored tenant rows that are not the ones
// the ledger gives: a changed hash, a removed or an added position, a
// position pointed at another entry.
func TestTenantLogTamperDetected(t *testing.T) {
	for _, tamper := range []struct {
		name, sql string
	}{
		{"hash changed", `UPDATE tenant_log_hashes SET hash = sha256(hash) WHERE tenant = 'tenant-3' AND index = 0`},
		{"position removed", `DELETE FROM tenant_log_entries WHERE tenant = 'tenant-3' AND pos = (SELECT max(pos) FROM tenant_log_entries WHERE tenant = 'tenant-3')`},
		{"position added", `INSERT INTO tenant_log_entries (tenant, pos, seq) VALUES ('tenant-3', 1000, 1)`},
		{"position moved", `UPDATE tenant_log_entries SET seq = seq + 7 WHERE tenant = 'tenant-3' AND pos = 1`},
	} {
		t.Run(tamper.name, func(t *testing.T) {
			ctx := context.Background()
			db := pgtest.New(t)
			s := openStore(t, db.RuntimePool(t), t.TempDir(), 10)
			for i := 1; i <= 40; i++ {
				if _, err := s.Append(ctx, event("tenants", i)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.TenantCheckpoint(ctx, "tenant-3"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
				t.Fatalf("untouched: %v", err)
			}
			owner := db.AdminPool(t)
			for _, tbl := range []string{"tenant_log_entries", "tenant_log_hashes"} {
				if _, err := owner.Exec(ctx, `ALTER TABLE `+tbl+` DISABLE TRIGGER `+tbl+`_append_only`); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := owner.Exec(ctx, tamper.sql); err != nil {
				t.Fatal(err)
			}
			_, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()})
			var be *audit.BreakError
			if !errors.As(err, &be) || be.Reason != audit.ReasonTenantLog {
				t.Errorf("Verify: got %v, want a tenant_log break", err)
			}
			if tamper.name == "position moved" || tamper.name == "hash changed" {
				if _, _, err := s.TenantInclusionProof(ctx, "tenant-3", 1, 2); !errors.Is(err, audit.ErrChainBroken) {
					t.Errorf("proof of the tampered position: got %v, want ErrChainBroken", err)
				}
				err := s.TenantEntries(ctx, "tenant-3", 1, 2, func(audit.TenantLogEntry) error { return nil })
				if !errors.As(err, &be) || be.Reason != audit.ReasonTenantLog {
					t.Errorf("listing the tampered position: got %v, want a tenant_log break", err)
				}
			}
		})
	}
}

// VerifyRegister holds each incident event's tenants (what puts it in
// their logs) to the tenants the register's versions name: an event that
// leaves a tenant out, though chained correctly, is refused.
func TestVerifyRegisterChecksIncidentTenants(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	if _, err := s.OpenFromDetection(ctx, "engine:n1", audit.Detection{Source: audit.SourceIsolationViolation, Invariant: "epoch",
		DetectedAt: time.Now(), AffectedTenants: []cloison.TenantID{"tenant-a", "tenant-b"}, AffectedResponses: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyRegister(ctx); err != nil {
		t.Fatal(err)
	}
	// A writer that names tenant-a only in the ledger event of an entry
	// whose content names both.
	v, err := audit.Detection{Source: audit.SourceIsolationViolation, Invariant: "scrub", DetectedAt: time.Now(),
		AffectedTenants: []cloison.TenantID{"tenant-a", "tenant-b"}, AffectedResponses: 1}.FirstVersion("inc-20261202-bad", audit.Organization{Name: "O"}, audit.Contact{Name: "C"})
	if err != nil {
		t.Fatal(err)
	}
	v.Normalize()
	content, digest, err := v.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.readWrite(ctx, func(tx pgx.Tx) error {
		recs, err := s.AppendTx(ctx, tx, audit.Event{OccurredAt: time.Now(), Actor: "engine:n1", Payload: audit.IncidentOpened{
			Incident: v.Incident, Source: audit.Name(v.Source), Version: 1, ContentDigest: digest, Tenants: []cloison.TenantID{"tenant-a"}}})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO incidents (id, source, opened_by, ledger_seq) VALUES ($1, $2, $3, $4)`,
			string(v.Incident), string(v.Source), "engine:n1", int64(recs[0].Seq)); err != nil {
			return err
		}
		_, err = insertVersion(ctx, tx, "engine:n1", v, content, digest, recs[0])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyRegister(ctx); !errors.Is(err, audit.ErrChainBroken) || !strings.Contains(err.Error(), "inc-20261202-bad") {
		t.Errorf("got %v, want ErrChainBroken for inc-20261202-bad", err)
	}
}

// A tenant's listing is its tenant log. Tenant A has its own
// requests, an isolation violation shared with B, an incident naming both
// and a notice; B's traffic comes first, so A's global seqs are not its
// positions. TenantEntries lists positions 1..n, n the size of A's signed
// checkpoint, each leaf the one TenantInclusionProof proves and the one an
// auditor recomputes from the ledger, each verifying offline (sumdb/tlog)
// against the checkpoint; from/to pages (across keyset pages of ScanPage
// positions) are slices of the whole; nothing listed names B.
func TestTenantEntriesAreTheTenantLog(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	s, err := Open(ctx, db.RuntimePool(t), Config{Origin: "test-ledger", SigningKey: testKey, CheckpointEvery: 1000,
		CheckpointInterval: time.Hour, CheckpointDir: t.TempDir(), ScanPage: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	const a, b = cloison.TenantID("tenant-alpha"), cloison.TenantID("tenant-bravo")
	req := func(tn cloison.TenantID, i int) {
		if _, err := s.Append(ctx, audit.Event{OccurredAt: time.Now(), Tenant: tn, Actor: "engine:n1", Payload: audit.RequestCompleted{
			Request: cloison.RequestID(fmt.Sprintf("%s-req-%d", tn, i)), Model: "m", PromptTokens: 3, CompletionTokens: 1, Pages: 1, Tier: "cross-tenant"}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 12; i++ {
		req(b, i)
	}
	for i := 0; i < 4; i++ {
		req(a, i)
		req(b, 100+i)
	}
	now := time.Now()
	viol, err := s.Append(ctx, audit.Event{OccurredAt: now, Tenant: b, Actor: "engine:n1", Payload: audit.IsolationViolation{
		Request: "tenant-bravo-req-9", Invariant: "ownership-tag", Page: 7, Epoch: 2,
		AffectedTenants: []cloison.TenantID{b, a}, AffectedRequests: []cloison.RequestID{"tenant-bravo-req-9"}, WithheldResponses: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.OpenFromDetection(ctx, "engine:n1", audit.Detection{Source: audit.SourceIsolationViolation, Invariant: "ownership-tag",
		DetectedAt: now, AffectedTenants: []cloison.TenantID{b, a}, AffectedRequests: []cloison.RequestID{"tenant-bravo-req-9"},
		AffectedResponses: 1, LedgerEvents: []int64{int64(viol.Seq)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddNotice(ctx, "admin:elise", audit.Notice{Incident: id, Recipient: audit.RecipientTenant, Tenant: a,
		RecipientName: "alpha DPO <dpo@alpha.example>", SentAt: now, Method: "courriel"}); err != nil {
		t.Fatal(err)
	}
	req(a, 4)

	list := func(from, to uint64) []audit.TenantLogEntry {
		t.Helper()
		var out []audit.TenantLogEntry
		if err := s.TenantEntries(ctx, a, from, to, func(e audit.TenantLogEntry) error { out = append(out, e); return nil }); err != nil {
			t.Fatalf("TenantEntries(%d, %d): %v", from, to, err)
		}
		return out
	}
	all := list(0, 0) // indexes first: no checkpoint was fetched yet
	cp, err := s.TenantCheckpoint(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	vkey := mustVerifierKey(t)
	h, err := audit.OpenTenantHead(cp, vkey, a)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(all)) != h.Size || h.Size != 4+3+1 {
		t.Fatalf("listed %d rows, tenant log size %d; want 8 (5 requests, the violation, the incident, the notice)", len(all), h.Size)
	}
	if want := recomputed(t, s, a); want.Root != h.Root {
		t.Fatal("fixture: the checkpoint is not the recomputed log")
	}
	origin, _ := audit.TenantOrigin("test-ledger", a)
	kinds := map[audit.Kind]int{}
	for i, e := range all {
		if e.Pos != uint64(i+1) {
			t.Fatalf("row %d: got position %d, want %d", i, e.Pos, i+1)
		}
		leaf, proof, err := s.TenantInclusionProof(ctx, a, e.Pos, h.Size)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(leaf, e.Leaf) {
			t.Errorf("position %d: listed %s, the log's leaf is %s", e.Pos, e.Leaf, leaf)
		}
		verifyOffline(t, vkey, cp, string(origin), int64(i), e.Leaf, proof)
		if bytes.Contains(e.Leaf, []byte(b)) {
			t.Errorf("position %d names B: %s", e.Pos, e.Leaf)
		}
		kinds[e.Kind]++
	}
	if kinds[audit.KindRequestCompleted] != 5 || kinds[audit.KindIsolationViolation] != 1 || kinds[audit.KindIncidentOpened] != 1 || kinds[audit.KindNoticeSent] != 1 {
		t.Errorf("kinds listed: %v", kinds)
	}
	for _, tc := range []struct{ from, to uint64 }{{1, 1}, {2, 5}, {3, 8}, {4, 0}, {6, 100}, {8, 8}} {
		got := list(tc.from, tc.to)
		hi := min(tc.to, h.Size)
		if tc.to == 0 {
			hi = h.Size
		}
		want := all[tc.from-1 : hi]
		if len(got) != len(want) {
			t.Fatalf("from %d to %d: got %d rows, want %d", tc.from, tc.to, len(got), len(want))
		}
		for i := range got {
			if got[i].Pos != want[i].Pos || !bytes.Equal(got[i].Leaf, want[i].Leaf) {
				t.Errorf("from %d to %d: row %d is position %d, want %d", tc.from, tc.to, i, got[i].Pos, want[i].Pos)
			}
		}
	}
	if got := list(9, 0); len(got) != 0 {
		t.Errorf("from past the end: got %d rows", len(got))
	}
	if err := s.TenantEntries(ctx, a, 5, 4, func(audit.TenantLogEntry) error { return nil }); !errors.Is(err, audit.ErrOutOfRange) {
		t.Errorf("to before from: got %v, want audit.ErrOutOfRange", err)
	}
	if err := s.TenantEntries(ctx, "no such tenant!", 1, 0, func(audit.TenantLogEntry) error { return nil }); cloison.ErrorCode(err) != cloison.CodeInvalid {
		t.Errorf("bad tenant id: got %v, want an invalid-argument error", err)
	}
	stop := errors.New("stop")
	n := 0
	if err := s.TenantEntries(ctx, a, 1, 0, func(audit.TenantLogEntry) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("fn's error: got %v after %d rows, want it after 1", err, n)
	}
}

// Every tenant checkpoint served is kept (migration 00023),
// append-only. The database owner rolls the ledger back below a tenant
// checkpoint alpha was served — the tail, the global checkpoints after the
// cut and every derived tenant row deleted, the tenant logs re-indexed
// from what is left — so that the chain, the tree and the tenant logs all
// agree with each other again. Verify names the rollback
// (audit.ErrSmallerTree), and TenantCheckpoint refuses to sign the smaller
// log. The runtime role cannot delete a kept checkpoint.
func TestServedTenantCheckpointsDetectRollback(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	const a = cloison.TenantID("tenant-alpha")
	add := func(from, to int) {
		for i := from; i <= to; i++ {
			if _, err := s.Append(ctx, audit.Event{OccurredAt: time.Now(), Tenant: a, Actor: "engine:n1", Payload: audit.RequestCompleted{
				Request: cloison.RequestID(fmt.Sprintf("req-%d", i)), Model: "m", PromptTokens: 3, CompletionTokens: 1, Pages: 1, Tier: "cross-tenant"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(1, 10)
	if _, err := s.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	head, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cut := head.Seq
	add(11, 20)
	cp, err := s.TenantCheckpoint(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.TenantCheckpoint(ctx, a) // the same size: kept once
	if err != nil || !bytes.Equal(again, cp) {
		t.Fatalf("second checkpoint: %v", err)
	}
	var kept int
	if err := db.AdminPool(t).QueryRow(ctx, `SELECT count(*) FROM tenant_checkpoints WHERE tenant = $1`, string(a)).Scan(&kept); err != nil || kept != 1 {
		t.Fatalf("kept %d tenant checkpoints (%v), want 1", kept, err)
	}
	if _, err := db.RuntimePool(t).Exec(ctx, `DELETE FROM tenant_checkpoints`); err == nil {
		t.Fatal("the runtime role deleted a served tenant checkpoint")
	}
	if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
		t.Fatalf("untouched: %v", err)
	}

	owner := db.AdminPool(t)
	tables := []string{"audit_events", "audit_checkpoints", "tlog_tiles", "tlog_checkpoints", "tenant_log_entries", "tenant_log_hashes", "tenant_log_indexed", "request_entries"}
	var stmts []string
	for _, tb := range tables {
		stmts = append(stmts, "ALTER TABLE "+tb+" DISABLE TRIGGER USER")
	}
	stmts = append(stmts,
		fmt.Sprintf("DELETE FROM audit_events WHERE seq > %d", cut),
		fmt.Sprintf("DELETE FROM tlog_checkpoints WHERE size > %d", cut),
		fmt.Sprintf("DELETE FROM audit_checkpoints WHERE size > %d", cut),
		"DELETE FROM request_entries", "DELETE FROM tenant_log_entries", "DELETE FROM tenant_log_hashes", "DELETE FROM tenant_log_indexed")
	stmts = append(stmts, pgtest.TruncateTreeSQL(int64(cut))...)
	for _, tb := range tables {
		stmts = append(stmts, "ALTER TABLE "+tb+" ENABLE TRIGGER USER")
	}
	for _, q := range stmts {
		if _, err := owner.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// A fresh store (no cached head or note sizes) over the rolled-back
	// database re-indexes the tenant logs from what is left.
	s2 := openStore(t, db.RuntimePool(t), t.TempDir(), 1000)
	if _, err := s2.IndexTenantLogs(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); !errors.Is(err, audit.ErrSmallerTree) {
		t.Errorf("Verify after the rollback: got %v, want ErrSmallerTree", err)
	}
	if _, err := s2.TenantCheckpoint(ctx, a); !errors.Is(err, audit.ErrSmallerTree) {
		t.Errorf("TenantCheckpoint after the rollback: got %v, want ErrSmallerTree", err)
	}
}
