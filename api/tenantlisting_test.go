package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	compliancev1 "github.com/cloison/cloison/api/proto/cloison/compliance/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// listingPlatform gives alpha its own requests, an isolation violation that
// bravo's request caused (its tenant column is bravo's) and that affects both,
// the incident it opens, and a notice to each; bravo's traffic comes first, so
// alpha's global seqs are all beyond its log's size but that of the platform's
// tenant.created. It returns alpha's global seqs, in ledger order, of the
// entries its log holds.
func listingPlatform(t *testing.T) (*platformtest.Platform, []uint64) {
	t.Helper()
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha", "bravo"}})
	ctx := context.Background()
	now := time.Now()
	req := func(tn cloison.TenantID, i int) {
		if _, err := p.Ledger.Append(ctx, audit.Event{OccurredAt: now, Tenant: tn, Actor: "engine:listing-test",
			Payload: audit.RequestCompleted{Request: cloison.RequestID(fmt.Sprintf("req-%s-%d", tn, i)), Model: "m", PromptTokens: 3,
				CompletionTokens: 1, Pages: 1, Tier: "cross-tenant"}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 30; i++ {
		req("bravo", i)
	}
	for i := 0; i < 3; i++ {
		req("alpha", i)
		req("bravo", 100+i)
	}
	both := []cloison.TenantID{"bravo", "alpha"}
	viol, err := p.Ledger.Append(ctx, audit.Event{OccurredAt: now, Tenant: "bravo", Actor: "engine:listing-test", Payload: audit.IsolationViolation{
		Request: "req-bravo-9", Invariant: "ownership-tag", AffectedTenants: both, AffectedRequests: []cloison.RequestID{"req-bravo-9"}, WithheldResponses: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := p.Ledger.OpenFromDetection(ctx, "engine:listing-test", audit.Detection{Source: audit.SourceIsolationViolation, Invariant: "ownership-tag",
		DetectedAt: now, AffectedTenants: both, AffectedRequests: []cloison.RequestID{"req-bravo-9"}, AffectedResponses: 1, LedgerEvents: []int64{int64(viol.Seq)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []audit.Notice{
		{Incident: id, Recipient: audit.RecipientTenant, Tenant: "alpha", RecipientName: "alpha DPO", SentAt: now, Method: "e-mail"},
		{Incident: id, Recipient: audit.RecipientTenant, Tenant: "bravo", RecipientName: "bravo DPO", SentAt: now, Method: "e-mail"},
	} {
		if _, err := p.Ledger.AddNotice(ctx, "admin:test", n); err != nil {
			t.Fatal(err)
		}
	}
	req("alpha", 3)
	var seqs []uint64
	if err := p.Ledger.Scan(ctx, 1, 0, func(r audit.Record) error {
		if _, ok := audit.TenantLeaf(r, "alpha"); ok {
			seqs = append(seqs, r.Seq)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seqs) < 2 || seqs[1] <= uint64(len(seqs)) {
		t.Fatalf("fixture: alpha's global seqs %v are within its log's %d positions", seqs, len(seqs))
	}
	return p, seqs
}

// listedRow is a tenant's ledger row, its payload's bytes as they came.
type listedRow struct {
	line    string
	fields  []string
	Seq     uint64          `json:"seq"`
	Tenant  string          `json:"tenant"`
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
}

func listRows(t *testing.T, body []byte) []listedRow {
	t.Helper()
	var out []listedRow
	for _, line := range strings.Split(strings.TrimRight(string(body), "\n"), "\n") {
		var r listedRow
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("row %q: %v", line, err)
		}
		_ = json.Unmarshal([]byte(line), &raw)
		for k := range raw {
			r.fields = append(r.fields, k)
		}
		slices.Sort(r.fields)
		r.line = line
		out = append(out, r)
	}
	return out
}

// A tenant's ledger listing IS its tenant log, so that every row it gets is
// provable. Row i is
// position i of the log the tenant checkpoint signs: its payload, hashed
// client-side as received, verifies with the inclusion proof for position
// i (golang.org/x/mod/sumdb/tlog alone); the incident and the notices that
// name alpha are listed (redacted where they name bravo); no row carries a
// global seq, a chain hash or bravo's id; from/to page by position; gRPC
// LedgerRange streams the same rows. The operator's view is unchanged.
func TestTenantLedgerListingIsTenantLog(t *testing.T) {
	p, globalSeqs := listingPlatform(t)
	vkey, _ := p.Ledger.TreeVerifierKey()
	alpha := p.Token(t, "alpha", tenancy.ScopeComplianceRead)
	code, cp := get(t, p.URL+"/compliance/v1/tlog/tenant/checkpoint", alpha, "")
	if code != 200 {
		t.Fatalf("checkpoint: %d %s", code, cp)
	}
	h, err := audit.OpenTenantHead(cp, vkey, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	code, body := get(t, p.URL+"/compliance/v1/ledger", alpha, "")
	if code != 200 {
		t.Fatalf("ledger: %d %s", code, body)
	}
	rows := listRows(t, body)
	if uint64(len(rows)) != h.Size || len(rows) != len(globalSeqs) {
		t.Fatalf("listed %d rows; tenant log size %d, %d entries name alpha", len(rows), h.Size, len(globalSeqs))
	}
	if bytes.Contains(body, []byte("bravo")) {
		t.Errorf("alpha's listing names bravo: %s", body)
	}
	kinds := map[string]int{}
	for i, r := range rows {
		pos := uint64(i + 1)
		if r.Seq != pos || r.Tenant != "alpha" || !slices.Equal(r.fields, []string{"actor", "kind", "payload", "seq", "tenant"}) {
			t.Fatalf("row %d: got seq %d, tenant %q, fields %v; want position %d, alpha, actor/kind/payload/seq/tenant only", i, r.Seq, r.Tenant, r.fields, pos)
		}
		if globalSeqs[i] > h.Size && strings.Contains(r.line, fmt.Sprintf(`"seq":%d`, globalSeqs[i])) {
			t.Errorf("row %d carries its global seq %d: %s", i, globalSeqs[i], r.line)
		}
		code, ib := get(t, fmt.Sprintf("%s/compliance/v1/tlog/tenant/inclusion?seq=%d&tree_size=%d", p.URL, pos, h.Size), alpha, "")
		if code != 200 {
			t.Fatalf("inclusion %d: %d %s", pos, code, ib)
		}
		var ip struct {
			Payload json.RawMessage `json:"payload"`
			Proof   []string        `json:"proof"`
		}
		if err := json.Unmarshal(ib, &ip); err != nil {
			t.Fatal(err)
		}
		proof := make(tlog.RecordProof, len(ip.Proof))
		for j, s := range ip.Proof {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(b) != tlog.HashSize {
				t.Fatalf("proof hash %q", s)
			}
			copy(proof[j][:], b)
		}
		if err := tlog.CheckRecord(proof, int64(h.Size), h.Root, int64(pos)-1, tlog.RecordHash(r.Payload)); err != nil {
			t.Errorf("row %d (%s): its payload is not leaf %d of the tenant checkpoint: %v", pos, r.Kind, pos, err)
		}
		if !bytes.Equal(ip.Payload, r.Payload) {
			t.Errorf("row %d: the inclusion proof's payload %s differs from the row's %s", pos, ip.Payload, r.Payload)
		}
		kinds[r.Kind]++
	}
	if kinds[string(audit.KindIsolationViolation)] != 1 || kinds[string(audit.KindIncidentOpened)] != 1 || kinds[string(audit.KindNoticeSent)] != 1 || kinds[string(audit.KindRequestCompleted)] != 4 {
		t.Errorf("kinds listed: %v; want alpha's 4 requests, the violation, the incident and its notice", kinds)
	}

	for _, tc := range []struct{ from, to int }{{1, 1}, {3, 5}, {5, 0}, {len(rows), 1000}} {
		q := fmt.Sprintf("?from=%d", tc.from)
		if tc.to != 0 {
			q += fmt.Sprintf("&to=%d", tc.to)
		}
		code, b := get(t, p.URL+"/compliance/v1/ledger"+q, alpha, "")
		hi := min(tc.to, len(rows))
		if tc.to == 0 {
			hi = len(rows)
		}
		var want []string
		for _, r := range rows[tc.from-1 : hi] {
			want = append(want, r.line)
		}
		if code != 200 || strings.TrimRight(string(b), "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: got %d %s, want rows %d..%d", q, code, b, tc.from, hi)
		}
	}
	if code, b := get(t, p.URL+"/compliance/v1/ledger?from=5&to=4", alpha, ""); code != 400 {
		t.Errorf("to before from: got %d %s, want 400", code, b)
	}
	if code, b := get(t, p.URL+"/compliance/v1/ledger?tenant=bravo", alpha, ""); code != 403 {
		t.Errorf("bravo's log with alpha's token: got %d %s, want 403", code, b)
	}
	if code, b := get(t, p.URL+"/compliance/v1/ledger?tenant=alpha", alpha, ""); code != 200 || !bytes.Equal(b, body) {
		t.Errorf("?tenant=alpha with alpha's token: got %d, want its listing", code)
	}

	// gRPC LedgerRange: the same rows, no hashes.
	conn, ctx := p.GRPC(t)
	c := compliancev1.NewComplianceServiceClient(conn)
	st, err := c.LedgerRange(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+alpha), &compliancev1.LedgerRangeRequest{From: 2})
	if err != nil {
		t.Fatal(err)
	}
	n := 1
	for {
		r, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		want := rows[n]
		n++
		if r.GetSeq() != want.Seq || !bytes.Equal(r.GetPayload(), want.Payload) || r.GetTenant() != "alpha" || len(r.GetHash())+len(r.GetPrevHash()) != 0 {
			t.Errorf("gRPC row %d: got seq %d tenant %q hashes %x %x payload %s; want %s", n, r.GetSeq(), r.GetTenant(), r.GetPrevHash(), r.GetHash(), r.GetPayload(), want.line)
		}
	}
	if n != len(rows) {
		t.Errorf("gRPC from 2: got %d rows, want %d", n-1, len(rows)-1)
	}

	// The operator reads the ledger by global seq, hashes included, and a
	// tenant's log when it names one.
	op := p.Token(t, "alpha", tenancy.ScopeComplianceRead, tenancy.ScopeAdmin)
	if code, b := get(t, p.URL+"/compliance/v1/ledger?tenant=alpha", op, ""); code != 200 || !bytes.Equal(b, body) {
		t.Errorf("operator, ?tenant=alpha: got %d %s, want alpha's listing", code, b)
	}
	// gRPC names a tenant's log as ?tenant= does: the operator gets alpha's
	// log by position, alpha bravo's not at all.
	grpcRows := func(token, tenant string) (int, error) {
		st, err := c.LedgerRange(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), &compliancev1.LedgerRangeRequest{Tenant: tenant})
		if err != nil {
			return 0, err
		}
		n := 0
		for {
			r, err := st.Recv()
			if err == io.EOF {
				return n, nil
			}
			if err != nil {
				return n, err
			}
			if want := rows[n]; r.GetSeq() != want.Seq || !bytes.Equal(r.GetPayload(), want.Payload) || r.GetTenant() != "alpha" || len(r.GetHash()) != 0 {
				t.Errorf("gRPC tenant %q row %d: got seq %d tenant %q payload %s; want %s", tenant, n+1, r.GetSeq(), r.GetTenant(), r.GetPayload(), want.line)
			}
			n++
		}
	}
	if n, err := grpcRows(op, "alpha"); err != nil || n != len(rows) {
		t.Errorf("gRPC operator, tenant alpha: %d rows, %v; want %d", n, err, len(rows))
	}
	if _, err := grpcRows(alpha, "bravo"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("gRPC bravo's log with alpha's token: got %v, want PermissionDenied", err)
	}
	code, ob := get(t, fmt.Sprintf("%s/compliance/v1/ledger?from=%d&to=%d", p.URL, globalSeqs[0], globalSeqs[0]), op, "")
	if code != 200 || !strings.Contains(string(ob), fmt.Sprintf(`"seq":%d`, globalSeqs[0])) || !strings.Contains(string(ob), `"prev_hash"`) {
		t.Errorf("operator: got %d %s, want global seq %d with its hashes", code, ob, globalSeqs[0])
	}
}
