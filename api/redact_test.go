package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison"
	compliancev1 "github.com/cloison/cloison/api/proto/cloison/compliance/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
	"google.golang.org/grpc/metadata"
)

// coVictims opens one incident that affects two tenants, with a notice to
// each (the other's carrying its contact address) and one to the
// Commission, and interleaves ledger rows of both tenants, one of which
// names both. It returns the incident id and how many rows alpha may see.
func coVictims(t *testing.T, p *platformtest.Platform) (audit.Name, int) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	both := []cloison.TenantID{"alpha", "bravo"}
	row := func(tenant cloison.TenantID, affected []cloison.TenantID, req string) {
		if _, err := p.Ledger.Append(ctx, audit.Event{OccurredAt: now, Tenant: tenant, Actor: "engine:test", Payload: audit.IsolationViolation{
			Request: cloison.RequestID(req), Invariant: "ownership-tag", AffectedTenants: affected,
			AffectedRequests: []cloison.RequestID{cloison.RequestID(req)}, WithheldResponses: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	row("alpha", []cloison.TenantID{"alpha"}, "req-a1")
	row("bravo", []cloison.TenantID{"bravo"}, "req-b1")
	row("bravo", []cloison.TenantID{"bravo"}, "req-b2")
	row("alpha", both, "req-a2") // names bravo: alpha sees it redacted
	row("alpha", []cloison.TenantID{"alpha"}, "req-a3")
	id, err := p.Ledger.OpenFromDetection(ctx, "engine:test", audit.Detection{Source: audit.SourceIsolationViolation, Invariant: "ownership-tag",
		DetectedAt: now, AffectedTenants: both, AffectedRequests: []cloison.RequestID{"req-a2"}, AffectedResponses: 2, LedgerEvents: []int64{4}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []audit.Notice{
		{Incident: id, Recipient: audit.RecipientTenant, Tenant: "alpha", RecipientName: "alpha DPO", SentAt: now, Method: "e-mail"},
		{Incident: id, Recipient: audit.RecipientTenant, Tenant: "bravo", RecipientName: "bravo DPO <dpo@bravo.example>", SentAt: now, Method: "e-mail to dpo@bravo.example"},
		{Incident: id, Recipient: audit.RecipientCAI, RecipientName: "CAI", SentAt: now, Method: "form: alpha and bravo"},
	} {
		if _, err := p.Ledger.AddNotice(ctx, "admin:test", n); err != nil {
			t.Fatal(err)
		}
	}
	// alpha's rows are its tenant log: the platform's tenant.created, its
	// violations (req-a2's redacted), the incident (redacted) and its notice.
	own := 0
	if err := p.Ledger.Scan(ctx, 1, 0, func(r audit.Record) error {
		if _, ok := audit.TenantLeaf(r, "alpha"); ok {
			own++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return id, own
}

func httpGet(t *testing.T, url, token string) string {
	t.Helper()
	resp, b := send(t, "GET", url, token, "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: got %d %s, want 200", url, resp.StatusCode, b)
	}
	return string(b)
}

// tenantView checks what alpha sees of the shared incident (its JSON):
// bravo counted, not named; only alpha's notice; no ledger sequence.
func tenantView(t *testing.T, raw []byte) {
	t.Helper()
	if strings.Contains(string(raw), "bravo") {
		t.Fatalf("alpha's view names bravo: %s", raw)
	}
	var v struct {
		Versions []struct {
			AffectedTenants []string `json:"affected_tenants"`
			OtherTenants    int      `json:"other_tenants"`
			LedgerEvents    []int64  `json:"ledger_events"`
			LedgerSeq       *uint64
			Content         *string
		}
		Notices []struct {
			Tenant    string
			LedgerSeq *uint64
		}
		LedgerSeq *uint64
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Versions) != 1 || len(v.Notices) != 1 || v.LedgerSeq != nil {
		t.Fatalf("got %d versions, %d notices, ledger seq %v; want 1, 1, none", len(v.Versions), len(v.Notices), v.LedgerSeq)
	}
	x := v.Versions[0]
	if len(x.AffectedTenants) != 1 || x.AffectedTenants[0] != "alpha" || x.OtherTenants != 1 || len(x.LedgerEvents) != 0 || x.LedgerSeq != nil || x.Content != nil {
		t.Fatalf("got version %+v, want alpha named, 1 other, no ledger seqs or content", x)
	}
	if v.Notices[0].Tenant != "alpha" || v.Notices[0].LedgerSeq != nil {
		t.Fatalf("got notice %+v, want alpha's without ledger seq", v.Notices[0])
	}
}

// tenantRows checks alpha's ledger rows: positions 1…want (its tenant
// log), no hashes (which cover the global sequence number), nothing naming
// bravo.
func tenantRows(t *testing.T, seqs []uint64, hashes [][]byte, payloads []string, want int) {
	t.Helper()
	if len(seqs) != want {
		t.Fatalf("got %d rows, want %d", len(seqs), want)
	}
	for i := range seqs {
		if seqs[i] != uint64(i+1) || len(hashes[i]) != 0 || strings.Contains(payloads[i], "bravo") {
			t.Fatalf("row %d: got seq %d, hashes %x, payload %s; want seq %d, none, not naming bravo", i, seqs[i], hashes[i], payloads[i], i+1)
		}
	}
}

// TestCoVictimsRedactedHTTP: an incident shared by tenants names none to
// another, over HTTP. Alpha, affected
// with bravo, sees bravo counted but not named, none of bravo's notices, no
// global sequence numbers; the operator sees the whole file.
func TestCoVictimsRedactedHTTP(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha", "bravo"}})
	id, own := coVictims(t, p)
	alpha := p.Token(t, "alpha", tenancy.ScopeComplianceRead)

	var list struct{ Incidents []json.RawMessage }
	if err := json.Unmarshal([]byte(httpGet(t, p.URL+"/compliance/v1/incidents", alpha)), &list); err != nil || len(list.Incidents) != 1 {
		t.Fatalf("got %d incidents (%v), want 1", len(list.Incidents), err)
	}
	tenantView(t, list.Incidents[0])
	tenantView(t, []byte(httpGet(t, p.URL+"/compliance/v1/incidents/"+string(id), alpha)))

	var seqs []uint64
	var prev [][]byte
	var payloads []string
	sc := bufio.NewScanner(strings.NewReader(httpGet(t, p.URL+"/compliance/v1/ledger", alpha)))
	for sc.Scan() {
		var r struct {
			Seq      uint64
			PrevHash []byte `json:"prev_hash"`
			Payload  json.RawMessage
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(sc.Text(), "hash") {
			r.PrevHash = []byte("shown")
		}
		seqs, prev, payloads = append(seqs, r.Seq), append(prev, r.PrevHash), append(payloads, string(r.Payload))
	}
	tenantRows(t, seqs, prev, payloads, own)
	// Positions page: from=own-2 is req-a3 (the incident and its notice.sent
	// follow).
	at := own - 2
	if got := httpGet(t, p.URL+fmt.Sprintf("/compliance/v1/ledger?from=%d&to=%d", at, at), alpha); strings.Count(got, "\n") != 1 || !strings.Contains(got, fmt.Sprintf(`"seq":%d`, at)) || !strings.Contains(got, "req-a3") {
		t.Fatalf("got %q, want alpha's second row only", got)
	}

	op := p.Token(t, "alpha", tenancy.ScopeComplianceRead, tenancy.ScopeAdmin)
	var f audit.IncidentFile
	if err := json.Unmarshal([]byte(httpGet(t, p.URL+"/compliance/v1/incidents/"+string(id), op)), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Notices) != 3 || len(f.Latest().AffectedTenants) != 2 || f.LedgerSeq == 0 {
		t.Fatalf("operator: got %d notices, tenants %v, seq %d; want the whole file", len(f.Notices), f.Latest().AffectedTenants, f.LedgerSeq)
	}
	if got := httpGet(t, p.URL+"/compliance/v1/ledger", op); !strings.Contains(got, "bravo") || !strings.Contains(got, "prev_hash") {
		t.Fatalf("operator ledger: got %q, want every row with prev_hash", got)
	}
}

// TestCoVictimsRedactedGRPC is TestCoVictimsRedactedHTTP over real gRPC.
func TestCoVictimsRedactedGRPC(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha", "bravo"}})
	id, own := coVictims(t, p)
	conn, ctx := p.GRPC(t)
	c := compliancev1.NewComplianceServiceClient(conn)
	as := func(scopes ...tenancy.Scope) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+p.Token(t, "alpha", scopes...))
	}
	alpha := as(tenancy.ScopeComplianceRead)

	list, err := c.ListIncidents(alpha, &compliancev1.ListIncidentsRequest{})
	if err != nil || len(list.GetIncidents()) != 1 {
		t.Fatalf("got %v (%v), want 1 incident", list, err)
	}
	one, err := c.GetIncident(alpha, &compliancev1.GetIncidentRequest{Id: string(id)})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []*compliancev1.Incident{list.GetIncidents()[0], one} {
		if in.GetLedgerSeq() != 0 || in.GetNotices() != 1 {
			t.Fatalf("got ledger seq %d, %d notices; want 0, 1", in.GetLedgerSeq(), in.GetNotices())
		}
		tenantView(t, in.GetJson())
	}
	var seqs []uint64
	var prev [][]byte
	var payloads []string
	st, err := c.LedgerRange(alpha, &compliancev1.LedgerRangeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seqs, prev, payloads = append(seqs, r.GetSeq()), append(prev, append(r.GetPrevHash(), r.GetHash()...)), append(payloads, string(r.GetPayload()))
	}
	tenantRows(t, seqs, prev, payloads, own)

	full, err := c.GetIncident(as(tenancy.ScopeComplianceRead, tenancy.ScopeAdmin), &compliancev1.GetIncidentRequest{Id: string(id)})
	if err != nil {
		t.Fatal(err)
	}
	if full.GetLedgerSeq() == 0 || full.GetNotices() != 3 || !strings.Contains(string(full.GetJson()), "bravo") {
		t.Fatalf("operator: got seq %d, %d notices; want the whole file", full.GetLedgerSeq(), full.GetNotices())
	}
}
